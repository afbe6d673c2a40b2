// SPDX-License-Identifier: GPL-2.0
/* Sender-side ExLL (Park, UNIST thesis 2019 / CoNEXT 2018), a plug-in on top of the kernel's Cubic.
 *
 * Observation: Cubic alone; per-ACK RTT samples give mpRTT (minimum) and apRTT (average). Per
 * round (one window of data, delimited by tp->delivered) MTE_S = (packets of that window ACKed
 * after the first ACK) / (last ACK - first ACK), i.e. cwnd / dt; T = delivered / round time.
 * Exit to control when cwnd^C / mRE > MTE_S, with mRE = mpRTT + D(2 (apRTT - mpRTT)), D() picking
 * the SR period from {5,10,20,40,80} ms nearest in the log domain (sr_calibration = 0: mRE = mpRTT).
 * Control, once per round (Eq. 3):  w = (1-g) w + g ((mRE/R) w + a (1 - T/MTE)),  a = 200 packets,
 * g = 0.5; cwnd = min(w, cwnd^C) ("ExLL overrides Cubic when cwnd^E < cwnd^C"). R = mean RTT of the
 * round. Loss (Recovery) freezes w until cwnd^C exceeds it again; a timeout (Loss) restarts
 * observation. Gaps filled here (the thesis gives none): the round as the update slot, MTE as an
 * EWMA with weight 1/4, T over one round. */
#include "cellab_cc.h"

char _license[] SEC("license") = "GPL";

#define FP_ONE 1024u
#define ALPHA_PKTS_DEFAULT 200
#define GAMMA_FP_DEFAULT (FP_ONE / 2)
#define MTE_EWMA_SHIFT 2
#define SR_PERIODS 5

enum { MODE_OBSERVE = 0, MODE_CONTROL = 1, MODE_HOLD = 2 };

/* SR periods (us) and the geometric midpoints between neighbours: log-domain nearest neighbour. */
static const __u32 sr_period_us[SR_PERIODS] = { 5000, 10000, 20000, 40000, 80000 };
static const __u32 sr_bound_us[SR_PERIODS - 1] = { 7071, 14142, 28284, 56569 };

struct exll_sk {
	__u64 round_start_us;
	__u64 first_ack_us;      /* first ACK of the round */
	__u64 last_ack_us;
	__u64 mte_Bps;
	__u64 rtt_sum_us;        /* whole observation (apRTT) */
	__u64 round_rtt_sum_us;
	__u32 rtt_cnt;
	__u32 round_rtt_cnt;
	__u32 round_end_delivered;
	__u32 round_start_delivered;
	__u32 first_ack_delivered;
	__u32 mp_rtt_us;
	__u32 mre_us;
	__u64 w_fp;              /* cwnd^E in 1/1024 packets */
	__u64 w_hold;
	__u8 mode;
};

struct exll_conf {
	__u32 alpha_pkts;
	__u32 gamma_fp;
	__u32 sr_calibration;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct exll_sk);
} exll_state SEC(".maps");

DEFINE_CONF_MAPS(struct exll_conf)

enum {
	ST_FLOWS, ST_CONTROL_ENTRIES, ST_UPDATES, ST_HOLDS, ST_RESETS, ST_LAST_MRE_US, ST_LAST_MTE_BPS,
	ST_LAST_CWND_E, ST_LAST_TSR_US, ST_LAST_MPRTT_US, ST_LAST_APRTT_US,
};
DEFINE_STATS_MAP()


