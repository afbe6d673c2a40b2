#include "exll.h"

#include <math.h>
#include <string.h>

#include "probe.h"

const int exll_sr_candidates_ms[5] = { 5, 10, 20, 40, 80 };

void exll_default_params(struct exll_params *p)
{
    p->alpha_pkts = 200.0;
    p->gamma = 0.5;
    p->ma_frames = 10;
    p->tol_frac = 0.25;
    p->iw_pkts = 10;
    p->mss_bytes = 1448;
    p->rwnd_min_bytes = 4 * 1448;
    p->rwnd_max_bytes = 32u << 20;
    p->slot_min_ms = 10;
    p->min_obs_samples = 20;
    p->sr_period_hint_ms = 0;
}

static void reset_observation(struct exll *e)
{
    e->state = EXLL_OBS;
    e->mp_us = INFINITY;
    e->ap_sum_us = 0;
    e->ap_n = 0;
    e->f_n = e->f_pos = e->c_n = e->c_pos = 0;
    e->mte_bps = e->ci_bps = 0;
}

void exll_init(struct exll *e, const struct exll_params *p)
{
    memset(e, 0, sizeof(*e));
    e->p = *p;
    if (e->p.ma_frames < 1)
        e->p.ma_frames = 1;
    if (e->p.ma_frames > EXLL_MA_MAX)
        e->p.ma_frames = EXLL_MA_MAX;
    e->cur_frame = -1;
    e->ms_last = -1;
    reset_observation(e);
}

const char *exll_state_name(int state)
{
    switch (state) {
    case EXLL_OBS: return "observation";
    case EXLL_CTRL: return "control";
    case EXLL_HOLD: return "hold";
    }
    return "?";
}

double exll_tsr_ms(double mp_us, double ap_us) { return 2.0 * (ap_us - mp_us) / 1e3; }

int exll_D_log(double tsr_ms)
{
    if (!(tsr_ms > 0))
        return exll_sr_candidates_ms[0];
    int best = exll_sr_candidates_ms[0];
    double best_d = INFINITY;
    for (int i = 0; i < 5; i++) {
        double d = fabs(log(tsr_ms) - log((double)exll_sr_candidates_ms[i]));
        if (d < best_d) {
            best_d = d;
            best = exll_sr_candidates_ms[i];
        }
    }
    return best;
}

int exll_D_lin(double tsr_ms)
{
    int best = exll_sr_candidates_ms[0];
    double best_d = INFINITY;
    for (int i = 0; i < 5; i++) {
        double d = fabs(tsr_ms - exll_sr_candidates_ms[i]);
        if (d < best_d) { /* strict: a tie keeps the lower candidate */
            best_d = d;
            best = exll_sr_candidates_ms[i];
        }
    }
    return best;
}

double exll_eq3(double w, double gamma, double mre_us, double r_us, double alpha, double t_bps, double mte_bps)
{
    double util = mte_bps > 0 ? t_bps / mte_bps : 1.0;
    return (1.0 - gamma) * w + gamma * (mre_us / r_us * w + alpha * (1.0 - util));
}

static uint64_t bytes_between_ms(const struct exll *e, int64_t lo_ms, int64_t hi_ms);

static double ma_push(double *hist, int *n, int *pos, int window, double v)
{
    hist[*pos] = v;
    *pos = (*pos + 1) % window;
    if (*n < window)
        (*n)++;
    double s = 0;
    for (int i = 0; i < *n; i++)
        s += hist[i];
    return s / *n;
}

