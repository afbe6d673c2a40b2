/* Receiver-side per-packet RTT (ExLL thesis §4.1): the time from receiving data packet n to receiving
 * the packet released by the ACK for n. Two ways to find the released packet:
 *  - TSecr: the first arriving data whose TSecr echoes the TSval of (or after) the ACK for n;
 *  - DRS (no timestamps): the first data at least one window beyond that ACK's number, the window
 *    being the bytes received in the last RTT (given by the caller).
 * Pure state machine: feed events in time order, collect samples. */
#ifndef CELLAB_RTTMATCH_H
#define CELLAB_RTTMATCH_H

#include <stdint.h>

#define RTTM_DATA_RING 32768
#define RTTM_ACK_RING 16384
#define RTTM_PKTS_PER_ACK 16 /* packets remembered per ACK; more (stretch ACKs) are summarised */

struct rttm_data { uint64_t t_ns; uint32_t seq_end; };

struct rttm_ack {
    uint64_t t_ns;
    uint32_t tsval, ack, win_est_bytes;
    uint8_t n;
    uint64_t pkt_t_ns[RTTM_PKTS_PER_ACK];
};

struct rttm {
    int have_data, have_ack, use_ts;
    uint32_t high_seq_end, last_ack;
    struct rttm_data data[RTTM_DATA_RING];
    uint32_t d_head, d_len;
    struct rttm_ack acks[RTTM_ACK_RING];
    uint32_t a_head, a_len;
    uint64_t dropped; /* entries lost to full rings (reported, never silent) */
};

struct rtt_sample { uint64_t t_ns; uint64_t data_t_ns; double rtt_us; };

void rttm_init(struct rttm *m);
/* A data segment arrived. Writes up to max samples resolved by it; returns how many. */
int rttm_on_data(struct rttm *m, uint64_t t_ns, uint32_t seq, uint32_t len, int has_ts, uint32_t tsecr,
                 struct rtt_sample *out, int max);
/* We sent an ACK. win_est_bytes: bytes received in the last RTT (DRS mode only). */
void rttm_on_ack(struct rttm *m, uint64_t t_ns, uint32_t ack, int has_ts, uint32_t tsval, uint32_t win_est_bytes);

#endif
