#include "pipeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void dvec_push(struct dvec *d, double x)
{
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 1024;
        double *v = realloc(d->v, cap * sizeof(double));
        if (!v)
            return; /* out of memory: the sample is lost, the summary's n shows it */
        d->v = v;
        d->cap = cap;
    }
    d->v[d->n++] = x;
}

const char *control_name(int control)
{
    switch (control) {
    case CONTROL_NONE: return "none";
    case CONTROL_EXLL: return "exll";
    case CONTROL_DFCSD: return "dfcsd";
    }
    return "?";
}

int control_parse(const char *s)
{
    if (!strcmp(s, "none")) return CONTROL_NONE;
    if (!strcmp(s, "exll")) return CONTROL_EXLL;
    if (!strcmp(s, "dfcsd")) return CONTROL_DFCSD;
    return -1;
}

void pipe_init(struct pipeline *pl, int control)
{
    memset(pl, 0, sizeof(*pl));
    pl->control = control;
    exll_default_params(&pl->exll_p);
    dfcsd_default_params(&pl->dfcsd_p);
    sr_default_params(&pl->sr_p);
}

void pipe_free(struct pipeline *pl)
{
    for (int i = 0; i < pl->n_flows; i++) {
        struct pipe_flow *f = pl->flows[i];
        free(f->rtt_all.v);
        free(f->rtt_obs.v);
        free(f->echo_ticks.v);
        free(f->echo_arrival_ms.v);
        free(f);
    }
    pl->n_flows = 0;
    free(pl->burst_gaps.v);
    pl->burst_gaps = (struct dvec){ 0 };
}

int pipe_add_flow(struct pipeline *pl, const char *label, const struct tcp_endpoint *local,
                  const struct tcp_endpoint *remote, uint64_t now_ns)
{
    if (pl->n_flows >= PIPE_MAX_FLOWS)
        return -1;
    struct pipe_flow *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    snprintf(f->label, sizeof(f->label), "%s", label);
    if (pl->ping_rtt_us && pl->n_ping >= pl->sr_p.min_ping_samples) {
        /* idle-uplink probes ran before the flows: their SR period feeds ExLL's mRE */
        struct sr_inputs in = { .ping_rtt_us = pl->ping_rtt_us, .n_ping = pl->n_ping };
        struct sr_verdict v;
        sr_estimate(&pl->sr_p, &in, &v);
        pl->exll_p.sr_period_hint_ms = v.ping_period_ms;
    }
    if (local && remote) {
        f->have_endpoints = 1;
        f->local = *local;
        f->remote = *remote;
    }
    rttm_init(&f->rtt);
    exll_init(&f->exll, &pl->exll_p);
    f->ms_cur = -1;
    f->last_dlog = 0;
    int i = pl->n_flows++;
    pl->flows[i] = f;
    dfcsd_flow_init(&pl->dflows[i], now_ns);
    if (pl->t_origin_ns == 0 || (now_ns && now_ns < pl->t_origin_ns))
        pl->t_origin_ns = now_ns;
    return i;
}

int pipe_match(const struct pipeline *pl, const struct tcp_segment *seg, int *dir)
{
    for (int i = 0; i < pl->n_flows; i++) {
        const struct pipe_flow *f = pl->flows[i];
        if (!f->have_endpoints)
            continue;
        if (endpoint_equal(&seg->src, &f->remote) && endpoint_equal(&seg->dst, &f->local)) {
            *dir = DIR_DATA_IN;
            return i;
        }
        if (endpoint_equal(&seg->src, &f->local) && endpoint_equal(&seg->dst, &f->remote)) {
            *dir = DIR_ACK_OUT;
            return i;
        }
    }
    return -1;
}

