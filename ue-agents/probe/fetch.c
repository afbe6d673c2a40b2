/* `cellab-probe fetch`: ask a cellab-send server for one or several concurrent flows, time every
 * packet, run the estimators and (optionally) control the receive window.
 * This file is the command's sequence: options, stop signals, pipeline, logs, capture, server address and
 * SR probes, the flows (fetch_loop.c), the summary and the exit status. fetch.h lists the other units. */
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "commands.h"
#include "fetch.h"
#include "util.h"

/* SIGTERM/SIGINT as a readable fd (c->sig_fd, -1 if unavailable): the loop stops and the summary is written */
static void block_stop_signals(struct fetch_ctx *c)
{
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    c->sig_fd = -1;
    if (sigprocmask(SIG_BLOCK, &stop_signals, NULL) == 0)
        c->sig_fd = signalfd(-1, &stop_signals, SFD_NONBLOCK | SFD_CLOEXEC);
}

static void init_pipeline(struct fetch_ctx *c, const struct fetch_tuning *t)
{
    pipe_init(&c->pl, c->o.control);
    c->pl.stack_tti_ms = c->o.stack_tti_ms;
    if (!isnan(t->exll_alpha)) c->pl.exll_p.alpha_pkts = t->exll_alpha;
    if (!isnan(t->exll_gamma)) c->pl.exll_p.gamma = t->exll_gamma;
    if (!isnan(t->dfcsd_beta)) c->pl.dfcsd_p.beta_pkts = t->dfcsd_beta;
    c->pl.exll_p.rwnd_max_bytes = (uint32_t)c->o.rcvbuf_bytes;
    c->pl.dfcsd_p.rwnd_max_bytes = (uint32_t)c->o.rcvbuf_bytes;
}

/* --log (one line per packet event) and --ms-log (one line per flow and ms); -1 with err on failure */
static int open_logs(struct fetch_ctx *c, char *err, size_t errlen)
{
    if (c->o.log_path) {
        FILE *pkt_log = fopen(c->o.log_path, "w");
        if (!pkt_log) {
            snprintf(err, errlen, "--log %s: %s", c->o.log_path, strerror(errno));
            return -1;
        }
        fputs("# cellab-probe events v1\nt_ns,flow,dir,seq,ack,len,win,has_ts,tsval,tsecr\n", pkt_log);
        c->pl.pkt_log = pkt_log;
    }
    if (c->o.ms_log_path) {
        FILE *ms_log = fopen(c->o.ms_log_path, "w");
        if (!ms_log) {
            snprintf(err, errlen, "--ms-log %s: %s", c->o.ms_log_path, strerror(errno));
            return -1;
        }
        fputs("ms,flow,bytes,packets,acks,rtt_mean_us,rwnd_bytes\n", ms_log);
        c->pl.ms_log = ms_log;
    }
    return 0;
}

/* Per-packet capture (AF_PACKET) unless --capture socket; what is missing without it goes into the summary. */
static void open_capture(struct fetch_ctx *c)
{
    if (strcmp(c->o.capture_mode, "socket") != 0) {
        if (capture_open(&c->cap, c->o.iface) == 0) {
            c->packet_mode = 1;
        } else {
            char msg[240];
            snprintf(msg, sizeof(msg), "no per-packet capture (AF_PACKET: %s; needs root or CAP_NET_RAW)%s",
                     strerror(errno), c->o.iface ? " or bad --iface" : "");
            if (!strcmp(c->o.capture_mode, "packet")) {
                add_msg(c->errors, &c->n_errors, msg);
            }
            add_msg(c->missing, &c->n_missing, msg);
            add_msg(c->missing, &c->n_missing,
                    "per-packet RTT, SR estimate and window control inputs: receive times are per read (coarse)");
        }
    } else {
        add_msg(c->missing, &c->n_missing, "per-packet RTT and SR estimate: --capture socket gives per-read times");
    }
    c->cap.fd = c->packet_mode ? c->cap.fd : -1;
}

