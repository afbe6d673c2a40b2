/* cellab-cell: command-line parameters, checked (exit 2 naming the option and the allowed values) before any
 * namespace is touched. */
#include "cell.h"

#include <errno.h>
#include <getopt.h>
#include <linux/if.h>
#include <stdlib.h>
#include <string.h>

static int in_list(int v, const int *allowed, int n)
{
    for (int i = 0; i < n; i++)
        if (allowed[i] == v)
            return 1;
    return 0;
}

static long parse_long(const char *opt, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi)
        die("--%s: %s is not an integer in [%ld, %ld]", opt, s, lo, hi);
    return v;
}

#define QUEUE_MAX_BYTES (1L << 30)

/* A queue option: the srsRAN model's name (returns 0) or bytes:N (returns 1, N in *bytes). */
static int parse_queue(const char *opt, const char *arg, const char *model, uint64_t *bytes)
{
    if (!strcmp(arg, model))
        return 0;
    if (strncmp(arg, "bytes:", 6))
        die("--%s: %s not allowed (allowed: %s, bytes:N with N in [1500, %ld])", opt, arg, model, QUEUE_MAX_BYTES);
    *bytes = (uint64_t)parse_long(opt, arg + 6, 1500, QUEUE_MAX_BYTES);
    return 1;
}

static double parse_double(const char *opt, const char *s, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !(v >= lo && v <= hi))
        die("--%s: %s is not a number in [%g, %g]", opt, s, lo, hi);
    return v;
}

static void split_ns_tun(const char *opt, const char *arg, char *ns, size_t ns_len, char *tun, size_t tun_len,
                         char *rest, size_t rest_len)
{
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "%s", arg);
    char *a = strtok(tmp, ":"), *b = strtok(NULL, ":"), *r = strtok(NULL, ":");
    if (!a || !b || strlen(a) >= ns_len || strlen(b) >= tun_len || strlen(b) >= IFNAMSIZ ||
        (rest && !r) || (!rest && r))
        die("--%s: %s must be %s", opt, arg, rest ? "NETNS:TUN:IPV4" : "NETNS:TUN");
    snprintf(ns, ns_len, "%s", a);
    snprintf(tun, tun_len, "%s", b);
    if (rest)
        snprintf(rest, rest_len, "%s", r);
}

static void usage(void)
{
    fputs("usage: cellab-cell --srv NETNS:TUN --ue NETNS:TUN:IPV4 [--ue ...] [options]\n"
          "  --n-prb 6|15|25|50|75|100   --sr-period-ms 5|10|20|40|80   --cqi-period-ms 2|5|10|20|40|80|160\n"
          "  --cqi-delay-ms N   --rlc-queue srsenb|bytes:N   --rlc-queue-sdus N   --pdcp-discard-ms N\n"
          "  --ul-queue srsue|bytes:N   --ul-policy srsenb|sr-strict\n"
          "  --ul-prb N   --ul-mcs 0..28   --bsr-timer-ms N   --harq-max-tx 1..8   --core-delay-ms X\n"
          "  --internet-delay-ms X   --core-jitter-ms N   --attenuation-db A[,A...]   --seed N   --fading-db SIGMA\n"
          "  --fading-coherence-ms X   --trace FILE   --trace-up FILE   --unlimited   --realtime   --cpus-awake   --plain-copy   --ctl EP   --pub EP\n"
          "  --tti-log FILE   --pid-file FILE   --duration-s X   --clock FILE   --clock-out FILE\n"
          "  --log-max-bytes N (the TTI log and --clock-out, each with its older segment FILE.1, within N; 0 = no cap)\n"
          "  --stdout-log FILE (the file stdout is: its events, kept within --log-max-bytes the same way)\n"
          "  --rlf   --t310-ms N   --n310 N   --n311 N   --t311-ms N   --rlf-release-ms N   --reest-ms N   --connect-ms N\n",
          stderr);
}