static void ms_log_flush(struct pipeline *pl, int idx)
{
    struct pipe_flow *f = pl->flows[idx];
    if (!pl->ms_log || f->ms_cur < 0)
        return;
    fprintf(pl->ms_log, "%lld,%d,%llu,%llu,%llu,", (long long)f->ms_cur, idx, (unsigned long long)f->ms_bytes,
            (unsigned long long)f->ms_pkts, (unsigned long long)f->ms_acks);
    if (f->ms_rtt_n)
        fprintf(pl->ms_log, "%.1f", f->ms_rtt_sum / f->ms_rtt_n);
    fprintf(pl->ms_log, ",%u\n", f->rwnd_applied);
    f->ms_bytes = f->ms_pkts = f->ms_acks = f->ms_rtt_n = 0;
    f->ms_rtt_sum = 0;
}

static void ms_log_account(struct pipeline *pl, int idx, uint64_t t_ns)
{
    struct pipe_flow *f = pl->flows[idx];
    if (!pl->ms_log)
        return;
    int64_t ms = (int64_t)(t_ns / NS_PER_MS);
    if (ms != f->ms_cur) {
        ms_log_flush(pl, idx);
        f->ms_cur = ms;
    }
}

static void on_rtt_sample(struct pipeline *pl, int idx, const struct rtt_sample *s)
{
    struct pipe_flow *f = pl->flows[idx];
    dvec_push(&f->rtt_all, s->rtt_us);
    int obs_sample = exll_on_rtt(&f->exll, s->t_ns, s->rtt_us);
    dfcsd_on_rtt(&pl->dflows[idx], s->rtt_us);
    /* the SR samples are ExLL's apRTT samples (see exll_on_rtt), up to the first exit from observation */
    if (!f->obs_frozen && obs_sample) {
        dvec_push(&f->rtt_obs, s->rtt_us);
        if (f->exll.ap_n > 0) {
            int d = exll_D_log(exll_tsr_ms(f->exll.mp_us, f->exll.ap_sum_us / f->exll.ap_n));
            if (d != f->last_dlog) {
                f->last_dlog = d;
                f->t_dlog_change_ns = s->t_ns;
            }
        }
    }
    f->ms_rtt_sum += s->rtt_us;
    f->ms_rtt_n++;
}

