/* `cellab-probe analyze`: the live estimators on a capture taken anywhere (libpcap; the capture is
 * read as seen by the data receiver) or on a probe event log (--events, also used for synthetic
 * timing in tests). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "pipeline.h"
#include "util.h"

#ifdef HAVE_PCAP
#include <pcap/pcap.h>
#endif

#define MAX_MSGS 8
#define MAX_CONNS 1024

struct analyze_ctx {
    struct pipeline pl;
    const char *input;
    const char *kind;        /* pcap | events */
    const char *timestamps;  /* pcap-ns | pcap-us | events */
    uint64_t records, tcp_packets;
    char errors[MAX_MSGS][300];
    int n_errors;
    char missing[MAX_MSGS][300];
    int n_missing;
    int fatal;
    /* ICMP echoes in the capture (the probe's idle-uplink SR probes): request times and RTTs */
    struct { uint16_t id, seq; uint64_t t_ns; } echo_req[256];
    int n_echo_req;
    double ping_rtt_us[256];
    int n_ping;
};

static void add_msg(char list[][300], int *n, const char *text)
{
    if (*n < MAX_MSGS)
        snprintf(list[(*n)++], 300, "%s", text);
}

#ifdef HAVE_PCAP
static void feed_segment(struct analyze_ctx *c, const struct tcp_segment *seg, uint64_t t_ns)
{
    int dir;
    int idx = pipe_match(&c->pl, seg, &dir);
    if (idx < 0)
        return;
    c->tcp_packets++;
    struct pkt_event ev = { .t_ns = t_ns, .dir = (uint8_t)dir, .has_ts = seg->has_ts, .tcp_flags = seg->flags,
                            .seq = seg->seq, .ack = seg->ack, .payload_bytes = seg->payload_bytes,
                            .win_raw = seg->win_raw, .tsval = seg->tsval, .tsecr = seg->tsecr };
    pipe_event(&c->pl, idx, &ev);
    /* the sender closed: live, the read returns 0 here and the flow's timers stop (later ACKs still
     * count); a capture runs on, and ticking on would close a last, partial frame live never saw */
    if (dir == DIR_DATA_IN && (seg->flags & (PKT_FIN | PKT_RST)) && !c->pl.flows[idx]->done)
        pipe_flow_done(&c->pl, idx, t_ns);
    pipe_tick(&c->pl, t_ns);
}

struct conn { struct tcp_endpoint a, b; uint64_t bytes_ab, bytes_ba; };

/* Network-layer offset for the link types captures of this kind come in; -1 = unsupported. */
static long l3_offset(int dlt, const uint8_t *p, size_t caplen)
{
    switch (dlt) {
    case DLT_RAW:
#ifdef DLT_IPV4
    case DLT_IPV4:
    case DLT_IPV6:
#endif
        return 0;
    case DLT_EN10MB: {
        if (caplen < 14)
            return -1;
        size_t off = 12;
        uint16_t et = (uint16_t)(p[off] << 8 | p[off + 1]);
        while ((et == 0x8100 || et == 0x88a8) && caplen >= off + 6) {
            off += 4;
            et = (uint16_t)(p[off] << 8 | p[off + 1]);
        }
        return (et == 0x0800 || et == 0x86dd) ? (long)off + 2 : -1;
    }
    case DLT_LINUX_SLL: return caplen >= 16 ? 16 : -1;
#ifdef DLT_LINUX_SLL2
    case DLT_LINUX_SLL2: return caplen >= 20 ? 20 : -1;
#endif
    case DLT_NULL: return caplen >= 4 ? 4 : -1;
    }
    return -1;
}

static int dlt_supported(int dlt)
{
    switch (dlt) {
    case DLT_RAW: case DLT_EN10MB: case DLT_LINUX_SLL: case DLT_NULL:
#ifdef DLT_IPV4
    case DLT_IPV4: case DLT_IPV6:
#endif
#ifdef DLT_LINUX_SLL2
    case DLT_LINUX_SLL2:
#endif
        return 1;
    }
    return 0;
}

