/* cellab-cell: packet FIFOs (RLC queues, UE buffers, delay lines) and the core/Internet delay line's release rule. */
#include "cell.h"

#include <stdlib.h>
#include <string.h>

void fifo_push(struct fifo *q, struct pkt *p)
{
    p->next = NULL;
    if (q->tail)
        q->tail->next = p;
    else
        q->head = p;
    q->tail = p;
    q->bytes += p->len;
    q->count++;
}

struct pkt *fifo_pop(struct fifo *q)
{
    struct pkt *p = q->head;
    if (!p)
        return NULL;
    q->head = p->next;
    if (!q->head)
        q->tail = NULL;
    q->bytes -= p->len;
    q->count--;
    return p;
}

void fifo_free(struct fifo *q)
{
    struct pkt *p;
    while ((p = fifo_pop(q)))
        free(p);
}

struct pkt *pkt_new(const uint8_t *data, uint32_t len)
{
    struct pkt *p = malloc(sizeof(*p) + len);
    if (!p)
        return NULL;
    memcpy(p->data, data, len);
    p->len = len;
    p->next = NULL;
    p->end_off = 0;
    p->release_tti = 0;
    p->enq_tti = 0;
    return p;
}

/* Release TTI for a packet entering a delay line: the fixed core delay plus, when configured, a jitter of
 * 0..J whole ms drawn uniformly (a software EPC/eNB's processing), never overtaking the packet ahead. */
uint64_t delay_release(struct cell *c, struct fifo *line, uint64_t base_tti)
{
    uint64_t rel = base_tti + c->delay_ticks;
    if (c->p.core_jitter_ms > 0)
        rel += (uint64_t)(rng_uniform(c) * (c->p.core_jitter_ms + 1));
    if (line->tail && line->tail->release_tti > rel)
        rel = line->tail->release_tti;
    return rel;
}
