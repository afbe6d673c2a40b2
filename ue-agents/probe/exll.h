/* ExLL receiver (Park, UNIST thesis 2019; spec ../shared/specs/seed003_exll.md):
 * per-subframe/per-frame grouping (F, C), MTE and C_i, mpRTT/apRTT, T̂_SR = 2(apRTT - mpRTT),
 * D() on a log scale, mRE, and the observation / control / hold state machine with Eq. 3.
 * Pure: time comes in through the calls, the window goes out through exll_rwnd_bytes(). */
#ifndef CELLAB_EXLL_H
#define CELLAB_EXLL_H

#include <stdint.h>

#define EXLL_SUBFRAMES 10
#define EXLL_MA_MAX 64
#define EXLL_MS_RING 4096 /* per-ms byte counts kept for the measured CWND (4 s) */

extern const int exll_sr_candidates_ms[5]; /* {5, 10, 20, 40, 80} */

struct exll_params {
    double alpha_pkts;         /* Eq. 3 α, in packets (thesis default 200; units a [GAP], FAST uses packets) */
    double gamma;              /* Eq. 3 γ (thesis default 0.5) */
    int ma_frames;             /* MTE / C_i moving-average window in frames [GAP]; ours 10 (100 ms) */
    double tol_frac;           /* unused by the recovery rule we ship (see control_slot); kept for tuning */
    uint32_t iw_pkts;          /* Cubic initial window for the timeout rule [INF: Linux IW10] */
    uint32_t mss_bytes;        /* payload bytes per packet (updated from the flow) */
    uint32_t rwnd_min_bytes;   /* never advertise less (ours: 4 MSS) */
    uint32_t rwnd_max_bytes;   /* never advertise more (the socket's buffer) */
    uint32_t slot_min_ms;      /* Eq. 3 time slot = max(mean RTT, slot_min_ms) [GAP]; ours 10 */
    uint32_t min_obs_samples;  /* RTT samples needed before the exit test may pass; ours 20 */
    int sr_period_hint_ms;     /* [INF, ours] SR period known from idle-uplink probes: mRE = mpRTT + it
                                * instead of D(T̂_SR); 0 = the thesis's D(T̂_SR) */
};

enum exll_state { EXLL_OBS = 0, EXLL_CTRL = 1, EXLL_HOLD = 2 };

struct exll_sf { uint64_t bytes, first_bytes, t_first, t_last; uint32_t pkts; };

struct exll {
    struct exll_params p;
    int state;
    int started;
    uint64_t t0_ns;
    /* grouping */
    int64_t cur_frame;
    struct exll_sf sf[EXLL_SUBFRAMES];
    double F_bps, C_bps, mte_bps, ci_bps;
    double f_hist[EXLL_MA_MAX], c_hist[EXLL_MA_MAX];
    int f_n, f_pos, c_n, c_pos;
    uint64_t n_frames;
    /* observation RTT statistics */
    double mp_us, ap_sum_us;
    uint64_t ap_n;
    double srtt_us;
    /* measured CWND */
    uint32_t ms_bytes[EXLL_MS_RING];
    int64_t ms_last;
    double cw_ewma_bytes;      /* bytes received within each per-packet RTT, smoothed */
    /* control */
    double rwnd_bytes, rwnd_rho_bytes, mre_us, cw_at_loss_bytes;
    uint64_t slot_retrans;
    uint64_t slot_start_ns, slot_bytes;
    double slot_rtt_sum_us;
    uint64_t slot_rtt_n;
    int rwnd_changed;
    /* what observation saw when it ended (the SR estimate ExLL uses) */
    int exited;
    double exit_mp_us, exit_ap_us, exit_mre_us;
    uint64_t exit_n, t_exit_ns;
    uint64_t n_timeouts, n_losses, n_updates, n_resumes;
    uint64_t n_pipe_full;      /* observation samples kept out of apRTT */
};

void exll_default_params(struct exll_params *p);
void exll_init(struct exll *e, const struct exll_params *p);
void exll_on_data(struct exll *e, uint64_t t_ns, uint32_t bytes);
/* Returns 1 when the sample went into apRTT (observation, window below the pipe). */
int exll_on_rtt(struct exll *e, uint64_t t_ns, double rtt_us);
/* A retransmitted segment arrived (the receiver's evidence of a loss). */
void exll_on_retransmission(struct exll *e);
/* Advance timers (frame close, Eq. 3 slot). Returns 1 when the window to advertise changed. */
int exll_tick(struct exll *e, uint64_t now_ns);
/* The measured CWND: bytes received during one RTT (thesis §4.1), taken over each per-packet RTT
 * sample's own interval, smoothed; before any sample, bytes per smoothed RTT. */
double exll_cwnd_meas_bytes(const struct exll *e, uint64_t now_ns);
uint32_t exll_rwnd_bytes(const struct exll *e);
const char *exll_state_name(int state);

/* T̂_SR = 2 (apRTT - mpRTT), in ms. */
double exll_tsr_ms(double mp_us, double ap_us);
/* D(): nearest candidate in the log domain (boundaries 7.07/14.1/28.3/56.6 ms), the spec's choice. */
int exll_D_log(double tsr_ms);
/* D() as a plain nearest value (ties to the lower), kept to show why it fails Table 2 row 5. */
int exll_D_lin(double tsr_ms);
/* One Eq. 3 step (pure): w' = (1-γ) w + γ (mRE/R · w + α (1 - T/MTE)). */
double exll_eq3(double w, double gamma, double mre_us, double r_us, double alpha, double t_bps, double mte_bps);

#endif
