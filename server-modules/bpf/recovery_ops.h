/* The struct_ops programs of a "Cubic + recovery window" congestion control (cubic_qarr,
 * cubic_barr): Cubic outside recovery; in CWR/Recovery the algorithm's window through .cong_control,
 * so the kernel skips PRR and the end-of-recovery cwnd reset; the pacing rate the kernel would have
 * set; .sndbuf_expand from the conf (paper: 3); the flow published in or_flows.
 *
 * Include it at the end of the algorithm's file, which defines first:
 *   RECOVERY_OPS               the struct_ops name (the module name the loader registers)
 *   struct recovery_sk         per-flow state, with at least `__u8 in_recovery`
 *   recovery_sk_init(s)        fresh state
 *   recovery_on_ack(sk, s, rs) every ACK, before the window decision (RTT, delivery samples)
 *   recovery_window(sk, s)     every ACK in CWR/Recovery: set tp->snd_cwnd */
#ifndef CELLAB_RECOVERY_OPS_H
#define CELLAB_RECOVERY_OPS_H

#include "recovery_common.h"

#define RECOVERY_STR_(x) #x
#define RECOVERY_STR(x) RECOVERY_STR_(x)

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct recovery_sk);
} recovery_state SEC(".maps");

static __always_inline struct recovery_sk *state_of(struct sock *sk)
{
	return bpf_sk_storage_get(&recovery_state, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
}

SEC("struct_ops")
void BPF_PROG(recovery_init, struct sock *sk)
{
	struct recovery_sk *s;

	cubictcp_init(sk);
	s = state_of(sk);
	if (s)
		recovery_sk_init(s);
	or_publish(sk, 0);
	stat_add(ST_FLOWS, 1);
}

SEC("struct_ops")
void BPF_PROG(recovery_cong_control, struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	struct recovery_sk *s = state_of(sk);

	if (!s)
		return;
	recovery_on_ack(sk, s, rs);
	if (rs->rtt_us > 0)
		stat_set(ST_LAST_RTT_US, rs->rtt_us);
	if (in_cwnd_reduction(sk)) {
		recovery_window(sk, s);
		stat_add(ST_RECOVERY_ACKS, 1);
	} else {
		s->in_recovery = 0;
		if (rs->acked_sacked > 0)
			cubictcp_cong_avoid(sk, ack, rs->acked_sacked);
	}
	update_pacing_rate(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(recovery_ssthresh, struct sock *sk)
{
	/* Cubic's recalculation keeps its W_max bookkeeping; the recovery window ignores ssthresh. */
	return cubictcp_recalc_ssthresh(sk);
}

SEC("struct_ops")
void BPF_PROG(recovery_set_state, struct sock *sk, __u8 new_state)
{
	cubictcp_state(sk, new_state);
	or_publish(sk, new_state == TCP_CA_Recovery);
}

CUBIC_CWND_EVENT(recovery)
CUBIC_PKTS_ACKED(recovery)
RENO_UNDO_CWND(recovery)

SEC("struct_ops")
__u32 BPF_PROG(recovery_sndbuf_expand, struct sock *sk)
{
	const struct recovery_conf *cf = conf_of(sk);

	return cf && cf->sndbuf_factor ? cf->sndbuf_factor : SNDBUF_FACTOR_DEFAULT;
}

SEC("struct_ops")
void BPF_PROG(recovery_release, struct sock *sk)
{
	or_forget(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops RECOVERY_OPS = {
	.init = (void *)recovery_init,
	.release = (void *)recovery_release,
	.ssthresh = (void *)recovery_ssthresh,
	.cong_control = (void *)recovery_cong_control,
	.set_state = (void *)recovery_set_state,
	.cwnd_event = (void *)recovery_cwnd_event,
	.pkts_acked = (void *)recovery_pkts_acked,
	.undo_cwnd = (void *)recovery_undo_cwnd,
	.sndbuf_expand = (void *)recovery_sndbuf_expand,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = RECOVERY_STR(RECOVERY_OPS),
};

#endif