/* Close the current radio frame: F from its bytes, C from Eq. 1 over subframes with ≥2 packets. */
static void close_frame(struct exll *e)
{
    uint64_t bytes = 0;
    double c_sum = 0;
    int c_cnt = 0, allocated = 0;
    for (int j = 0; j < EXLL_SUBFRAMES; j++) {
        struct exll_sf *s = &e->sf[j];
        if (s->pkts == 0)
            continue;
        allocated++;
        bytes += s->bytes;
        if (s->pkts >= 2) {
            /* [INF, ours] Eq. 1 uses b/Δt. We count the bytes after the first packet (those arrived
             * within Δt) and floor Δt at (n-1)/n of a subframe: one TB's packets cannot take longer
             * than a subframe, and a capture that stamps a TB's packets back to back (the emulated
             * cell, GRO) would otherwise give an unbounded rate. */
            double dt_s = (double)(s->t_last - s->t_first) / 1e9;
            double floor_s = 1e-3 * (double)(s->pkts - 1) / s->pkts;
            if (dt_s < floor_s)
                dt_s = floor_s;
            c_sum += (double)(s->bytes - s->first_bytes) * 8.0 / dt_s;
            c_cnt++;
        }
    }
    memset(e->sf, 0, sizeof(e->sf));
    if (!allocated)
        return; /* a frame without allocated subframes is ignored */
    e->n_frames++;
    e->F_bps = (double)bytes * 8.0 / 0.010;
    e->mte_bps = ma_push(e->f_hist, &e->f_n, &e->f_pos, e->p.ma_frames, e->F_bps);
    if (!c_cnt) {
        /* [INF, ours] no subframe with 2 packets (Δt undefined, spec §1.2 [GAP]): a slow link spaces
         * packets over 1 ms. Count what each allocated subframe carried per 1 ms instead, so C and the
         * exit test still exist there. */
        c_sum = (double)bytes * 8.0 / 0.001 / allocated;
        c_cnt = 1;
    }
    if (c_cnt) {
        e->C_bps = c_sum / c_cnt;
        e->ci_bps = ma_push(e->c_hist, &e->c_n, &e->c_pos, e->p.ma_frames, e->C_bps);
    }
}

static void ms_account(struct exll *e, int64_t ms, uint32_t bytes)
{
    if (e->ms_last < 0)
        e->ms_last = ms - 1;
    if (ms > e->ms_last) {
        int64_t clear = ms - e->ms_last;
        if (clear > EXLL_MS_RING)
            clear = EXLL_MS_RING;
        for (int64_t k = 1; k <= clear; k++)
            e->ms_bytes[(e->ms_last + k) % EXLL_MS_RING] = 0;
        e->ms_last = ms;
    }
    if (ms > e->ms_last - EXLL_MS_RING)
        e->ms_bytes[ms % EXLL_MS_RING] += bytes;
}

void exll_on_data(struct exll *e, uint64_t t_ns, uint32_t bytes)
{
    if (bytes == 0)
        return;
    if (!e->started) {
        e->started = 1;
        e->t0_ns = t_ns; /* [GAP] subframe alignment: ours is the phase of the first packet */
        e->slot_start_ns = t_ns;
    }
    if (t_ns < e->t0_ns)
        t_ns = e->t0_ns;
    int64_t sf_abs = (int64_t)((t_ns - e->t0_ns) / NS_PER_MS);
    int64_t frame = sf_abs / EXLL_SUBFRAMES;
    ms_account(e, sf_abs, bytes);
    e->slot_bytes += bytes;
    if (frame < e->cur_frame)
        return; /* stamped before a frame the timer already closed: counted, not grouped */
    if (frame != e->cur_frame) {
        if (e->cur_frame >= 0)
            close_frame(e);
        e->cur_frame = frame;
    }
    struct exll_sf *s = &e->sf[sf_abs % EXLL_SUBFRAMES];
    if (s->pkts == 0) {
        s->t_first = t_ns;
        s->first_bytes = bytes;
    }
    s->t_last = t_ns;
    s->bytes += bytes;
    s->pkts++;
}

