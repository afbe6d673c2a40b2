/* cellab-cell: one TTI of the model, its steps in order: delay lines, channel, downlink and uplink
 * schedulers, the PF averages, the TTI log and the telemetry period. */
#include "cell.h"

#include <stdlib.h>

#include "ttilog.h"

#define TELEMETRY_TTI 100

void run_tti(struct cell *c, uint64_t t)
{
    for (int k = 0; k < c->p.n_ues; k++) {
        struct ue *u = &c->ue[k];
        u->r_tbs_bits = u->r_delivered = u->r_ul_grant = u->r_ul_delivered = u->r_drop_bytes = 0;
        u->r_prb = u->r_retx = u->r_flags = 0;
        u->r_mcs = -1;
    }
    /* uplink packets leaving the core toward the server */
    while (c->ul_delay.head && c->ul_delay.head->release_tti <= t) {
        struct pkt *p = fifo_pop(&c->ul_delay);
        if (c->sgi_down) { /* the SGi path is cut: lost between the core and the server */
            c->sgi_drop_pkts++;
            c->sgi_drop_bytes += p->len;
            free(p);
            continue;
        }
        tun_write(c, c->srv_fd, p);
        free(p);
    }
    /* downlink packets reaching the eNB after the core/Internet delay */
    while (c->dl_delay.head && c->dl_delay.head->release_tti <= t) {
        struct pkt *p = fifo_pop(&c->dl_delay);
        struct ue *u = &c->ue[p->end_off]; /* end_off holds the UE index while in the delay line */
        if (c->s1_down || (c->p.rlf && u->ctx_released)) { /* cut S1, or no bearer at the eNB any more */
            if (c->s1_down)
                u->s1_drop_pkts++, u->s1_drop_bytes += p->len;
            else
                u->rrc_drop_pkts++, u->rrc_drop_bytes += p->len;
            u->r_drop_bytes += p->len;
            free(p);
            continue;
        }
        dl_enqueue(c, u, p, t);
    }
    for (int k = 0; k < c->p.n_ues; k++) /* the eNB's timers run while the schedulers are paused too */
        dl_discard_expired(c, &c->ue[k], t);
    for (int k = 0; k < c->p.n_ues; k++)
        channel_update(c, &c->ue[k], t);
    if (c->p.rlf)
        for (int k = 0; k < c->p.n_ues; k++) {
            rrc_tti(c, &c->ue[k], t);
            if (!ue_connected(c, &c->ue[k]))
                c->ue[k].r_flags |= TTILOG_NOT_CONNECTED;
        }
    if (!c->paused) {
        if (c->p.unlimited) {
            dl_unlimited(c, t);
            for (int k = 0; k < c->p.n_ues; k++)
                ul_unlimited(c, &c->ue[k], t);
        } else {
            if (c->have_trace) {
                dl_trace(c, t);
            } else {
                for (int k = 0; k < c->p.n_ues; k++)
                    dl_outcomes(c, &c->ue[k], t);
                dl_schedule(c, t);
            }
            for (int k = 0; k < c->p.n_ues; k++) {
                if (c->have_trace_up)
                    ul_trace(c, &c->ue[k], t);
                else
                    ul_tti(c, &c->ue[k], t);
            }
        }
        for (int k = 0; k < c->p.n_ues; k++) {
            struct ue *u = &c->ue[k];
            u->pf_avg_bits = 0.99 * u->pf_avg_bits + 0.01 * u->r_tbs_bits; /* PF window: 100 TTIs */
        }
    }
    write_tti_records(c, t);
    if (t % TELEMETRY_TTI == TELEMETRY_TTI - 1)
        publish_telemetry(c, t);
}
