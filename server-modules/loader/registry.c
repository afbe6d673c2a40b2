/* The table of modules: skeleton entry points, parameters (with units and defaults) and counters. */
#include <string.h>

#include "registry.h"
#include "c2tcp.skel.h"
#include "scubic.skel.h"
#include "exll.skel.h"
#include "cubic_qarr.skel.h"
#include "cubic_barr.skel.h"
#include "or_ingress.skel.h"
#include "burst_drop.skel.h"
#include "cubic_cap.skel.h"

#define SKEL_OPS(n)                                                                        \
	static void *n##_open(const struct bpf_object_open_opts *o) { return n##_bpf__open_opts(o); } \
	static int n##_load(void *s) { return n##_bpf__load(s); }                          \
	static void n##_destroy(void *s) { n##_bpf__destroy(s); }                         \
	static struct bpf_object *n##_obj(void *s) { return ((struct n##_bpf *)s)->obj; }

SKEL_OPS(c2tcp)
SKEL_OPS(scubic)
SKEL_OPS(exll)
SKEL_OPS(cubic_qarr)
SKEL_OPS(cubic_barr)
SKEL_OPS(or_ingress)
SKEL_OPS(burst_drop)
SKEL_OPS(cubic_cap)

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Defaults: the paper's where it gives one (see server-modules/README.md for the rest). */
static const struct param_desc c2tcp_params[] = {
	{ "target_ms", 0, 0, 10000, 1000, 50, "ms", SCOPE_NETNS }, /* paper: 50 ms trace-driven; 0 = Tuner off */
	{ "alpha_init", 1, 1, 10, 1024, 1.5, "x MINRTT", SCOPE_NETNS }, /* authors' v2 scripts */
	{ "tune_period_ms", 2, 10, 10000, 1000, 500, "ms", SCOPE_NETNS }, /* paper: 0.5 s */
	{ "tuner", 3, 0, 1, 1, 0, "0 Eq. 10 | 1 authors' v2", SCOPE_NETNS }, /* paper Eq. 10 / authors' Mahimahi scripts */
	{ "alpha_min", 4, 1, 10, 1024, 1.5, "x MINRTT", SCOPE_NETNS }, /* NOT the paper's 1: SR-uplink trap, issue 4 */
	{ "small_flight_pkts", 5, 0, 64, 1, 8, "packets", SCOPE_NETNS }, /* NOT the paper (0): Setpoint floor, issue 18 */
};
static const char *const c2tcp_counters[] = {
	"flows", "good_acks", "bad_events", "invalid_rtt", "tuner_updates",
	"last_alpha_x1024", "last_avg_rtt_us", "last_min_rtt_us", "floored_acks", "last_flight_rtt_us",
};

static const struct param_desc scubic_params[] = {
	{ "ttl_ms", 0, 1, 86400000, 1, 3600000, "ms", SCOPE_NETNS }, /* not in the paper: tcp_metrics' 1 h */
	{ "min_bdp_pkts", 1, 1, 100000, 1, 10, "packets", SCOPE_NETNS }, /* paper: discard if BDP <= CWnd_init */
	{ "ssthresh_at_exit", 2, 0, 1, 1, 0, "0|1", SCOPE_NETNS }, /* not in the paper: end slow start at Startup exit */
};
static const char *const scubic_counters[] = {
	"flows", "hits", "misses", "expired", "stored", "startup_exits", "estimates",
	"last_rate_Bps", "last_min_rtt_us", "last_bdp_pkts", "small_bdp",
};

static const struct param_desc exll_params[] = {
	{ "alpha_pkts", 0, 1, 100000, 1, 200, "packets", SCOPE_NETNS }, /* thesis: alpha = 200 */
	{ "gamma", 1, 0.01, 1, 1024, 0.5, "", SCOPE_NETNS },     /* thesis: gamma = 0.5 */
	{ "sr_calibration", 2, 0, 1, 1, 1, "0|1", SCOPE_NETNS }, /* mRE = mpRTT + D(2(apRTT-mpRTT)) */
};
static const char *const exll_counters[] = {
	"flows", "control_entries", "updates", "holds", "resets",
	"last_mre_us", "last_mte_Bps", "last_cwnd_e", "last_tsr_us", "last_mprtt_us", "last_aprtt_us",
};

