/* cellab-cell: the uplink: SR configuration (TS 36.213 Table 10.1.5-1, assigned as srsENB does), SR occasions,
 * grants, BSRs and PUSCH under the srsenb and sr-strict policies; trace and unlimited modes. */
#include "cell.h"

#include <stdlib.h>

#include "lte_tables.h"
#include "radio.h"
#include "ttilog.h"

void assign_sr(struct cell *c, int k)
{
    struct ue *u = &c->ue[k];
    int period = c->p.sr_period_ms;
    /* srsENB: I_SR = period - 5 + sf_mapping[j], sf_mapping = {0, 2, 4, ...} (period/2 slots, SR on even
     * subframes), UE k taking the least-loaded slot j = k mod (period/2). */
    int slots = period / 2;
    int i_sr = period - 5 + 2 * (k % slots);
    u->i_sr = i_sr;
    for (int i = 0; i < lte_sr_table_len; i++) {
        const struct lte_sr_cfg *s = &lte_sr_table[i];
        if (i_sr >= s->i_sr_min && i_sr <= s->i_sr_max) {
            u->sr_period_ms = s->period_ms;
            u->sr_offset = i_sr - s->offset_base;
            return;
        }
    }
    die("I_SR %d outside Table 10.1.5-1", i_sr);
}

static int sr_occasion(const struct ue *u, uint64_t t)
{
    /* (10 n_f + floor(n_s/2) - N_OFFSET,SR) mod SR_PERIODICITY == 0, with t = 10 n_f + subframe */
    uint64_t sfn_sf = t % 10240;
    return ((sfn_sf + 10240 * 8 - (uint64_t)u->sr_offset) % (uint64_t)u->sr_period_ms) == 0;
}

static uint32_t ul_full_grant_bytes(struct cell *c)
{
    return (uint32_t)radio_ul_tbs_bits(c->p.ul_mcs, c->p.ul_prb) / 8;
}

/* Smallest grant (in whole PRBs) that carries `bytes`, capped at the uplink PRBs. */
static uint32_t ul_grant_for(struct cell *c, uint64_t bytes)
{
    for (int n = 1; n <= c->p.ul_prb; n++) {
        uint32_t b = (uint32_t)radio_ul_tbs_bits(c->p.ul_mcs, n) / 8;
        if (b >= bytes)
            return b;
    }
    return ul_full_grant_bytes(c);
}

static int ul_grants_out(const struct ue *u)
{
    int n = 0;
    for (int i = 0; i < CELL_UL_HARQ_PROCS; i++)
        n += u->grants[i].active;
    return n;
}

static void ul_add_grant(struct ue *u, uint64_t pusch_tti, uint32_t bytes)
{
    for (int i = 0; i < CELL_UL_HARQ_PROCS; i++) {
        if (!u->grants[i].active) {
            u->grants[i] = (struct ul_grant){pusch_tti, bytes, 1};
            u->grants_issued++;
            u->r_flags |= TTILOG_UL_GRANT;
            return;
        }
    }
}

/* Packets whose last byte went out reach the eNB at the end of this subframe, then the core. */
static void ul_complete(struct cell *c, struct ue *u, uint64_t t)
{
    while (u->ulq.head && u->ulq.head->end_off <= u->ul_sent_off) {
        struct pkt *p = fifo_pop(&u->ulq);
        p->release_tti = delay_release(c, &c->ul_delay, t + 1);
        u->ul_delivered_bytes += p->len;
        u->ul_delivered_pkts++;
        u->r_ul_delivered += p->len;
        u->win_ul_bytes += p->len;
        if (c->s1_down) { /* the S1 path is cut: lost between the eNB and the core */
            u->s1_drop_pkts++;
            u->s1_drop_bytes += p->len;
            free(p);
        } else if (c->ul_delay.bytes + p->len > CELL_DELAY_LINE_MAX_BYTES) {
            c->delay_drop_pkts++;
            free(p);
        } else {
            fifo_push(&c->ul_delay, p);
        }
    }
}

static void ul_transmit(struct cell *c, struct ue *u, uint64_t t, uint32_t grant_bytes)
{
    uint64_t pending = u->ul_in_off - u->ul_sent_off;
    uint64_t send = pending < grant_bytes ? pending : grant_bytes;
    u->ul_sent_off += send;
    u->r_ul_grant += grant_bytes;
    u->r_flags |= TTILOG_PUSCH;
    ul_complete(c, u, t);
    /* the PUSCH carries a BSR of what is left; the eNB can use it a few TTIs later */
    u->bsr_pending_value = u->ul_in_off - u->ul_sent_off;
    u->bsr_usable_at = t + CELL_BSR_PROCESS_TTI;
    u->bsr_pending = 1;
    /* srsenb: a UE that just reported an empty buffer gets its next chance when the periodic BSR timer
     * (restarted by this BSR) expires, without an SR; sr-strict: it goes back to SR at once. */
    if (c->p.ul_policy == UL_SRSENB && u->bsr_pending_value == 0)
        u->poll_pusch_tti = t + (uint64_t)c->p.bsr_timer_ms;
}

