/* `cellab-probe selftest`: the estimators on synthetic timing, one line per check
 * ("ok NAME detail" / "FAIL NAME detail"); exit 1 if any fails. Run from pytest on every build
 * (x86_64 natively, aarch64 under qemu). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "dfcsd.h"
#include "exll.h"
#include "flowproto.h"
#include "rttmatch.h"
#include "srest.h"

struct st { int failed, run; };

static void check(struct st *s, int ok, const char *name, const char *fmt, double a, double b)
{
    s->run++;
    if (!ok)
        s->failed++;
    printf("%s %s ", ok ? "ok" : "FAIL", name);
    printf(fmt, a, b);
    putchar('\n');
}

/* ExLL thesis Table 2: (mpRTT, apRTT) per row, and the SR period of the setting. */
static const double table2[15][3] = {
    { 37.65, 42.55, 10 }, { 38.61, 42.58, 10 }, { 38.59, 43.04, 10 }, { 36.85, 41.90, 10 }, { 39.16, 42.89, 10 },
    { 24.98, 34.18, 20 }, { 23.78, 35.29, 20 }, { 25.17, 37.96, 20 }, { 24.85, 33.16, 20 }, { 24.52, 36.73, 20 },
    { 23.74, 40.69, 40 }, { 22.82, 40.47, 40 }, { 24.01, 41.15, 40 }, { 22.99, 41.60, 40 }, { 23.67, 41.25, 40 },
};

static void test_D(struct st *s)
{
    int correct = 0;
    for (int i = 0; i < 15; i++) {
        double tsr = exll_tsr_ms(table2[i][0] * 1e3, table2[i][1] * 1e3);
        correct += exll_D_log(tsr) == (int)table2[i][2];
    }
    check(s, correct == 15, "table2_dlog_all_rows", "correct=%g of %g", correct, 15);
    double row5 = exll_tsr_ms(39.16e3, 42.89e3);
    check(s, fabs(row5 - 7.46) < 0.01, "table2_row5_tsr", "tsr=%g expected=%g", row5, 7.46);
    check(s, exll_D_lin(row5) == 5 && exll_D_log(row5) == 10, "table2_row5_lin_fails_log_holds", "lin=%g log=%g",
          exll_D_lin(row5), exll_D_log(row5));
    static const double cases[][2] = { { 0, 5 }, { -3, 5 }, { 3.6, 5 }, { 7.0, 5 }, { 7.1, 10 }, { 14.0, 10 },
                                       { 14.2, 20 }, { 28.2, 20 }, { 28.4, 40 }, { 56.5, 40 }, { 56.7, 80 },
                                       { 1000, 80 } };
    int ok = 1;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ok &= exll_D_log(cases[i][0]) == (int)cases[i][1];
    check(s, ok, "dlog_geometric_boundaries", "cases=%g%.0s", (double)(sizeof(cases) / sizeof(cases[0])), 0);
}

static void test_eq3(struct st *s)
{
    double w = exll_eq3(100, 0.5, 50e3, 50e3, 200, 10e6, 10e6);
    check(s, fabs(w - 100) < 1e-9, "eq3_fixed_point", "w=%g expected=%g", w, 100);
    w = exll_eq3(100, 0.5, 50e3, 40e3, 200, 10e6, 10e6);
    check(s, w > 100, "eq3_grows_when_rtt_below_mre", "w=%g from=%g", w, 100);
    w = exll_eq3(100, 0.5, 50e3, 100e3, 200, 10e6, 10e6);
    check(s, fabs(w - 75) < 1e-9, "eq3_shrinks_when_queueing", "w=%g expected=%g", w, 75);
    w = exll_eq3(100, 0.5, 50e3, 50e3, 200, 0, 10e6);
    check(s, fabs(w - 200) < 1e-9, "eq3_alpha_term_when_idle", "w=%g expected=%g", w, 200);
    /* closed loop on a link of C packets/ms with mRE 50 ms: converges to C·mRE, no standing queue */
    double C = 8.0, mre_ms = 50;
    w = 10;
    for (int i = 0; i < 400; i++) {
        double r_ms = w / C > mre_ms ? w / C : mre_ms;
        double t = w / r_ms < C ? w / r_ms : C;
        w = exll_eq3(w, 0.5, mre_ms * 1e3, r_ms * 1e3, 200, t, C);
    }
    check(s, fabs(w - C * mre_ms) / (C * mre_ms) < 0.01, "eq3_closed_loop_bdp", "w=%g bdp=%g", w, C * mre_ms);
}