void pipe_event(struct pipeline *pl, int idx, const struct pkt_event *ev)
{
    if (idx < 0 || idx >= pl->n_flows)
        return;
    struct pipe_flow *f = pl->flows[idx];
    /* Our SYN (captures that start before connect(); live flows start after it) acknowledges nothing:
     * its ack field, 0, would become the RTT matcher's last ACK, and when the sender's ISN is >= 2^31
     * every real ACK would then look older than it and time nothing. Its TS option is only an offer.
     * Not logged either: event logs carry no flags to tell it apart. */
    if (ev->dir == DIR_ACK_OUT && ev->tcp_flags && !(ev->tcp_flags & PKT_ACK))
        return;
    if (pl->pkt_log)
        fprintf(pl->pkt_log, "%llu,%d,%d,%u,%u,%u,%u,%d,%u,%u\n", (unsigned long long)ev->t_ns, idx, ev->dir,
                ev->seq, ev->ack, ev->payload_bytes, ev->win_raw, ev->has_ts, ev->tsval, ev->tsecr);
    ms_log_account(pl, idx, ev->t_ns);
    if (ev->dir == DIR_DATA_IN) {
        if (ev->payload_bytes == 0 && !ev->has_ts)
            return;
        if (ev->payload_bytes > 0) {
            /* a UE receives a TTI's transport block at once: bursts start one TTI (or a few) apart */
            if (pl->last_data_ns && ev->t_ns > pl->last_data_ns + 300000 && ev->t_ns < pl->last_data_ns + 6000000)
                dvec_push(&pl->burst_gaps, (double)(ev->t_ns - pl->last_data_ns) / 1e6);
            pl->last_data_ns = ev->t_ns;
            if (f->t_first_ns == 0)
                f->t_first_ns = ev->t_ns;
            f->t_last_ns = ev->t_ns;
            uint32_t seq_end = ev->seq + ev->payload_bytes;
            if (!f->rtt.have_data) {
                f->first_seq = ev->seq;
                f->max_tsval = ev->tsval;
            }
            if (f->rtt.have_data && !seq_after(seq_end, f->rtt.high_seq_end)) {
                /* behind the highest byte: a retransmission if sent after everything seen so far
                 * (newer TSval), else an original that arrived out of order (e.g. after a HARQ retx) */
                if (!ev->has_ts || seq_after(ev->tsval, f->max_tsval)) {
                    f->retrans_pkts++;
                    exll_on_retransmission(&f->exll);
                } else {
                    f->reordered_pkts++;
                }
            } else {
                /* bytes = the sequence span received: duplicates and reordering do not change it */
                f->bytes = (uint64_t)(uint32_t)(seq_end - f->first_seq);
            }
            if (ev->has_ts && seq_after(ev->tsval, f->max_tsval))
                f->max_tsval = ev->tsval;
            f->pkts_in++;
            f->ms_bytes += ev->payload_bytes;
            f->ms_pkts++;
            if (ev->payload_bytes > f->mss_bytes && ev->payload_bytes <= 9000) {
                f->mss_bytes = ev->payload_bytes;
                f->exll.p.mss_bytes = ev->payload_bytes;
                pl->dfcsd_p.mss_bytes = ev->payload_bytes;
            }
            exll_on_data(&f->exll, ev->t_ns, ev->payload_bytes);
            pl->dflows[idx].size_bytes = f->bytes;
        }
        if (ev->has_ts && ev->payload_bytes > 0 && (!f->have_echo || ev->tsecr != f->last_echo)) {
            /* The first segment echoing a new TSecr was sent right after an uplink burst reached the
             * sender: its TSval (the sender's clock) times that arrival. Works for an ACK-clocked sender
             * (each ACK echoed) and for one smoothed by pacing/TSQ (only a burst's last ACK echoed). */
            if (!f->have_echo)
                f->first_echo_tsval = ev->tsval;
            f->have_echo = 1;
            f->last_echo = ev->tsecr;
            dvec_push(&f->echo_ticks, (double)(uint32_t)(ev->tsval - f->first_echo_tsval));
            dvec_push(&f->echo_arrival_ms, (double)(ev->t_ns - pl->t_origin_ns) / 1e6);
        }
        struct rtt_sample s[RTTM_PKTS_PER_ACK * 8];
        int n = rttm_on_data(&f->rtt, ev->t_ns, ev->seq, ev->payload_bytes, ev->has_ts, ev->tsecr, s,
                             (int)(sizeof(s) / sizeof(s[0])));
        for (int i = 0; i < n; i++)
            on_rtt_sample(pl, idx, &s[i]);
    } else {
        if (!f->ts_decided) {
            f->ts_decided = 1;
            f->uses_ts = ev->has_ts;
        }
        f->acks_out++;
        f->ms_acks++;
        uint32_t win_est = (uint32_t)exll_cwnd_meas_bytes(&f->exll, ev->t_ns);
        if (win_est == 0)
            win_est = 10 * (f->mss_bytes ? f->mss_bytes : 1448); /* before any RTT: Linux IW10 */
        rttm_on_ack(&f->rtt, ev->t_ns, ev->ack, ev->has_ts, ev->tsval, win_est);
    }
}

/* [INF, ours] Linux never retracts a right edge it has advertised, so a window that grew far beyond
 * what the flow uses (a large locked SO_RCVBUF lets it) makes any later clamp bite seconds late. While
 * a controller runs, the clamp therefore also follows the flow: at most 2x the bytes received per RTT
 * plus 32 KiB, what slow start needs to double each RTT. */
static uint32_t headroom_cap(const struct pipe_flow *f, uint64_t now_ns)
{
    double cap = 2 * exll_cwnd_meas_bytes(&f->exll, now_ns) + 32768;
    return cap > 4294967295.0 ? UINT32_MAX : (uint32_t)cap;
}

