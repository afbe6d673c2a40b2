// SPDX-License-Identifier: GPL-2.0
/* cubic_qarr: Cubic, with QARR (queue-aware rate reduction) as the loss-recovery window algorithm
 * (Liu et al., Sec. III, Eq. 1-2) instead of the kernel's PRR. No ssthresh cut:
 *   Q_i = pipe_i (RTT_i - baseRTT) / RTT_i   and   W_i = W_{i-1} - max(Q_i - Q_T, 0).
 * W starts at the cwnd held when recovery began; Eq. 2 can only decrease it, and we floor it at 2
 * packets (the paper gives no floor). baseRTT is the flow's minimum RTT.
 * When: the paper says per ACK/DUPACK; applied that way, a standing Q - Q_T > 0 (a few packets of RTT
 * jitter on a cellular uplink is enough) is subtracted once per ACK, i.e. ~cwnd times per RTT, and W
 * collapses within one RTT, which contradicts the paper's own measured utilisation (T4: 0.96). The
 * authors' public module applies Eq. 2 once per RTT. Parameter per_rtt: 1 (default) once per round
 * of delivered data, 0 per ACK as printed. */
#include "recovery_common.h"

char _license[] SEC("license") = "GPL";

#define RECOVERY_OPS cubic_qarr
#define QUEUE_THRESHOLD_PKTS_DEFAULT 5 /* paper: Q_T = 5 */

struct recovery_sk {
	__u32 base_rtt_us;
	__u32 last_rtt_us;
	__u32 w_pkts;       /* recovery window */
	__u32 round_end;    /* tp->delivered that ends the current round */
	__u8 in_recovery;
};

static __always_inline void recovery_sk_init(struct recovery_sk *s)
{
	s->base_rtt_us = ~0u;
}

static __always_inline void recovery_on_ack(struct sock *sk, struct recovery_sk *s, const struct rate_sample *rs)
{
	if (!s->base_rtt_us)  /* storage created after init (module picked mid-connection) */
		s->base_rtt_us = ~0u;
	if (rs->rtt_us > 0) {
		s->last_rtt_us = rs->rtt_us;
		s->base_rtt_us = min_u32(s->base_rtt_us, rs->rtt_us);
	}
}

/* Eq. 1-2 while the kernel is in CWR/Recovery: per round (per_rtt = 1) or per ACK. */
static __always_inline void recovery_window(struct sock *sk, struct recovery_sk *s)
{
	struct tcp_sock *tp = tcp_sk(sk);
	const struct recovery_conf *cf = conf_of(sk);
	__u32 q_t = cf ? cf->param0 : QUEUE_THRESHOLD_PKTS_DEFAULT;
	__u32 rtt = s->last_rtt_us, base = s->base_rtt_us, pipe, q = 0;

	if (!s->in_recovery) {
		s->in_recovery = 1;
		s->w_pkts = tp->snd_cwnd;
		s->round_end = tp->delivered;
		stat_add(ST_RECOVERIES, 1);
	}
	pipe = tcp_packets_in_flight(tp);
	if (!cf || cf->per_rtt) {
		if ((__s32)(tp->delivered - s->round_end) < 0)
			goto apply;
		s->round_end = tp->delivered + max_u32(pipe, 1);
	}
	if (rtt && base != ~0u && rtt > base)
		q = (__u32)((__u64)pipe * (rtt - base) / rtt);
	if (q > q_t)
		s->w_pkts = s->w_pkts > q - q_t ? s->w_pkts - (q - q_t) : 0;
	s->w_pkts = max_u32(s->w_pkts, CELLAB_MIN_CWND_PKTS);
	stat_set(ST_LAST_ESTIMATE, q);
apply:
	tp->snd_cwnd = min_u32(s->w_pkts, tp->snd_cwnd_clamp);
	stat_set(ST_LAST_W_PKTS, s->w_pkts);
}

#include "recovery_ops.h"