static void feed_frames(struct exll *e, uint64_t t0, int frames, int sf_used, int pkts, double gap_us)
{
    for (int f = 0; f < frames; f++)
        for (int j = 0; j < sf_used; j++)
            for (int k = 0; k < pkts; k++)
                exll_on_data(e, t0 + (uint64_t)f * 10000000ULL + (uint64_t)j * 1000000ULL + (uint64_t)(k * gap_us * 1e3 + 50e3), 1500);
}

static void test_frames(struct st *s)
{
    struct exll_params p;
    exll_default_params(&p);
    struct exll e;
    exll_init(&e, &p);
    uint64_t t0 = 1000000000ULL;
    feed_frames(&e, t0, 20, 10, 8, 125);
    exll_tick(&e, t0 + 20 * 10000000ULL + 5000000ULL);
    check(s, fabs(e.F_bps - 96e6) / 96e6 < 0.01, "frame_F_full", "F=%g expected=%g", e.F_bps, 96e6);
    check(s, fabs(e.C_bps - 96e6) / 96e6 < 0.01, "frame_C_full", "C=%g expected=%g", e.C_bps, 96e6);
    check(s, fabs(e.mte_bps - 96e6) / 96e6 < 0.01, "frame_MTE", "MTE=%g expected=%g", e.mte_bps, 96e6);
    exll_init(&e, &p);
    feed_frames(&e, t0, 20, 5, 8, 125); /* half the subframes: F halves, C does not (C >> F) */
    exll_tick(&e, t0 + 20 * 10000000ULL + 5000000ULL);
    check(s, fabs(e.F_bps - 48e6) / 48e6 < 0.01, "frame_F_half_allocated", "F=%g expected=%g", e.F_bps, 48e6);
    check(s, fabs(e.C_bps - 96e6) / 96e6 < 0.01, "frame_C_half_allocated", "C=%g expected=%g", e.C_bps, 96e6);
    exll_init(&e, &p);
    feed_frames(&e, t0, 20, 10, 8, 0); /* a TB's packets stamped together: Δt floor keeps C finite */
    exll_tick(&e, t0 + 20 * 10000000ULL + 5000000ULL);
    check(s, fabs(e.C_bps - 96e6) / 96e6 < 0.01, "frame_C_same_instant", "C=%g expected=%g", e.C_bps, 96e6);
}

static void test_dfcsd(struct st *s)
{
    check(s, dfcsd_alpha_factor(5, 5, 5) == 1.0, "eq12_equal_sizes_guard", "a=%g expected=%g",
          dfcsd_alpha_factor(5, 5, 5), 1);
    check(s, fabs(dfcsd_alpha_factor(100, 100, 1000) - 1) < 1e-12, "eq12_smallest_full_alpha", "a=%g expected=%g",
          dfcsd_alpha_factor(100, 100, 1000), 1);
    check(s, fabs(dfcsd_alpha_factor(1000, 100, 1000) - exp(-1)) < 1e-12, "eq12_largest_alpha_over_e",
          "a=%g expected=%g", dfcsd_alpha_factor(1000, 100, 1000), exp(-1));
    check(s, fabs(dfcsd_eq13_pkts(4, 60e3, 50e3, 1e3) - 24) < 1e-9, "eq13_value", "w=%g expected=%g",
          dfcsd_eq13_pkts(4, 60e3, 50e3, 1e3), 24);
    check(s, fabs(dfcsd_eq13_pkts(4, 50e3, 50e3, 100) - 2000) < 1e-9, "eq13_D_equals_d_guard", "w=%g expected=%g",
          dfcsd_eq13_pkts(4, 50e3, 50e3, 100), 2000);
    check(s, isinf(dfcsd_eq13_pkts(4, 50e3, INFINITY, 1e3)), "eq13_unknown_d_no_clamp", "w=%g%.0s",
          dfcsd_eq13_pkts(4, 50e3, INFINITY, 1e3), 0);
    /* closed loop: one flow on C pkt/ms, base RTT 50 ms; the damped update settles with a standing
     * queue near β and never below the BDP */
    struct dfcsd_params p;
    dfcsd_default_params(&p);
    p.mss_bytes = 1000;
    struct dfcsd_flow f;
    uint64_t t = 0;
    dfcsd_flow_init(&f, t);
    double C = 8, d = 50, cwnd = 10, rwnd = INFINITY, qmax = 0, qlast = 0;
    for (int i = 0; i < 3000; i++) {
        t += 60ULL * 1000000ULL;
        double w_pkts = cwnd < rwnd ? cwnd : rwnd; /* the sender: slow start, capped by rwnd */
        double q_pkts = w_pkts - C * d > 0 ? w_pkts - C * d : 0;
        double D = d + q_pkts / C;
        for (int k = 0; k < 8; k++)
            dfcsd_on_rtt(&f, D * 1e3);
        f.size_bytes += 1000;
        f.cw_bytes = w_pkts * 1000;
        if (dfcsd_tick(&p, &f, 1, t))
            rwnd = f.rwnd_bytes / 1000;
        cwnd = cwnd * 2 < 5000 ? cwnd * 2 : 5000;
        qlast = q_pkts;
        if (i > 2000 && q_pkts > qmax)
            qmax = q_pkts;
    }
    check(s, qlast > 0.5 * p.beta_pkts && qlast < 2 * p.beta_pkts, "dfcsd_closed_loop_queue_near_beta",
          "queue=%g beta=%g", qlast, p.beta_pkts);
    check(s, qmax < 3 * p.beta_pkts, "dfcsd_closed_loop_no_oscillation", "max_queue=%g beta=%g", qmax, p.beta_pkts);
    /* two flows: the younger (smaller) one gets α, the older α/e */
    struct dfcsd_flow two[2];
    dfcsd_flow_init(&two[0], 0);
    dfcsd_flow_init(&two[1], 0);
    two[0].size_bytes = 10000000;
    two[1].size_bytes = 100000;
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 8; j++)
            dfcsd_on_rtt(&two[k], 60e3);
    dfcsd_tick(&p, two, 2, 100ULL * 1000000ULL);
    check(s, two[1].target_bytes > 2.5 * two[0].target_bytes, "dfcsd_short_flow_favoured", "short=%g long=%g",
          two[1].target_bytes, two[0].target_bytes);
}