static pcap_t *open_pcap(struct analyze_ctx *c, int *nano)
{
    char errbuf[PCAP_ERRBUF_SIZE] = "";
    pcap_t *p = pcap_open_offline_with_tstamp_precision(c->input, PCAP_TSTAMP_PRECISION_NANO, errbuf);
    if (!p) {
        char msg[300];
        snprintf(msg, sizeof(msg), "%s: not a readable capture: %s", c->input, errbuf);
        add_msg(c->errors, &c->n_errors, msg);
        c->fatal = 1;
        return NULL;
    }
    *nano = pcap_get_tstamp_precision(p) == PCAP_TSTAMP_PRECISION_NANO;
    return p;
}

/* ICMP / ICMPv6 echo between the flows' receiver and sender: the probe's SR probes, if any. */
static void feed_icmp(struct analyze_ctx *c, const struct tcp_endpoint *srv, const uint8_t *ip, size_t caplen,
                      uint64_t t_ns)
{
    if (caplen < 1)
        return;
    unsigned version = ip[0] >> 4;
    const uint8_t *icmp, *src, *dst;
    size_t alen;
    if (version == 4 && caplen >= 28 && ip[9] == 1) {
        size_t ihl = (size_t)(ip[0] & 0x0f) * 4;
        if (caplen < ihl + 8)
            return;
        icmp = ip + ihl, src = ip + 12, dst = ip + 16, alen = 4;
    } else if (version == 6 && caplen >= 48 && ip[6] == 58) {
        icmp = ip + 40, src = ip + 8, dst = ip + 24, alen = 16;
    } else {
        return;
    }
    int request = icmp[0] == (version == 4 ? 8 : 128), reply = icmp[0] == (version == 4 ? 0 : 129);
    uint16_t id = (uint16_t)(icmp[4] << 8 | icmp[5]), seq = (uint16_t)(icmp[6] << 8 | icmp[7]);
    if (request && memcmp(dst, srv->addr, alen) == 0 && c->n_echo_req < 256) {
        c->echo_req[c->n_echo_req].id = id;
        c->echo_req[c->n_echo_req].seq = seq;
        c->echo_req[c->n_echo_req++].t_ns = t_ns;
    } else if (reply && memcmp(src, srv->addr, alen) == 0 && c->n_ping < 256) {
        for (int i = c->n_echo_req - 1; i >= 0; i--) {
            if (c->echo_req[i].id == id && c->echo_req[i].seq == seq && c->echo_req[i].t_ns) {
                c->ping_rtt_us[c->n_ping++] = (double)(t_ns - c->echo_req[i].t_ns) / 1e3;
                c->echo_req[i].t_ns = 0;
                break;
            }
        }
    }
}

/* Returns 1 for a packet, 0 at the end, -1 on a read error (message added once). */
static int next_packet(struct analyze_ctx *c, pcap_t *p, int nano, struct tcp_segment *seg, uint64_t *t_ns,
                       int *is_tcp, int report, const struct tcp_endpoint *icmp_server)
{
    struct pcap_pkthdr *h;
    const u_char *data;
    int r = pcap_next_ex(p, &h, &data);
    if (r == PCAP_ERROR_BREAK)
        return 0;
    if (r < 0) {
        if (report) {
            char msg[300];
            snprintf(msg, sizeof(msg), "%s: capture ends early after %llu records: %s", c->input,
                     (unsigned long long)c->records, pcap_geterr(p));
            add_msg(c->errors, &c->n_errors, msg);
            add_msg(c->missing, &c->n_missing, "packets after the damaged end of the capture");
        }
        return -1;
    }
    if (report)
        c->records++;
    *t_ns = (uint64_t)h->ts.tv_sec * 1000000000ULL + (uint64_t)h->ts.tv_usec * (nano ? 1ULL : 1000ULL);
    long off = l3_offset(pcap_datalink(p), data, h->caplen);
    *is_tcp = off >= 0 && parse_ip_tcp(data + off, h->caplen - (size_t)off, seg) == 0;
    if (!*is_tcp && off >= 0 && icmp_server)
        feed_icmp(c, icmp_server, data + off, h->caplen - (size_t)off, *t_ns);
    return 1;
}

