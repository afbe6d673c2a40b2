#include "rttmatch.h"

#include <string.h>

#include "probe.h"

void rttm_init(struct rttm *m)
{
    memset(m, 0, sizeof(*m));
    m->use_ts = -1; /* decided by the first ACK */
}

static int ack_resolved_by(const struct rttm *m, const struct rttm_ack *a, uint64_t t_ns, uint32_t seq_end,
                           int has_ts, uint32_t tsecr)
{
    if (t_ns <= a->t_ns)
        return 0;
    if (m->use_ts == 1)
        return has_ts && !seq_before(tsecr, a->tsval);
    return !seq_before(seq_end, a->ack + a->win_est_bytes);
}

int rttm_on_data(struct rttm *m, uint64_t t_ns, uint32_t seq, uint32_t len, int has_ts, uint32_t tsecr,
                 struct rtt_sample *out, int max)
{
    int n_out = 0;
    uint32_t seq_end = seq + len;
    /* Only data is released by our ACKs. A sender's pure ACK or bare FIN answers our request or FIN
     * (handshake, teardown): it would time the last RTT's packets with the teardown delay, and only
     * where the capture outlives the flow (pcap, not live). */
    if (len == 0)
        return 0;
    while (m->a_len > 0) {
        struct rttm_ack *a = &m->acks[m->a_head];
        if (!ack_resolved_by(m, a, t_ns, seq_end, has_ts, tsecr))
            break;
        for (int i = 0; i < a->n && n_out < max; i++) {
            out[n_out].t_ns = t_ns;
            out[n_out].data_t_ns = a->pkt_t_ns[i];
            out[n_out].rtt_us = (double)(t_ns - a->pkt_t_ns[i]) / 1e3;
            n_out++;
        }
        m->a_head = (m->a_head + 1) % RTTM_ACK_RING;
        m->a_len--;
    }
    if (m->have_data && !seq_after(seq_end, m->high_seq_end))
        return n_out; /* retransmission or duplicate: no new packet to time */
    m->high_seq_end = seq_end;
    m->have_data = 1;
    if (m->d_len == RTTM_DATA_RING) { /* full: forget the oldest, count it */
        m->d_head = (m->d_head + 1) % RTTM_DATA_RING;
        m->d_len--;
        m->dropped++;
    }
    struct rttm_data *d = &m->data[(m->d_head + m->d_len) % RTTM_DATA_RING];
    d->t_ns = t_ns;
    d->seq_end = seq_end;
    m->d_len++;
    return n_out;
}

void rttm_on_ack(struct rttm *m, uint64_t t_ns, uint32_t ack, int has_ts, uint32_t tsval, uint32_t win_est_bytes)
{
    if (m->use_ts < 0)
        m->use_ts = has_ts ? 1 : 0;
    if (m->have_ack && !seq_after(ack, m->last_ack))
        return; /* duplicate or window update: acknowledges no new packet */
    m->have_ack = 1;
    m->last_ack = ack;
    struct rttm_ack a = { .t_ns = t_ns, .tsval = tsval, .ack = ack, .win_est_bytes = win_est_bytes, .n = 0 };
    while (m->d_len > 0) {
        struct rttm_data *d = &m->data[m->d_head];
        if (seq_after(d->seq_end, ack))
            break;
        if (a.n < RTTM_PKTS_PER_ACK)
            a.pkt_t_ns[a.n++] = d->t_ns;
        m->d_head = (m->d_head + 1) % RTTM_DATA_RING;
        m->d_len--;
    }
    if (a.n == 0)
        return;
    if (m->a_len == RTTM_ACK_RING) {
        m->a_head = (m->a_head + 1) % RTTM_ACK_RING;
        m->a_len--;
        m->dropped++;
    }
    m->acks[(m->a_head + m->a_len) % RTTM_ACK_RING] = a;
    m->a_len++;
}
