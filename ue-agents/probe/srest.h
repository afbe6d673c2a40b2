/* SR-period estimation with a regime verdict. Two independent views of the same flow:
 *  - ExLL's: T̂_SR = 2 (apRTT - mpRTT) over observation-phase per-packet RTTs, D() on a log scale;
 *  - ours [INF]: the sender's transmit times (TSval, ms) of the data it released. When the uplink is
 *    SR-limited, ACKs reach the sender only at SR occasions, so an ACK-clocked sender transmits at
 *    times that are phase-locked to the SR period: TSval mod P concentrates for P and its divisors.
 * A period is reported only when both agree (or, without timestamps, from the RTT view marked low
 * confidence); a saturated uplink granted from buffer-status reports shows no SR phase lock and is
 * reported as not SR-limited, never as a period. */
#ifndef CELLAB_SREST_H
#define CELLAB_SREST_H

#include <stddef.h>
#include <stdint.h>

struct sr_params {
    uint64_t min_rtt_samples;   /* ours: 30 */
    uint64_t min_phase_samples; /* ours: 30 */
    double phase_threshold;     /* resultant length for "phase-locked", ours: 0.5 */
};

struct sr_verdict {
    const char *regime;     /* "sr-limited" | "not-sr-limited" | "undetermined" */
    const char *confidence; /* "high" (both views agree) | "low" (RTT view only) | "none" */
    const char *reason;
    int period_ms;          /* 0 unless sr-limited */
    double mp_us, ap_us, tsr_ms;
    int d_log_ms, d_lin_ms;
    uint64_t n_rtt;
    double excess_p95_ms;
    uint64_t n_phase;
    double ts_hz;           /* the sender's timestamp clock, estimated */
    double phase_r[5];      /* resultant length of TSval mod P for P in {5,10,20,40,80} */
    int phase_period_ms;    /* largest phase-locked candidate, 0 if none */
};

void sr_default_params(struct sr_params *p);

/* rtt_us: observation-phase samples; tsval/t_ns: observation-phase data packets (sender TSval and our
 * receive time), n_ts may be 0 when the flow has no timestamps. Pure. */
void sr_estimate(const struct sr_params *p, const double *rtt_us, size_t n_rtt, const uint32_t *tsval,
                 const uint64_t *t_ns, size_t n_ts, struct sr_verdict *v);

/* Resultant length of (x mod period) on the circle; exposed for tests. */
double sr_phase_resultant(const double *x_ms, size_t n, double period_ms);

#endif
