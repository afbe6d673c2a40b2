/* cellab-probe fetch: the command's state and its units (one concern each):
 * fetch.c (the command: setup, run, summary file, exit status), fetch_args.c (options and flow specs),
 * fetch_flow.c (one flow: connect, request, response, data), fetch_loop.c (the poll loop over flows, capture,
 * signals and window control), fetch_summary.c (the JSON summary). */
#ifndef CELLAB_PROBE_FETCH_H
#define CELLAB_PROBE_FETCH_H

#include <netdb.h>
#include <stdint.h>
#include <stdio.h>

#include "capture.h"
#include "flowproto.h"
#include "pipeline.h"
#include "srprobe.h"

#define MAX_MSGS 8

enum fstate { F_PENDING, F_CONNECTING, F_RESP, F_DATA, F_DONE, F_FAILED };

struct flow_spec {
    int mode;
    uint64_t amount;
    uint64_t start_ms;
    char cc[17];
    uint64_t tag;
};

struct fetch_flow {
    struct flow_spec spec;
    int fd;
    int state;
    uint8_t req[FLOWPROTO_REQ_BYTES];
    uint8_t resp[FLOWPROTO_RESP_BYTES];
    size_t resp_got;
    uint16_t status;
    uint64_t flow_id;
    uint64_t bytes_read;
    uint64_t t_connect_ns, t_first_byte_ns, t_done_ns;
    int complete;
    char error[240];
    int pipe_idx;
    uint32_t rcvbuf_bytes;
};

struct fetch_opts {
    const char *server;
    int port;
    const char *summary_path;
    const char *log_path;
    const char *ms_log_path;
    const char *capture_mode; /* auto | packet | socket */
    const char *iface;
    int control;
    double timeout_s;
    double connect_timeout_s;
    uint64_t rcvbuf_bytes;
    uint32_t chunk_bytes;
    int sr_probes;
    int sr_probes_max; /* the probing budget: more probes while the candidates are not told apart */
    double stack_tti_ms; /* --stack-tti-ms: the lab's measure of its stack's TTI, 0 unknown */
};

struct fetch_ctx {
    struct fetch_opts o;
    struct fetch_flow flows[PIPE_MAX_FLOWS];
    int n_flows;
    struct pipeline pl;
    struct capture cap;
    int packet_mode;
    struct addrinfo *addr;
    char errors[MAX_MSGS][240];
    int n_errors;
    char missing[MAX_MSGS][240];
    int n_missing;
    uint64_t t_start_ns;
    int timed_out;
    int sig_fd;       /* SIGTERM/SIGINT as a readable fd: stop, then write the partial summary */
    int interrupted;
    struct srprobe_result probes;
    double probes_elapsed_ms;
    char probe_error[240];
    uint8_t buf[256 * 1024];
};

static inline void add_msg(char list[][240], int *n, const char *text)
{
    if (*n < MAX_MSGS)
        snprintf(list[(*n)++], 240, "%s", text);
}

/* fetch_args.c: the options into c (flows ready to start); ExLL/DFCSD tunings not given are NAN */
struct fetch_tuning {
    double exll_alpha, exll_gamma, dfcsd_beta;
};
enum { FETCH_ARGS_OK = 0, FETCH_ARGS_HELP = 1, FETCH_ARGS_BAD = 2, FETCH_ARGS_UNKNOWN = 3 };
/* FETCH_ARGS_BAD leaves the message in err; FETCH_ARGS_UNKNOWN: getopt has already said what */
int fetch_parse_args(struct fetch_ctx *c, int argc, char **argv, struct fetch_tuning *t, char *err, size_t errlen);
void fetch_usage(FILE *out);

/* fetch_flow.c */
void fetch_fail_flow(struct fetch_ctx *c, struct fetch_flow *f, const char *what, int err);
void fetch_start_flow(struct fetch_ctx *c, struct fetch_flow *f);
void fetch_on_connected(struct fetch_ctx *c, struct fetch_flow *f);
void fetch_on_readable(struct fetch_ctx *c, struct fetch_flow *f);

/* fetch_loop.c: run every flow to its end, the timeout or a stop signal */
int fetch_run(struct fetch_ctx *c);

/* fetch_summary.c */
void fetch_write_summary(struct fetch_ctx *c, FILE *out);

#endif