void ul_tti(struct cell *c, struct ue *u, uint64_t t)
{
    if (!ue_connected(c, u)) /* no PUCCH, no PUSCH: data waits in the UE's buffer */
        return;
    int sr_occ = sr_occasion(u, t);
    if (sr_occ)
        u->r_flags |= TTILOG_SR_OCCASION;
    /* PUSCH on grants due now, or overdue: a pause skips TTIs, and a grant left active forever would keep
     * the UE from ever sending an SR again */
    for (int i = 0; i < CELL_UL_HARQ_PROCS; i++) {
        struct ul_grant *g = &u->grants[i];
        if (g->active && g->pusch_tti <= t) {
            g->active = 0;
            ul_transmit(c, u, t, g->bytes);
        }
    }
    uint64_t pending = u->ul_in_off - u->ul_sent_off;
    /* srsenb: periodic BSR timer expiry gives an active UE a small grant without an SR */
    if (u->poll_pusch_tti && t >= u->poll_pusch_tti) {
        u->poll_pusch_tti = 0;
        if (pending > 0)
            ul_transmit(c, u, t, (uint32_t)radio_ul_tbs_bits(c->p.ul_mcs, c->p.poll_grant_prb) / 8);
        pending = u->ul_in_off - u->ul_sent_off;
    }
    /* the eNB learns a BSR */
    if (u->bsr_pending && t >= u->bsr_usable_at) {
        u->bsr_pending = 0;
        uint64_t in_flight = 0; /* grants issued after that PUSCH also carry part of the reported buffer */
        for (int i = 0; i < CELL_UL_HARQ_PROCS; i++)
            if (u->grants[i].active)
                in_flight += u->grants[i].bytes;
        u->bsr_bytes = u->bsr_pending_value > in_flight ? u->bsr_pending_value - in_flight : 0;
    }
    /* BSR-driven grants while the eNB knows of data (8 UL HARQ processes) */
    if (u->bsr_bytes > 0 && ul_grants_out(u) < CELL_UL_HARQ_PROCS) {
        uint32_t bytes = c->p.ul_policy == UL_SR_STRICT ? ul_full_grant_bytes(c) : ul_grant_for(c, u->bsr_bytes);
        ul_add_grant(u, t + CELL_GRANT_TO_PUSCH_TTI, bytes);
        u->bsr_bytes = u->bsr_bytes > bytes ? u->bsr_bytes - bytes : 0;
    }
    /* new data with no grant in sight (as the UE sees it: no grant received, no non-empty BSR awaiting its
     * grants, no periodic-BSR chance pending) waits for its SR occasion */
    int idle = ul_grants_out(u) == 0 && !(u->bsr_pending && u->bsr_pending_value > 0) && u->bsr_bytes == 0 &&
               u->poll_pusch_tti == 0;
    if (pending > 0 && idle && !u->sr_waiting)
        u->sr_waiting = 1;
    if (u->sr_waiting && sr_occ) {
        u->sr_waiting = 0;
        u->sr_sent++;
        u->r_flags |= TTILOG_SR_SENT;
        /* the SR grant: the eNB does not know the size yet and grants the UE's full uplink allocation */
        ul_add_grant(u, t + CELL_SR_TO_GRANT_TTI + CELL_GRANT_TO_PUSCH_TTI, ul_full_grant_bytes(c));
    }
}

/* Uplink trace mode: the trace's 1500-byte opportunities of this ms, no SR or grants (Mahimahi's rule). */
void ul_trace(struct cell *c, struct ue *u, uint64_t t)
{
    uint64_t cap = (uint64_t)trace_opportunities(&c->trace_up, t) * TRACE_OPPORTUNITY_BYTES;
    uint64_t pending = u->ul_in_off - u->ul_sent_off;
    u->ul_sent_off += pending < cap ? pending : cap; /* an unused opportunity is wasted */
    u->r_ul_grant = (uint32_t)cap;
    ul_complete(c, u, t);
}

void ul_unlimited(struct cell *c, struct ue *u, uint64_t t)
{
    uint64_t pending = u->ul_in_off - u->ul_sent_off;
    if (pending)
        ul_transmit(c, u, t, (uint32_t)(pending > UINT32_MAX ? UINT32_MAX : pending));
    u->bsr_pending = 0;
}