int exll_on_rtt(struct exll *e, uint64_t t_ns, double rtt_us)
{
    if (!(rtt_us > 0))
        return 0;
    e->srtt_us = e->srtt_us > 0 ? 0.875 * e->srtt_us + 0.125 * rtt_us : rtt_us;
    if (e->started && t_ns > e->t0_ns) {
        /* what arrived between packet n and the packet its ACK released: the window the sender had */
        int64_t hi = (int64_t)((t_ns - e->t0_ns) / NS_PER_MS);
        int64_t lo = hi - (int64_t)(rtt_us / 1e3 + 0.5);
        double w = (double)bytes_between_ms(e, lo, hi);
        e->cw_ewma_bytes = e->cw_ewma_bytes > 0 ? 0.875 * e->cw_ewma_bytes + 0.125 * w : w;
    }
    e->slot_rtt_sum_us += rtt_us;
    e->slot_rtt_n++;
    if (e->state != EXLL_OBS)
        return 0;
    if (rtt_us < e->mp_us)
        e->mp_us = rtt_us;
    /* [INF, ours] apRTT only from samples taken while the window is below the pipe (bytes per RTT under
     * C_i x mpRTT): once slow start overfills the queue, queueing delay would pass for SR waiting in
     * 2 (apRTT - mpRTT) and inflate mRE. */
    if (e->ci_bps > 0 && isfinite(e->mp_us) && exll_cwnd_meas_bytes(e, t_ns) >= e->ci_bps / 8 * e->mp_us / 1e6) {
        e->n_pipe_full++;
        return 0;
    }
    e->ap_sum_us += rtt_us;
    e->ap_n++;
    return 1;
}

static uint64_t bytes_between_ms(const struct exll *e, int64_t lo_ms, int64_t hi_ms)
{
    uint64_t sum = 0;
    for (int64_t ms = lo_ms + 1; ms <= hi_ms && ms <= e->ms_last; ms++) {
        if (ms < 0 || ms <= e->ms_last - EXLL_MS_RING)
            continue;
        sum += e->ms_bytes[ms % EXLL_MS_RING];
    }
    return sum;
}

double exll_cwnd_meas_bytes(const struct exll *e, uint64_t now_ns)
{
    if (e->cw_ewma_bytes > 0)
        return e->cw_ewma_bytes;
    if (!e->started || e->srtt_us <= 0 || e->ms_last < 0)
        return 0;
    /* [INF, ours] bytes per RTT, averaged over max(2 RTT, 100 ms): with ACKs bunched at the SR period
     * a single RTT window holds a varying number of bunches. */
    double r_ms = e->srtt_us / 1e3;
    double win_ms = 2 * r_ms > 100 ? 2 * r_ms : 100;
    if (win_ms > EXLL_MS_RING - 1)
        win_ms = EXLL_MS_RING - 1;
    int64_t now_ms = (int64_t)((now_ns - e->t0_ns) / NS_PER_MS);
    uint64_t sum = bytes_between_ms(e, now_ms - (int64_t)win_ms, now_ms);
    double elapsed_ms = (double)(now_ns - e->t0_ns) / 1e6;
    if (elapsed_ms < win_ms)
        win_ms = elapsed_ms > 1 ? elapsed_ms : 1;
    return (double)sum * r_ms / win_ms;
}

uint32_t exll_rwnd_bytes(const struct exll *e)
{
    return (uint32_t)e->rwnd_bytes;
}

static double clamp_rwnd(const struct exll *e, double w)
{
    double lo = e->p.rwnd_min_bytes, hi = e->p.rwnd_max_bytes;
    return w < lo ? lo : (w > hi ? hi : w);
}

static void try_exit_observation(struct exll *e, uint64_t now_ns)
{
    if (e->ap_n < e->p.min_obs_samples || e->ci_bps <= 0)
        return;
    double ap = e->ap_sum_us / e->ap_n;
    /* The exit test needs mRE before control sets it: keep a running candidate (spec §1.8). */
    int d_ms = e->p.sr_period_hint_ms > 0 ? e->p.sr_period_hint_ms : exll_D_log(exll_tsr_ms(e->mp_us, ap));
    double mre_us = e->mp_us + 1e3 * d_ms;
    double cw = exll_cwnd_meas_bytes(e, now_ns);
    if (cw * 8.0 / (mre_us / 1e6) <= e->ci_bps)
        return;
    if (!e->exited) {
        e->exited = 1;
        e->exit_mp_us = e->mp_us;
        e->exit_ap_us = ap;
        e->exit_n = e->ap_n;
        e->exit_mre_us = mre_us;
        e->t_exit_ns = now_ns;
    }
    e->mre_us = mre_us;
    e->state = EXLL_CTRL;
    e->rwnd_bytes = clamp_rwnd(e, cw);
    e->rwnd_changed = 1;
    e->slot_start_ns = now_ns;
    e->slot_bytes = 0;
    e->slot_rtt_sum_us = 0;
    e->slot_rtt_n = 0;
}