static __always_inline struct exll_sk *state_of(struct sock *sk)
{
	return bpf_sk_storage_get(&exll_state, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
}

static __always_inline void observe_reset(struct exll_sk *s)
{
	s->mode = MODE_OBSERVE;
	s->mp_rtt_us = ~0u;
	s->rtt_sum_us = 0;
	s->rtt_cnt = 0;
	s->mte_Bps = 0;
}

SEC("struct_ops")
void BPF_PROG(exll_init, struct sock *sk)
{
	struct exll_sk *s;

	cubictcp_init(sk);
	s = state_of(sk);
	if (s)
		observe_reset(s);
	stat_add(ST_FLOWS, 1);
}

/* D(): the SR period nearest to t_sr in the log domain. */
static __always_inline __u32 sr_period_of(__u32 t_sr_us)
{
	for (int i = 0; i < SR_PERIODS - 1; i++)
		if (t_sr_us < sr_bound_us[i])
			return sr_period_us[i];
	return sr_period_us[SR_PERIODS - 1];
}

static __always_inline __u32 mre_of(struct sock *sk, struct exll_sk *s)
{
	const struct exll_conf *cf = conf_of(sk);
	__u32 ap, t_sr;

	if (!s->rtt_cnt || s->mp_rtt_us == ~0u)
		return 0;
	if (cf && !cf->sr_calibration)
		return s->mp_rtt_us;
	ap = s->rtt_sum_us / s->rtt_cnt;
	t_sr = ap > s->mp_rtt_us ? 2 * (ap - s->mp_rtt_us) : 0;
	stat_set(ST_LAST_TSR_US, t_sr);
	stat_set(ST_LAST_APRTT_US, ap);
	stat_set(ST_LAST_MPRTT_US, s->mp_rtt_us);
	return s->mp_rtt_us + sr_period_of(t_sr);
}

SEC("struct_ops")
void BPF_PROG(exll_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct exll_sk *s = state_of(sk);
	__u32 rtt;

	cubictcp_acked(sk, sample);
	if (!s || sample->rtt_us <= 0)
		return;
	rtt = sample->rtt_us;
	if (s->mode == MODE_OBSERVE) {
		if (!s->mp_rtt_us || rtt < s->mp_rtt_us)
			s->mp_rtt_us = rtt;
		s->rtt_sum_us += rtt;
		s->rtt_cnt++;
	}
	s->round_rtt_sum_us += rtt;
	s->round_rtt_cnt++;
}

/* Eq. 3 in 1/1024 fixed point (unsigned: BPF has no signed division). */
static __always_inline void control_update(struct sock *sk, struct exll_sk *s, __u64 thr_Bps, __u32 r_us)
{
	struct tcp_sock *tp = tcp_sk(sk);
	const struct exll_conf *cf = conf_of(sk);
	__u64 alpha = cf && cf->alpha_pkts ? cf->alpha_pkts : ALPHA_PKTS_DEFAULT;
	__u64 gamma = cf && cf->gamma_fp ? cf->gamma_fp : GAMMA_FP_DEFAULT;
	__u64 w = s->w_fp, mte = s->mte_Bps, target;

	if (!r_us || !mte)
		return;
	if (gamma > FP_ONE)
		gamma = FP_ONE;
	target = w * s->mre_us / r_us;                        /* (mRE/R) w */
	if (thr_Bps <= mte)                                   /* + a (1 - T/MTE) */
		target += alpha * FP_ONE * (mte - thr_Bps) / mte;
	else
		target -= min_u64(target, alpha * FP_ONE * (thr_Bps - mte) / mte);
	w = ((FP_ONE - gamma) * w + gamma * target) / FP_ONE;
	w = max_u64(w, CELLAB_MIN_CWND_PKTS * FP_ONE);
	w = min_u64(w, (__u64)tp->snd_cwnd_clamp * FP_ONE);
	s->w_fp = w;
	stat_add(ST_UPDATES, 1);
	stat_set(ST_LAST_CWND_E, w / FP_ONE);
}

/* Round bookkeeping and the per-round decisions; runs after Cubic's own increase. */
static __always_inline void on_ack(struct sock *sk, struct exll_sk *s)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u64 now = tp->tcp_mstamp, mte, thr = 0, span;
	__u32 delivered = tp->delivered, r_us = 0, cwnd_c = tp->snd_cwnd, pkts;
	__u8 ca = BPF_CORE_READ_BITFIELD(inet_csk(sk), icsk_ca_state);

	if (!s->first_ack_us) {
		s->first_ack_us = now;
		s->first_ack_delivered = delivered;
	}
	s->last_ack_us = now;
	if ((__s32)(delivered - s->round_end_delivered) < 0)
		goto apply;

	/* a round ended: one window's worth of packets has been delivered */
	span = s->last_ack_us - s->first_ack_us;
	pkts = delivered - s->first_ack_delivered;
	if (span && pkts) {
		mte = (__u64)pkts * tp->mss_cache * USEC_PER_SEC / span;   /* MTE_S = cwnd / dt */
		s->mte_Bps = s->mte_Bps ? s->mte_Bps - (s->mte_Bps >> MTE_EWMA_SHIFT) + (mte >> MTE_EWMA_SHIFT) : mte;
		stat_set(ST_LAST_MTE_BPS, s->mte_Bps);
	}
	if (now > s->round_start_us && s->round_start_us)
		thr = (__u64)(delivered - s->round_start_delivered) * tp->mss_cache * USEC_PER_SEC /
		      (now - s->round_start_us);
	if (s->round_rtt_cnt)
		r_us = s->round_rtt_sum_us / s->round_rtt_cnt;

	if (s->mode == MODE_OBSERVE) {
		__u32 mre = mre_of(sk, s);

		/* exit test: cwnd^C / mRE > MTE_S */
		if (mre && s->mte_Bps && ca == TCP_CA_Open &&
		    (__u64)cwnd_c * tp->mss_cache * USEC_PER_SEC / mre > s->mte_Bps) {
			s->mre_us = mre;
			s->mode = MODE_CONTROL;
			s->w_fp = cwnd_c * FP_ONE;
			stat_add(ST_CONTROL_ENTRIES, 1);
			stat_set(ST_LAST_MRE_US, mre);
		}
	} else if (s->mode == MODE_CONTROL && ca == TCP_CA_Open) {
		control_update(sk, s, thr, r_us);
	} else if (s->mode == MODE_HOLD && ca == TCP_CA_Open && cwnd_c * FP_ONE > s->w_hold) {
		s->mode = MODE_CONTROL;
	}

	s->round_start_us = now;
	s->round_start_delivered = delivered;
	s->round_end_delivered = delivered + max_u32(tp->packets_out, 1);
	s->first_ack_us = 0;
	s->round_rtt_sum_us = 0;
	s->round_rtt_cnt = 0;
apply:
	if (s->mode == MODE_CONTROL && ca == TCP_CA_Open && s->w_fp / FP_ONE < tp->snd_cwnd)
		tp->snd_cwnd = max_u32(s->w_fp / FP_ONE, CELLAB_MIN_CWND_PKTS);
}

