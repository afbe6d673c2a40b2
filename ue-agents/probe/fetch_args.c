/* cellab-probe fetch: its command line (options, --flow specs) into the fetch context; bad input is refused
 * with a message naming the option and what it allows. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fetch.h"
#include "util.h"

void fetch_usage(FILE *out)
{
    fputs("usage: cellab-probe fetch --server ADDR [--port 5301] (--bytes SIZE | --seconds S) [--flows N]\n"
          "         [--flow bytes=SIZE|seconds=S[,start_ms=M][,cc=NAME][,tag=N]]... [--cc NAME]\n"
          "         [--control none|exll|dfcsd] [--capture auto|packet|socket] [--iface NAME]\n"
          "         [--summary FILE] [--log FILE] [--ms-log FILE] [--timeout S] [--connect-timeout S]\n"
          "         [--rcvbuf SIZE] [--chunk SIZE] [--exll-alpha PKTS] [--exll-gamma G] [--dfcsd-beta PKTS]\n"
          "         [--sr-probes N]   (N idle-uplink ICMP probes before the flows, for the SR period; 0..256)\n"
          "         [--sr-probes-max M] (more probes while the SR candidates are not told apart, up to M; default 2 N)\n"
          "         [--stack-tti-ms MS] (the radio stack's TTI on the wall clock, when the lab measures it: the SR\n"
          "                              estimator's ruler, before the download's own; 0.5..20)\n",
          out);
}

static int parse_flow_spec(const char *text, struct flow_spec *s, const char *default_cc, char *err, size_t errlen)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", text);
    memset(s, 0, sizeof(*s));
    snprintf(s->cc, sizeof(s->cc), "%s", default_cc ? default_cc : "");
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            snprintf(err, errlen, "--flow: item '%s' is not KEY=VALUE (keys: bytes, seconds, start_ms, cc, tag)", tok);
            return -1;
        }
        *eq = '\0';
        const char *k = tok, *v = eq + 1;
        double d;
        uint64_t u;
        if (!strcmp(k, "bytes")) {
            if (parse_size(v, &u) || u == 0) {
                snprintf(err, errlen, "--flow: bytes '%s' is not a positive size (e.g. 1500, 64K, 10M)", v);
                return -1;
            }
            s->mode = FLOW_MODE_BYTES;
            s->amount = u;
        } else if (!strcmp(k, "seconds")) {
            if (parse_double(v, &d) || !(d > 0) || d > 86400) {
                snprintf(err, errlen, "--flow: seconds '%s' must be in (0, 86400]", v);
                return -1;
            }
            s->mode = FLOW_MODE_MS;
            s->amount = (uint64_t)llround(d * 1000);
        } else if (!strcmp(k, "start_ms")) {
            if (parse_double(v, &d) || d < 0) {
                snprintf(err, errlen, "--flow: start_ms '%s' must be >= 0", v);
                return -1;
            }
            s->start_ms = (uint64_t)d;
        } else if (!strcmp(k, "cc")) {
            if (strlen(v) > 16) {
                snprintf(err, errlen, "--flow: cc '%s' is longer than 16 characters", v);
                return -1;
            }
            snprintf(s->cc, sizeof(s->cc), "%s", v);
        } else if (!strcmp(k, "tag")) {
            if (parse_size(v, &u)) {
                snprintf(err, errlen, "--flow: tag '%s' is not a number", v);
                return -1;
            }
            s->tag = u;
        } else {
            snprintf(err, errlen, "--flow: unknown key '%s' (allowed: bytes, seconds, start_ms, cc, tag)", k);
            return -1;
        }
    }
    if (s->mode == 0) {
        snprintf(err, errlen, "--flow '%s': needs bytes= or seconds=", text);
        return -1;
    }
    return 0;
}

/* The options into c->o and c->flows (each flow's fd and pipeline index unset). */
int fetch_parse_args(struct fetch_ctx *c, int argc, char **argv, struct fetch_tuning *t, char *err, size_t errlen)
{
    static const struct option longopts[] = {
        { "server", required_argument, 0, 's' }, { "port", required_argument, 0, 'p' },
        { "bytes", required_argument, 0, 'b' }, { "seconds", required_argument, 0, 't' },
        { "flows", required_argument, 0, 'n' }, { "flow", required_argument, 0, 'f' },
        { "cc", required_argument, 0, 'c' }, { "control", required_argument, 0, 'C' },
        { "capture", required_argument, 0, 'K' }, { "iface", required_argument, 0, 'i' },
        { "summary", required_argument, 0, 'o' }, { "log", required_argument, 0, 'l' },
        { "ms-log", required_argument, 0, 'm' }, { "timeout", required_argument, 0, 'T' },
        { "connect-timeout", required_argument, 0, 'W' }, { "rcvbuf", required_argument, 0, 'R' },
        { "chunk", required_argument, 0, 'k' }, { "exll-alpha", required_argument, 0, 'A' },
        { "exll-gamma", required_argument, 0, 'G' }, { "dfcsd-beta", required_argument, 0, 'B' },
        { "sr-probes", required_argument, 0, 'P' }, { "sr-probes-max", required_argument, 0, 'M' },
        { "stack-tti-ms", required_argument, 0, 'S' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    c->o.port = FLOWPROTO_DEFAULT_PORT;
    c->o.capture_mode = "auto";
    c->o.timeout_s = 60;
    c->o.connect_timeout_s = 5;
    c->o.rcvbuf_bytes = 8u << 20;
    *t = (struct fetch_tuning){NAN, NAN, NAN};
    const char *flow_texts[PIPE_MAX_FLOWS];
    int n_flow_texts = 0, n_same = 1;
    const char *bytes_s = NULL, *seconds_s = NULL, *cc = NULL;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        double d;
        uint64_t u;
        switch (opt) {
        case 's': c->o.server = optarg; break;
        case 'p':
            if (parse_double(optarg, &d) || d < 1 || d > 65535 || d != floor(d)) {
                snprintf(err, errlen, "--port '%s' must be an integer in 1..65535", optarg);
                return FETCH_ARGS_BAD;
            }
            c->o.port = (int)d;
            break;
        case 'b': bytes_s = optarg; break;
        case 't': seconds_s = optarg; break;
        case 'n':
            if (parse_double(optarg, &d) || d < 1 || d > PIPE_MAX_FLOWS || d != floor(d)) {
                snprintf(err, errlen, "--flows '%s' must be an integer in 1..%d", optarg, PIPE_MAX_FLOWS);
                return FETCH_ARGS_BAD;
            }
            n_same = (int)d;
            break;
        case 'f':
            if (n_flow_texts >= PIPE_MAX_FLOWS) {
                snprintf(err, errlen, "--flow: at most %d flows", PIPE_MAX_FLOWS);
                return FETCH_ARGS_BAD;
            }
            flow_texts[n_flow_texts++] = optarg;
            break;
        case 'c':
            if (strlen(optarg) > 16) {
                snprintf(err, errlen, "--cc '%s' is longer than 16 characters", optarg);
                return FETCH_ARGS_BAD;
            }
            cc = optarg;
            break;
        case 'C':
            c->o.control = control_parse(optarg);
            if (c->o.control < 0) {
                snprintf(err, errlen, "--control '%s' (allowed: none, exll, dfcsd)", optarg);
                return FETCH_ARGS_BAD;
            }
            break;
        case 'K':
            if (strcmp(optarg, "auto") && strcmp(optarg, "packet") && strcmp(optarg, "socket")) {
                snprintf(err, errlen, "--capture '%s' (allowed: auto, packet, socket)", optarg);
                return FETCH_ARGS_BAD;
            }
            c->o.capture_mode = optarg;
            break;
        case 'i': c->o.iface = optarg; break;
        case 'o': c->o.summary_path = optarg; break;
        case 'l': c->o.log_path = optarg; break;
        case 'm': c->o.ms_log_path = optarg; break;
        case 'T':
            if (parse_double(optarg, &d) || !(d > 0) || d > 86400) {
                snprintf(err, errlen, "--timeout '%s' must be in (0, 86400] seconds", optarg);
                return FETCH_ARGS_BAD;
            }
            c->o.timeout_s = d;
            break;
        case 'W':
            if (parse_double(optarg, &d) || !(d > 0) || d > 600) {
                snprintf(err, errlen, "--connect-timeout '%s' must be in (0, 600] seconds", optarg);
                return FETCH_ARGS_BAD;
            }
            c->o.connect_timeout_s = d;
            break;
        case 'R':
            if (parse_size(optarg, &u) || u < 65536 || u > (1u << 30)) {
                snprintf(err, errlen, "--rcvbuf '%s' must be a size in 64K..1G", optarg);
                return FETCH_ARGS_BAD;
            }
            c->o.rcvbuf_bytes = u;
            break;
        case 'k':
            if (parse_size(optarg, &u) || u > (1u << 30)) {
                snprintf(err, errlen, "--chunk '%s' must be a size up to 1G (0 = sender default)", optarg);
                return FETCH_ARGS_BAD;
            }
            c->o.chunk_bytes = (uint32_t)u;
            break;
        case 'A':
            if (parse_double(optarg, &t->exll_alpha) || !(t->exll_alpha > 0)) {
                snprintf(err, errlen, "--exll-alpha '%s' must be > 0 (packets)", optarg);
                return FETCH_ARGS_BAD;
            }
            break;
        case 'G':
            if (parse_double(optarg, &t->exll_gamma) || !(t->exll_gamma > 0) || t->exll_gamma > 1) {
                snprintf(err, errlen, "--exll-gamma '%s' must be in (0, 1]", optarg);
                return FETCH_ARGS_BAD;
            }
            break;
        case 'B':
            if (parse_double(optarg, &t->dfcsd_beta) || !(t->dfcsd_beta > 0)) {
                snprintf(err, errlen, "--dfcsd-beta '%s' must be > 0 (packets)", optarg);
                return FETCH_ARGS_BAD;
            }
            break;
        case 'P':
            if (parse_double(optarg, &d) || d < 0 || d > 256 || d != floor(d)) {
                snprintf(err, errlen, "--sr-probes '%s' must be an integer in 0..256", optarg);
                return FETCH_ARGS_BAD;
            }
            c->o.sr_probes = (int)d;
            break;
        case 'M':
            if (parse_double(optarg, &d) || d < 1 || d > 256 || d != floor(d)) {
                snprintf(err, errlen, "--sr-probes-max '%s' must be an integer in 1..256", optarg);
                return FETCH_ARGS_BAD;
            }
            c->o.sr_probes_max = (int)d;
            break;
        case 'S':
            if (parse_double(optarg, &d) || !(d >= 0.5 && d <= 20)) {
                snprintf(err, errlen, "--stack-tti-ms '%s' must be a number of ms in 0.5..20", optarg);
                return FETCH_ARGS_BAD;
            }
            c->o.stack_tti_ms = d;
            break;
        case 'h': return FETCH_ARGS_HELP;
        default: return FETCH_ARGS_UNKNOWN;
        }
    }
    if (c->o.sr_probes_max && !c->o.sr_probes) {
        snprintf(err, errlen, "--sr-probes-max needs --sr-probes");
        return FETCH_ARGS_BAD;
    }
    if (!c->o.sr_probes_max)
        c->o.sr_probes_max = 2 * c->o.sr_probes < 256 ? 2 * c->o.sr_probes : 256;
    if (c->o.sr_probes_max < c->o.sr_probes) {
        snprintf(err, errlen, "--sr-probes-max %d is below --sr-probes %d", c->o.sr_probes_max, c->o.sr_probes);
        return FETCH_ARGS_BAD;
    }
    /* one probe at a time: a 30-110 ms gap plus its RTT, ~0.25 s each on a slow stack */
    if (c->o.sr_probes_max * SRPROBE_EXPECTED_S > c->o.timeout_s) {
        snprintf(err, errlen, "--sr-probes-max %d takes up to %.0f s of probing, beyond --timeout %g s", c->o.sr_probes_max,
                 c->o.sr_probes_max * SRPROBE_EXPECTED_S, c->o.timeout_s);
        return FETCH_ARGS_BAD;
    }
    if (!c->o.server) {
        snprintf(err, errlen, "--server is required");
        return FETCH_ARGS_BAD;
    }
    if (n_flow_texts == 0) {
        if (!!bytes_s == !!seconds_s) {
            snprintf(err, errlen, "give exactly one of --bytes or --seconds (or --flow specs)");
            return FETCH_ARGS_BAD;
        }
        char spec[128];
        snprintf(spec, sizeof(spec), "%s=%s", bytes_s ? "bytes" : "seconds", bytes_s ? bytes_s : seconds_s);
        for (int i = 0; i < n_same; i++) {
            if (parse_flow_spec(spec, &c->flows[i].spec, cc, err, errlen))
                return FETCH_ARGS_BAD;
            c->flows[i].spec.tag = (uint64_t)i;
        }
        c->n_flows = n_same;
    } else {
        for (int i = 0; i < n_flow_texts; i++)
            if (parse_flow_spec(flow_texts[i], &c->flows[i].spec, cc, err, errlen))
                return FETCH_ARGS_BAD;
        c->n_flows = n_flow_texts;
    }
    for (int i = 0; i < c->n_flows; i++) {
        c->flows[i].fd = -1;
        c->flows[i].pipe_idx = -1;
    }
    return FETCH_ARGS_OK;
}
