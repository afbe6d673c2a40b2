/* What cubic_qarr and cubic_barr share (Liu et al., "Optimizing TCP Loss Recovery Performance Over
 * Mobile Data Networks"): their parameters, counters, the per-flow record the opportunistic-
 * retransmission tc program reads (CA state and the peer's window scale) and the kernel pacing rule
 * that .cong_control must redo. The congestion-control programs themselves (Cubic outside recovery,
 * the algorithm's window in CWR/Recovery, .sndbuf_expand) are in recovery_ops.h. */
#ifndef CELLAB_RECOVERY_COMMON_H
#define CELLAB_RECOVERY_COMMON_H

#include "cellab_cc.h"
#include "or_flows.h"

#define SNDBUF_FACTOR_DEFAULT 3 /* paper Thm 11, Eq. 22: b_snd >= 3 CW when beta = 1 */

struct recovery_conf {
	__u32 param0;          /* qarr: Q_T in packets; barr: M in ACKs */
	__u32 sndbuf_factor;
	__u32 per_rtt;         /* qarr: 1 = Eq. 2 once per round, 0 = per ACK */
	__u32 pad;
};

DEFINE_CONF_MAPS(struct recovery_conf)

enum { ST_FLOWS, ST_RECOVERIES, ST_RECOVERY_ACKS, ST_LAST_W_PKTS, ST_LAST_ESTIMATE, ST_LAST_RTT_US };
DEFINE_STATS_MAP()

static __always_inline void or_key_of(const struct sock *sk, struct or_flow_key *key)
{
	key->local_addr = sk->__sk_common.skc_rcv_saddr;
	key->remote_addr = sk->__sk_common.skc_daddr;
	key->local_port = bpf_htons(sk->__sk_common.skc_num);
	key->remote_port = sk->__sk_common.skc_dport;
}

/* tp->rx_opt.snd_wscale. The libbpf 1.1 bitfield macros returned wrong values for this u16
 * bitfield here, so read the 16-bit word that follows rcv_tsecr (saw_tstamp:1 tstamp_ok:1 dsack:1
 * wscale_ok:1 sack_ok:3 smc_ok:1 snd_wscale:4 rcv_wscale:4, little-endian bit order). */
static __always_inline __u8 peer_wscale(struct tcp_sock *tp)
{
	__u16 word = 0;
	void *at = (void *)tp + bpf_core_field_offset(struct tcp_sock, rx_opt) +
		   bpf_core_field_offset(struct tcp_options_received, rcv_tsecr) + sizeof(__u32);

	bpf_probe_read_kernel(&word, sizeof(word), at);
	return (word >> 8) & 0xf;
}

static __always_inline void or_publish(struct sock *sk, __u8 in_recovery)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct or_flow_key key;
	struct or_flow val = {}, *cur;

	if (sk->__sk_common.skc_family != 2 /* AF_INET: the tc program parses IPv4 */)
		return;
	or_key_of(sk, &key);
	cur = bpf_map_lookup_elem(&or_flows, &key);
	if (cur) {
		cur->in_recovery = in_recovery;
		cur->snd_wscale = peer_wscale(tp);
		return;
	}
	val.in_recovery = in_recovery;
	val.snd_wscale = peer_wscale(tp);
	bpf_map_update_elem(&or_flows, &key, &val, BPF_ANY);
}

static __always_inline void or_forget(struct sock *sk)
{
	struct or_flow_key key;

	or_key_of(sk, &key);
	bpf_map_delete_elem(&or_flows, &key);
}

/* The kernel's tcp_update_pacing_rate(), which it skips when .cong_control is set:
 * rate = mss * max(cwnd, packets_out) / srtt, times 2 in slow start and 1.2 otherwise. */
static __always_inline void update_pacing_rate(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u64 rate = (__u64)tp->mss_cache * ((USEC_PER_SEC / 100) << 3);
	__u32 srtt8 = tp->srtt_us;

	rate *= tp->snd_cwnd < tp->snd_ssthresh / 2 ? 200 : 120;
	rate *= max_u32(tp->snd_cwnd, tp->packets_out);
	if (srtt8)
		rate /= srtt8;
	sk->sk_pacing_rate = min_u64(rate, sk->sk_max_pacing_rate);
}

static __always_inline int in_cwnd_reduction(const struct sock *sk)
{
	__u8 st = BPF_CORE_READ_BITFIELD(inet_csk(sk), icsk_ca_state);

	return st == TCP_CA_CWR || st == TCP_CA_Recovery;
}

#endif