static void test_rttmatch(struct st *s)
{
    static struct rttm m; /* large rings: not on the stack */
    rttm_init(&m);
    struct rtt_sample out[64];
    uint64_t ms = 1000000ULL;
    rttm_on_data(&m, 0, 1000, 1000, 1, 7, out, 64);
    rttm_on_data(&m, 1 * ms, 2000, 1000, 1, 7, out, 64);
    rttm_on_ack(&m, 1 * ms + 100000, 3000, 1, 500, 0);
    int n = rttm_on_data(&m, 30 * ms, 3000, 1000, 1, 499, out, 64); /* echoes an older ACK: not released by it */
    check(s, n == 0, "rtt_older_tsecr_not_matched", "n=%g expected=%g", n, 0);
    n = rttm_on_data(&m, 41 * ms, 4000, 1000, 1, 500, out, 64);
    check(s, n == 2 && fabs(out[0].rtt_us - 41000) < 1e-6 && fabs(out[1].rtt_us - 40000) < 1e-6,
          "rtt_per_packet_tsecr", "first=%g second=%g", n > 0 ? out[0].rtt_us : -1, n > 1 ? out[1].rtt_us : -1);
    rttm_init(&m); /* the sender's pure ACK (e.g. of our FIN) echoes our TSval but was not released by it */
    rttm_on_data(&m, 0, 1000, 1000, 1, 7, out, 64);
    rttm_on_ack(&m, 1 * ms, 2000, 1, 500, 0);
    n = rttm_on_data(&m, 30 * ms, 2000, 0, 1, 500, out, 64);
    int n_data = rttm_on_data(&m, 41 * ms, 2000, 1000, 1, 500, out, 64);
    check(s, n == 0 && n_data == 1 && fabs(out[0].rtt_us - 41000) < 1e-6, "rtt_pure_ack_times_nothing",
          "pure=%g data=%g", n, n_data);
    rttm_init(&m); /* no timestamps: DRS, released = one window beyond the ACK */
    rttm_on_data(&m, 0, 0, 1000, 0, 0, out, 64);
    rttm_on_ack(&m, 100000, 1000, 0, 0, 4000);
    n = rttm_on_data(&m, 20 * ms, 3000, 1000, 0, 0, out, 64);
    int n2 = rttm_on_data(&m, 25 * ms, 4000, 1000, 0, 0, out, 64);
    check(s, n == 0 && n2 == 1 && fabs(out[0].rtt_us - 25000) < 1e-6, "rtt_drs_window_beyond", "n=%g rtt=%g",
          n + n2, n2 ? out[0].rtt_us : -1);
}