SEC("struct_ops")
void BPF_PROG(exll_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct exll_sk *s = state_of(sk);

	cubictcp_cong_avoid(sk, ack, acked);
	if (s)
		on_ack(sk, s);
}

SEC("struct_ops")
void BPF_PROG(exll_set_state, struct sock *sk, __u8 new_state)
{
	struct exll_sk *s = state_of(sk);

	cubictcp_state(sk, new_state);
	if (!s)
		return;
	if (new_state == TCP_CA_Loss) {
		/* timeout: start over with fresh measurements */
		observe_reset(s);
		stat_add(ST_RESETS, 1);
	} else if (new_state == TCP_CA_Recovery && s->mode == MODE_CONTROL) {
		s->w_hold = s->w_fp;
		s->mode = MODE_HOLD;
		stat_add(ST_HOLDS, 1);
	}
}

CUBIC_SSTHRESH(exll)
CUBIC_CWND_EVENT(exll)
RENO_UNDO_CWND(exll)

SEC(".struct_ops")
struct tcp_congestion_ops exll = {
	.init = (void *)exll_init,
	.ssthresh = (void *)exll_ssthresh,
	.cong_avoid = (void *)exll_cong_avoid,
	.set_state = (void *)exll_set_state,
	.cwnd_event = (void *)exll_cwnd_event,
	.pkts_acked = (void *)exll_pkts_acked,
	.undo_cwnd = (void *)exll_undo_cwnd,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "exll",
};
