// SPDX-License-Identifier: GPL-2.0
/* S-Cubic (Guo & Lee, "Stateful-TCP", IEEE Access 2020): the kernel's Cubic plus per-destination
 * state. At flow end the GCBE bandwidth estimate c* and the minimum RTT are stored in an LRU map
 * keyed by the full destination address and the socket's network namespace (lab instances on one host
 * use the same addresses; one instance's estimate must not seed another's flow). The next flow to that destination starts (Startup) with
 * cwnd = c* x RTTmin and paces its first RTT at c*; the first ACK ends Startup with
 * cwnd = max(in-flight, 10) (Eq. 3) and plain Cubic takes over.
 *
 * Not portable without a kernel patch: receive-window (AWnd) suppression, because snd_wnd is not
 * writable from BPF; the first flight is min(cwnd, rwnd). Defaults the paper does not give: TTL
 * (1 h, as tcp_metrics), GCBE bytes from tp->delivered x mss (SACK-aware), cycle length = srtt
 * (the paper's d; the authors' code used the last sample). */
#include "cellab_cc.h"

char _license[] SEC("license") = "GPL";

#define GCBE_HISTORY 5              /* paper Eq. 8: L = 5 */
#define GCBE_MIN_ACKS 3             /* authors' code: MIN_ACK_REQUIRED */
#define DST_ENTRIES (1 << 20)       /* paper: H = 20 bits */
#define TTL_MS_DEFAULT 3600000u
#define MIN_BDP_PKTS_DEFAULT TCP_INIT_CWND_PKTS
#define SK_PACING_NONE 0
#define SK_PACING_NEEDED 1

struct scubic_dst {
	__u64 rate_Bps;
	__u64 stamp_ns;
	__u32 min_rtt_us;
	__u32 nsamples;
};

struct scubic_sk {
	__u64 cyc_start_us;      /* h_{i,0}: first ACK of the cycle */
	__u64 prev_ack_us;
	__u64 max_gap_us;        /* largest inter-ACK gap of the cycle */
	__u64 bytes;             /* bytes ACKed in the cycle after its first ACK */
	__u64 gap_bytes;         /* a_{i,z}: bytes ACKed by the ACK after the largest gap */
	__u64 ring[8];            /* GCBE_HISTORY used; 8 for a verifier-visible mask */
	__u32 prev_delivered;
	__u32 acks_in_cycle;
	__u32 nsamples;
	__u32 min_rtt_us;
	__u8 startup;            /* 1 while the first RTT is paced at c* */
	__u8 tx_started;
};

struct scubic_conf {
	__u32 ttl_ms;
	__u32 min_bdp_pkts;
	__u32 ssthresh_at_exit;  /* 1: ssthresh = max(in-flight, 10) at the end of Startup (not in the paper) */
	__u32 pad;
};

/* The destination's state, per network namespace. */
struct scubic_dst_key {
	__u64 netns_cookie;
	struct cellab_dst_key dst;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, DST_ENTRIES);
	__type(key, struct scubic_dst_key);
	__type(value, struct scubic_dst);
} dst_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct scubic_sk);
} scubic_state SEC(".maps");

DEFINE_CONF_MAPS(struct scubic_conf)

enum {
	ST_FLOWS, ST_HITS, ST_MISSES, ST_EXPIRED, ST_STORED, ST_STARTUP_EXITS, ST_ESTIMATES,
	ST_LAST_RATE_BPS, ST_LAST_MIN_RTT_US, ST_LAST_BDP_PKTS, ST_SMALL_BDP,
};
DEFINE_STATS_MAP()

static __always_inline void scubic_key_of(const struct sock *sk, struct scubic_dst_key *key)
{
	__builtin_memset(key, 0, sizeof(*key));
	key->netns_cookie = sk_netns_cookie(sk);
	dst_key_of(sk, &key->dst);
}

