// SPDX-License-Identifier: GPL-2.0
/* C2TCP (Abbasloo, Xu, Chao, IEEE JSAC 2019) on top of the kernel's Cubic.
 *
 * Cubic (through its kfuncs) owns icsk_ca_priv; C2TCP's per-socket state lives in sk_storage.
 * Condition Detector (Alg. 1) and Action Enforcer (Alg. 2) run per ACK in .pkts_acked; the Tuner
 * (Alg. 3) runs ACK-driven every tuning cycle. Parameters: the socket's network namespace's entry in
 * `ns_conf`, else the host-wide `conf` (cellab_cc.h). Target delay, first match wins: the namespace's
 * entry for the destination prefix (LPM map `targets`, keyed by netns cookie + address), the namespace's
 * Target, the host-wide entry for the destination prefix (cookie 0), the host-wide Target. Target 0
 * disables the Tuner (fixed alpha). Every flow's Target and where it came from are kept in `flow_log`.
 *
 * Tuner rule: the paper's Algorithm 3, taken literally, yields alpha < 1 (Setpoint below MINRTT)
 * whenever avg_rtt > Target/3, and clamps only one side. Section IV, Eq. 10 states the intent:
 * Setpoint_new = (RTT'_avg / RTT_avg) * Setpoint with RTT'_avg = Target - (Target - avg)/2 below
 * Target and avg - 2(avg - Target) above. As Setpoint = alpha * MINRTT, that is multiplicative:
 *   below: alpha *= (Target + avg) / (2 avg);   above: alpha *= (2 Target - avg) / avg;
 * both clamped to [alpha_min, 10]. We implement Eq. 10 because it is the rule the analysis relies on.
 *
 * Deviation, alpha_min (default 1.5; the paper's min_alpha is 1; `alpha_min 1` restores it). The paper
 * assumes a flow with no queue of its own sees MINRTT. On an LTE uplink with SR-driven grants it does
 * not: MINRTT (24 ms on the virtual cell, 25 PRB, SR 20 ms, core 10 ms) is measured while the ACK stream
 * keeps the UE granted, but after the Bad action (cwnd = 1) the lone ACKs wait for an SR occasion and a
 * grant, 26-51 ms (idle ping). With Setpoint = alpha * MINRTT below that, Bad sustains itself: every
 * ACK after Interval/sqrt(N) resets cwnd to 1 again. Measured with the Tuner off: alpha 1.0 and 1.25
 * give 0.54-0.65 Mbit/s (140-160 Bad events in 5 s), alpha 1.5-2.0 give 11-16 Mbit/s (7-11 Bad events),
 * in every run. Eq. 10 reaches such alphas after a cycle whose average RTT is above Target
 * (alpha *= (2 Target - avg)/avg), and the trap holds there: its per-ACK mean RTT is ~47.5 ms, just
 * under Target 50 ms, so Eq. 10 raises alpha by only ~2.6 % per 0.5 s cycle (from 1.2 to 2.0 in 5 s,
 * measured), while each Bad also recomputes ssthresh down to 2. The floor keeps the Tuner out of that
 * region; it bounds how far Setpoint can fall below the path's own idle RTT, not the delay Target.
 */
#include "cellab_cc.h"

char _license[] SEC("license") = "GPL";

#define ALPHA_ONE 1024u                 /* alpha fixed point: 1.0 */
#define ALPHA_MIN (1u * ALPHA_ONE)      /* paper: min_alpha = 1 */
#define ALPHA_MAX (10u * ALPHA_ONE)     /* paper: max_alpha = 10 */
#define TUNE_PERIOD_US_DEFAULT 500000u  /* paper Sec. IV: tuning cycle 0.5 s */
#define ALPHA_INIT_DEFAULT (3u * ALPHA_ONE / 2) /* authors' v2 scripts: alpha = 1.5 (paper silent) */
/* Deviation (issue 4): the loader's default alpha_min is 1.5, not the paper's 1; see the file comment. */
#define INV_SQRT_STEPS 32               /* 1/sqrt(N) table; N is clamped to it */
/* The authors' v2 Tuner (their Mahimahi scripts, which produced Table I): additive steps of
 * 0.5 x (avg/Target) down when avg > Target, 0.5 x (0.85 Target/avg) up when avg < 0.85 Target
 * (integer quotients in their code), nothing in between. */
