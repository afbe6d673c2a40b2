// SPDX-License-Identifier: GPL-2.0
/* cubic_barr: Cubic, with BARR (bandwidth-aware rate reduction) as the loss-recovery window
 * algorithm (Liu et al., Sec. III, Eq. 3-4) instead of the kernel's PRR. No ssthresh cut: per ACK in
 * recovery,  B_i = (ack_{i} - ack_{i-M}) / (t_i - t_{i-M})  over the last M ACKs, W_i = B_i * RTT_i.
 * "ack" is counted as delivered packets (tp->delivered, which includes SACKed data), so the rate
 * keeps its meaning while the cumulative ACK is stuck at the hole. RTT_i is the current sample. */
#include "recovery_common.h"

char _license[] SEC("license") = "GPL";

#define RECOVERY_OPS cubic_barr
#define WINDOW_ACKS_DEFAULT 200 /* paper: M = 200 */
#define RING_SLOTS 256          /* power of two >= the largest M the loader accepts */

struct ack_mark {
	__u32 delivered_pkts;
	__u32 pad;
	__u64 t_us;
};

struct recovery_sk {
	__u64 head;          /* ACKs recorded so far */
	__u32 last_rtt_us;
	__u32 w_pkts;
	__u8 in_recovery;
	struct ack_mark ring[RING_SLOTS];
};

static __always_inline void recovery_sk_init(struct recovery_sk *s)
{
}

/* Every ACK goes into the ring: (delivered packets, time). */
static __always_inline void recovery_on_ack(struct sock *sk, struct recovery_sk *s, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 slot = s->head & (RING_SLOTS - 1);

	s->ring[slot].delivered_pkts = tp->delivered;
	s->ring[slot].t_us = tp->tcp_mstamp;
	s->head++;
	if (rs->rtt_us > 0)
		s->last_rtt_us = rs->rtt_us;
}

/* Eq. 3-4: delivery rate over the last M ACKs times the current RTT. */
static __always_inline void recovery_window(struct sock *sk, struct recovery_sk *s)
{
	struct tcp_sock *tp = tcp_sk(sk);
	const struct recovery_conf *cf = conf_of(sk);
	__u32 m = cf && cf->param0 ? cf->param0 : WINDOW_ACKS_DEFAULT;
	__u32 newest, oldest, pkts;
	__u64 dt_us, w;

	if (!s->in_recovery) {
		s->in_recovery = 1;
		s->w_pkts = tp->snd_cwnd;
		stat_add(ST_RECOVERIES, 1);
	}
	if (m >= RING_SLOTS)
		m = RING_SLOTS - 1;
	if (s->head > m && s->last_rtt_us) {
		newest = (s->head - 1) & (RING_SLOTS - 1);
		oldest = (s->head - 1 - m) & (RING_SLOTS - 1);
		pkts = s->ring[newest].delivered_pkts - s->ring[oldest].delivered_pkts;
		dt_us = s->ring[newest].t_us - s->ring[oldest].t_us;
		if (dt_us) {
			w = (__u64)pkts * s->last_rtt_us / dt_us;
			s->w_pkts = (__u32)max_u64(w, CELLAB_MIN_CWND_PKTS);
			stat_set(ST_LAST_ESTIMATE, (__u64)pkts * USEC_PER_SEC / dt_us);
		}
	}
	tp->snd_cwnd = min_u32(s->w_pkts, tp->snd_cwnd_clamp);
	stat_set(ST_LAST_W_PKTS, s->w_pkts);
}

#include "recovery_ops.h"