/* --sr-probes: idle-uplink ICMP probes before the flows; their RTTs feed the SR estimator. */
static void run_sr_probes(struct fetch_ctx *c)
{
    char perr[240] = "";
    uint64_t probes_t0 = now_realtime_ns();
    /* a stack slower than real time (the lab's ruler) stretches the gaps with its TTI, up to 2x: srsENB polls an
     * emptied UE once 20 of its TTIs after the last PUSCH, and a probe riding that poll misses the SR grid */
    double gap_x = c->o.stack_tti_ms > 1 ? (c->o.stack_tti_ms < 2 ? c->o.stack_tti_ms : 2) : 1;
    if (srprobe_run(c->addr->ai_addr, c->addr->ai_addrlen, c->o.sr_probes, c->o.sr_probes_max, 30 * gap_x, 110 * gap_x,
                    (uint32_t)now_realtime_ns(),
                    &c->probes, perr, sizeof(perr)) != 0) {
        snprintf(c->probe_error, sizeof(c->probe_error), "%s", perr);
        add_msg(c->missing, &c->n_missing, perr);
    } else if (c->probes.received < c->o.sr_probes / 2) {
        snprintf(c->probe_error, sizeof(c->probe_error), "only %d of %d SR probes answered", c->probes.received,
                 c->probes.sent);
        add_msg(c->missing, &c->n_missing, c->probe_error);
    }
    c->probes_elapsed_ms = (double)(now_realtime_ns() - probes_t0) / 1e6;
    c->pl.ping_rtt_us = c->probes.rtt_us;
    c->pl.n_ping = (size_t)c->probes.received;
}

/* Resolve the server, probe, run the flows; 1 when the server does not resolve (every flow failed). */
static int resolve_and_run(struct fetch_ctx *c)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
    char port[8];
    snprintf(port, sizeof(port), "%d", c->o.port);
    int gai = getaddrinfo(c->o.server, port, &hints, &c->addr);
    if (gai != 0) {
        char msg[240];
        snprintf(msg, sizeof(msg), "server '%s': %s", c->o.server, gai_strerror(gai));
        add_msg(c->errors, &c->n_errors, msg);
        for (int i = 0; i < c->n_flows; i++) {
            c->flows[i].state = F_FAILED;
            snprintf(c->flows[i].error, sizeof(c->flows[i].error), "%s", msg);
        }
        return 1;
    }
    if (c->o.sr_probes > 0)
        run_sr_probes(c);
    fetch_run(c);
    freeaddrinfo(c->addr);
    return 0;
}

/* The summary (--summary FILE, or stdout), written atomically; 1 on failure, said on stderr. */
static int write_summary_file(struct fetch_ctx *c)
{
    struct outfile out;
    if (outfile_open(&out, c->o.summary_path) != 0) {
        fprintf(stderr, "cellab-probe: --summary %s: %s\n", c->o.summary_path, strerror(errno));
        return 1;
    }
    fetch_write_summary(c, out.f);
    if (outfile_close(&out) != 0) {
        fprintf(stderr, "cellab-probe: writing --summary %s failed\n", c->o.summary_path);
        return 1;
    }
    return 0;
}

static void release(struct fetch_ctx *c)
{
    if (c->pl.pkt_log)
        fclose(c->pl.pkt_log);
    if (c->pl.ms_log)
        fclose(c->pl.ms_log);
    if (c->sig_fd >= 0)
        close(c->sig_fd);
    pipe_free(&c->pl);
    free(c);
}

static int usage_error(struct fetch_ctx *c, const char *err)
{
    fprintf(stderr, "cellab-probe fetch: %s\n", err);
    fetch_usage(stderr);
    free(c);
    return 2;
}

int cmd_fetch(int argc, char **argv)
{
    struct fetch_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return 1;
    struct fetch_tuning tuning;
    char err[300] = "";
    switch (fetch_parse_args(c, argc, argv, &tuning, err, sizeof(err))) {
    case FETCH_ARGS_OK: break;
    case FETCH_ARGS_HELP: fetch_usage(stdout); free(c); return 0;
    case FETCH_ARGS_BAD: return usage_error(c, err);
    default: free(c); fetch_usage(stderr); return 2;
    }
    block_stop_signals(c);
    init_pipeline(c, &tuning);
    if (open_logs(c, err, sizeof(err)) != 0)
        return usage_error(c, err);
    open_capture(c);

    int rc = 0;
    if (!strcmp(c->o.capture_mode, "packet") && !c->packet_mode)
        rc = 1;
    else
        rc = resolve_and_run(c);
    if (c->packet_mode && c->cap.fd >= 0)
        capture_close(&c->cap);

    if (write_summary_file(c) != 0)
        rc = 1;
    for (int i = 0; i < c->n_errors; i++)
        fprintf(stderr, "cellab-probe: %s\n", c->errors[i]);
    for (int i = 0; i < c->n_flows; i++)
        if (c->flows[i].state != F_DONE || !c->flows[i].complete)
            rc = 1;
    release(c);
    return rc;
}
