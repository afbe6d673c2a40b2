/* SR-period estimation with a regime verdict. Two independent views of the same flow:
 *  - ExLL's: T̂_SR = 2 (apRTT - mpRTT) over observation-phase per-packet RTTs, D() on a log scale;
 *  - ours [INF]: when our ACKs reach the sender. A data segment's TSecr is the TSval of the last ACK
 *    the sender had received, so the first segment carrying a new TSecr left the sender just after an
 *    uplink burst arrived, and its TSval stamps that moment on the sender's clock. When the uplink is
 *    SR-limited, bursts arrive only after SR occasions: those TSvals mod P concentrate for P and its
 *    divisors. An ACK-clocked sender echoes every ACK, a sender smoothed by pacing/TSQ only a burst's
 *    last one; both give the burst arrival times.
 * A period is reported only when both agree (or, without timestamps, from the RTT view marked low
 * confidence); a saturated uplink granted from buffer-status reports shows no SR phase lock and is
 * reported as not SR-limited, never as a period. */
#ifndef CELLAB_SREST_H
#define CELLAB_SREST_H

#include <stddef.h>
#include <stdint.h>

struct sr_inputs {
    const double *rtt_us;           /* observation-phase per-packet RTTs (ExLL's view) */
    size_t n_rtt;
    const double *echo_ticks;       /* sender TSval of the first segment echoing each new TSecr */
    const double *echo_arrival_ms;  /* and when it arrived here */
    size_t n_echo;
    const double *ping_rtt_us;      /* RTTs of our idle-uplink probes, if any */
    size_t n_ping;
    double tti_ms;                  /* the download's TTI on the wall clock (its burst spacing), 0 unknown */
};

struct sr_params {
    uint64_t min_rtt_samples;   /* ours: 30 */
    uint64_t min_phase_samples; /* ours: 30 */
    double phase_threshold;     /* resultant length for "phase-locked", ours: 0.5 */
    uint64_t min_ping_samples;  /* ours: 15 */
};

/* the probes' wait models: no wait, then the SR periods */
#define SR_FIT_MODELS 6
/* a lead (nats) this large over the runner-up is a "high" confidence fit; the probes stop there */
#define SR_FIT_HIGH_NATS 6.0
extern const int sr_fit_periods_ms[SR_FIT_MODELS];

struct sr_verdict {
    const char *regime;     /* the flow's uplink: "sr-limited" | "not-sr-limited" | "undetermined" */
    const char *confidence; /* of period_ms: "high" | "medium" | "low" | "none" */
    const char *source;     /* what period_ms comes from: "uplink-probes" | "flow-phase" | "flow-rtt" | "none" */
    const char *reason;
    int period_ms;          /* the SR period estimate, 0 when none */
    int flow_cadence_ms;    /* the flow's uplink-burst period (phase view), 0 if no lock */
    uint64_t n_ping;
    double ping_min_ms, ping_avg_ms, ping_tsr_ms, ping_quantile_tsr_ms;
    double ping_loglik[SR_FIT_MODELS]; /* of each wait model, sr_fit_periods_ms order */
    double ping_margin_nats;  /* best model's log-likelihood over the runner-up's */
    int ping_period_ms;       /* the best model's period, 0 for "no wait" */
    double ping_stretch[SR_FIT_MODELS]; /* each model's fitted wall-clock stretch of the SR cycle (>= 1) */
    double ping_odd_share;
    double tti_ms;            /* the ruler the stretch range came from (0: none, range 1-1.5) */
    const char *tti_source;   /* where that ruler came from: "download", "lab" (fetch --stack-tti-ms), NULL none */    /* share of waits in the best period's second half (its odd half-cycle multiple) */
    int ambiguous;            /* the probes cannot tell several periods apart (e.g. P and 2P): no period */
    int n_candidates;
    int candidates_ms[SR_FIT_MODELS]; /* the periods within SR_FIT_MIN_NATS of the best, when ambiguous */
    double mp_us, ap_us, tsr_ms;
    int d_log_ms, d_lin_ms;
    uint64_t n_rtt;
    double excess_p95_ms;
    uint64_t n_phase;
    double ts_hz;           /* the sender's TSval clock, estimated (1 kHz on Linux) */
    double phase_r[5];      /* resultant length of TSval mod P for P in {5,10,20,40,80} */
    int phase_period_ms;    /* the candidate sr_phase_select names, 0 if none */
};

void sr_default_params(struct sr_params *p);

/* Pure: the verdict from whatever views have data (n_echo 0 without timestamps, n_ping 0 without
 * probes). */
void sr_estimate(const struct sr_params *p, const struct sr_inputs *in, struct sr_verdict *v);

/* The SR period the burst-phase resultants (P = 5..80 ms) name, 0 when none does; exposed for tests. */
int sr_phase_select(const double r[5], double threshold);

/* Log-likelihood of each wait model for the probes' RTTs (ms, sorted ascending, n >= 1); exposed for
 * tests. _ex also gives each model's fitted stretch and base (ms); either may be NULL. */
void sr_probe_fit(const double *sorted_ms, size_t n, double loglik[SR_FIT_MODELS]);
void sr_probe_fit_ex(const double *sorted_ms, size_t n, double tti_ms, double loglik[SR_FIT_MODELS],
                     double stretch[SR_FIT_MODELS], double base[SR_FIT_MODELS]);

/* How far the best wait model leads the runner-up (nats) for these probe RTTs (µs, any order); 0
 * without samples. */
double sr_probe_margin(const double *rtt_us, size_t n);

/* Resultant length of (x mod period) on the circle; exposed for tests. */
double sr_phase_resultant(const double *x_ms, size_t n, double period_ms);

#endif
