/* cellab-cell: the downlink RLC queue of each UE: admission of a packet arriving from the core, the PDCP
 * discard timer and which packets have started transmission. Two policies (emulator/README.md, "Downlink
 * queue"): srsenb's (at most rlc_queue_sdus packets not yet started, tail drop of the arriving one; a packet
 * not started pdcp_discard_ms after its arrival is discarded, when the bearer has that timer) and a plain byte
 * limit with tail drop. */
#include "cell.h"

#include <stdlib.h>

#include "ttilog.h"

static uint64_t pkt_start(const struct pkt *p) { return p->end_off - p->len; }

void dl_enqueue(struct cell *c, struct ue *u, struct pkt *p, uint64_t t)
{
    int full = c->p.dl_queue == DLQ_SRSENB ? u->dl_new_pkts >= (uint32_t)c->p.rlc_queue_sdus
                                           : u->dlq.bytes + p->len > c->p.rlc_queue_bytes;
    if (full) {
        u->dl_drop_bytes += p->len;
        u->dl_drop_pkts++;
        u->r_drop_bytes += p->len;
        free(p);
        return;
    }
    u->dl_in_off += p->len;
    p->end_off = u->dl_in_off;
    p->enq_tti = t;
    fifo_push(&u->dlq, p);
    if (!u->dl_next_new)
        u->dl_next_new = p; /* every packet before it has started: it is the first new one */
    u->dl_new_pkts++;
}

/* After the scheduler moved dl_sched_off: packets with a byte scheduled are no longer new (srsenb's RLC has
 * taken them out of its SDU queue; a PDCP discard no longer reaches them). Called before any delivery can free
 * them. */
void dl_mark_scheduled(struct ue *u)
{
    while (u->dl_next_new && pkt_start(u->dl_next_new) < u->dl_sched_off) {
        u->dl_next_new = u->dl_next_new->next;
        u->dl_new_pkts--;
    }
}

/* Remove the new (not yet started) packets from dl_next_new on: those pdcp_discard_ms old or older (all = 0),
 * or every one of them (all = 1: an RLC re-establishment or a released UE context, rrc.c). They form a run from
 * dl_next_new; the packets behind them move down in the byte stream (no TB covers them yet). Returns the bytes. */
static uint64_t discard_new(struct cell *c, struct ue *u, uint64_t t, int all)
{
    struct pkt *first = u->dl_next_new;
    struct pkt *before = NULL; /* the packet ahead of the run, NULL when the run starts at the head */
    for (struct pkt *q = u->dlq.head; q != first; q = q->next)
        before = q;
    uint64_t gone_bytes = 0;
    uint32_t gone_pkts = 0;
    struct pkt *rest = first;
    while (rest && (all || t - rest->enq_tti >= (uint64_t)c->p.pdcp_discard_ms)) {
        struct pkt *next = rest->next;
        gone_bytes += rest->len;
        gone_pkts++;
        free(rest);
        rest = next;
    }
    if (before)
        before->next = rest;
    else
        u->dlq.head = rest;
    if (!rest)
        u->dlq.tail = before;
    for (struct pkt *q = rest; q; q = q->next)
        q->end_off -= gone_bytes;
    u->dlq.bytes -= gone_bytes;
    u->dlq.count -= gone_pkts;
    u->dl_in_off -= gone_bytes;
    u->dl_next_new = rest;
    u->dl_new_pkts -= gone_pkts;
    u->r_drop_bytes += (uint32_t)gone_bytes;
    if (!all) {
        u->dl_discard_bytes += gone_bytes;
        u->dl_discard_pkts += gone_pkts;
    } else {
        u->rrc_drop_bytes += gone_bytes;
        u->rrc_drop_pkts += gone_pkts;
    }
    return gone_bytes;
}

/* srsenb's PDCP discard timer: new packets that arrived pdcp_discard_ms ago or earlier leave the queue. */
void dl_discard_expired(struct cell *c, struct ue *u, uint64_t t)
{
    struct pkt *first = u->dl_next_new;
    if (c->p.dl_queue != DLQ_SRSENB || c->p.pdcp_discard_ms == 0 || !first ||
        t - first->enq_tti < (uint64_t)c->p.pdcp_discard_ms)
        return;
    discard_new(c, u, t, 0);
    u->r_flags |= TTILOG_DL_DISCARD;
}

/* Every packet not yet started leaves the queue (RLC UM re-establishment: TS 36.322 5.4 discards all SDUs). */
uint64_t dl_discard_all_new(struct cell *c, struct ue *u, uint64_t t)
{
    return u->dl_next_new ? discard_new(c, u, t, 1) : 0;
}