static const struct param_desc qarr_params[] = {
	{ "queue_threshold_pkts", 0, 0, 100000, 1, 5, "packets", SCOPE_NETNS }, /* paper: Q_T = 5 */
	{ "sndbuf_factor", 1, 2, 8, 1, 3, "x cwnd", SCOPE_NETNS },  /* paper: 3 */
	{ "per_rtt", 2, 0, 1, 1, 1, "0|1", SCOPE_NETNS },           /* authors' code; 0 = per ACK as printed */
};
static const struct param_desc barr_params[] = {
	{ "window_acks", 0, 2, 255, 1, 200, "ACKs", SCOPE_NETNS },  /* paper: M = 200 */
	{ "sndbuf_factor", 1, 2, 8, 1, 3, "x cwnd", SCOPE_NETNS },
};
static const char *const recovery_counters[] = {
	"flows", "recoveries", "recovery_acks", "last_w_pkts", "last_estimate", "last_rtt_us",
};

static const struct param_desc or_params[] = {
	{ "enabled", 0, 0, 1, 1, 1, "0|1", SCOPE_HOST },
};
static const char *const or_counters[] = {
	"acks_seen", "sack_acks_in_recovery", "widened_acks", "last_ext_bytes", "clamped", "last_wscale",
};

static const struct param_desc drop_params[] = {
	{ "after_pkts", 0, 0, 100000000, 1, 1000, "packets", SCOPE_HOST },
	{ "drop_pkts", 1, 0, 100000, 1, 10, "packets", SCOPE_HOST },
	{ "port", 2, 0, 65535, 1, 0, "source or destination port, 0 = any", SCOPE_HOST },
};
static const char *const drop_counters[] = { "data_pkts", "dropped" };

static const struct param_desc cap_params[] = {
	{ "cwnd_cap_pkts", 0, 1, 100000, 1, 10000, "packets", SCOPE_NETNS }, /* a measuring tool: no paper default */
};
static const char *const cap_counters[] = { "flows", "capped_acks" };

#define CC(nm, p, c, fields, orf, pt)                                                          \
	{ #nm, KIND_CC, #nm, NULL, nm##_open, nm##_load, nm##_destroy, nm##_obj, p, N(p), fields, \
	  c, N(c), orf, pt, pt }

static const struct module_desc modules[] = {
	CC(c2tcp, c2tcp_params, c2tcp_counters, 6, 0, 1),
	CC(scubic, scubic_params, scubic_counters, 4, 0, 0),
	CC(exll, exll_params, exll_counters, 4, 0, 0),
	CC(cubic_qarr, qarr_params, recovery_counters, 4, 1, 0),
	CC(cubic_barr, barr_params, recovery_counters, 4, 1, 0),
	{ "or_ingress", KIND_TC_INGRESS, NULL, "or_ingress", or_ingress_open, or_ingress_load,
	  or_ingress_destroy, or_ingress_obj, or_params, N(or_params), 4, or_counters, N(or_counters), 1, 0, 0 },
	{ "burst_drop", KIND_TC_INGRESS, NULL, "burst_drop", burst_drop_open, burst_drop_load,
	  burst_drop_destroy, burst_drop_obj, drop_params, N(drop_params), 4, drop_counters,
	  N(drop_counters), 0, 0, 0 },
	CC(cubic_cap, cap_params, cap_counters, 1, 0, 0),
};

const struct module_desc *registry_find(const char *name)
{
	for (unsigned i = 0; i < N(modules); i++)
		if (strcmp(modules[i].name, name) == 0)
			return &modules[i];
	return NULL;
}

const struct module_desc *registry_at(unsigned i)
{
	return i < N(modules) ? &modules[i] : NULL;
}

unsigned registry_count(void)
{
	return N(modules);
}
