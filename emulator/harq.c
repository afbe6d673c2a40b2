/* cellab-cell: downlink HARQ: TB outcomes (BLER, outer-loop link adaptation, retransmission 8 ms later, loss
 * after the last transmission) and in-order delivery out of the RLC queue (dlq.c). */
#include "cell.h"

#include <stdlib.h>

#include "radio.h"
#include "ttilog.h"

/* Outer-loop link adaptation: srsENB's default target_bler is 0.05; +-step per first-transmission outcome,
 * offset bounded to [-10, +2] dB. */
#define OLLA_TARGET_BLER 0.05
#define OLLA_STEP_DB 0.5
#define OLLA_MAX_DB 2.0

static void record_delivery_error(struct cell *c, uint64_t t)
{
    uint64_t model = c->start_ns + t * NS_PER_TTI, real = now_ns();
    uint64_t err_us = (real > model ? real - model : model - real) / 1000;
    c->err_hist[err_us < CELL_ERR_HIST_US - 1 ? err_us : CELL_ERR_HIST_US - 1]++;
    c->err_count++;
}

static int overlaps_lost(struct ue *u, uint64_t lo, uint64_t hi)
{
    for (int i = 0; i < u->n_lost; i++)
        if (lo < u->lost_hi[i] && hi > u->lost_lo[i])
            return 1;
    return 0;
}

/* Deliver (or drop, when a lost TB carried part of them) every packet whose last byte is done. */
void dl_deliver(struct cell *c, struct ue *u, uint64_t t)
{
    while (u->dlq.head && u->dlq.head->end_off <= u->dl_done_off) {
        struct pkt *p = fifo_pop(&u->dlq);
        if (u->n_lost && overlaps_lost(u, p->end_off - p->len, p->end_off)) {
            u->dl_lost_pkts++;
        } else if (u->host_down) { /* the modem received it; its host is paused (ue_pause) and takes nothing */
            u->host_dl_drop_pkts++;
            u->host_dl_drop_bytes += p->len;
            u->r_drop_bytes += p->len;
        } else {
            record_delivery_error(c, t);
            tun_write(c, u->fd, p);
            u->dl_delivered_bytes += p->len;
            u->dl_delivered_pkts++;
            u->r_delivered += p->len;
            u->win_dl_bytes += p->len;
            c->fwd_pkts++;
            c->fwd_bytes += p->len;
        }
        /* lost ranges wholly behind the queue head can be forgotten */
        uint64_t head_start = u->dlq.head ? u->dlq.head->end_off - u->dlq.head->len : u->dl_done_off;
        for (int i = 0; i < u->n_lost;) {
            if (u->lost_hi[i] <= head_start) {
                u->lost_lo[i] = u->lost_lo[u->n_lost - 1];
                u->lost_hi[i] = u->lost_hi[u->n_lost - 1];
                u->n_lost--;
            } else {
                i++;
            }
        }
        free(p);
    }
}

int dl_harq_busy(struct ue *u)
{
    int n = 0;
    for (int i = 0; i < u->tb_count; i++) {
        enum tb_state s = tb_at(u, i)->state;
        n += (s == TB_WAIT_OUTCOME || s == TB_WAIT_RETX);
    }
    return n;
}

static void dl_advance(struct cell *c, struct ue *u, uint64_t t)
{
    while (u->tb_count > 0) {
        struct dl_tb *tb = tb_at(u, 0);
        if (tb->state != TB_DONE && tb->state != TB_LOST)
            break;
        if (tb->state == TB_LOST && u->n_lost < CELL_MAX_LOST) {
            u->lost_lo[u->n_lost] = tb->start;
            u->lost_hi[u->n_lost] = tb->end;
            u->n_lost++;
        }
        u->dl_done_off = tb->end;
        tb->state = TB_FREE;
        u->tb_head = (u->tb_head + 1) % CELL_MAX_TB;
        u->tb_count--;
    }
    dl_deliver(c, u, t);
}

void dl_outcomes(struct cell *c, struct ue *u, uint64_t t)
{
    for (int i = 0; i < u->tb_count; i++) {
        struct dl_tb *tb = tb_at(u, i);
        if (tb->state != TB_WAIT_OUTCOME || tb->event_tti > t)
            continue;
        double bler = radio_bler(u->sinr_db, tb->tbs_bits, tb->n_re);
        int ok = rng_uniform(c) >= bler;
        if (tb->tx_count == 1) {
            /* outer-loop link adaptation on first transmissions: converges to OLLA_TARGET_BLER */
            u->olla_db += ok ? OLLA_STEP_DB * OLLA_TARGET_BLER / (1.0 - OLLA_TARGET_BLER) : -OLLA_STEP_DB;
            if (u->olla_db > OLLA_MAX_DB)
                u->olla_db = OLLA_MAX_DB;
            if (u->olla_db < -OLLA_MAX_DB * 5)
                u->olla_db = -OLLA_MAX_DB * 5;
        }
        if (ok) {
            tb->state = TB_DONE;
        } else if (tb->tx_count < c->p.harq_max_tx) {
            tb->state = TB_WAIT_RETX;
            tb->event_tti = tb->tx_tti + (uint64_t)c->p.harq_rtt_ms;
        } else {
            tb->state = TB_LOST; /* HARQ gives up; RLC UM semantics: the packets it carried are lost */
            u->r_flags |= TTILOG_HARQ_LOST;
        }
    }
    dl_advance(c, u, t);
}

/* A MAC reset (re-establishment, a new connection): the TBs in flight are abandoned, their packets lost. */
void dl_reset_harq(struct cell *c, struct ue *u, uint64_t t)
{
    for (int i = 0; i < u->tb_count; i++) {
        struct dl_tb *tb = tb_at(u, i);
        if (tb->state == TB_WAIT_OUTCOME || tb->state == TB_WAIT_RETX)
            tb->state = TB_LOST;
    }
    u->olla_db = 0;
    dl_advance(c, u, t);
}