static int run_pcap(struct analyze_ctx *c)
{
    int nano = 0;
    pcap_t *p = open_pcap(c, &nano);
    if (!p)
        return -1;
    c->timestamps = nano ? "pcap-ns" : "pcap-us";
    int dlt = pcap_datalink(p);
    if (!dlt_supported(dlt)) {
        char msg[300];
        snprintf(msg, sizeof(msg), "%s: link type %s is not supported (allowed: EN10MB, RAW, LINUX_SLL, LINUX_SLL2, NULL)",
                 c->input, pcap_datalink_val_to_name(dlt) ? pcap_datalink_val_to_name(dlt) : "?");
        add_msg(c->errors, &c->n_errors, msg);
        c->fatal = 1;
        pcap_close(p);
        return -1;
    }
    /* pass 1: find the TCP connections and which side received the data */
    struct conn *conns = calloc(MAX_CONNS, sizeof(*conns));
    int n_conns = 0;
    struct tcp_segment seg;
    uint64_t t;
    int is_tcp;
    while (next_packet(c, p, nano, &seg, &t, &is_tcp, 1, NULL) == 1) {
        if (!is_tcp || !conns)
            continue;
        int found = -1;
        for (int i = 0; i < n_conns; i++) {
            if ((endpoint_equal(&conns[i].a, &seg.src) && endpoint_equal(&conns[i].b, &seg.dst)) ||
                (endpoint_equal(&conns[i].a, &seg.dst) && endpoint_equal(&conns[i].b, &seg.src))) {
                found = i;
                break;
            }
        }
        if (found < 0 && n_conns < MAX_CONNS) {
            found = n_conns++;
            conns[found].a = seg.src;
            conns[found].b = seg.dst;
        }
        if (found < 0)
            continue;
        if (endpoint_equal(&conns[found].a, &seg.src))
            conns[found].bytes_ab += seg.payload_bytes;
        else
            conns[found].bytes_ba += seg.payload_bytes;
    }
    pcap_close(p);
    /* the connections that carried data, largest first */
    struct tcp_endpoint rx_ep[PIPE_MAX_FLOWS], tx_ep[PIPE_MAX_FLOWS];
    int n_chosen = 0;
    for (int k = 0; k < PIPE_MAX_FLOWS; k++) {
        int best = -1;
        uint64_t best_bytes = 0;
        for (int i = 0; i < n_conns; i++) {
            uint64_t b = conns[i].bytes_ab > conns[i].bytes_ba ? conns[i].bytes_ab : conns[i].bytes_ba;
            if (b > best_bytes) {
                best_bytes = b;
                best = i;
            }
        }
        if (best < 0)
            break;
        struct conn *cn = &conns[best];
        rx_ep[n_chosen] = cn->bytes_ab >= cn->bytes_ba ? cn->b : cn->a;
        tx_ep[n_chosen] = cn->bytes_ab >= cn->bytes_ba ? cn->a : cn->b;
        n_chosen++;
        cn->bytes_ab = cn->bytes_ba = 0;
    }
    if (n_chosen > 0) {
        /* the probe's ICMP SR probes to the first flow's sender, before the flows are set up: as live,
         * their period feeds ExLL's mRE, so observation ends where it ended live */
        p = open_pcap(c, &nano);
        if (p) {
            while (next_packet(c, p, nano, &seg, &t, &is_tcp, 0, &tx_ep[0]) == 1)
                ;
            pcap_close(p);
        }
        c->pl.ping_rtt_us = c->ping_rtt_us;
        c->pl.n_ping = (size_t)c->n_ping;
    }
    for (int k = 0; k < n_chosen; k++) {
        char a[80], b[80], label[64];
        endpoint_format(&tx_ep[k], a, sizeof(a));
        endpoint_format(&rx_ep[k], b, sizeof(b));
        snprintf(label, sizeof(label), "%.30s>%.30s", a, b);
        pipe_add_flow(&c->pl, label, &rx_ep[k], &tx_ep[k], 0);
    }
    free(conns);
    if (c->pl.n_flows == 0) {
        char msg[300];
        snprintf(msg, sizeof(msg), "%s: no TCP connection carrying data in %llu records", c->input,
                 (unsigned long long)c->records);
        add_msg(c->errors, &c->n_errors, msg);
        return -1;
    }
    /* pass 2: the estimators */
    p = open_pcap(c, &nano);
    if (!p)
        return -1;
    uint64_t last_t = 0;
    while (next_packet(c, p, nano, &seg, &t, &is_tcp, 0, NULL) == 1) {
        if (is_tcp)
            feed_segment(c, &seg, t);
        last_t = t;
    }
    pcap_close(p);
    for (int i = 0; i < c->pl.n_flows; i++)
        pipe_flow_done(&c->pl, i, last_t);
    return 0;
}
#endif

