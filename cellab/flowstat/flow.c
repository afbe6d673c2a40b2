#include "flow.h"

#include <stdlib.h>
#include <string.h>

#define SEQ_SPACE 0x100000000LL

/* The 64-bit sequence number nearest to ref whose low 32 bits are seq: survives wraparound. */
static int64_t unwrap_seq(int64_t ref, uint32_t seq)
{
    uint32_t delta = seq - (uint32_t)(uint64_t)ref;
    return ref + (delta < 0x80000000u ? (int64_t)delta : (int64_t)delta - SEQ_SPACE);
}

static struct sent_segment *ring_at(struct sent_ring *r, size_t i)
{
    return &r->v[(r->head + i) & (r->cap - 1)];
}

static void ring_push(struct sent_ring *r, int64_t start_seq, int64_t end_seq, int64_t t_ns)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        struct sent_segment *v = xrealloc(NULL, cap * sizeof(*v));
        for (size_t i = 0; i < r->n; i++)
            v[i] = *ring_at(r, i);
        free(r->v);
        r->v = v;
        r->cap = cap;
        r->head = 0;
    }
    *ring_at(r, r->n) = (struct sent_segment){start_seq, end_seq, t_ns, SENT_WAITING};
    r->n++;
}

static void ring_pop(struct sent_ring *r)
{
    r->head = (r->head + 1) & (r->cap - 1);
    r->n--;
}

/* Index of the first waiting segment that ends after seq (r->n when none does). */
static size_t ring_first_ending_after(struct sent_ring *r, int64_t seq)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ring_at(r, mid)->end_seq <= seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void half_init(struct half *h)
{
    memset(h, 0, sizeof(*h));
    h->first_data_ns = h->last_data_ns = h->fin_ns = -1;
    h->last_pure_ack_ns = -1;
}

static void half_free(struct half *h)
{
    free(h->waiting.v);
    dvec_free(&h->rtt_ms);
    dvec_free(&h->rtt_t_s);
    u64vec_free(&h->bin_bytes);
    dvec_free(&h->ack_gap_ms);
}

void flow_init(struct flow *f, const struct flow_key *key, int dir, int64_t t_ns)
{
    memset(f, 0, sizeof(*f));
    f->key = *key;
    f->first_dir = dir;
    f->first_ns = f->last_ns = t_ns;
    f->syn_ns = -1;
    half_init(&f->half[0]);
    half_init(&f->half[1]);
}

void flow_free(struct flow *f)
{
    half_free(&f->half[0]);
    half_free(&f->half[1]);
}

uint64_t half_bytes(const struct half *h)
{
    return h->seq_known && h->snd_max > h->base_seq ? (uint64_t)(h->snd_max - h->base_seq) : 0;
}

int flow_data_dir(const struct flow *f)
{
    uint64_t b0 = half_bytes(&f->half[0]), b1 = half_bytes(&f->half[1]);
    if (b0 != b1)
        return b0 > b1 ? 0 : 1;
    return f->first_dir;
}

int flow_is_reused_by(const struct flow *f, const struct segment *s)
{
    int fresh_syn = (s->flags & (TCP_SYN | TCP_ACK)) == TCP_SYN;
    int closed = f->half[0].fin_seen || f->half[1].fin_seen || f->half[0].rst_seen || f->half[1].rst_seen;
    return fresh_syn && closed;
}

static void start_sequence(struct half *h, uint32_t first_data_seq)
{
    h->base_seq = h->snd_max = first_data_seq;
    h->seq_known = 1;
}

/* Karn: segments overlapping a resent range give no RTT sample (which copy did the ACK answer?). */
static void mark_ambiguous(struct sent_ring *r, int64_t start_seq, int64_t end_seq)
{
    for (size_t i = ring_first_ending_after(r, start_seq); i < r->n; i++) {
        struct sent_segment *s = ring_at(r, i);
        if (s->start_seq >= end_seq)
            break;
        if (s->state == SENT_WAITING)
            s->state = SENT_AMBIGUOUS;
    }
}

static void add_new_bytes(struct half *h, uint64_t bytes, int64_t t_ns, const struct flow_settings *cfg)
{
    int64_t bin = (t_ns - cfg->start_ns) / cfg->interval_ns;
    if (h->bin_bytes.n == 0)
        h->first_bin = bin;
    int64_t idx = bin - h->first_bin;
    if (idx < 0)
        idx = 0;   /* a timestamp that went backwards lands in the first bin */
    if (idx >= MAX_SERIES_BINS) {
        h->unbinned_bytes += bytes;
        return;
    }
    u64vec_grow_to(&h->bin_bytes, (size_t)idx + 1);
    h->bin_bytes.v[idx] += bytes;
}