#define V2_STEP_FP (ALPHA_ONE / 2)
#define V2_DEADBAND_PCT 85
enum { TUNER_EQ10 = 0, TUNER_AUTHORS_V2 = 1 };

/* 1024/sqrt(N) for N = 1..32 (index N-1): the Bad re-trigger spacing Interval/sqrt(N). */
static const __u16 inv_sqrt_1024[INV_SQRT_STEPS] = {
	1024, 724, 591, 512, 458, 418, 387, 362, 341, 324, 309, 296, 284, 274, 264, 256,
	248, 241, 235, 229, 223, 218, 214, 209, 205, 201, 197, 194, 190, 187, 184, 181,
};

enum { COND_GOOD = 0, COND_NORMAL = 1, COND_BAD = 2 };

/* The key of a flow's record in flow_log (kept in the socket's state: by .release the kernel has already
 * cleared the local port). */
struct c2tcp_flow_key {
	__u64 netns_cookie;
	__u8 daddr[16];        /* v4-mapped */
	__u16 sport;           /* host order: the local port */
	__u16 dport;           /* host order: the peer's port */
	__u32 pad;
};

struct c2tcp_sk {
	__u64 next_time_us;   /* end of the current Normal/Bad wait */
	__u64 tune_start_us;  /* start of the current tuning cycle */
	__u64 rtt_sum_us;     /* RTT sum over the tuning cycle */
	__u32 rtt_cnt;
	__u32 min_rtt_us;     /* global MINRTT of the session (never aged, as in the paper) */
	__u32 alpha_fp;       /* alpha * ALPHA_ONE */
	__u32 interval_us;
	__u32 n_backoffs;     /* N: consecutive Bad actions */
	__u32 target_us;      /* 0 = Tuner off */
	__u32 flight_rtt_us;  /* smoothed RTT of ACKs that ended a small flight (0: none yet) */
	__u8 first_time;
	__u8 condition;
	__u8 flight_fresh;    /* a small flight refreshed flight_rtt_us in this tuning cycle */
	struct c2tcp_flow_key flow_key;
};

struct c2tcp_conf {
	__u32 target_us;       /* default Target (average delay) when no prefix matches; 0 = Tuner off */
	__u32 alpha_init_fp;   /* initial alpha * 1024 */
	__u32 tune_period_us;
	__u32 tuner;           /* TUNER_EQ10 | TUNER_AUTHORS_V2 */
	__u32 alpha_min_fp;    /* lower bound of alpha * 1024 (paper: 1; 0 = the paper's 1) */
	__u32 small_flight_pkts; /* Setpoint floor from flights of at most this many packets; 0 = paper */
};

/* LPM key: 64 bits of netns cookie (0: host-wide), then the v4-mapped 128-bit address; the loader stores
 * prefixlen = 64 + the address prefix, so the cookie always matches whole. */
struct c2tcp_target_key {
	__u32 prefixlen;
	__u8 data[24];         /* cookie (8 bytes, host order), address (16) */
};

/* Where a flow's Target came from (flow_log.target_source). */
enum { TARGET_HOST = 0, TARGET_HOST_DST = 1, TARGET_NETNS = 2, TARGET_NETNS_DST = 3 };

/* One record per flow (LRU): which namespace, which Target, and how the flow went; `stats c2tcp --flows`. */

