#include "dfcsd.h"

#include <math.h>
#include <string.h>

void dfcsd_default_params(struct dfcsd_params *p)
{
    p->beta_pkts = 4.0;
    p->q_floor_us = 100.0;
    p->gamma_max = 0.5;
    p->mss_bytes = 1448;
    p->rwnd_min_bytes = 4 * 1448;
    p->rwnd_max_bytes = 32u << 20;
    p->period_min_ms = 10;
}

void dfcsd_flow_init(struct dfcsd_flow *f, uint64_t now_ns)
{
    memset(f, 0, sizeof(*f));
    f->active = 1;
    f->d_us = INFINITY; /* Algorithm 1: d_s = ∞ */
    f->period_start_ns = now_ns;
    f->alpha_prime = 1.0;
}

void dfcsd_on_rtt(struct dfcsd_flow *f, double rtt_us)
{
    if (rtt_us > 0) {
        f->sum_us += rtt_us;
        f->n++;
    }
}

double dfcsd_alpha_factor(uint64_t size, uint64_t size_min, uint64_t size_max)
{
    if (size_max <= size_min) /* 0/0 in the paper: one flow, or all equal */
        return 1.0;
    double x = ((double)size_min - (double)size) / ((double)size_max - (double)size_min);
    if (x > 0)
        x = 0;
    if (x < -1)
        x = -1;
    return exp(x);
}

double dfcsd_eq13_pkts(double beta_prime_pkts, double D_us, double d_us, double q_floor_us)
{
    if (!isfinite(d_us) || !(D_us > 0))
        return INFINITY;
    double q = D_us - d_us;
    if (q < q_floor_us) /* D = d on the first sample: the paper divides by zero */
        q = q_floor_us;
    return beta_prime_pkts * D_us / q;
}

uint32_t dfcsd_tick(const struct dfcsd_params *p, struct dfcsd_flow *flows, int n_flows, uint64_t now_ns)
{
    uint64_t smin = UINT64_MAX, smax = 0;
    double d_ue = INFINITY;
    for (int i = 0; i < n_flows; i++) {
        if (flows[i].d_us < d_ue)
            d_ue = flows[i].d_us;
        if (!flows[i].active)
            continue;
        smin = flows[i].size_bytes < smin ? flows[i].size_bytes : smin;
        smax = flows[i].size_bytes > smax ? flows[i].size_bytes : smax;
    }
    uint32_t changed = 0;
    for (int i = 0; i < n_flows; i++) {
        struct dfcsd_flow *f = &flows[i];
        if (!f->active || f->n == 0)
            continue;
        double period_ms = isfinite(f->D_us) && f->D_us > 0 ? f->D_us / 1e3 : 0;
        if (period_ms < p->period_min_ms)
            period_ms = p->period_min_ms;
        /* [INF, ours] at least 8 samples per period: with ACKs waiting for SR occasions a mean over a
         * handful of samples is noisy, and d_s, a minimum of such means, would lock onto the noise */
        if ((double)(now_ns - f->period_start_ns) / 1e6 < period_ms || f->n < 8)
            continue;
        /* D_s = mean of the TS RTT samples in the last RTT; d_s = lifetime minimum of D_s.
         * [INF, ours] D_s is then smoothed over ~4 RTTs (EWMA 1/4) before it enters the minimum and
         * Eq. 13: with ACKs waiting for SR occasions the per-RTT means scatter by a few ms, and the
         * minimum of raw means sits below their typical value, which Eq. 13 reads as a standing queue
         * (a flow held at half the link with no queue at all). */
        double D_raw = f->sum_us / (double)f->n;
        f->D_us = f->n_updates == 0 || !(f->D_us > 0) ? D_raw : 0.75 * f->D_us + 0.25 * D_raw;
        f->sum_us = 0;
        f->n = 0;
        f->period_start_ns = now_ns;
        if (f->D_us < f->d_us)
            f->d_us = f->D_us;
        /* [INF, ours] all flows of one UE share its eNB queue (Eq. 11), so they share the base RTT: a
         * flow that starts behind a standing queue takes the UE's minimum, not its own inflated one */
        double d = f->d_us < d_ue ? f->d_us : d_ue;
        f->alpha_prime = dfcsd_alpha_factor(f->size_bytes, smin, smax);
        double beta_prime = p->beta_pkts * f->alpha_prime;
        double target = dfcsd_eq13_pkts(beta_prime, f->D_us, d, p->q_floor_us) * p->mss_bytes;
        if (target > p->rwnd_max_bytes)
            target = p->rwnd_max_bytes;
        if (target < p->rwnd_min_bytes)
            target = p->rwnd_min_bytes;
        f->target_bytes = target;
        /* start from (and never drift far above) the window the flow really uses: Linux cannot take
         * back an advertised right edge, so a controller state far above it acts seconds late */
        double used = f->cw_bytes > 0 ? 2 * f->cw_bytes + 32768 : target;
        double w = f->rwnd_bytes;
        if (w <= 0 || w > used)
            w = target < used ? target : used;
        /* Spec §1.10: the direct set has loop gain -BDP/β and oscillates at LTE rates; keep the gain
         * under 1/(1 + BDP/β'), half the stability bound, BDP from the window scaled to the minimum
         * RTT. [INF, ours] Far above the target (a standing queue to drain, w > 2 target) decrease
         * with γ = 1/2 instead, or a bloated start would take seconds to drain. */
        double bdp_pkts = w / p->mss_bytes * d / f->D_us;
        double g = 1.0 / (1.0 + bdp_pkts / beta_prime);
        if (g > p->gamma_max || w > 2 * target)
            g = p->gamma_max;
        w = w + g * (target - w);
        if (w < p->rwnd_min_bytes)
            w = p->rwnd_min_bytes;
        if (fabs(w - f->rwnd_bytes) >= 1) {
            f->rwnd_bytes = w;
            if (i < 32)
                changed |= 1u << i;
        }
        f->n_updates++;
    }
    return changed;
}
