/* DFCSD (Dong et al., Sensors 19(12):2791, 2019; spec ../shared/specs/seed004_dfcsd.md):
 * Eq. 12 α'_s = α_s exp((size_min - size_s)/(size_max - size_min)) over one UE's concurrent flows,
 * Eq. 13 rwnd_s = α'_s D_s d_s / (D_s - d_s), applied as a damped update with guards for the
 * divisions by zero the paper leaves open. α is expressed as a backlog β = α d in packets (spec §1.5,
 * [INF]); the per-flow controller runs once per RTT of that flow. Pure. */
#ifndef CELLAB_DFCSD_H
#define CELLAB_DFCSD_H

#include <stdint.h>

struct dfcsd_params {
    double beta_pkts;     /* α_s d_s: standing backlog per flow, packets [GAP: paper gives none; ours 4 = Vegas beta] */
    double q_floor_us;    /* floor on D - d [INF, ours 0.1 ms]: our RTT samples come from capture stamps
                           * (µs), not the 1 ms TS clock; a 1 ms floor caps rwnd at β(1 + d/1 ms), below the
                           * BDP on any link faster than β packets per ms, and starves the flow */
    double gamma_max;     /* upper bound of the damping gain [INF]; the gain is also kept under 1/(1+BDP/β) */
    uint32_t mss_bytes;
    uint32_t rwnd_min_bytes, rwnd_max_bytes;
    uint32_t period_min_ms; /* update no faster than this even when D_s is tiny; ours 10 */
};

struct dfcsd_flow {
    int active;           /* still receiving: takes part in size_min / size_max */
    uint64_t size_bytes;  /* bytes received so far (the paper's size_s) */
    double D_us, d_us;    /* mean RTT of the last period, lifetime minimum */
    double sum_us;
    uint64_t n;
    uint64_t period_start_ns;
    double rwnd_bytes;    /* 0 until the first update: the paper's "default" = no clamp */
    double alpha_prime;   /* last α'_s / α_s */
    double target_bytes;
    double cw_bytes;      /* the window the flow actually uses (bytes per RTT), set by the caller */
    uint64_t n_updates;
};

void dfcsd_default_params(struct dfcsd_params *p);
void dfcsd_flow_init(struct dfcsd_flow *f, uint64_t now_ns);
void dfcsd_on_rtt(struct dfcsd_flow *f, double rtt_us);

/* Eq. 12 factor α'_s/α_s in [1/e, 1]; 1 when all sizes are equal (one flow). */
double dfcsd_alpha_factor(uint64_t size, uint64_t size_min, uint64_t size_max);
/* Eq. 13 in packets with α_s d_s = beta: beta' D/(D - d), D - d floored at q_floor. Infinity when
 * d is unknown. */
double dfcsd_eq13_pkts(double beta_prime_pkts, double D_us, double d_us, double q_floor_us);

/* Run due per-flow updates at time now. Returns a bitmask (flows 0..31) of windows that changed. */
uint32_t dfcsd_tick(const struct dfcsd_params *p, struct dfcsd_flow *flows, int n_flows, uint64_t now_ns);

#endif
