/* cellab-cell: the downlink scheduler: HARQ retransmissions, then proportional-fair sharing of the PRBs with
 * link adaptation; trace mode (Mahimahi's delivery rule) and unlimited mode. */
#include "cell.h"

#include "radio.h"

/* Retransmissions first (they keep their PRBs), then new data shared proportionally fair. */
void dl_schedule(struct cell *c, uint64_t t)
{
    int avail = c->p.n_prb, sf = (int)(t % 10);
    for (int k = 0; k < c->p.n_ues; k++) {
        struct ue *u = &c->ue[k];
        if (!ue_connected(c, u))
            continue;
        for (int i = 0; i < u->tb_count && avail > 0; i++) {
            struct dl_tb *tb = tb_at(u, i);
            if (tb->state != TB_WAIT_RETX || tb->event_tti > t || tb->n_prb > avail)
                continue;
            avail -= tb->n_prb;
            tb->state = TB_WAIT_OUTCOME;
            tb->tx_tti = t;
            tb->event_tti = t + 1;
            tb->tx_count++;
            tb->n_re = radio_pdsch_re(c->p.n_prb, tb->n_prb, sf);
            u->harq_retx++;
            u->win_retx++;
            u->r_retx++;
            u->r_tbs_bits += (uint32_t)tb->tbs_bits;
            u->r_prb += tb->n_prb;
        }
    }
    int done[CELL_MAX_UES] = {0};
    while (avail > 0) {
        int best = -1;
        double best_metric = -1;
        for (int k = 0; k < c->p.n_ues; k++) {
            struct ue *u = &c->ue[k];
            if (done[k] || u->cqi_used <= 0 || u->dl_in_off == u->dl_sched_off || !ue_connected(c, u) ||
                dl_harq_busy(u) >= CELL_DL_HARQ_PROCS || u->tb_count >= CELL_MAX_TB)
                continue;
            double rate = radio_dl_alloc(u->cqi_used, c->p.n_prb, c->p.n_prb, sf).tbs_bits;
            double metric = rate / (u->pf_avg_bits + 1.0);
            if (metric > best_metric)
                best_metric = metric, best = k;
        }
        if (best < 0)
            break;
        struct ue *u = &c->ue[best];
        done[best] = 1;
        uint64_t pending_bits = (u->dl_in_off - u->dl_sched_off) * 8;
        int n = 1;
        struct radio_alloc a = radio_dl_alloc(u->cqi_used, c->p.n_prb, n, sf);
        while (n < avail && (uint64_t)a.tbs_bits < pending_bits) /* fewest PRBs that carry the queue */
            a = radio_dl_alloc(u->cqi_used, c->p.n_prb, ++n, sf);
        if ((uint64_t)a.tbs_bits < pending_bits) /* the queue outgrows the PRBs: the largest TB they allow */
            a = radio_dl_best_alloc(u->cqi_used, c->p.n_prb, avail, sf, &n);
        if (a.tbs_bits < 8)
            continue;
        uint64_t carry = (uint64_t)a.tbs_bits / 8;
        if (carry > u->dl_in_off - u->dl_sched_off)
            carry = u->dl_in_off - u->dl_sched_off;
        struct dl_tb *tb = &u->tb[(u->tb_head + u->tb_count) % CELL_MAX_TB];
        *tb = (struct dl_tb){.start = u->dl_sched_off, .end = u->dl_sched_off + carry, .event_tti = t + 1,
                             .tx_tti = t, .n_prb = n, .mcs = a.mcs, .tbs_bits = a.tbs_bits,
                             .n_re = radio_pdsch_re(c->p.n_prb, n, sf), .tx_count = 1, .state = TB_WAIT_OUTCOME};
        u->tb_count++;
        u->dl_sched_off += carry;
        dl_mark_scheduled(u);
        avail -= n;
        u->r_tbs_bits += (uint32_t)a.tbs_bits;
        u->win_dl_tbs_bits += (uint64_t)a.tbs_bits;
        u->r_prb += n;
        u->r_mcs = a.mcs;
    }
}

/* Trace mode: each UE's link gets the trace's 1500-byte opportunities of this ms (Mahimahi's rule). */
void dl_trace(struct cell *c, uint64_t t)
{
    uint64_t cap = (uint64_t)trace_opportunities(&c->trace, t) * TRACE_OPPORTUNITY_BYTES;
    for (int k = 0; k < c->p.n_ues; k++) {
        struct ue *u = &c->ue[k];
        uint64_t carry = u->dl_in_off - u->dl_sched_off;
        if (carry > cap)
            carry = cap; /* an unused opportunity is wasted */
        u->dl_sched_off += carry;
        dl_mark_scheduled(u);
        u->dl_done_off = u->dl_sched_off;
        u->r_tbs_bits = (uint32_t)(cap * 8);
        dl_deliver(c, u, t);
    }
}

/* Radio limit lifted (benchmark): everything queued leaves in this TTI. */
void dl_unlimited(struct cell *c, uint64_t t)
{
    for (int k = 0; k < c->p.n_ues; k++) {
        struct ue *u = &c->ue[k];
        u->dl_sched_off = u->dl_done_off = u->dl_in_off;
        dl_mark_scheduled(u);
        dl_deliver(c, u, t);
    }
}