static int run_events(struct analyze_ctx *c)
{
    c->timestamps = "events";
    FILE *in = fopen(c->input, "r");
    if (!in) {
        char msg[300];
        snprintf(msg, sizeof(msg), "%s: %s", c->input, strerror(errno));
        add_msg(c->errors, &c->n_errors, msg);
        c->fatal = 1;
        return -1;
    }
    char line[512];
    uint64_t lineno = 0, last_t = 0;
    int flow_map[PIPE_MAX_FLOWS];
    uint64_t flow_last_t[PIPE_MAX_FLOWS] = {0};
    for (int i = 0; i < PIPE_MAX_FLOWS; i++)
        flow_map[i] = -1;
    while (fgets(line, sizeof(line), in)) {
        lineno++;
        if (line[0] == '#' || line[0] == 't' || line[0] == '\n')
            continue;
        unsigned long long t;
        int flow, dir, has_ts;
        unsigned seq, ack, len, win, tsval, tsecr;
        if (sscanf(line, "%llu,%d,%d,%u,%u,%u,%u,%d,%u,%u", &t, &flow, &dir, &seq, &ack, &len, &win, &has_ts, &tsval,
                   &tsecr) != 10 || flow < 0 || flow >= PIPE_MAX_FLOWS || (dir != 0 && dir != 1)) {
            char msg[300];
            snprintf(msg, sizeof(msg),
                     "%s: line %llu: expected t_ns,flow(0..%d),dir(0 data|1 ack),seq,ack,len,win,has_ts,tsval,tsecr",
                     c->input, (unsigned long long)lineno, PIPE_MAX_FLOWS - 1);
            add_msg(c->errors, &c->n_errors, msg);
            add_msg(c->missing, &c->n_missing, "events after the first malformed line");
            break;
        }
        if (flow_map[flow] >= 0 && t < flow_last_t[flow]) { /* the recording's clock stepped back */
            char msg[300];
            snprintf(msg, sizeof(msg), "%s: line %llu: time goes back in flow %d: %llu after %llu ns", c->input,
                     (unsigned long long)lineno, flow, t, (unsigned long long)flow_last_t[flow]);
            add_msg(c->errors, &c->n_errors, msg);
            add_msg(c->missing, &c->n_missing, "events from the first one out of time order");
            break;
        }
        flow_last_t[flow] = t;
        c->records++;
        if (flow_map[flow] < 0) {
            char label[32];
            snprintf(label, sizeof(label), "flow%d", flow);
            flow_map[flow] = pipe_add_flow(&c->pl, label, NULL, NULL, 0);
        }
        struct pkt_event ev = { .t_ns = t, .dir = (uint8_t)dir, .has_ts = (uint8_t)(has_ts != 0), .seq = seq,
                                .ack = ack, .payload_bytes = len, .win_raw = win, .tsval = tsval, .tsecr = tsecr };
        c->tcp_packets++;
        pipe_event(&c->pl, flow_map[flow], &ev);
        pipe_tick(&c->pl, t);
        last_t = t;
    }
    fclose(in);
    for (int i = 0; i < c->pl.n_flows; i++)
        pipe_flow_done(&c->pl, i, last_t);
    if (c->records == 0 && c->n_errors == 0) {
        char msg[300];
        snprintf(msg, sizeof(msg), "%s: no events", c->input);
        add_msg(c->errors, &c->n_errors, msg);
    }
    return 0;
}

