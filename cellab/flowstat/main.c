/* cellab-flowstat FILE [--interval-ms N] [--max-points N] [--out FILE]
 *                 [--min-flow-bytes N]
 * One pass over a capture; per TCP flow: bytes, throughput (mean and series), RTT at the capture point
 * (data segment to the first ACK covering it, Karn's rule), retransmissions, loss rate, completion time,
 * and the gaps between the ACK direction's ACKs. Prints one JSON document. Exit 2: the input is unusable. */
#include <errno.h>
#include <math.h>
#include <pcap/pcap.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flowstat.h"

#define EXIT_BAD_INPUT 2
#define DEFAULT_INTERVAL_MS 100.0
#define DEFAULT_MAX_POINTS 1000

void add_warning(struct ctx *c, const char *fmt, ...)
{
    if (c->n_warnings >= MAX_WARNINGS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->warnings[c->n_warnings++], WARNING_BYTES, fmt, ap);
    va_end(ap);
}

static void usage(FILE *out)
{
    fprintf(out, "usage: cellab-flowstat FILE [--interval-ms N] [--max-points N] [--min-flow-bytes N] [--out FILE]\n"
                 "  per-TCP-flow metrics of a pcap/pcapng capture as JSON (stdout unless --out)\n"
                 "  --interval-ms N   throughput series interval (default %.0f)\n"
                 "  --max-points N    RTT and ACK-gap samples listed per flow (default %d; statistics use all)\n"
                 "  --min-flow-bytes N  flows with fewer data bytes are listed but left out of the summary (default 1)\n",
            DEFAULT_INTERVAL_MS, DEFAULT_MAX_POINTS);
}

static int bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "cellab-flowstat: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    usage(stderr);
    return -1;
}

static int parse_args(int argc, char **argv, struct options *o)
{
    o->interval_ms = DEFAULT_INTERVAL_MS;
    o->max_points = DEFAULT_MAX_POINTS;
    o->min_flow_bytes = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--interval-ms") && value) {
            o->interval_ms = strtod(value, &end);
            if (*end || !(o->interval_ms >= 0.001 && o->interval_ms <= 3.6e6))
                return bad_usage("--interval-ms %s: need a number of milliseconds in [0.001, 3600000]", value);
            i++;
        } else if (!strcmp(a, "--max-points") && value) {
            long n = strtol(value, &end, 10);
            if (*end || n < 2 || n > 10000000)
                return bad_usage("--max-points %s: need an integer in [2, 10000000]", value);
            o->max_points = (size_t)n;
            i++;
        } else if (!strcmp(a, "--min-flow-bytes") && value) {
            unsigned long long n = strtoull(value, &end, 10);
            if (*end || value[0] == '-' || value[0] == '\0')
                return bad_usage("--min-flow-bytes %s: need a non-negative integer", value);
            o->min_flow_bytes = n;
            i++;
        } else if (!strcmp(a, "--out") && value) {
            o->out_path = argv[++i];
        } else if (a[0] == '-' && a[1] != '\0') {
            return bad_usage("unknown option or missing value: %s", a);
        } else if (o->path) {
            return bad_usage("one capture file only (got a second: %s)", a);
        } else {
            o->path = a;
        }
    }
    if (!o->path)
        return bad_usage("%s", "no capture file given");
    return 0;
}

static void on_frame(struct ctx *c, const struct pcap_pkthdr *h, const uint8_t *frame)
{
    struct segment s;
    int64_t t_ns = (int64_t)h->ts.tv_sec * 1000000000 + h->ts.tv_usec;   /* tv_usec holds ns: NANO precision */
    if (!c->started) {
        c->cfg.start_ns = t_ns;
        c->started = 1;
    }
    c->last_ns = t_ns;
    c->packets++;
    switch (decode_frame(c->linktype, frame, h->caplen, h->len, &s)) {
    case DECODE_TCP: {
        int dir;
        s.t_ns = t_ns;
        struct flow *f = flowtab_find(&c->table, &s, &dir);
        flow_segment(f, dir, &s, &c->cfg);
        c->tcp_packets++;
        break;
    }
    case DECODE_OTHER:
        c->other_packets++;
        break;
    case DECODE_SHORT:
        c->short_packets++;
        break;
    }
}

/* Reads every record; a damaged or cut-off tail ends the pass with a warning, not an error. */
static int read_capture(struct ctx *c)
{
    char errbuf[PCAP_ERRBUF_SIZE] = "";
    pcap_t *p = pcap_open_offline_with_tstamp_precision(c->opt.path, PCAP_TSTAMP_PRECISION_NANO, errbuf);
    if (!p) {
        fprintf(stderr, "cellab-flowstat: %s: not a readable pcap/pcapng capture: %s\n", c->opt.path, errbuf);
        return -1;
    }
    c->linktype = pcap_datalink(p);
    if (link_header_bytes(c->linktype) < 0) {
        const char *name = pcap_datalink_val_to_name(c->linktype);
        fprintf(stderr, "cellab-flowstat: %s: link type %s (%d) is not supported (supported: %s)\n", c->opt.path,
                name ? name : "unknown", c->linktype, supported_link_types());
        pcap_close(p);
        return -1;
    }
    struct pcap_pkthdr *h;
    const u_char *frame;
    int r;
    while ((r = pcap_next_ex(p, &h, &frame)) == 1)
        on_frame(c, h, frame);
    if (r == PCAP_ERROR)
        add_warning(c, "%s: capture ends in a damaged or truncated record after %llu packets (%s); metrics cover "
                       "the packets before it", c->opt.path, (unsigned long long)c->packets, pcap_geterr(p));
    pcap_close(p);
    return 0;
}

static void warn_unbinned(struct ctx *c)
{
    size_t flows = 0;
    for (size_t i = 0; i < c->table.n; i++)
        flows += c->table.flows[i].half[0].unbinned_bytes + c->table.flows[i].half[1].unbinned_bytes > 0;
    if (flows)
        add_warning(c, "%zu flows last longer than %d throughput intervals (a timestamp jump?): their series stop "
                       "there (see unbinned_bytes)", flows, MAX_SERIES_BINS);
}

static int write_output(const struct ctx *c)
{
    if (!c->opt.out_path) {
        write_report(c, stdout);
        return fflush(stdout) == 0 ? 0 : -1;
    }
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp%ld", c->opt.out_path, (long)getpid());
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fprintf(stderr, "cellab-flowstat: %s: cannot write: %s\n", tmp, strerror(errno));
        return -1;
    }
    write_report(c, out);
    int failed = ferror(out) | fclose(out);
    if (failed || rename(tmp, c->opt.out_path) != 0) {   /* whole file or none: readers never see half */
        fprintf(stderr, "cellab-flowstat: %s: cannot write: %s\n", c->opt.out_path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct ctx c;
    memset(&c, 0, sizeof(c));
    if (parse_args(argc, argv, &c.opt) != 0)
        return EXIT_BAD_INPUT;
    c.cfg.interval_ns = (int64_t)llround(c.opt.interval_ms * 1e6);
    flowtab_init(&c.table);
    int rc = 0;
    if (read_capture(&c) != 0) {
        rc = EXIT_BAD_INPUT;
    } else {
        warn_unbinned(&c);
        if (c.short_packets)
            add_warning(&c, "%llu packets were cut before the end of their TCP header (snaplen too small?) and "
                            "were skipped", (unsigned long long)c.short_packets);
        rc = write_output(&c) == 0 ? 0 : 1;
    }
    flowtab_free(&c.table);
    return rc;
}