static void test_phase(struct st *s)
{
    double x[400];
    for (int i = 0; i < 400; i++)
        x[i] = 20.0 * (i / 4) + 3 + (i % 3); /* bursts every 20 ms, 3 ms spread */
    double r20 = sr_phase_resultant(x, 400, 20), r40 = sr_phase_resultant(x, 400, 40);
    check(s, r20 > 0.8 && r40 < 0.2, "phase_lock_at_period_only", "r20=%g r40=%g", r20, r40);
    for (int i = 0; i < 400; i++)
        x[i] = i * 1.37; /* continuous sending */
    double r5 = sr_phase_resultant(x, 400, 5);
    check(s, r5 < 0.2, "phase_none_when_continuous", "r5=%g%.0s", r5, 0);
    /* measured profiles (issue 5: C2TCP at ~1 Mbit/s, RTT 77 ms, true period 20 ms, srsenb) */
    const double alias[5] = { 0.679, 0.714, 0.719, 0.420, 0.540 }, flat[5] = { 0.546, 0.563, 0.552, 0.524, 0.544 };
    int pa = sr_phase_select(alias, 0.5), pf = sr_phase_select(flat, 0.5);
    check(s, pa == 20, "phase_select_divisor_weaker_not_80", "period=%g expected=%g", pa, 20);
    check(s, pf == 0, "phase_select_flat_profile_no_period", "period=%g expected=%g", pf, 0);
    const double lock80[5] = { 1, 1, 1, 1, 0.99 }, lock20[5] = { 1, 1, 1, 0.02, 0.01 };
    /* measured at true 40 and 80 ms (sr-strict, lab cell): divisors weaker in two-mode burst timing */
    const double jitter40[5] = { 0.57, 0.86, 0.54, 0.85, 0.05 }, none[5] = { 0.01, 0.02, 0.01, 0.03, 0.02 };
    const double modes80[5] = { 0.5, 0.75, 0.33, 0.72, 0.92 };
    int pm = sr_phase_select(modes80, 0.5);
    check(s, pm == 80, "phase_select_two_mode_lock", "period=%g expected=%g", pm, 80);
    int p80 = sr_phase_select(lock80, 0.5), p20 = sr_phase_select(lock20, 0.5);
    int pj = sr_phase_select(jitter40, 0.5), pn = sr_phase_select(none, 0.5);
    check(s, p80 == 80 && p20 == 20 && pj == 40 && pn == 0, "phase_select_clean_locks",
          "p80=%g p20=%g", p80, p20);
}

static void test_probe_spread(struct st *s)
{
    /* issue 5: P = 5 ms on a poor radio (srsenb, 55 dB): 26 probes wait 0..4 ms, 4 took a HARQ
     * retransmission (+8 ms). The 10-90 spread (10.8 ms) named 10; the fit's HARQ term explains the
     * four and names 5 (the truth), or nothing: never 10 */
    double ping[30], waits[30];
    for (int i = 0; i < 26; i++)
        waits[i] = i < 6 ? 0 : 1 + (i - 6) / 5;
    for (int i = 26; i < 30; i++)
        waits[i] = 8;
    for (int i = 0; i < 30; i++)
        ping[i] = 30000 + 1000 * waits[(i * 7) % 30]; /* any order */
    struct sr_params p;
    sr_default_params(&p);
    struct sr_inputs in = { .ping_rtt_us = ping, .n_ping = 30 };
    struct sr_verdict v;
    sr_estimate(&p, &in, &v);
    check(s, v.period_ms == 5 || v.period_ms == 0, "probes_harq_tail_no_wrong_period", "period=%g margin=%g", v.period_ms,
          v.ping_margin_nats);
    for (int i = 0; i < 30; i++)
        ping[i] = 30000 + 1000 * (20.0 * ((i * 11) % 30) / 30.0); /* uniform waits at P = 20 */
    sr_estimate(&p, &in, &v);
    check(s, v.period_ms == 20 && !strcmp(v.confidence, "high"), "probes_uniform_wait_names_period",
          "period=%g margin=%g", v.period_ms, v.ping_margin_nats);
    /* measured at a true 80 ms (sr-strict, CPU-loaded host): the 10-75 % spread was 57.9 ms, on the
     * 80 ms bin's edge (56.6 ms) */
    static const double at80_ms[30] = { 33, 36, 37, 38, 48, 54, 55, 57, 62, 65, 66, 70, 71, 74, 75,
                                        75, 78, 80, 86, 87, 88, 88, 90, 91, 97, 100, 106, 106, 108, 108 };
    for (int i = 0; i < 30; i++)
        ping[i] = at80_ms[(i * 7) % 30] * 1000;
    sr_estimate(&p, &in, &v);
    check(s, v.period_ms == 80 && v.ping_margin_nats > 6, "probes_fit_names_80_off_the_bin_edge", "period=%g margin=%g",
          v.period_ms, v.ping_margin_nats);
    for (int i = 0; i < 30; i++)
        ping[i] = 30000 + 300 * ((i * 7) % 5) - 600; /* +-0.6 ms: no SR wait */
    sr_estimate(&p, &in, &v);
    check(s, v.period_ms == 0 && !strcmp(v.regime, "not-sr-limited"), "probes_without_wait_name_none",
          "period=%g best=%g", v.period_ms, v.ping_period_ms);
}

