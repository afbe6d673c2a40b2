// SPDX-License-Identifier: GPL-2.0
/* burst_drop: a test tool, not a congestion control. On the receiver's tc ingress it lets
 * `after_pkts` TCP data segments pass and then drops the next `drop_pkts` consecutive ones: the
 * "burst of n lost packets" of Liu et al.'s model validation, lost in the network as far as the
 * sender can tell (a drop on the sender's own egress would be a local drop TCP simply retries).
 * `set` re-arms it. GSO packets count as their segment number. */
#include "tc_common.h"

char _license[] SEC("license") = "GPL";

struct drop_conf {
	__u32 after_pkts;
	__u32 drop_pkts;
	__u32 port;        /* match source or destination port; 0 = any */
	__u32 l2_bytes;    /* written by the loader from the interface type */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct drop_conf);
} conf SEC(".maps");

enum { ST_DATA_PKTS, ST_DROPPED };
DEFINE_STATS_MAP()

SEC("tc")
int burst_drop(struct __sk_buff *skb)
{
	const struct drop_conf *cf;
	struct tcp_pkt p;
	__u32 zero = 0, idx_seen = ST_DATA_PKTS, idx_drop = ST_DROPPED, segs;
	__u64 *seen, *dropped;

	cf = bpf_map_lookup_elem(&conf, &zero);
	if (!cf || parse_tcp(skb, &p, cf->l2_bytes) || !p.payload_bytes)
		return TC_ACT_OK;
	if (cf->port && p.tcp->source != bpf_htons(cf->port) && p.tcp->dest != bpf_htons(cf->port))
		return TC_ACT_OK;
	seen = bpf_map_lookup_elem(&stats, &idx_seen);
	dropped = bpf_map_lookup_elem(&stats, &idx_drop);
	if (!seen || !dropped)
		return TC_ACT_OK;
	segs = skb->gso_segs ? skb->gso_segs : 1;
	*seen += segs;
	if (*seen > cf->after_pkts && *dropped < cf->drop_pkts) {
		*dropped += segs;
		return TC_ACT_SHOT;
	}
	return TC_ACT_OK;
}