struct c2tcp_flow {
	__u64 start_ns;
	__u64 end_ns;          /* 0 while the flow lives */
	__u32 netns_inum;
	__u32 target_us;
	__u32 target_source;
	__u32 alpha_fp;        /* after the last tuning cycle (the initial alpha before the first) */
	__u32 min_rtt_us;
	__u32 last_avg_rtt_us;
	__u32 bad_events;
	__u32 tuner_updates;
};
#define C2TCP_FLOW_LOG 4096

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct c2tcp_sk);
} c2tcp_state SEC(".maps");

DEFINE_CONF_MAPS(struct c2tcp_conf)

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1024);
	__type(key, struct c2tcp_target_key);
	__type(value, __u32);
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, C2TCP_FLOW_LOG);
	__type(key, struct c2tcp_flow_key);
	__type(value, struct c2tcp_flow);
} flow_log SEC(".maps");

enum {
	ST_FLOWS, ST_GOOD_ACKS, ST_BAD_EVENTS, ST_INVALID_RTT, ST_TUNER_UPDATES,
	ST_LAST_ALPHA_FP, ST_LAST_AVG_RTT_US, ST_LAST_MIN_RTT_US, ST_FLOORED_ACKS, ST_LAST_FLIGHT_RTT_US,
};
DEFINE_STATS_MAP()

/* The Target, first match wins: namespace + destination, namespace, host + destination, host. */
static __always_inline __u32 target_for(const struct sock *sk, __u32 *source)
{
	struct c2tcp_target_key key = { .prefixlen = 192 };
	__u64 cookie = sk_netns_cookie(sk);
	const struct cellab_ns_conf *ns;
	const struct c2tcp_conf *host;
	struct cellab_dst_key dst;
	__u32 *t, zero = 0, v;

	dst_key_of(sk, &dst);
	__builtin_memcpy(key.data + 8, dst.addr, 16);
	__builtin_memcpy(key.data, &cookie, 8);
	t = bpf_map_lookup_elem(&targets, &key);
	if (t) {
		v = *t;
		*source = TARGET_NETNS_DST;
		return v;
	}
	ns = bpf_map_lookup_elem(&ns_conf, &cookie);
	if (ns && (ns->set_mask & 1u) /* word 0: target_us */) {
		v = ns->val[0];
		*source = TARGET_NETNS;
		return v;
	}
	__builtin_memset(key.data, 0, 8);
	t = bpf_map_lookup_elem(&targets, &key);
	if (t) {
		v = *t;
		*source = TARGET_HOST_DST;
		return v;
	}
	*source = TARGET_HOST;
	host = bpf_map_lookup_elem(&conf, &zero);
	return host ? host->target_us : 0;
}

static __always_inline void flow_key_of(const struct sock *sk, struct c2tcp_flow_key *key)
{
	struct cellab_dst_key dst;

	__builtin_memset(key, 0, sizeof(*key));
	dst_key_of(sk, &dst);
	key->netns_cookie = sk_netns_cookie(sk);
	__builtin_memcpy(key->daddr, dst.addr, 16);
	key->sport = sk->__sk_common.skc_num;
	key->dport = bpf_ntohs(sk->__sk_common.skc_dport);
}

static __always_inline struct c2tcp_flow *flow_rec(struct c2tcp_sk *s)
{
	return bpf_map_lookup_elem(&flow_log, &s->flow_key);
}