void pipe_tick(struct pipeline *pl, uint64_t now_ns)
{
    for (int i = 0; i < pl->n_flows; i++) {
        struct pipe_flow *f = pl->flows[i];
        if (f->done)
            continue;
        exll_tick(&f->exll, now_ns);
        if (f->exll.exited && !f->obs_frozen)
            f->obs_frozen = 1; /* the SR estimate is what observation saw (thesis Table 2) */
    }
    if (pl->control == CONTROL_DFCSD) {
        for (int i = 0; i < pl->n_flows; i++)
            pl->dflows[i].cw_bytes = exll_cwnd_meas_bytes(&pl->flows[i]->exll, now_ns);
        dfcsd_tick(&pl->dfcsd_p, pl->dflows, pl->n_flows, now_ns);
    }
    if (pl->control == CONTROL_NONE)
        return;
    for (int i = 0; i < pl->n_flows; i++) {
        struct pipe_flow *f = pl->flows[i];
        if (f->done)
            continue;
        double want;
        if (pl->control == CONTROL_EXLL)
            want = f->exll.state == EXLL_OBS ? (double)pl->exll_p.rwnd_max_bytes : f->exll.rwnd_bytes;
        else
            want = pl->dflows[i].rwnd_bytes > 0 ? pl->dflows[i].rwnd_bytes : (double)pl->dfcsd_p.rwnd_max_bytes;
        uint32_t cap = headroom_cap(f, now_ns);
        uint32_t w = want < cap ? (uint32_t)want : cap;
        if (w < 4 * (f->mss_bytes ? f->mss_bytes : 1448))
            w = 4 * (f->mss_bytes ? f->mss_bytes : 1448);
        /* re-apply only on a real change: every setsockopt is a syscall in the receive loop */
        double diff = (double)w - (double)f->rwnd_wanted;
        if (f->rwnd_wanted == 0 || diff > 0.05 * f->rwnd_wanted || -diff > 0.05 * f->rwnd_wanted) {
            f->rwnd_wanted = w;
            f->rwnd_dirty = 1;
        }
    }
}

void pipe_flow_done(struct pipeline *pl, int idx, uint64_t now_ns)
{
    if (idx < 0 || idx >= pl->n_flows)
        return;
    pl->flows[idx]->done = 1;
    pl->flows[idx]->t_done_ns = now_ns;
    pl->dflows[idx].active = 0; /* a finished flow leaves the size_min/size_max set */
}

void pipe_flush_logs(struct pipeline *pl)
{
    for (int i = 0; i < pl->n_flows; i++)
        ms_log_flush(pl, i);
    if (pl->pkt_log)
        fflush(pl->pkt_log);
    if (pl->ms_log)
        fflush(pl->ms_log);
}

static int cmp_double(const void *a, const void *b);

/* The TTI on the wall clock: the 25th percentile of the burst spacings (mostly one TTI under load,
 * sometimes several); 0 with fewer than 200 bursts. */
static double tti_ruler_ms(const struct dvec *gaps)
{
    if (gaps->n < 200)
        return 0;
    double *v = malloc(gaps->n * sizeof(double));
    if (!v)
        return 0;
    memcpy(v, gaps->v, gaps->n * sizeof(double));
    qsort(v, gaps->n, sizeof(double), cmp_double);
    double q = v[gaps->n / 4];
    free(v);
    return q;
}

