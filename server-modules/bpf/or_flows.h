/* The per-flow record of opportunistic retransmission: the recovery congestion controls
 * (cubic_qarr, cubic_barr) write it, since they know the CA state and the peer's window scale; the
 * tc program or_ingress reads it on every incoming ACK. One map, pinned by name under
 * /sys/fs/bpf/cellab/shared, so every object that includes this header shares it. */
#ifndef CELLAB_OR_FLOWS_H
#define CELLAB_OR_FLOWS_H

#include "cellab_cc.h"

struct or_flow_key {
	__u32 local_addr;   /* network order, the sender (this host) */
	__u32 remote_addr;  /* network order, the receiver */
	__u16 local_port;   /* network order */
	__u16 remote_port;  /* network order */
};

struct or_flow {
	__u8 in_recovery;
	__u8 snd_wscale;    /* the scale the receiver applies to its advertised window */
	__u16 pad;
	__u32 pad2;
	__u64 widened_acks;
};

#define OR_FLOWS_MAX 65536

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OR_FLOWS_MAX);
	__type(key, struct or_flow_key);
	__type(value, struct or_flow);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} or_flows SEC(".maps");

#endif
