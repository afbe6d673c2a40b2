/* The SR verdict (srest.h) as the summary's `sr_estimate` object. */
#include <math.h>
#include <stdio.h>

#include "exll.h"
#include "jsonw.h"
#include "pipeline.h"
#include "srest.h"

void sr_verdict_json(struct jsonw *w, const char *key, const struct sr_verdict *v)
{
    jw_obj_open(w, key);
    jw_str(w, "regime", v->regime);
    if (v->period_ms)
        jw_int(w, "period_ms", v->period_ms);
    else
        jw_null(w, "period_ms");
    jw_str(w, "confidence", v->confidence);
    jw_str(w, "source", v->source);
    if (v->flow_cadence_ms) jw_int(w, "flow_burst_period_ms", v->flow_cadence_ms); else jw_null(w, "flow_burst_period_ms");
    jw_bool(w, "ambiguous", v->ambiguous);
    jw_arr_open(w, "candidates_ms");
    for (int k = 0; k < v->n_candidates; k++)
        jw_int(w, NULL, v->candidates_ms[k]);
    jw_arr_close(w);
    jw_obj_open(w, "uplink_probes");
    jw_int(w, "n", (long long)v->n_ping);
    jw_num(w, "min_ms", v->ping_min_ms);
    jw_num(w, "avg_ms", v->ping_avg_ms);
    jw_num(w, "tsr_ms", v->ping_tsr_ms);
    jw_num(w, "quantile_tsr_ms", v->ping_quantile_tsr_ms);
    jw_obj_open(w, "loglik");
    for (int k = 0; k < SR_FIT_MODELS && isfinite(v->ping_margin_nats); k++) {
        char name[8];
        snprintf(name, sizeof(name), "%d", sr_fit_periods_ms[k]);
        jw_num(w, name, v->ping_loglik[k]);
    }
    jw_obj_close(w);
    jw_obj_open(w, "stretch");
    for (int k = 1; k < SR_FIT_MODELS && isfinite(v->ping_margin_nats); k++) {
        char name[8];
        snprintf(name, sizeof(name), "%d", sr_fit_periods_ms[k]);
        jw_num(w, name, v->ping_stretch[k]);
    }
    jw_obj_close(w);
    jw_num(w, "odd_half_share", v->ping_odd_share);
    jw_num(w, "tti_ms", v->tti_ms);
    if (v->tti_source) jw_str(w, "tti_source", v->tti_source); else jw_null(w, "tti_source");
    jw_num(w, "margin_nats", v->ping_margin_nats);
    if (isfinite(v->ping_margin_nats)) jw_int(w, "best_fit_ms", v->ping_period_ms); else jw_null(w, "best_fit_ms");
    jw_obj_close(w);
    jw_str(w, "reason", v->reason);
    jw_num(w, "tsr_ms", v->tsr_ms);
    if (v->d_log_ms) jw_int(w, "d_log_ms", v->d_log_ms); else jw_null(w, "d_log_ms");
    if (v->d_lin_ms) jw_int(w, "d_lin_ms", v->d_lin_ms); else jw_null(w, "d_lin_ms");
    jw_num(w, "mp_rtt_ms", v->mp_us / 1e3);
    jw_num(w, "ap_rtt_ms", v->ap_us / 1e3);
    jw_int(w, "n_rtt_samples", (long long)v->n_rtt);
    jw_num(w, "rtt_excess_p95_ms", v->excess_p95_ms);
    jw_int(w, "n_uplink_bursts", (long long)v->n_phase);
    jw_num(w, "sender_ts_hz", v->ts_hz);
    jw_obj_open(w, "phase_resultant");
    for (int k = 0; k < 5; k++) {
        char name[8];
        snprintf(name, sizeof(name), "%d", exll_sr_candidates_ms[k]);
        jw_num(w, name, v->phase_r[k]);
    }
    jw_obj_close(w);
    if (v->phase_period_ms) jw_int(w, "phase_period_ms", v->phase_period_ms); else jw_null(w, "phase_period_ms");
    jw_obj_close(w);
}
