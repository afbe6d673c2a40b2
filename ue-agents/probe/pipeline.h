/* The per-flow analysis shared by `fetch` (live), `analyze` (pcap or event log) and `selftest`:
 * RTT matching, ExLL (estimation always; control when asked), DFCSD, the SR verdict, the logs and the
 * JSON summary. No I/O besides the optional log files. */
#ifndef CELLAB_PIPELINE_H
#define CELLAB_PIPELINE_H

#include <stdio.h>

#include "dfcsd.h"
#include "exll.h"
#include "jsonw.h"
#include "pktparse.h"
#include "probe.h"
#include "rttmatch.h"
#include "srest.h"

#define PIPE_MAX_FLOWS 32

enum control_mode { CONTROL_NONE = 0, CONTROL_EXLL = 1, CONTROL_DFCSD = 2 };

struct dvec { double *v; size_t n, cap; };

struct pipe_flow {
    char label[64];
    int have_endpoints;
    struct tcp_endpoint local, remote; /* local = the receiver */
    struct rttm rtt;
    struct exll exll;
    uint64_t bytes, pkts_in, acks_out, retrans_pkts, reordered_pkts;
    uint32_t first_seq, max_tsval;
    uint64_t t_first_ns, t_last_ns, t_done_ns;
    uint32_t mss_bytes;
    int done;
    int uses_ts, ts_decided;
    struct dvec rtt_all;       /* every RTT sample, for the summary's percentiles */
    struct dvec rtt_obs;       /* observation-phase samples: the SR estimate's input */
    struct dvec echo_ticks;    /* the phase view: sender TSval (ticks since the first) of the first */
    struct dvec echo_arrival_ms; /* segment echoing each new TSecr, and when it arrived here */
    int have_echo;
    uint32_t last_echo, first_echo_tsval;
    int obs_frozen;            /* ExLL left observation the first time: the SR inputs are fixed */
    int last_dlog;             /* running D_log, to time when the estimate settled */
    uint64_t t_dlog_change_ns;
    uint32_t rwnd_applied;     /* last window the caller applied (0 = none) */
    uint32_t rwnd_wanted;      /* window the controller asks for */
    int rwnd_dirty;
    /* per-ms log accumulation */
    int64_t ms_cur;
    uint64_t ms_bytes, ms_pkts, ms_acks, ms_rtt_n;
    double ms_rtt_sum;
};

struct pipeline {
    int control;
    struct exll_params exll_p;
    struct dfcsd_params dfcsd_p;
    struct sr_params sr_p;
    int n_flows;
    struct pipe_flow *flows[PIPE_MAX_FLOWS];
    struct dfcsd_flow dflows[PIPE_MAX_FLOWS];
    const double *ping_rtt_us; /* idle-uplink probe RTTs (fetch --sr-probes), owned by the caller */
    size_t n_ping;
    FILE *pkt_log;    /* per-packet event log (CSV), or NULL */
    FILE *ms_log;     /* per-millisecond log (CSV), or NULL */
    uint64_t t_origin_ns;
    uint64_t last_data_ns;   /* the TTI ruler: spacing of the download's delivery bursts (any flow) */
    struct dvec burst_gaps;  /* ms, 0.3-6 ms apart */
    double stack_tti_ms;     /* the lab's TTI ruler (fetch --stack-tti-ms), before the download's own */
};

void pipe_init(struct pipeline *pl, int control);
void pipe_free(struct pipeline *pl);
/* Register a flow; endpoints may be NULL (synthetic event logs). Returns its index or -1. */
int pipe_add_flow(struct pipeline *pl, const char *label, const struct tcp_endpoint *local,
                  const struct tcp_endpoint *remote, uint64_t now_ns);
/* Which flow (and direction) a parsed segment belongs to; -1 if none. */
int pipe_match(const struct pipeline *pl, const struct tcp_segment *seg, int *dir);
void pipe_event(struct pipeline *pl, int flow, const struct pkt_event *ev);
/* Advance timers; afterwards flows[i]->rwnd_dirty says which windows to apply. */
void pipe_tick(struct pipeline *pl, uint64_t now_ns);
void pipe_flow_done(struct pipeline *pl, int flow, uint64_t now_ns);
/* The SR verdict over all flows' observation samples pooled (flow < 0) or one flow. */
void pipe_sr_verdict(const struct pipeline *pl, int flow, struct sr_verdict *v);
/* Write "flows": [...] and "sr_estimate": {...} into an open JSON object. */
void pipe_write_summary(const struct pipeline *pl, struct jsonw *w);
void pipe_flush_logs(struct pipeline *pl);

const char *control_name(int control);
int control_parse(const char *s);

void sr_verdict_json(struct jsonw *w, const char *key, const struct sr_verdict *v);

#endif
