/* Packet parsing shared by the tc programs (IPv4 / TCP over Ethernet). */
#ifndef CELLAB_TC_COMMON_H
#define CELLAB_TC_COMMON_H

#include "cellab_cc.h"

#define TC_ACT_OK 0
#define TC_ACT_SHOT 2
#define ETH_P_IP_BE 0x0008      /* htons(0x0800) */
#define IPPROTO_TCP_NUM 6

struct tcp_pkt {
	struct iphdr *ip;
	struct tcphdr *tcp;
	__u32 l4_off;
	__u32 payload_bytes;
};

/* 0 when skb holds an IPv4 TCP segment whose fixed headers are all in the linear data.
 * l2_bytes: 14 on Ethernet (veth), 0 on L3 devices (the virtual cell's TUN); the loader sets it. */
static __always_inline int parse_tcp(struct __sk_buff *skb, struct tcp_pkt *p, __u32 l2_bytes)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	__u32 ihl, doff;

	if (l2_bytes) {
		struct ethhdr *eth = data;

		if ((void *)(eth + 1) > end || eth->h_proto != ETH_P_IP_BE)
			return -1;
		p->ip = (void *)(eth + 1);
	} else {
		if (skb->protocol != ETH_P_IP_BE)
			return -1;
		p->ip = data;
	}
	if ((void *)(p->ip + 1) > end || p->ip->version != 4 || p->ip->protocol != IPPROTO_TCP_NUM)
		return -1;
	ihl = p->ip->ihl * 4;
	if (ihl < sizeof(struct iphdr))
		return -1;
	p->l4_off = (l2_bytes ? sizeof(struct ethhdr) : 0) + ihl;
	p->tcp = (void *)p->ip + ihl;
	if ((void *)(p->tcp + 1) > end)
		return -1;
	doff = p->tcp->doff * 4;
	if (doff < sizeof(struct tcphdr) || bpf_ntohs(p->ip->tot_len) < ihl + doff)
		return -1;
	p->payload_bytes = bpf_ntohs(p->ip->tot_len) - ihl - doff;
	return 0;
}

#endif