static __always_inline struct scubic_sk *state_of(struct sock *sk)
{
	return bpf_sk_storage_get(&scubic_state, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
}

SEC("struct_ops")
void BPF_PROG(scubic_init, struct sock *sk)
{
	struct scubic_sk *s;

	cubictcp_init(sk);
	s = state_of(sk);
	if (s)
		s->min_rtt_us = ~0u;
	stat_add(ST_FLOWS, 1);
}

/* Startup: on the first data transmission, seed cwnd and pacing from the destination's state. */
static __always_inline void startup(struct sock *sk, struct scubic_sk *s)
{
	struct tcp_sock *tp = tcp_sk(sk);
	const struct scubic_conf *cf = conf_of(sk);
	__u64 ttl_ns = (__u64)(cf && cf->ttl_ms ? cf->ttl_ms : TTL_MS_DEFAULT) * 1000000ULL;
	__u32 min_bdp = cf && cf->min_bdp_pkts ? cf->min_bdp_pkts : MIN_BDP_PKTS_DEFAULT;
	struct scubic_dst_key key;
	struct scubic_dst *e;
	__u64 bdp;

	scubic_key_of(sk, &key);
	e = bpf_map_lookup_elem(&dst_state, &key);
	if (!e || !e->rate_Bps || !e->min_rtt_us) {
		stat_add(ST_MISSES, 1);
		return;
	}
	if (bpf_ktime_get_ns() - e->stamp_ns > ttl_ns) {
		bpf_map_delete_elem(&dst_state, &key);
		stat_add(ST_EXPIRED, 1);
		return;
	}
	bdp = e->rate_Bps * e->min_rtt_us / USEC_PER_SEC / max_u32(tp->mss_cache, 1);
	stat_set(ST_LAST_BDP_PKTS, bdp);
	if (bdp <= min_bdp) {
		stat_add(ST_SMALL_BDP, 1);
		return;
	}
	tp->snd_cwnd = min_u32((__u32)bdp, tp->snd_cwnd_clamp);
	sk->sk_pacing_rate = min_u64(e->rate_Bps, sk->sk_max_pacing_rate);
	if (sk->sk_pacing_status == SK_PACING_NONE)
		sk->sk_pacing_status = SK_PACING_NEEDED;
	s->startup = 1;
	stat_add(ST_HITS, 1);
}

SEC("struct_ops")
void BPF_PROG(scubic_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	struct scubic_sk *s;

	/* TX_START fires again after idle; only the first one of the flow is Startup. */
	if (event == CA_EVENT_TX_START) {
		s = state_of(sk);
		if (s && !s->tx_started) {
			s->tx_started = 1;
			startup(sk, s);
		}
	}
	cubictcp_cwnd_event(sk, event);
}

/* GCBE, Eq. 4-8: per cycle of one smoothed RTT, bytes over time with the largest gap removed. */
SEC("struct_ops")
void BPF_PROG(scubic_in_ack_event, struct sock *sk, __u32 flags)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct scubic_sk *s = state_of(sk);
	__u64 now = tp->tcp_mstamp, gap, acked, d, dur, rate, best = 0;
	__u32 delivered = tp->delivered;

	if (!s)
		return;
	acked = (__u64)(delivered - s->prev_delivered) * tp->mss_cache;
	s->prev_delivered = delivered;
	if (!acked)
		return;
	if (!s->acks_in_cycle) {
		/* h_{i,0}: its bytes are excluded, its send time is unknown */
		s->cyc_start_us = now;
		s->prev_ack_us = now;
		s->acks_in_cycle = 1;
		s->bytes = 0;
		s->max_gap_us = 0;
		s->gap_bytes = 0;
		return;
	}
	gap = now - s->prev_ack_us;
	if (gap >= s->max_gap_us) {
		s->max_gap_us = gap;
		s->gap_bytes = acked;
	}
	s->bytes += acked;
	s->acks_in_cycle++;
	s->prev_ack_us = now;
	d = tp->srtt_us >> 3;
	if (!d || now - s->cyc_start_us < d)
		return;
	/* Eq. 7 */
	if (s->acks_in_cycle > GCBE_MIN_ACKS && s->bytes >= 3ULL * tp->mss_cache) {
		dur = (now - s->cyc_start_us) - s->max_gap_us;
		if (dur && s->bytes > s->gap_bytes) {
			rate = (s->bytes - s->gap_bytes) * USEC_PER_SEC / dur;
			__u32 slot = s->nsamples % GCBE_HISTORY;

			cellab_barrier_var(slot);
			s->ring[slot & 7] = rate;
			s->nsamples++;
			stat_add(ST_ESTIMATES, 1);
		}
	}
	for (int i = 0; i < GCBE_HISTORY; i++)
		best = max_u64(best, s->ring[i]);
	stat_set(ST_LAST_RATE_BPS, best);
	/* the closing ACK starts the next cycle as its h_0 */
	s->cyc_start_us = now;
	s->acks_in_cycle = 1;
	s->bytes = 0;
	s->max_gap_us = 0;
	s->gap_bytes = 0;
}