static void usage(FILE *out)
{
    fputs("usage: cellab-probe analyze (--pcap FILE | --events FILE) [--summary FILE]\n", out);
}

int cmd_analyze(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "pcap", required_argument, 0, 'p' }, { "events", required_argument, 0, 'e' },
        { "summary", required_argument, 0, 'o' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    struct analyze_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return 1;
    const char *summary = NULL;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'p': c->input = optarg; c->kind = "pcap"; break;
        case 'e': c->input = optarg; c->kind = "events"; break;
        case 'o': summary = optarg; break;
        case 'h': usage(stdout); free(c); return 0;
        default: usage(stderr); free(c); return 2;
        }
    }
    if (!c->input) {
        fprintf(stderr, "cellab-probe analyze: give --pcap FILE or --events FILE\n");
        usage(stderr);
        free(c);
        return 2;
    }
    pipe_init(&c->pl, CONTROL_NONE);
    if (!strcmp(c->kind, "pcap")) {
#ifdef HAVE_PCAP
        run_pcap(c);
#else
        add_msg(c->errors, &c->n_errors, "--pcap: this build has no libpcap (the static aarch64 build): copy the "
                                         "capture to a host build, or use --events with a probe log");
        add_msg(c->missing, &c->n_missing, "everything: the capture was not read");
        c->fatal = 1;
        c->timestamps = "none";
#endif
    } else {
        run_events(c);
    }

    struct outfile out;
    int rc = 0;
    if (outfile_open(&out, summary) != 0) {
        fprintf(stderr, "cellab-probe: --summary %s: %s\n", summary, strerror(errno));
        pipe_free(&c->pl);
        free(c);
        return 1;
    }
    struct jsonw w;
    jw_init(&w, out.f);
    const char *status = c->fatal || c->pl.n_flows == 0 ? "error" : (c->n_errors ? "partial" : "ok");
    jw_obj_open(&w, NULL);
    jw_str(&w, "tool", "cellab-probe");
    jw_str(&w, "version", PROBE_VERSION);
    jw_str(&w, "command", "analyze");
    jw_str(&w, "status", status);
    jw_str(&w, "input", c->input);
    jw_str(&w, "input_kind", c->kind);
    jw_str(&w, "timestamps", c->timestamps ? c->timestamps : "none");
    jw_str(&w, "vantage", "data receiver (the capture is read as taken at the UE)");
    jw_int(&w, "records", (long long)c->records);
    jw_int(&w, "flow_packets", (long long)c->tcp_packets);
    jw_str_rows(&w, "errors", c->errors[0], sizeof c->errors[0], c->n_errors);
    jw_str_rows(&w, "missing", c->missing[0], sizeof c->missing[0], c->n_missing);
    pipe_write_summary(&c->pl, &w);
    jw_obj_close(&w);
    if (outfile_close(&out) != 0)
        rc = 1;
    for (int i = 0; i < c->n_errors; i++)
        fprintf(stderr, "cellab-probe: %s\n", c->errors[i]);
    if (strcmp(status, "ok") != 0)
        rc = 1;
    pipe_free(&c->pl);
    free(c);
    return rc;
}
