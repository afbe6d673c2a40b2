// SPDX-License-Identifier: GPL-2.0
/* cubic_cap: a measuring tool, not a proposal. The kernel's Cubic with its window held at or below
 * `cwnd_cap_pkts`: on a path it keeps full, a constant-window sender. Played over a range of caps on
 * one trace it draws the throughput/delay frontier of constant windows there, the reference C2TCP's
 * point is judged against (the thin trace slice, issue 18; `cellab.server.bench frontier`). Cubic's
 * losses and its slow start below the cap are unchanged. */
#include "cellab_cc.h"

char _license[] SEC("license") = "GPL";

struct cap_conf {
	__u32 cwnd_cap_pkts;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cap_conf);
} conf SEC(".maps");

enum { ST_FLOWS, ST_CAPPED_ACKS };
DEFINE_STATS_MAP()

static __always_inline void hold_cap(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 zero = 0;
	const struct cap_conf *cf = bpf_map_lookup_elem(&conf, &zero);

	if (cf && cf->cwnd_cap_pkts && tp->snd_cwnd > cf->cwnd_cap_pkts) {
		tp->snd_cwnd = cf->cwnd_cap_pkts;
		stat_add(ST_CAPPED_ACKS, 1);
	}
}

SEC("struct_ops")
void BPF_PROG(cap_init, struct sock *sk)
{
	cubictcp_init(sk);
	hold_cap(sk);  /* the initial window too (10 packets) */
	stat_add(ST_FLOWS, 1);
}

SEC("struct_ops")
__u32 BPF_PROG(cap_ssthresh, struct sock *sk)
{
	return cubictcp_recalc_ssthresh(sk);
}

SEC("struct_ops")
void BPF_PROG(cap_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	cubictcp_cong_avoid(sk, ack, acked);
	hold_cap(sk);
}

SEC("struct_ops")
void BPF_PROG(cap_set_state, struct sock *sk, __u8 new_state)
{
	cubictcp_state(sk, new_state);
}

SEC("struct_ops")
void BPF_PROG(cap_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	cubictcp_cwnd_event(sk, event);
}

SEC("struct_ops")
void BPF_PROG(cap_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	cubictcp_acked(sk, sample);
}

SEC("struct_ops")
__u32 BPF_PROG(cap_undo_cwnd, struct sock *sk)
{
	/* an undone reduction returns to the window before it, which the cap already bounded */
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops cubic_cap = {
	.init = (void *)cap_init,
	.ssthresh = (void *)cap_ssthresh,
	.cong_avoid = (void *)cap_cong_avoid,
	.set_state = (void *)cap_set_state,
	.cwnd_event = (void *)cap_cwnd_event,
	.pkts_acked = (void *)cap_pkts_acked,
	.undo_cwnd = (void *)cap_undo_cwnd,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "cubic_cap",
};
