// SPDX-License-Identifier: GPL-2.0
/* Opportunistic retransmission (Liu et al., Sec. IV) without a kernel patch: a tc ingress program
 * on the sender that, while the flow is in loss recovery, widens the window field of incoming SACK
 * ACKs by the SACKed amount (highest SACKed sequence - cumulative ACK, i.e. n1 + n2 segments), so
 * the kernel's send-window gate lets new data out beyond the receiver's window. The recovery CCs
 * (cubic_qarr, cubic_barr) publish each flow's CA state and the peer's window scale in or_flows.
 * The paper changes the window gate inside tcp_output.c instead; rewriting the ACK is the
 * patch-free substitute, and it breaks end-to-end window semantics while recovery lasts. */
#include "tc_common.h"
#include "or_flows.h"

char _license[] SEC("license") = "GPL";

#define TCPOPT_EOL 0
#define TCPOPT_NOP 1
#define TCPOPT_SACK 5
#define TCP_MAX_OPT_BYTES 40
#define TCP_MAX_WINDOW_FIELD 65535

struct or_conf {
	__u32 enabled;
	__u32 pad[2];
	__u32 l2_bytes;    /* written by the loader from the interface type */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct or_conf);
} conf SEC(".maps");

enum { ST_ACKS, ST_SACK_IN_RECOVERY, ST_WIDENED, ST_LAST_EXT_BYTES, ST_CLAMPED, ST_LAST_WSCALE };
DEFINE_STATS_MAP()

/* Bytes beyond the cumulative ACK covered by the highest SACK block; 0 without SACK blocks. */
static __always_inline __u32 sacked_extent(struct __sk_buff *skb, const struct tcp_pkt *p, __u32 ack)
{
	__u8 opts[64] = {};
	__u32 optlen = p->tcp->doff * 4 - sizeof(struct tcphdr), i = 0, sack_off = 0, sack_len = 0, best = 0;

	if (optlen < 10 || optlen > TCP_MAX_OPT_BYTES)
		return 0;
	if (bpf_skb_load_bytes(skb, p->l4_off + sizeof(struct tcphdr), opts, optlen))
		return 0;
	/* find the SACK option: each turn consumes at least one byte */
	for (int guard = 0; guard < TCP_MAX_OPT_BYTES; guard++) {
		__u8 kind, len;

		i &= 63;
		if (i >= optlen)
			break;
		kind = opts[i];
		if (kind == TCPOPT_EOL)
			break;
		if (kind == TCPOPT_NOP) {
			i++;
			continue;
		}
		len = opts[(i + 1) & 63];
		if (len < 2)
			break;
		if (kind == TCPOPT_SACK) {
			sack_off = i;
			sack_len = len;
			break;
		}
		i += len;
	}
	if (sack_len < 10 || sack_off + sack_len > optlen)
		return 0;
	/* blocks of 8 bytes (left, right); keep the right edge furthest beyond the ACK */
	for (int b = 0; b < 4; b++) {
		__u32 at, right;

		if (2 + 8 * b + 8 > sack_len)
			break;
		at = (sack_off + 2 + 8 * b + 4) & 63;
		right = ((__u32)opts[at & 63] << 24) | ((__u32)opts[(at + 1) & 63] << 16) |
			((__u32)opts[(at + 2) & 63] << 8) | opts[(at + 3) & 63];
		right -= ack;
		if ((__s32)right > 0 && right > best)
			best = right;
	}
	return best;
}

SEC("tc")
int or_ingress(struct __sk_buff *skb)
{
	struct tcp_pkt p;
	struct or_flow_key key;
	struct or_flow *flow;
	const struct or_conf *cf;
	__u32 zero = 0, ack, ext, win, wide;
	__u16 old_be, new_be;

	cf = bpf_map_lookup_elem(&conf, &zero);
	if (!cf || !cf->enabled)
		return TC_ACT_OK;
	if (parse_tcp(skb, &p, cf->l2_bytes) || !p.tcp->ack)
		return TC_ACT_OK;
	stat_add(ST_ACKS, 1);
	key.local_addr = p.ip->daddr;
	key.remote_addr = p.ip->saddr;
	key.local_port = p.tcp->dest;
	key.remote_port = p.tcp->source;
	flow = bpf_map_lookup_elem(&or_flows, &key);
	if (!flow || !flow->in_recovery)
		return TC_ACT_OK;
	ack = bpf_ntohl(p.tcp->ack_seq);
	old_be = p.tcp->window;
	ext = sacked_extent(skb, &p, ack);   /* invalidates packet pointers */
	if (!ext)
		return TC_ACT_OK;
	stat_add(ST_SACK_IN_RECOVERY, 1);
	win = bpf_ntohs(old_be);
	stat_set(ST_LAST_WSCALE, flow->snd_wscale);
	wide = win + (ext >> (flow->snd_wscale & 15));
	if (wide > TCP_MAX_WINDOW_FIELD) {
		wide = TCP_MAX_WINDOW_FIELD;
		stat_add(ST_CLAMPED, 1);
	}
	if (wide == win)
		return TC_ACT_OK;
	new_be = bpf_htons((__u16)wide);
	if (bpf_l4_csum_replace(skb, p.l4_off + offsetof(struct tcphdr, check), old_be, new_be, 2))
		return TC_ACT_OK;
	if (bpf_skb_store_bytes(skb, p.l4_off + offsetof(struct tcphdr, window), &new_be, 2, 0))
		return TC_ACT_OK;
	__sync_fetch_and_add(&flow->widened_acks, 1);
	stat_add(ST_WIDENED, 1);
	stat_set(ST_LAST_EXT_BYTES, ext);
	return TC_ACT_OK;
}
