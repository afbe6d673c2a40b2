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

#define QUEUE_THRESHOLD_PKTS_DEFAULT 5 /* paper: Q_T = 5 */

struct qarr_sk {
	__u32 base_rtt_us;
	__u32 last_rtt_us;
	__u32 w_pkts;       /* recovery window */
	__u32 round_end;    /* tp->delivered that ends the current round */
	__u8 in_recovery;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct qarr_sk);
} qarr_state SEC(".maps");

static __always_inline struct qarr_sk *state_of(struct sock *sk)
{
	return bpf_sk_storage_get(&qarr_state, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
}

SEC("struct_ops")
void BPF_PROG(qarr_init, struct sock *sk)
{
	struct qarr_sk *s;

	cubictcp_init(sk);
	s = state_of(sk);
	if (s)
		s->base_rtt_us = ~0u;
	or_publish(sk, 0);
	stat_add(ST_FLOWS, 1);
}

/* Eq. 1-2, once per ACK while the kernel is in CWR/Recovery. */
static __always_inline void recovery_window(struct sock *sk, struct qarr_sk *s)
{
	struct tcp_sock *tp = tcp_sk(sk);
	const struct recovery_conf *cf = get_conf();
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
	stat_add(ST_RECOVERY_ACKS, 1);
	stat_set(ST_LAST_W_PKTS, s->w_pkts);
}

SEC("struct_ops")
void BPF_PROG(qarr_cong_control, struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	struct qarr_sk *s = state_of(sk);

	if (!s)
		return;
	if (!s->base_rtt_us)
		s->base_rtt_us = ~0u;
	if (rs->rtt_us > 0) {
		s->last_rtt_us = rs->rtt_us;
		s->base_rtt_us = min_u32(s->base_rtt_us, rs->rtt_us);
		stat_set(ST_LAST_RTT_US, rs->rtt_us);
	}
	if (in_cwnd_reduction(sk)) {
		recovery_window(sk, s);
	} else {
		s->in_recovery = 0;
		if (rs->acked_sacked > 0)
			cubictcp_cong_avoid(sk, ack, rs->acked_sacked);
	}
	update_pacing_rate(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(qarr_ssthresh, struct sock *sk)
{
	/* Cubic's recalculation keeps its W_max bookkeeping; QARR itself does not cut to it. */
	return cubictcp_recalc_ssthresh(sk);
}

SEC("struct_ops")
void BPF_PROG(qarr_set_state, struct sock *sk, __u8 new_state)
{
	cubictcp_state(sk, new_state);
	or_publish(sk, new_state == TCP_CA_Recovery);
}

SEC("struct_ops")
void BPF_PROG(qarr_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	cubictcp_cwnd_event(sk, event);
}

SEC("struct_ops")
void BPF_PROG(qarr_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	cubictcp_acked(sk, sample);
}

SEC("struct_ops")
__u32 BPF_PROG(qarr_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(qarr_sndbuf_expand, struct sock *sk)
{
	const struct recovery_conf *cf = get_conf();

	return cf && cf->sndbuf_factor ? cf->sndbuf_factor : SNDBUF_FACTOR_DEFAULT;
}

SEC("struct_ops")
void BPF_PROG(qarr_release, struct sock *sk)
{
	or_forget(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops cubic_qarr = {
	.init = (void *)qarr_init,
	.release = (void *)qarr_release,
	.ssthresh = (void *)qarr_ssthresh,
	.cong_control = (void *)qarr_cong_control,
	.set_state = (void *)qarr_set_state,
	.cwnd_event = (void *)qarr_cwnd_event,
	.pkts_acked = (void *)qarr_pkts_acked,
	.undo_cwnd = (void *)qarr_undo_cwnd,
	.sndbuf_expand = (void *)qarr_sndbuf_expand,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "cubic_qarr",
};
