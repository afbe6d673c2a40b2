#include "srest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exll.h"

void sr_default_params(struct sr_params *p)
{
    p->min_rtt_samples = 30;
    p->min_phase_samples = 30;
    p->phase_threshold = 0.5;
}

double sr_phase_resultant(const double *x_ms, size_t n, double period_ms)
{
    if (n == 0)
        return 0;
    double c = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        double a = 2 * M_PI * fmod(x_ms[i], period_ms) / period_ms;
        c += cos(a);
        s += sin(a);
    }
    return sqrt(c * c + s * s) / (double)n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The sender's TSval rate from the span of the flow: Linux ticks at 1 kHz, some stacks at 1 MHz. */
static double ts_clock_hz(const uint32_t *tsval, const uint64_t *t_ns, size_t n)
{
    if (n < 2 || t_ns[n - 1] <= t_ns[0] + 50 * 1000000ULL)
        return 0;
    double dts = (double)(uint32_t)(tsval[n - 1] - tsval[0]);
    double dt_s = (double)(t_ns[n - 1] - t_ns[0]) / 1e9;
    return dts / dt_s;
}

void sr_estimate(const struct sr_params *p, const double *rtt_us, size_t n_rtt, const uint32_t *tsval,
                 const uint64_t *t_ns, size_t n_ts, struct sr_verdict *v)
{
    memset(v, 0, sizeof(*v));
    v->regime = "undetermined";
    v->confidence = "none";
    v->mp_us = v->ap_us = v->tsr_ms = v->excess_p95_ms = NAN;
    v->n_rtt = n_rtt;
    v->n_phase = n_ts;

    int rtt_ok = n_rtt >= p->min_rtt_samples;
    if (rtt_ok) {
        double mp = INFINITY, sum = 0;
        for (size_t i = 0; i < n_rtt; i++) {
            mp = rtt_us[i] < mp ? rtt_us[i] : mp;
            sum += rtt_us[i];
        }
        v->mp_us = mp;
        v->ap_us = sum / (double)n_rtt;
        v->tsr_ms = exll_tsr_ms(v->mp_us, v->ap_us);
        v->d_log_ms = exll_D_log(v->tsr_ms);
        v->d_lin_ms = exll_D_lin(v->tsr_ms);
        double *sorted = malloc(n_rtt * sizeof(double));
        if (sorted) {
            memcpy(sorted, rtt_us, n_rtt * sizeof(double));
            qsort(sorted, n_rtt, sizeof(double), cmp_double);
            v->excess_p95_ms = (sorted[(size_t)(0.95 * (double)(n_rtt - 1))] - mp) / 1e3;
            free(sorted);
        }
    }

    int phase_ok = 0;
    if (n_ts >= p->min_phase_samples) {
        v->ts_hz = ts_clock_hz(tsval, t_ns, n_ts);
        double scale = 0; /* TSval ticks -> ms */
        /* wide bands: queueing stretches the arrival span, we only need to tell ms from µs clocks */
        if (v->ts_hz > 500 && v->ts_hz < 1500)
            scale = 1.0;
        else if (v->ts_hz > 5e5 && v->ts_hz < 1.5e6)
            scale = 1e-3;
        if (scale > 0) {
            double *x = malloc(n_ts * sizeof(double));
            if (x) {
                for (size_t i = 0; i < n_ts; i++)
                    x[i] = (double)(uint32_t)(tsval[i] - tsval[0]) * scale;
                phase_ok = 1;
                for (int k = 0; k < 5; k++) {
                    v->phase_r[k] = sr_phase_resultant(x, n_ts, exll_sr_candidates_ms[k]);
                    /* each candidate divides the next, so the lock must hold for all smaller ones */
                    if (v->phase_r[k] >= p->phase_threshold && (k == 0 || v->phase_period_ms == exll_sr_candidates_ms[k - 1]))
                        v->phase_period_ms = exll_sr_candidates_ms[k];
                }
                free(x);
            }
        }
    }

    if (!rtt_ok && !phase_ok) {
        v->reason = "too few per-packet RTT samples in the observation phase, and no sender timestamps";
        return;
    }
    /* outside the candidates' log-domain range (5/√2 .. 80·√2 ms) no SR period explains the spread */
    if (!phase_ok && v->tsr_ms < 5.0 / M_SQRT2) {
        v->regime = "not-sr-limited";
        v->confidence = "low";
        v->reason = "per-packet RTT spread is below half the shortest SR period";
        return;
    }
    if (!phase_ok && v->tsr_ms > 80.0 * M_SQRT2) {
        v->reason = "per-packet RTT spread exceeds every SR period: queueing dominates the observation phase";
        return;
    }
    if (!phase_ok) {
        v->regime = "sr-limited";
        v->confidence = "low";
        v->period_ms = v->d_log_ms;
        v->reason = n_ts < p->min_phase_samples ? "no TCP timestamps: RTT view only, SR-limited uplink assumed"
                                                : "sender timestamp clock not 1 kHz or 1 MHz: RTT view only";
        return;
    }
    if (v->phase_period_ms == 0) {
        v->regime = "not-sr-limited";
        v->confidence = "high";
        v->reason = "the sender's transmit times show no SR phase lock: uplink grants do not follow SR occasions";
        return;
    }
    /* the transmit phase names the period; the RTT view (ExLL's T̂_SR) confirms it or not */
    v->regime = "sr-limited";
    v->period_ms = v->phase_period_ms;
    if (v->phase_period_ms == v->d_log_ms) {
        v->confidence = "high";
        v->reason = "transmit phase lock and RTT spread agree";
    } else {
        v->confidence = "medium";
        v->reason = "transmit phase lock; the RTT spread (T̂_SR) points elsewhere (burst queueing in slow start)";
    }
}
