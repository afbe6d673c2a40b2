// SPDX-License-Identifier: GPL-2.0
/* cubic_barr: Cubic, with BARR (bandwidth-aware rate reduction) as the loss-recovery window
 * algorithm (Liu et al., Sec. III, Eq. 3-4) instead of the kernel's PRR. No ssthresh cut: per ACK in
 * recovery,  B_i = (ack_{i} - ack_{i-M}) / (t_i - t_{i-M})  over the last M ACKs, W_i = B_i * RTT_i.
 * "ack" is counted as delivered packets (tp->delivered, which includes SACKed data), so the rate
 * keeps its meaning while the cumulative ACK is stuck at the hole. RTT_i is the current sample. */
#include "recovery_common.h"

char _license[] SEC("license") = "GPL";

#define WINDOW_ACKS_DEFAULT 200 /* paper: M = 200 */
#define RING_SLOTS 256          /* power of two >= the largest M the loader accepts */

struct ack_mark {
	__u32 delivered_pkts;
	__u32 pad;
	__u64 t_us;
};

struct barr_sk {
	__u64 head;          /* ACKs recorded so far */
	__u32 last_rtt_us;
	__u32 w_pkts;
	__u8 in_recovery;
	struct ack_mark ring[RING_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct barr_sk);
} barr_state SEC(".maps");

static __always_inline struct barr_sk *state_of(struct sock *sk)
{
	return bpf_sk_storage_get(&barr_state, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
}

SEC("struct_ops")
void BPF_PROG(barr_init, struct sock *sk)
{
	cubictcp_init(sk);
	state_of(sk);
	or_publish(sk, 0);
	stat_add(ST_FLOWS, 1);
}

static __always_inline void record_ack(struct tcp_sock *tp, struct barr_sk *s)
{
	__u32 slot = s->head & (RING_SLOTS - 1);

	s->ring[slot].delivered_pkts = tp->delivered;
	s->ring[slot].t_us = tp->tcp_mstamp;
	s->head++;
}

/* Eq. 3-4: delivery rate over the last M ACKs times the current RTT. */
static __always_inline void recovery_window(struct sock *sk, struct barr_sk *s)
{
	struct tcp_sock *tp = tcp_sk(sk);
	const struct recovery_conf *cf = get_conf();
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
	stat_add(ST_RECOVERY_ACKS, 1);
	stat_set(ST_LAST_W_PKTS, s->w_pkts);
}

SEC("struct_ops")
void BPF_PROG(barr_cong_control, struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct barr_sk *s = state_of(sk);

	if (!s)
		return;
	record_ack(tp, s);
	if (rs->rtt_us > 0) {
		s->last_rtt_us = rs->rtt_us;
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
__u32 BPF_PROG(barr_ssthresh, struct sock *sk)
{
	return cubictcp_recalc_ssthresh(sk);
}

SEC("struct_ops")
void BPF_PROG(barr_set_state, struct sock *sk, __u8 new_state)
{
	cubictcp_state(sk, new_state);
	or_publish(sk, new_state == TCP_CA_Recovery);
}

SEC("struct_ops")
void BPF_PROG(barr_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	cubictcp_cwnd_event(sk, event);
}

SEC("struct_ops")
void BPF_PROG(barr_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	cubictcp_acked(sk, sample);
}

SEC("struct_ops")
__u32 BPF_PROG(barr_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(barr_sndbuf_expand, struct sock *sk)
{
	const struct recovery_conf *cf = get_conf();

	return cf && cf->sndbuf_factor ? cf->sndbuf_factor : SNDBUF_FACTOR_DEFAULT;
}

SEC("struct_ops")
void BPF_PROG(barr_release, struct sock *sk)
{
	or_forget(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops cubic_barr = {
	.init = (void *)barr_init,
	.release = (void *)barr_release,
	.ssthresh = (void *)barr_ssthresh,
	.cong_control = (void *)barr_cong_control,
	.set_state = (void *)barr_set_state,
	.cwnd_event = (void *)barr_cwnd_event,
	.pkts_acked = (void *)barr_pkts_acked,
	.undo_cwnd = (void *)barr_undo_cwnd,
	.sndbuf_expand = (void *)barr_sndbuf_expand,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "cubic_barr",
};
