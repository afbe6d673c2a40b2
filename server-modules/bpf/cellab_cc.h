/* Shared definitions for the cellab BPF congestion controls (struct_ops tcp_congestion_ops).
 * Kernel facts used here come from include/net/tcp.h and net/ipv4/bpf_tcp_ca.c (Linux 6.x). */
#ifndef CELLAB_CC_H
#define CELLAB_CC_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

/* include/net/tcp.h: a congestion control every user may select (tcp_allowed_congestion_control). */
#define TCP_CONG_NON_RESTRICTED 0x1

#define USEC_PER_SEC 1000000ULL
#define USEC_PER_MSEC 1000ULL
#define NSEC_PER_USEC 1000ULL
#define TCP_INIT_CWND_PKTS 10   /* RFC 6928 initial window, the kernel default */
#define CELLAB_MIN_CWND_PKTS 2  /* the kernel never reduces below 2 on its own */

/* The kernel's own Cubic, callable as kfuncs (net/ipv4/tcp_cubic.c registers them). */
extern void cubictcp_init(struct sock *sk) __ksym;
extern __u32 cubictcp_recalc_ssthresh(struct sock *sk) __ksym;
extern void cubictcp_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern void cubictcp_state(struct sock *sk, __u8 new_state) __ksym;
extern void cubictcp_cwnd_event(struct sock *sk, enum tcp_ca_event event) __ksym;
extern void cubictcp_acked(struct sock *sk, const struct ack_sample *sample) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

/* The ops a module leaves to the kernel's Cubic (and Reno's undo), as struct_ops programs named
 * PFX_<op>: one line each in the module instead of a wrapper apiece. */