static __always_inline struct c2tcp_sk *state_of(struct sock *sk)
{
	return bpf_sk_storage_get(&c2tcp_state, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
}

/* alpha within [alpha_min, ALPHA_MAX]; alpha_min itself within the paper's [1, 10] */
static __always_inline __u32 clamp_alpha(__u64 alpha, const struct c2tcp_conf *cf)
{
	__u32 lo = cf ? cf->alpha_min_fp : 0;

	lo = lo < ALPHA_MIN ? ALPHA_MIN : (lo > ALPHA_MAX ? ALPHA_MAX : lo);
	return alpha < lo ? lo : (alpha > ALPHA_MAX ? ALPHA_MAX : (__u32)alpha);
}

static __always_inline void state_init(struct sock *sk, struct c2tcp_sk *s)
{
	const struct c2tcp_conf *cf = conf_of(sk);
	__u32 alpha = cf && cf->alpha_init_fp ? cf->alpha_init_fp : ALPHA_INIT_DEFAULT;
	struct c2tcp_flow rec = {};
	__u32 source = TARGET_HOST;

	s->alpha_fp = clamp_alpha(alpha, cf);
	s->min_rtt_us = ~0u;
	s->first_time = 1;
	s->n_backoffs = 1;
	s->target_us = target_for(sk, &source);
	s->tune_start_us = now_us();
	s->rtt_sum_us = 0;
	s->rtt_cnt = 0;
	s->flight_rtt_us = 0;
	s->condition = COND_GOOD;

	flow_key_of(sk, &s->flow_key);
	rec.start_ns = bpf_ktime_get_ns();
	rec.netns_inum = sk_netns_inum(sk);
	rec.target_us = s->target_us;
	rec.target_source = source;
	rec.alpha_fp = s->alpha_fp;
	bpf_map_update_elem(&flow_log, &s->flow_key, &rec, BPF_ANY);
}

SEC("struct_ops")
void BPF_PROG(c2tcp_init, struct sock *sk)
{
	struct c2tcp_sk *s;

	cubictcp_init(sk);
	s = state_of(sk);
	if (s)
		state_init(sk, s);
	stat_add(ST_FLOWS, 1);
}

/* Eq. 10, multiplicative, in 1/1024 fixed point; see the file comment for why. */
static __always_inline void tuner(struct sock *sk, struct c2tcp_sk *s, __u64 now)
{
	const struct c2tcp_conf *cf = conf_of(sk);
	struct c2tcp_flow *rec;
	__u32 period = cf && cf->tune_period_us ? cf->tune_period_us : TUNE_PERIOD_US_DEFAULT;
	__u64 avg, target = s->target_us, alpha = s->alpha_fp;

	if (now - s->tune_start_us < period)
		return;
	if (s->rtt_cnt && target) {
		avg = s->rtt_sum_us / s->rtt_cnt;
		if (cf && cf->tuner == TUNER_AUTHORS_V2) {
			__u64 low = target * V2_DEADBAND_PCT / 100;

			if (avg > target)
				alpha = alpha > (avg / target) * V2_STEP_FP ? alpha - (avg / target) * V2_STEP_FP : 0;
			else if (avg && avg < low)
				alpha += (low / avg) * V2_STEP_FP;
		} else if (avg && avg < target) {
			alpha = alpha * (target + avg) / (2 * avg);
		} else if (avg > target) {
			alpha = avg >= 2 * target ? 0 : alpha * (2 * target - avg) / avg;
		}
		alpha = clamp_alpha(alpha, cf);
		s->alpha_fp = alpha;
		stat_add(ST_TUNER_UPDATES, 1);
		stat_set(ST_LAST_ALPHA_FP, alpha);
		stat_set(ST_LAST_AVG_RTT_US, avg);
		rec = flow_rec(s);
		if (rec) {
			rec->alpha_fp = alpha;
			rec->last_avg_rtt_us = avg;
			rec->min_rtt_us = s->min_rtt_us;
			rec->tuner_updates++;
		}
	}
	s->tune_start_us = now;
	s->rtt_sum_us = 0;
	s->rtt_cnt = 0;
	/* the floor ages by a quarter per cycle without a small flight: a path that recovered (its floor was
	 * measured in a deep fade) gets its Setpoint back within a few cycles */
	if (!s->flight_fresh)
		s->flight_rtt_us -= s->flight_rtt_us >> 2;
	s->flight_fresh = 0;
}

/* Good: Eq. 1, Cwnd += (Setpoint/RTT) * (1/Cwnd) per ACKed packet, on top of Cubic's own increase. */
static __always_inline void act_good(struct tcp_sock *tp, __u32 setpoint_us, __u32 rtt_us, __u32 acked)
{
	__u32 cwnd = tp->snd_cwnd, add;

	if (!rtt_us || !cwnd)
		return;
	add = (__u32)((__u64)setpoint_us * acked / rtt_us);
	tp->snd_cwnd_cnt += add;
	if (tp->snd_cwnd_cnt >= cwnd) {
		__u32 inc = tp->snd_cwnd_cnt / cwnd;

		tp->snd_cwnd_cnt -= inc * cwnd;
		tp->snd_cwnd = min_u32(cwnd + inc, tp->snd_cwnd_clamp);
	}
}

/* Bad: the "imaginary drop" of Alg. 2 (ssthresh recalculated by Cubic, Cwnd = 1).
 * Deviation: a Bad that finds the flow still in slow start after an earlier Bad (cwnd < ssthresh)
 * keeps ssthresh. On the SR-granted uplink such a flow's few ACKs wait for SR occasions, so its RTT
 * says nothing about a queue of its own, and recomputing from its small cwnd would drive ssthresh to 2,
 * leaving the flow to climb back linearly (one collapsed flow in a CI run: 0.57 Mbit/s, 148 Bad events,
 * at alpha 1.5-1.9). The paper's first Bad at the operating point is unchanged, and so is a Bad in the
 * initial slow start: ssthresh is still infinite there, and it sets one. */
#define C2TCP_INFINITE_SSTHRESH 0x7fffffffu  /* include/net/tcp.h TCP_INFINITE_SSTHRESH: no reduction yet */

static __always_inline void act_bad(struct sock *sk, struct tcp_sock *tp, struct c2tcp_sk *s)
{
	struct c2tcp_flow *rec;

	if (tp->snd_cwnd >= tp->snd_ssthresh || tp->snd_ssthresh >= C2TCP_INFINITE_SSTHRESH)
		tp->snd_ssthresh = cubictcp_recalc_ssthresh(sk);
	tp->snd_cwnd = 1;
	tp->snd_cwnd_cnt = 0;
	stat_add(ST_BAD_EVENTS, 1);
	rec = flow_rec(s);
	if (rec)
		rec->bad_events++;
}

/* Deviation (issue 18), the Setpoint floor: an ACK whose packet travelled behind a flight of at most
 * small_flight_pkts packets measures the RTT of a flight with no queue of its own: on an SR-granted
 * uplink the wait for an SR occasion, on a gappy trace the wait for a delivery opportunity.
 * Setpoint = max(alpha x MINRTT, its EWMA (1/8)): a flight that small is never Bad for the delay it
 * cannot avoid, so a flow at cwnd 1-2 after a fade grows again instead of being reset at every
 * Interval. Every Bad (cwnd 1) refreshes the floor, and it ages by 1/4 per tuning cycle without a
 * small flight, so it follows the path. 0 = the paper. */
static __always_inline __u32 flight_floor_us(struct sock *sk, struct c2tcp_sk *s, const struct tcp_sock *tp,
					     __u32 in_flight_bytes, __u32 rtt_us)
{
	const struct c2tcp_conf *cf = conf_of(sk);
	__u32 small = cf ? cf->small_flight_pkts : 0;

	if (!small) {
		s->flight_rtt_us = 0;
		return 0;
	}
	/* sample->in_flight: bytes delivered between the sending of the newest ACKed packet and now, i.e.
	 * the flight it travelled behind; counting packets still out instead missed every small flight sent
	 * after a Bad while the old flight drained (the thin trace slice) */
	if (tp->mss_cache && in_flight_bytes / tp->mss_cache <= small) {
		s->flight_rtt_us = s->flight_rtt_us ? s->flight_rtt_us - (s->flight_rtt_us >> 3) + (rtt_us >> 3)
						    : rtt_us;
		s->flight_fresh = 1;
		stat_set(ST_LAST_FLIGHT_RTT_US, s->flight_rtt_us);
	}
	return s->flight_rtt_us;
}

SEC("struct_ops")
void BPF_PROG(c2tcp_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct c2tcp_sk *s;
	__u32 rtt_us, setpoint_us, floor_us, idx;
	__u64 now;
	__s32 rtt_raw = sample->rtt_us;

	cubictcp_acked(sk, sample);
	/* rtt_us is -1 without a valid sample; the authors' code turned that into a Good sample. */
	if (rtt_raw <= 0) {
		stat_add(ST_INVALID_RTT, 1);
		return;
	}
	s = state_of(sk);
	if (!s)
		return;
	if (!s->n_backoffs)  /* storage created late (module picked mid-connection) */
		state_init(sk, s);
	rtt_us = rtt_raw;
	now = now_us();

	s->rtt_sum_us += rtt_us;
	s->rtt_cnt++;
	tuner(sk, s, now);

	if (rtt_us < s->min_rtt_us) {
		s->min_rtt_us = rtt_us;
		stat_set(ST_LAST_MIN_RTT_US, rtt_us);
	}
	setpoint_us = (__u32)(((__u64)s->alpha_fp * s->min_rtt_us) / ALPHA_ONE);
	floor_us = flight_floor_us(sk, s, tp, sample->in_flight, rtt_us);
	if (floor_us > setpoint_us) {
		setpoint_us = floor_us;
		stat_add(ST_FLOORED_ACKS, 1);
	}

	if (rtt_us < setpoint_us) {
		s->interval_us = setpoint_us;
		s->condition = COND_GOOD;
		s->first_time = 1;
		s->n_backoffs = 1;
		act_good(tp, setpoint_us, rtt_us, sample->pkts_acked);
		stat_add(ST_GOOD_ACKS, 1);
	} else if (s->first_time) {
		s->condition = COND_NORMAL;
		if (!s->interval_us)
			s->interval_us = setpoint_us;
		s->next_time_us = now + s->interval_us;
		s->first_time = 0;
	} else if (now > s->next_time_us) {
		idx = s->n_backoffs - 1;
		if (idx >= INV_SQRT_STEPS)
			idx = INV_SQRT_STEPS - 1;
		cellab_barrier_var(idx);
		idx &= INV_SQRT_STEPS - 1;  /* a bound the verifier can see */
		s->condition = COND_BAD;
		s->next_time_us = now + ((__u64)s->interval_us * inv_sqrt_1024[idx]) / 1024;
		s->n_backoffs++;
		/* In Recovery/Loss the kernel's loss recovery owns cwnd; the paper is silent, we leave it. */
		if (BPF_CORE_READ_BITFIELD(inet_csk(sk), icsk_ca_state) <= TCP_CA_Disorder)
			act_bad(sk, tp, s);
	}
}

SEC("struct_ops")
void BPF_PROG(c2tcp_release, struct sock *sk)
{
	struct c2tcp_sk *s = bpf_sk_storage_get(&c2tcp_state, sk, 0, 0);
	struct c2tcp_flow *rec = s ? flow_rec(s) : NULL;

	if (rec)
		rec->end_ns = bpf_ktime_get_ns();
}

CUBIC_SSTHRESH(c2tcp)
CUBIC_CONG_AVOID(c2tcp)
CUBIC_SET_STATE(c2tcp)
CUBIC_CWND_EVENT(c2tcp)
RENO_UNDO_CWND(c2tcp)

SEC(".struct_ops")
struct tcp_congestion_ops c2tcp = {
	.init = (void *)c2tcp_init,
	.release = (void *)c2tcp_release,
	.ssthresh = (void *)c2tcp_ssthresh,
	.cong_avoid = (void *)c2tcp_cong_avoid,
	.set_state = (void *)c2tcp_set_state,
	.cwnd_event = (void *)c2tcp_cwnd_event,
	.pkts_acked = (void *)c2tcp_pkts_acked,
	.undo_cwnd = (void *)c2tcp_undo_cwnd,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "c2tcp",
};