static void control_slot(struct exll *e, uint64_t now_ns)
{
    double slot_ms = e->srtt_us / 1e3;
    if (slot_ms < e->p.slot_min_ms)
        slot_ms = e->p.slot_min_ms;
    double elapsed_ms = (double)(now_ns - e->slot_start_ns) / 1e6;
    if (elapsed_ms < slot_ms || e->slot_rtt_n == 0)
        return;
    double r_us = e->slot_rtt_sum_us / e->slot_rtt_n;
    double t_bps = (double)e->slot_bytes * 8.0 / (elapsed_ms / 1e3);
    double cw = exll_cwnd_meas_bytes(e, now_ns);
    double mss = e->p.mss_bytes;
    e->slot_start_ns = now_ns;
    e->slot_bytes = 0;
    e->slot_rtt_sum_us = 0;
    e->slot_rtt_n = 0;
    int lost = e->slot_retrans > 0;
    e->slot_retrans = 0;
    if (e->state == EXLL_HOLD) {
        /* [INF, ours] the thesis resumes when the measured CWND exceeds RWND_rho. Measured at the
         * receiver it reads low against the advertised window when ACKs wait for SR occasions (the
         * bytes seen within one per-packet RTT are ~0.7 RWND at P = 40 ms), so we compare like with
         * like: resume once it is back at what it was when the loss came. */
        if (!lost && cw >= 0.9 * e->cw_at_loss_bytes) {
            e->state = EXLL_CTRL;
            e->n_resumes++;
        }
        return;
    }
    if (cw <= 1.5 * e->p.iw_pkts * mss) {
        /* measured CWND back at Cubic's initial window: a timeout, start over */
        e->n_timeouts++;
        reset_observation(e);
        e->rwnd_bytes = e->p.rwnd_max_bytes;
        e->rwnd_changed = 1;
        return;
    }
    if (lost) {
        /* [INF, ours] a loss, detected as the retransmissions the receiver sees (the thesis infers it
         * from measured CWND < RWND, which the SR bias above would fire on every slot): freeze RWND,
         * Cubic is in charge until it has recovered */
        e->n_losses++;
        e->rwnd_rho_bytes = e->rwnd_bytes;
        e->cw_at_loss_bytes = cw;
        e->state = EXLL_HOLD;
        return;
    }
    double w = exll_eq3(e->rwnd_bytes, e->p.gamma, e->mre_us, r_us, e->p.alpha_pkts * mss, t_bps, e->mte_bps);
    w = clamp_rwnd(e, w);
    if (fabs(w - e->rwnd_bytes) >= 1) {
        e->rwnd_bytes = w;
        e->rwnd_changed = 1;
    }
    e->n_updates++;
}

void exll_on_retransmission(struct exll *e)
{
    e->slot_retrans++;
}

int exll_tick(struct exll *e, uint64_t now_ns)
{
    if (!e->started)
        return 0;
    /* close a frame only 2 ms after its end: live captures hand packets over a little late */
    uint64_t settled = now_ns > e->t0_ns + 2 * NS_PER_MS ? now_ns - 2 * NS_PER_MS : e->t0_ns;
    int64_t frame = (int64_t)((settled - e->t0_ns) / NS_PER_MS) / EXLL_SUBFRAMES;
    if (e->cur_frame >= 0 && frame > e->cur_frame) {
        close_frame(e);
        e->cur_frame = frame;
    }
    if (e->state == EXLL_OBS)
        try_exit_observation(e, now_ns);
    else
        control_slot(e, now_ns);
    int changed = e->rwnd_changed;
    e->rwnd_changed = 0;
    return changed;
}