#define CUBIC_SSTHRESH(pfx)                                                              \
	SEC("struct_ops") __u32 BPF_PROG(pfx##_ssthresh, struct sock *sk)                \
	{ return cubictcp_recalc_ssthresh(sk); }
#define CUBIC_CONG_AVOID(pfx)                                                            \
	SEC("struct_ops") void BPF_PROG(pfx##_cong_avoid, struct sock *sk, __u32 ack, __u32 acked) \
	{ cubictcp_cong_avoid(sk, ack, acked); }
#define CUBIC_SET_STATE(pfx)                                                             \
	SEC("struct_ops") void BPF_PROG(pfx##_set_state, struct sock *sk, __u8 new_state) \
	{ cubictcp_state(sk, new_state); }
#define CUBIC_CWND_EVENT(pfx)                                                            \
	SEC("struct_ops") void BPF_PROG(pfx##_cwnd_event, struct sock *sk, enum tcp_ca_event event) \
	{ cubictcp_cwnd_event(sk, event); }
#define CUBIC_PKTS_ACKED(pfx)                                                            \
	SEC("struct_ops") void BPF_PROG(pfx##_pkts_acked, struct sock *sk, const struct ack_sample *sample) \
	{ cubictcp_acked(sk, sample); }
#define RENO_UNDO_CWND(pfx)                                                              \
	SEC("struct_ops") __u32 BPF_PROG(pfx##_undo_cwnd, struct sock *sk)               \
	{ return tcp_reno_undo_cwnd(sk); }

/* Hide a value from the compiler so a later mask (a bound the verifier can see) is kept. */
#define cellab_barrier_var(v) asm volatile("" : "+r"(v))

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *inet_csk(const struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

static __always_inline __u32 tcp_packets_in_flight(const struct tcp_sock *tp)
{
	return tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
}

static __always_inline __u64 now_us(void)
{
	return bpf_ktime_get_ns() / NSEC_PER_USEC;
}

static __always_inline __u32 min_u32(__u32 a, __u32 b) { return a < b ? a : b; }
static __always_inline __u32 max_u32(__u32 a, __u32 b) { return a > b ? a : b; }
static __always_inline __u64 min_u64(__u64 a, __u64 b) { return a < b ? a : b; }
static __always_inline __u64 max_u64(__u64 a, __u64 b) { return a > b ? a : b; }

/* Destination key shared by the per-destination maps: IPv4 is stored v4-mapped (::ffff:a.b.c.d)
 * so one map serves both families. */
struct cellab_dst_key {
	__u8 addr[16];
};

static __always_inline void dst_key_of(const struct sock *sk, struct cellab_dst_key *key)
{
	__builtin_memset(key, 0, sizeof(*key));
	if (sk->__sk_common.skc_family == 2 /* AF_INET */) {
		__u32 daddr = sk->__sk_common.skc_daddr;
		key->addr[10] = 0xff;
		key->addr[11] = 0xff;
		__builtin_memcpy(&key->addr[12], &daddr, 4);
	} else {
		BPF_CORE_READ_INTO(&key->addr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
	}
}

/* Parameters per network namespace (issue 25: several lab instances on one host, each its own set of
 * namespaces). Every congestion control keeps its host-wide `conf` (one array entry, the module's own conf
 * struct) and a hash map `ns_conf` {netns cookie -> cellab_ns_conf}: a flow uses the entry of the namespace
 * its socket lives in, else the host-wide entry. The loader keeps each namespace entry complete: the words
 * the namespace set (set_mask) plus copies of the host-wide words for the rest, rewritten whenever the
 * host-wide value changes, so a lookup here is one map read. Keyed by the netns cookie (net->net_cookie,
 * userspace: SO_NETNS_COOKIE), never reused while the host runs; the inode number (ns.inum) is reused as
 * soon as a namespace is freed, so an entry left by a removed namespace could otherwise reach a new one. */
#define CELLAB_CONF_WORDS 16
#define CELLAB_NETNS_MAX 1024
#define CELLAB_NETNS_NAME 32

struct cellab_ns_conf {
	__u32 val[CELLAB_CONF_WORDS];  /* the module's conf struct for this namespace */
	__u32 set_mask;                /* bit i: val[i] was set for this namespace (else: the host-wide copy) */
	__u32 inum;                    /* the namespace's inode, for people */
	__u64 cookie;                  /* the key, again */
	char name[CELLAB_NETNS_NAME];  /* its name under /run/netns, for the loader's clean-up */
};

static __always_inline __u64 sk_netns_cookie(const struct sock *sk)
{
	return BPF_CORE_READ(sk, __sk_common.skc_net.net, net_cookie);
}

static __always_inline __u32 sk_netns_inum(const struct sock *sk)
{
	return BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
}

/* The host-wide `conf` (conf_type: the module's conf struct), `ns_conf`, and conf_of(sk): the parameters the
 * socket's namespace sees. */
#define DEFINE_CONF_MAPS(conf_type)                                                           \
	struct {                                                                         \
		__uint(type, BPF_MAP_TYPE_ARRAY);                                        \
		__uint(max_entries, 1);                                                  \
		__type(key, __u32);                                                      \
		__type(value, conf_type);                                                     \
	} conf SEC(".maps");                                                             \
	struct {                                                                         \
		__uint(type, BPF_MAP_TYPE_HASH);                                         \
		__uint(max_entries, CELLAB_NETNS_MAX);                                   \
		__type(key, __u64);                                                      \
		__type(value, struct cellab_ns_conf);                                    \
	} ns_conf SEC(".maps");                                                          \
	_Static_assert(sizeof(conf_type) <= CELLAB_CONF_WORDS * sizeof(__u32), "conf larger than a namespace entry"); \
	static __always_inline __attribute__((unused)) const conf_type *conf_of(const struct sock *sk) \
	{                                                                                \
		__u64 cookie = sk_netns_cookie(sk);                                      \
		const struct cellab_ns_conf *ns = bpf_map_lookup_elem(&ns_conf, &cookie); \
		__u32 zero = 0;                                                          \
		if (ns)                                                                  \
			return (const conf_type *)ns->val;                                    \
		return bpf_map_lookup_elem(&conf, &zero);                                \
	}

/* Counters every module exports (index = its own enum); the loader prints them with `stats`. */
#define CELLAB_STATS_MAX 16
#define DEFINE_STATS_MAP()                                   \
	struct {                                             \
		__uint(type, BPF_MAP_TYPE_ARRAY);            \
		__uint(max_entries, CELLAB_STATS_MAX);       \
		__type(key, __u32);                          \
		__type(value, __u64);                        \
	} stats SEC(".maps");                                \
	static __always_inline __attribute__((unused)) void stat_add(__u32 idx, __u64 v) \
	{                                                    \
		__u64 *c = bpf_map_lookup_elem(&stats, &idx); \
		if (c)                                       \
			__sync_fetch_and_add(c, v);          \
	}                                                    \
	static __always_inline __attribute__((unused)) void stat_set(__u32 idx, __u64 v) \
	{                                                    \
		__u64 *c = bpf_map_lookup_elem(&stats, &idx); \
		if (c)                                       \
			*c = v;                              \
	}

#endif