void pipe_sr_verdict(const struct pipeline *pl, int flow, struct sr_verdict *v)
{
    struct dvec rtt = { 0 };
    struct dvec ticks = { 0 }, arrival = { 0 };
    for (int i = 0; i < pl->n_flows; i++) {
        if (flow >= 0 && i != flow)
            continue;
        const struct pipe_flow *f = pl->flows[i];
        for (size_t k = 0; k < f->rtt_obs.n; k++)
            dvec_push(&rtt, f->rtt_obs.v[k]);
        /* the phase view takes one flow: the asked-for one, or the first when pooling */
        if (flow >= 0 || i == 0)
            for (size_t k = 0; k < f->echo_ticks.n; k++) {
                dvec_push(&ticks, f->echo_ticks.v[k]);
                dvec_push(&arrival, f->echo_arrival_ms.v[k]);
            }
    }
    struct sr_inputs in = { .rtt_us = rtt.v, .n_rtt = rtt.n, .echo_ticks = ticks.v, .echo_arrival_ms = arrival.v,
                            .n_echo = ticks.n < arrival.n ? ticks.n : arrival.n, .ping_rtt_us = pl->ping_rtt_us,
                            .n_ping = pl->n_ping, .tti_ms = tti_ruler_ms(&pl->burst_gaps) };
    /* the lab's own measure of its stack's speed, when it gives one, comes first: a slow download's bursts
     * span several TTIs (at 6 PRB on srsran-zmq they read 4.3 ms for a stack at 0.7 of real time, and the fit
     * then named SR 10 a confident 5), and without any ruler a slow stack looks like a real-time one with a
     * longer period (SR 10 read as a confident 20, measured) */
    int lab_ruler = pl->stack_tti_ms > 0;
    if (lab_ruler)
        in.tti_ms = pl->stack_tti_ms;
    sr_estimate(&pl->sr_p, &in, v);
    v->tti_source = lab_ruler ? "lab" : in.tti_ms > 0 ? "download" : NULL;
    free(rtt.v);
    free(ticks.v);
    free(arrival.v);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void rtt_stats_json(struct jsonw *w, const struct dvec *d, const char *method)
{
    jw_obj_open(w, "rtt");
    jw_str(w, "method", method);
    jw_int(w, "n", (long long)d->n);
    if (d->n == 0) {
        jw_null(w, "min_ms");
        jw_null(w, "mean_ms");
        jw_null(w, "p50_ms");
        jw_null(w, "p95_ms");
        jw_obj_close(w);
        return;
    }
    double *s = malloc(d->n * sizeof(double));
    double sum = 0;
    for (size_t i = 0; i < d->n; i++)
        sum += d->v[i];
    if (s) {
        memcpy(s, d->v, d->n * sizeof(double));
        qsort(s, d->n, sizeof(double), cmp_double);
        jw_num(w, "min_ms", s[0] / 1e3);
        jw_num(w, "mean_ms", sum / (double)d->n / 1e3);
        jw_num(w, "p50_ms", s[(d->n - 1) / 2] / 1e3);
        jw_num(w, "p95_ms", s[(size_t)(0.95 * (double)(d->n - 1))] / 1e3);
        free(s);
    }
    jw_obj_close(w);
}

void pipe_write_summary(const struct pipeline *pl, struct jsonw *w)
{
    uint64_t total_bytes = 0, t0 = 0, t1 = 0;
    jw_arr_open(w, "flows");
    for (int i = 0; i < pl->n_flows; i++) {
        const struct pipe_flow *f = pl->flows[i];
        jw_obj_open(w, NULL);
        jw_str(w, "label", f->label);
        if (f->have_endpoints) {
            char a[80], b[80];
            endpoint_format(&f->local, a, sizeof(a));
            endpoint_format(&f->remote, b, sizeof(b));
            jw_str(w, "local", a);
            jw_str(w, "remote", b);
        }
        jw_int(w, "bytes", (long long)f->bytes);
        jw_int(w, "packets", (long long)f->pkts_in);
        jw_int(w, "acks_sent", (long long)f->acks_out);
        jw_int(w, "retransmitted_packets", (long long)f->retrans_pkts);
        jw_int(w, "reordered_packets", (long long)f->reordered_pkts);
        double dur_s = f->t_last_ns > f->t_first_ns ? (double)(f->t_last_ns - f->t_first_ns) / 1e9 : 0;
        jw_num(w, "first_ns", (double)f->t_first_ns);
        jw_num(w, "duration_s", dur_s);
        jw_num(w, "throughput_bps", dur_s > 0 ? (double)f->bytes * 8 / dur_s : NAN);
        jw_int(w, "mss_bytes", f->mss_bytes);
        jw_bool(w, "timestamps", f->uses_ts);
        rtt_stats_json(w, &f->rtt_all, !f->ts_decided ? "none" : (f->uses_ts ? "tsecr" : "drs"));
        jw_int(w, "rtt_unmatched_dropped", (long long)f->rtt.dropped);
        jw_int(w, "rtt_samples_pipe_full", (long long)f->exll.n_pipe_full);
        const struct exll *e = &f->exll;
        jw_obj_open(w, "exll");
        jw_str(w, "state", exll_state_name(e->state));
        jw_bool(w, "left_observation", e->exited);
        jw_num(w, "t_exit_ms", e->exited ? (double)(e->t_exit_ns - f->t_first_ns) / 1e6 : NAN);
        jw_num(w, "mp_rtt_ms", e->exited ? e->exit_mp_us / 1e3 : e->mp_us / 1e3);
        jw_num(w, "ap_rtt_ms", e->exited ? e->exit_ap_us / 1e3 : (e->ap_n ? e->ap_sum_us / e->ap_n / 1e3 : NAN));
        jw_num(w, "mre_ms", e->exited ? e->exit_mre_us / 1e3 : NAN);
        jw_str(w, "mre_sr_source", e->p.sr_period_hint_ms > 0 ? "uplink-probes" : "observation T_SR");
        jw_num(w, "cwnd_meas_bytes", e->cw_ewma_bytes);
        jw_num(w, "F_bps", e->F_bps);
        jw_num(w, "C_bps", e->C_bps);
        jw_num(w, "mte_bps", e->mte_bps);
        jw_num(w, "ci_bps", e->ci_bps);
        jw_int(w, "frames", (long long)e->n_frames);
        jw_int(w, "updates", (long long)e->n_updates);
        jw_int(w, "timeouts", (long long)e->n_timeouts);
        jw_int(w, "losses", (long long)e->n_losses);
        jw_int(w, "resumes", (long long)e->n_resumes);
        jw_num(w, "rwnd_bytes", e->rwnd_bytes);
        jw_obj_close(w);
        const struct dfcsd_flow *d = &pl->dflows[i];
        jw_obj_open(w, "dfcsd");
        jw_num(w, "D_ms", d->D_us / 1e3);
        jw_num(w, "d_ms", d->d_us / 1e3);
        jw_num(w, "alpha_factor", d->alpha_prime);
        jw_num(w, "target_bytes", d->target_bytes);
        jw_num(w, "rwnd_bytes", d->rwnd_bytes);
        jw_int(w, "updates", (long long)d->n_updates);
        jw_obj_close(w);
        jw_int(w, "rwnd_applied_bytes", f->rwnd_applied);
        struct sr_verdict v;
        pipe_sr_verdict(pl, i, &v);
        sr_verdict_json(w, "sr_estimate", &v);
        jw_obj_close(w);
        total_bytes += f->bytes;
        if (f->t_first_ns && (t0 == 0 || f->t_first_ns < t0))
            t0 = f->t_first_ns;
        if (f->t_last_ns > t1)
            t1 = f->t_last_ns;
    }
    jw_arr_close(w);
    jw_int(w, "total_bytes", (long long)total_bytes);
    jw_num(w, "throughput_bps", t1 > t0 ? (double)total_bytes * 8 / ((double)(t1 - t0) / 1e9) : NAN);
    struct dvec all = { 0 };
    for (int i = 0; i < pl->n_flows; i++)
        for (size_t k = 0; k < pl->flows[i]->rtt_all.n; k++)
            dvec_push(&all, pl->flows[i]->rtt_all.v[k]);
    rtt_stats_json(w, &all, "pooled");
    free(all.v);
    struct sr_verdict v;
    pipe_sr_verdict(pl, -1, &v);
    sr_verdict_json(w, "sr_estimate", &v);
    double settled_ms = NAN;
    if (pl->n_flows > 0 && pl->flows[0]->t_first_ns && pl->flows[0]->t_dlog_change_ns)
        settled_ms = (double)(pl->flows[0]->t_dlog_change_ns - pl->flows[0]->t_first_ns) / 1e6;
    jw_num(w, "sr_estimate_settled_ms", settled_ms);
}