/* Harmonics: a period and its multiple explain the same waits partly. */
static void test_probe_harmonics(struct st *s)
{
    struct sr_params p;
    sr_default_params(&p);
    double ping[60];
    struct sr_inputs in = { .ping_rtt_us = ping, .n_ping = 60 };
    struct sr_verdict v;
    /* P = 10 on a stack at half speed (its TTI 2 ms on the wall clock): waits uniform over 20 ms. With
     * the download's TTI ruler, 10 or ambiguous, never a confident 20 */
    for (int i = 0; i < 60; i++)
        ping[i] = 40000 + 1000 * (20.0 * ((i * 17) % 60) / 60.0);
    in.tti_ms = 2.0;
    sr_estimate(&p, &in, &v);
    check(s, v.period_ms == 0 && v.ambiguous && (v.candidates_ms[0] == 10 || v.candidates_ms[1] == 10), "probes_slow_stack_not_2p", "period=%g amb=%g",
          v.period_ms, (double)v.ambiguous);
    /* the same waits in real time (ruler 1 ms) are P = 20 */
    in.tti_ms = 1.0;
    sr_estimate(&p, &in, &v);
    check(s, v.period_ms == 20 && !v.ambiguous, "probes_real_time_names_20", "period=%g amb=%g", v.period_ms, (double)v.ambiguous);
    /* measured on srsRAN over ZMQ at SR 10 ms, 465 TTIs per wall second (2.15 ms per TTI), srsue repeating
     * unanswered SRs 2-4 occasions later: not 20 or 40 named with confidence */
    static const double z10_ms[30] = { 22.7, 25.1, 25.4, 27.2, 27.2, 27.4, 29.0, 29.0, 31.0, 32.0, 33.3, 33.3, 33.9,
                                       34.2, 35.3, 35.5, 36.9, 40.0, 41.2, 43.6, 45.2, 46.5, 47.8, 48.1, 49.5, 53.4,
                                       53.7, 55.0, 72.4, 73.3 };
    for (int i = 0; i < 30; i++)
        ping[i] = z10_ms[(i * 7) % 30] * 1000;
    in.n_ping = 30;
    in.tti_ms = 2.15;
    sr_estimate(&p, &in, &v);
    check(s, v.period_ms == 10 || v.period_ms == 0, "probes_zmq_sr10_no_confident_multiple", "period=%g candidates=%g",
          v.period_ms, (double)v.n_candidates);
    /* an ambiguous verdict lists its candidates */
    check(s, !v.ambiguous || v.n_candidates >= 2, "probes_ambiguous_lists_candidates", "n=%g amb=%g",
          (double)v.n_candidates, (double)v.ambiguous);
}

static void test_flowproto(struct st *s)
{
    uint8_t req[FLOWPROTO_REQ_BYTES];
    flowproto_encode_request(req, FLOW_MODE_BYTES, 0x0102030405ULL, "cubic", 7, 65536);
    int ok = !memcmp(req, "CLB1", 4) && req[4] == 1 && req[5] == 0 && req[6] == 1 && req[8] == 0x05 &&
             req[12] == 0x01 && !strcmp((char *)req + 16, "cubic") && req[32] == 7 && req[40] == 0 && req[42] == 1;
    check(s, ok, "flowproto_request_layout", "mode=%g tag=%g", req[6], req[32]);
    uint8_t resp[FLOWPROTO_RESP_BYTES] = { 'C', 'L', 'B', '1', 2, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0 };
    uint16_t st = 99;
    uint64_t id = 0;
    int rc = flowproto_decode_response(resp, &st, &id);
    check(s, rc == 0 && st == 2 && id == 9, "flowproto_response", "status=%g id=%g", st, (double)id);
}

int cmd_selftest(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct st s = { 0, 0 };
    test_D(&s);
    test_eq3(&s);
    test_frames(&s);
    test_dfcsd(&s);
    test_rttmatch(&s);
    test_phase(&s);
    test_probe_spread(&s);
    test_probe_harmonics(&s);
    test_flowproto(&s);
    printf("%s %d of %d checks passed\n", s.failed ? "FAILED" : "PASSED", s.run - s.failed, s.run);
    return s.failed ? 1 : 0;
}