static void on_data(struct half *me, const struct segment *s, const struct flow_settings *cfg)
{
    uint32_t seq = s->seq + ((s->flags & TCP_SYN) ? 1u : 0u);   /* a SYN takes one sequence number */
    if (!me->seq_known)
        start_sequence(me, seq);
    int64_t start = unwrap_seq(me->snd_max, seq);
    int64_t end = start + s->payload_bytes;
    me->payload_bytes += s->payload_bytes;
    me->data_segments++;
    if (me->first_data_ns < 0)
        me->first_data_ns = s->t_ns;
    me->last_data_ns = s->t_ns;
    if (end <= me->snd_max) {
        me->retransmits++;
        mark_ambiguous(&me->waiting, start, end);
        return;
    }
    if (start < me->snd_max)   /* partly resent: only the new tail can give a clean sample */
        mark_ambiguous(&me->waiting, start, me->snd_max);
    add_new_bytes(me, (uint64_t)(end - me->snd_max), s->t_ns, cfg);
    ring_push(&me->waiting, start > me->snd_max ? start : me->snd_max, end, s->t_ns);
    me->snd_max = end;
}

static void take_sample(struct half *data, const struct sent_segment *sent, int64_t ack_ns,
                        const struct flow_settings *cfg)
{
    dvec_push(&data->rtt_ms, (double)(ack_ns - sent->t_ns) / 1e6);
    dvec_push(&data->rtt_t_s, (double)(ack_ns - cfg->start_ns) / 1e9);
}

/* A SACK block [left, right) covers waiting segments at the block's right end that this ACK acks first. */
static void on_sack_block(struct half *data, int64_t left, int64_t right, int64_t ack_ns,
                          const struct flow_settings *cfg)
{
    struct sent_ring *r = &data->waiting;
    size_t end_idx = ring_first_ending_after(r, right);   /* [0, end_idx) end at or before right */
    size_t lo = end_idx;
    while (lo > 0) {
        struct sent_segment *s = ring_at(r, lo - 1);
        if (s->start_seq < left || s->state != SENT_WAITING)
            break;   /* earlier parts of the block were sampled by earlier ACKs */
        lo--;
    }
    for (size_t i = lo; i < end_idx; i++) {
        take_sample(data, ring_at(r, i), ack_ns, cfg);
        ring_at(r, i)->state = SENT_SAMPLED;
    }
}

/* An ACK from the other side: the first one covering a waiting segment gives its RTT sample. */
static void on_ack(struct half *data, const struct segment *s, const struct flow_settings *cfg)
{
    if (!data->seq_known)
        return;   /* capture began after this data was sent */
    int64_t ack = unwrap_seq(data->snd_max, s->ack);
    struct sent_ring *r = &data->waiting;
    while (r->n > 0 && ring_at(r, 0)->end_seq <= ack) {
        if (ring_at(r, 0)->state == SENT_WAITING)
            take_sample(data, ring_at(r, 0), s->t_ns, cfg);
        ring_pop(r);
    }
    for (int b = 0; b < s->n_sack; b++) {
        int64_t left = unwrap_seq(data->snd_max, s->sack_left[b]);
        int64_t right = unwrap_seq(data->snd_max, s->sack_right[b]);
        if (right <= ack || right > data->snd_max || left >= right)
            continue;   /* D-SACK below the cumulative ACK, or a block we cannot place */
        on_sack_block(data, left, right, s->t_ns, cfg);
    }
}

static void on_pure_ack(struct half *me, int64_t t_ns)
{
    if (me->last_pure_ack_ns >= 0)
        dvec_push(&me->ack_gap_ms, (double)(t_ns - me->last_pure_ack_ns) / 1e6);
    me->last_pure_ack_ns = t_ns;
}

void flow_segment(struct flow *f, int dir, const struct segment *s, const struct flow_settings *cfg)
{
    struct half *me = &f->half[dir], *peer = &f->half[!dir];
    f->packets++;
    f->last_ns = s->t_ns;
    if (s->flags & TCP_SYN) {
        if (f->syn_ns < 0)
            f->syn_ns = s->t_ns;
        me->syn_seen = 1;
        if (!me->seq_known)
            start_sequence(me, s->seq + 1u);
    }
    if (s->flags & TCP_RST)
        me->rst_seen = 1;
    if (s->sack_permitted || s->n_sack)
        me->sack_seen = 1;
    if (s->payload_bytes)
        on_data(me, s, cfg);
    if (s->flags & TCP_ACK)
        on_ack(peer, s, cfg);
    if ((s->flags & (TCP_ACK | TCP_SYN | TCP_FIN | TCP_RST)) == TCP_ACK && s->payload_bytes == 0)
        on_pure_ack(me, s->t_ns);
    if ((s->flags & TCP_FIN) && !me->fin_seen) {
        me->fin_seen = 1;
        me->fin_ns = s->t_ns;
    }
}