void parse_args(struct cell *c, int argc, char **argv)
{
    struct cell_params *p = &c->p;
    *p = (struct cell_params){.n_prb = 25, .sr_period_ms = 20, .cqi_period_ms = 40, .cqi_delay_ms = 4,
                              .ul_prb = -1, .ul_mcs = 20, .bsr_timer_ms = 20, .harq_max_tx = 4,
                              .harq_rtt_ms = 8, .ul_policy = UL_SRSENB, .dl_queue = DLQ_SRSENB, .ul_queue = ULQ_SRSUE,
                              .rlc_queue_sdus = 256, .pdcp_discard_ms = 0, .rlc_queue_bytes = 4u << 20,
                              .ul_buffer_bytes = 4u << 20, .fading_coherence_ms = 100.0, .seed = 1,
                              .poll_grant_prb = 2, .t310_ms = 200, .n310 = 1, .n311 = 1, .t311_ms = 10000,
                              .rlf_release_ms = 4000, .reest_ms = 150, .connect_ms = 300};
    static const struct option opts[] = {
        {"srv", 1, 0, 'S'}, {"ue", 1, 0, 'U'}, {"n-prb", 1, 0, 'n'}, {"sr-period-ms", 1, 0, 'r'},
        {"cqi-period-ms", 1, 0, 'q'}, {"cqi-delay-ms", 1, 0, 'Q'}, {"rlc-queue", 1, 0, 'b'},
        {"rlc-queue-sdus", 1, 0, 'k'}, {"pdcp-discard-ms", 1, 0, 'd'},
        {"ul-queue", 1, 0, 'B'}, {"ul-policy", 1, 0, 'P'}, {"ul-prb", 1, 0, 'u'}, {"ul-mcs", 1, 0, 'm'},
        {"bsr-timer-ms", 1, 0, 'T'}, {"harq-max-tx", 1, 0, 'h'}, {"core-delay-ms", 1, 0, 'c'},
        {"internet-delay-ms", 1, 0, 'i'}, {"core-jitter-ms", 1, 0, 'j'}, {"attenuation-db", 1, 0, 'a'}, {"seed", 1, 0, 's'},
        {"fading-db", 1, 0, 'f'}, {"fading-coherence-ms", 1, 0, 'F'}, {"trace", 1, 0, 't'}, {"trace-up", 1, 0, 'y'},
        {"unlimited", 0, 0, 'L'}, {"realtime", 0, 0, 'R'}, {"cpus-awake", 0, 0, 'K'}, {"plain-copy", 0, 0, 'X'}, {"ctl", 1, 0, 'C'}, {"pub", 1, 0, 'p'},
        {"tti-log", 1, 0, 'l'}, {"pid-file", 1, 0, 'I'}, {"duration-s", 1, 0, 'D'}, {"help", 0, 0, 'H'},
        {"clock", 1, 0, 1010}, {"clock-out", 1, 0, 1011}, {"log-max-bytes", 1, 0, 1012}, {"stdout-log", 1, 0, 1013},
        {"rlf", 0, 0, 'W'}, {"t310-ms", 1, 0, 1000}, {"n310", 1, 0, 1001}, {"n311", 1, 0, 1002},
        {"t311-ms", 1, 0, 1003}, {"rlf-release-ms", 1, 0, 1004}, {"reest-ms", 1, 0, 1005}, {"connect-ms", 1, 0, 1006},
        {0, 0, 0, 0}};
    char atten_arg[512] = "";
    int opt;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 'S':
            split_ns_tun("srv", optarg, p->srv_netns, sizeof(p->srv_netns), p->srv_tun, sizeof(p->srv_tun), NULL,
                         0);
            break;
        case 'U': {
            if (p->n_ues >= CELL_MAX_UES)
                die("--ue: at most %d UEs", CELL_MAX_UES);
            struct ue *u = &c->ue[p->n_ues];
            char addr[64];
            split_ns_tun("ue", optarg, u->netns, sizeof(u->netns), u->tun, sizeof(u->tun), addr, sizeof(addr));
            unsigned a, b, cc, d;
            char extra;
            if (sscanf(addr, "%u.%u.%u.%u%c", &a, &b, &cc, &d, &extra) != 4 || a > 255 || b > 255 || cc > 255 ||
                d > 255)
                die("--ue: %s is not an IPv4 address", addr);
            uint8_t *ab = (uint8_t *)&u->addr_be;
            ab[0] = (uint8_t)a, ab[1] = (uint8_t)b, ab[2] = (uint8_t)cc, ab[3] = (uint8_t)d;
            p->n_ues++;
            break;
        }
        case 'n': {
            static const int ok[] = {6, 15, 25, 50, 75, 100};
            p->n_prb = (int)parse_long("n-prb", optarg, 1, 110);
            if (!in_list(p->n_prb, ok, 6))
                die("--n-prb: %d not allowed (allowed: 6, 15, 25, 50, 75, 100)", p->n_prb);
            break;
        }
        case 'r': {
            static const int ok[] = {5, 10, 20, 40, 80};
            p->sr_period_ms = (int)parse_long("sr-period-ms", optarg, 1, 1000);
            if (!in_list(p->sr_period_ms, ok, 5))
                die("--sr-period-ms: %d not allowed (allowed: 5, 10, 20, 40, 80)", p->sr_period_ms);
            break;
        }
        case 'q': {
            static const int ok[] = {2, 5, 10, 20, 40, 80, 160};
            p->cqi_period_ms = (int)parse_long("cqi-period-ms", optarg, 1, 1000);
            if (!in_list(p->cqi_period_ms, ok, 7))
                die("--cqi-period-ms: %d not allowed (allowed: 2, 5, 10, 20, 40, 80, 160)", p->cqi_period_ms);
            break;
        }
        case 'Q': p->cqi_delay_ms = (int)parse_long("cqi-delay-ms", optarg, 0, 100); break;
        case 'b':
            p->dl_queue = parse_queue("rlc-queue", optarg, "srsenb", &p->rlc_queue_bytes) ? DLQ_BYTES : DLQ_SRSENB;
            break;
        case 'k': p->rlc_queue_sdus = (int)parse_long("rlc-queue-sdus", optarg, 1, 65536); break;
        case 'd': p->pdcp_discard_ms = (int)parse_long("pdcp-discard-ms", optarg, 0, 10000); break; /* 0: none */
        case 'B':
            p->ul_queue = parse_queue("ul-queue", optarg, "srsue", &p->ul_buffer_bytes) ? ULQ_BYTES : ULQ_SRSUE;
            break;
        case 'P':
            if (!strcmp(optarg, "srsenb"))
                p->ul_policy = UL_SRSENB;
            else if (!strcmp(optarg, "sr-strict"))
                p->ul_policy = UL_SR_STRICT;
            else
                die("--ul-policy: %s not allowed (allowed: srsenb, sr-strict)", optarg);
            break;
        case 'u': p->ul_prb = (int)parse_long("ul-prb", optarg, 1, 100); break;
        case 'm': p->ul_mcs = (int)parse_long("ul-mcs", optarg, 0, 28); break;
        case 'T': p->bsr_timer_ms = (int)parse_long("bsr-timer-ms", optarg, 5, 2560); break;
        case 'h': p->harq_max_tx = (int)parse_long("harq-max-tx", optarg, 1, 8); break;
        case 'c': p->core_delay_ms = parse_double("core-delay-ms", optarg, 0, 10000); break;
        case 'i': p->internet_delay_ms = parse_double("internet-delay-ms", optarg, 0, 10000); break;
        case 'j': p->core_jitter_ms = (int)parse_long("core-jitter-ms", optarg, 0, 1000); break;
        case 'a': snprintf(atten_arg, sizeof(atten_arg), "%s", optarg); break;
        case 's': p->seed = (uint64_t)parse_long("seed", optarg, 0, 0x7fffffffffffffffL); break;
        case 'f': p->fading_sigma_db = parse_double("fading-db", optarg, 0, 30); break;
        case 'F': p->fading_coherence_ms = parse_double("fading-coherence-ms", optarg, 1, 100000); break;
        case 't': p->trace_path = optarg; break;
        case 'y': p->trace_up_path = optarg; break;
        case 'L': p->unlimited = 1; break;
        case 'R': p->realtime = 1; break;
        case 'K': p->cpus_awake = 1; break;
        case 'X': p->plain_copy = 1; break;
        case 'C': p->ctl_ep = optarg; break;
        case 'p': p->pub_ep = optarg; break;
        case 'l': p->tti_log_path = optarg; break;
        case 'I': p->pid_path = optarg; break;
        case 'D': p->duration_s = parse_double("duration-s", optarg, 0, 1e7); break;
        case 'W': p->rlf = 1; break;
        /* TS 36.331 UE-TimersAndConstants ranges (t310 0..2000, n310 1..20, n311 1..10, t311 1000..30000) */
        case 1000: p->t310_ms = (int)parse_long("t310-ms", optarg, 0, 2000); break;
        case 1001: p->n310 = (int)parse_long("n310", optarg, 1, 20); break;
        case 1002: p->n311 = (int)parse_long("n311", optarg, 1, 10); break;
        case 1003: p->t311_ms = (int)parse_long("t311-ms", optarg, 1000, 30000); break;
        case 1004: p->rlf_release_ms = (int)parse_long("rlf-release-ms", optarg, 0, 600000); break;
        case 1005: p->reest_ms = (int)parse_long("reest-ms", optarg, 0, 10000); break;
        case 1006: p->connect_ms = (int)parse_long("connect-ms", optarg, 0, 60000); break;
        case 1010: p->clock_path = optarg; break;
        case 1011: p->clock_out_path = optarg; break;
        case 1012: /* 0: no cap; else room for two segments of a header and a 16-UE TTI */
            p->log_max_bytes = strcmp(optarg, "0") ? (uint64_t)parse_long("log-max-bytes", optarg, 65536, 1L << 50) : 0;
            break;
        case 1013: p->stdout_log_path = optarg; break;
        case 'H': usage(); exit(0);
        default: usage(); exit(2);
        }
    }
    if (optind < argc)
        die("unexpected argument %s", argv[optind]);
    if (!p->srv_netns[0])
        die("--srv NETNS:TUN is required");
    if (p->n_ues == 0)
        die("--ue NETNS:TUN:IPV4 is required (one per UE)");
    if (p->ul_prb < 0)
        p->ul_prb = p->n_prb > 6 ? p->n_prb - 4 : 4; /* PUCCH takes PRBs at both band edges */
    if (p->ul_prb > p->n_prb)
        die("--ul-prb: %d exceeds --n-prb %d", p->ul_prb, p->n_prb);
    if (p->rlf && (p->trace_path || p->trace_up_path || p->unlimited))
        die("--rlf: the radio link failure model needs the radio model (not --trace, --trace-up or --unlimited)");
    /* attenuation: one value for every UE, or one per UE */
    for (int i = 0; i < p->n_ues; i++)
        c->ue[i].attenuation_db = 0.0;
    if (atten_arg[0]) {
        char *save = NULL, *tok = strtok_r(atten_arg, ",", &save);
        int i = 0;
        double last = 0;
        while (tok) {
            if (i >= p->n_ues)
                die("--attenuation-db: more values than UEs (%d)", p->n_ues);
            last = parse_double("attenuation-db", tok, 0, 200);
            c->ue[i++].attenuation_db = last;
            tok = strtok_r(NULL, ",", &save);
        }
        if (i == 1)
            for (int k = 1; k < p->n_ues; k++)
                c->ue[k].attenuation_db = last;
        else if (i != p->n_ues)
            die("--attenuation-db: give one value or one per UE (%d)", p->n_ues);
    }
    if (p->clock_path) { /* read and checked whole before any namespace is touched */
        char err[512] = "";
        if (p->plain_copy)
            die("--clock: not with --plain-copy (the baseline has no TTIs)");
        if (stack_clock_load(&c->clock, p->clock_path, err, sizeof(err)) < 0)
            die("--clock %s: %s", p->clock_path, err);
    }
    if (p->trace_path) {
        char err[512] = "";
        if (trace_load(&c->trace, p->trace_path, err, sizeof(err)) < 0)
            die("--trace: %s", err);
        c->have_trace = 1;
    }
    if (p->trace_up_path) {
        char err[512] = "";
        if (trace_load(&c->trace_up, p->trace_up_path, err, sizeof(err)) < 0)
            die("--trace-up: %s", err);
        c->have_trace_up = 1;
    }
}