SEC("struct_ops")
void BPF_PROG(scubic_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct scubic_sk *s = state_of(sk);

	if (s && sample->rtt_us > 0)
		s->min_rtt_us = min_u32(s->min_rtt_us ? s->min_rtt_us : ~0u, sample->rtt_us);
	/* Eq. 3: Startup ends at the first ACK; only in Open (after a loss Cubic's recovery rules). */
	if (s && s->startup) {
		s->startup = 0;
		if (BPF_CORE_READ_BITFIELD(inet_csk(sk), icsk_ca_state) == TCP_CA_Open) {
			const struct scubic_conf *cf = conf_of(sk);
			__u32 kappa = max_u32(tcp_packets_in_flight(tp), TCP_INIT_CWND_PKTS);

			tp->snd_cwnd = kappa;
			/* The paper leaves ssthresh alone, so slow start keeps doubling from the BDP and
			 * overshoots a 1-BDP buffer; the spec's optional A/B flag ends slow start here. */
			if (cf && cf->ssthresh_at_exit)
				tp->snd_ssthresh = kappa;
		}
		if (sk->sk_pacing_status == SK_PACING_NEEDED)
			sk->sk_pacing_status = SK_PACING_NONE;
		stat_add(ST_STARTUP_EXITS, 1);
	}
	cubictcp_acked(sk, sample);
}

/* Store only flows that produced an estimate (the authors' code overwrote good state with 0). */
SEC("struct_ops")
void BPF_PROG(scubic_release, struct sock *sk)
{
	struct scubic_sk *s = bpf_sk_storage_get(&scubic_state, sk, 0, 0);
	struct scubic_dst_key key;
	struct scubic_dst e = {};
	__u64 best = 0;

	if (!s || !s->nsamples || !s->min_rtt_us || s->min_rtt_us == ~0u)
		return;
	for (int i = 0; i < GCBE_HISTORY; i++)
		best = max_u64(best, s->ring[i]);
	if (!best)
		return;
	e.rate_Bps = best;
	e.min_rtt_us = s->min_rtt_us;
	e.nsamples = s->nsamples;
	e.stamp_ns = bpf_ktime_get_ns();
	scubic_key_of(sk, &key);
	bpf_map_update_elem(&dst_state, &key, &e, BPF_ANY);
	stat_add(ST_STORED, 1);
	stat_set(ST_LAST_MIN_RTT_US, s->min_rtt_us);
}

CUBIC_SSTHRESH(scubic)
CUBIC_CONG_AVOID(scubic)
CUBIC_SET_STATE(scubic)
RENO_UNDO_CWND(scubic)

SEC(".struct_ops")
struct tcp_congestion_ops scubic = {
	.init = (void *)scubic_init,
	.release = (void *)scubic_release,
	.ssthresh = (void *)scubic_ssthresh,
	.cong_avoid = (void *)scubic_cong_avoid,
	.set_state = (void *)scubic_set_state,
	.cwnd_event = (void *)scubic_cwnd_event,
	.in_ack_event = (void *)scubic_in_ack_event,
	.pkts_acked = (void *)scubic_pkts_acked,
	.undo_cwnd = (void *)scubic_undo_cwnd,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "scubic",
};
