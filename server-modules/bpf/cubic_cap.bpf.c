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

DEFINE_CONF_MAPS(struct cap_conf)

enum { ST_FLOWS, ST_CAPPED_ACKS };
DEFINE_STATS_MAP()

static __always_inline void hold_cap(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	const struct cap_conf *cf = conf_of(sk);

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

CUBIC_SSTHRESH(cap)

SEC("struct_ops")
void BPF_PROG(cap_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	cubictcp_cong_avoid(sk, ack, acked);
	hold_cap(sk);
}

CUBIC_SET_STATE(cap)
CUBIC_CWND_EVENT(cap)
CUBIC_PKTS_ACKED(cap)
RENO_UNDO_CWND(cap)  /* an undone reduction returns to a window the cap already bounded */

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
