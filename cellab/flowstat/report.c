/* The JSON document: capture counters, warnings, a summary over all flows, and one object per flow. */
#include <arpa/inet.h>
#include <math.h>
#include <pcap/pcap.h>
#include <stdlib.h>
#include <string.h>

#include "flowstat.h"
#include "jsonw.h"

/* Lower edges of the ACK-gap histogram bins; the last bin is open-ended. */
static const double ACK_GAP_EDGES_MS[] = {0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000};
#define N_ACK_GAP_BINS (sizeof(ACK_GAP_EDGES_MS) / sizeof(ACK_GAP_EDGES_MS[0]))

static double rel_s(const struct ctx *c, int64_t t_ns)
{
    return t_ns < 0 ? NAN : (double)(t_ns - c->cfg.start_ns) / 1e9;
}

static void format_endpoint(char *buf, size_t n, const struct flow_key *k, int side)
{
    char addr[INET6_ADDRSTRLEN] = "?";
    inet_ntop(k->family == 6 ? AF_INET6 : AF_INET, k->addr[side], addr, sizeof(addr));
    snprintf(buf, n, k->family == 6 ? "[%s]:%u" : "%s:%u", addr, (unsigned)k->port[side]);
}

static void write_address(struct jsonw *j, const char *key, const struct flow_key *k, int side)
{
    char addr[INET6_ADDRSTRLEN] = "?";
    inet_ntop(k->family == 6 ? AF_INET6 : AF_INET, k->addr[side], addr, sizeof(addr));
    jw_str(j, key, addr);
}

/* Up to max_points values, evenly picked, as an array. */
static void write_downsampled(struct jsonw *j, const char *key, const double *v, size_t n, size_t max_points)
{
    jw_arr_open(j, key);
    size_t points = n < max_points ? n : max_points;
    for (size_t i = 0; i < points; i++)
        jw_num(j, NULL, v[n <= max_points ? i : downsample_index(i, n, max_points)]);
    jw_arr_close(j);
}

static void write_rtt(struct jsonw *j, const struct half *h, size_t max_points)
{
    const double *v = h->rtt_ms.v;
    size_t n = h->rtt_ms.n, pairs = 0;
    double diff_sum = 0;
    abs_diff_sum(v, n, &diff_sum, &pairs);
    jw_obj_open(j, "rtt");
    jw_int(j, "samples", n);
    jw_num(j, "mean_ms", mean_of(v, n));
    jw_num(j, "min_ms", min_of(v, n));
    jw_num(j, "p95_ms", percentile_of(v, n, 0.95));
    jw_num(j, "max_ms", max_of(v, n));
    jw_num(j, "jitter_ms", pairs ? diff_sum / (double)pairs : NAN);
    jw_obj_open(j, "series");
    write_downsampled(j, "t_s", h->rtt_t_s.v, n, max_points);
    write_downsampled(j, "rtt_ms", v, n, max_points);
    jw_obj_close(j);
    jw_obj_close(j);
}

static void write_throughput_series(struct jsonw *j, const struct ctx *c, const struct half *h)
{
    double interval_s = (double)c->cfg.interval_ns / 1e9;
    jw_obj_open(j, "throughput_series");
    jw_num(j, "interval_s", interval_s);
    jw_int(j, "unbinned_bytes", h->unbinned_bytes);
    jw_arr_open(j, "t_s");
    for (size_t i = 0; i < h->bin_bytes.n; i++)
        jw_num(j, NULL, (double)(h->first_bin + (int64_t)i) * interval_s);
    jw_arr_close(j);
    jw_arr_open(j, "bps");
    for (size_t i = 0; i < h->bin_bytes.n; i++)
        jw_num(j, NULL, (double)h->bin_bytes.v[i] * 8.0 / interval_s);
    jw_arr_close(j);
    jw_obj_close(j);
}

static void write_ack_gap_hist(struct jsonw *j, const double *v, size_t n)
{
    uint64_t counts[N_ACK_GAP_BINS] = {0};
    for (size_t i = 0; i < n; i++) {
        size_t b = N_ACK_GAP_BINS - 1;
        while (b > 0 && v[i] < ACK_GAP_EDGES_MS[b])
            b--;
        counts[b]++;
    }
    jw_obj_open(j, "hist");
    jw_arr_open(j, "lower_edges_ms");
    for (size_t b = 0; b < N_ACK_GAP_BINS; b++)
        jw_num(j, NULL, ACK_GAP_EDGES_MS[b]);
    jw_arr_close(j);
    jw_arr_open(j, "counts");
    for (size_t b = 0; b < N_ACK_GAP_BINS; b++)
        jw_int(j, NULL, counts[b]);
    jw_arr_close(j);
    jw_obj_close(j);
}

static void write_ack_gaps(struct jsonw *j, const struct half *acker, size_t max_points)
{
    const double *v = acker->ack_gap_ms.v;
    size_t n = acker->ack_gap_ms.n;
    jw_obj_open(j, "ack_gaps");
    jw_int(j, "count", n);
    jw_num(j, "mean_ms", mean_of(v, n));
    jw_num(j, "p50_ms", percentile_of(v, n, 0.5));
    jw_num(j, "p95_ms", percentile_of(v, n, 0.95));
    write_ack_gap_hist(j, v, n);
    write_downsampled(j, "samples_ms", v, n, max_points);
    jw_obj_close(j);
}

/* Flows the summary covers: enough data bytes (short control connections can be left out). */
static int counted(const struct ctx *c, const struct flow *f)
{
    return half_bytes(&f->half[flow_data_dir(f)]) >= c->opt.min_flow_bytes;
}

/* Completion: from the first SYN (else the first data) to the last data segment or the sender's FIN. */
static double flow_fct_s(const struct flow *f, const struct half *data)
{
    if (data->first_data_ns < 0)
        return NAN;
    int64_t start = f->syn_ns >= 0 ? f->syn_ns : data->first_data_ns;
    int64_t end = data->fin_ns > data->last_data_ns ? data->fin_ns : data->last_data_ns;
    return (double)(end - start) / 1e9;
}

static void write_transfer(struct jsonw *j, const struct ctx *c, const struct half *data, const struct half *rev)
{
    uint64_t bytes = half_bytes(data);
    double duration_s = data->first_data_ns >= 0 ? (double)(data->last_data_ns - data->first_data_ns) / 1e9 : NAN;
    jw_int(j, "bytes", bytes);
    jw_int(j, "payload_bytes", data->payload_bytes);
    jw_int(j, "reverse_bytes", half_bytes(rev));
    jw_int(j, "data_segments", data->data_segments);
    jw_int(j, "retransmits", data->retransmits);
    jw_num(j, "loss_rate", data->data_segments ? (double)data->retransmits / (double)data->data_segments : NAN);
    jw_num(j, "first_data_s", rel_s(c, data->first_data_ns));
    jw_num(j, "last_data_s", rel_s(c, data->last_data_ns));
    jw_num(j, "duration_s", duration_s);
    jw_num(j, "throughput_bps", duration_s > 0 ? (double)bytes * 8.0 / duration_s : NAN);
}

static void write_flow(struct jsonw *j, const struct ctx *c, const struct flow *f, size_t index)
{
    int d = flow_data_dir(f);
    const struct half *data = &f->half[d], *rev = &f->half[!d];
    char src[64], dst[64], label[140];
    format_endpoint(src, sizeof(src), &f->key, d);
    format_endpoint(dst, sizeof(dst), &f->key, !d);
    snprintf(label, sizeof(label), "%s>%s", src, dst);
    jw_obj_open(j, NULL);
    jw_int(j, "index", index);
    jw_bool(j, "counted", counted(c, f));
    jw_str(j, "flow", label);
    jw_int(j, "ip_version", f->key.family);
    write_address(j, "src", &f->key, d);
    jw_int(j, "sport", f->key.port[d]);
    write_address(j, "dst", &f->key, !d);
    jw_int(j, "dport", f->key.port[!d]);
    jw_int(j, "packets", f->packets);
    jw_num(j, "start_s", rel_s(c, f->first_ns));
    jw_num(j, "end_s", rel_s(c, f->last_ns));
    write_transfer(j, c, data, rev);
    jw_bool(j, "syn", f->syn_ns >= 0);
    jw_bool(j, "fin", data->fin_seen);
    jw_bool(j, "rst", data->rst_seen || rev->rst_seen);
    jw_bool(j, "sack", data->sack_seen || rev->sack_seen);
    jw_num(j, "fct_s", flow_fct_s(f, data));
    jw_bool(j, "complete", data->fin_seen && data->first_data_ns >= 0);
    write_rtt(j, data, c->opt.max_points);
    write_throughput_series(j, c, data);
    write_ack_gaps(j, rev, c->opt.max_points);
    jw_obj_close(j);
}

/* The counted flows' RTT samples (rtt=1) or their ACK sides' gaps (rtt=0), pooled. */
static double *pool(const struct ctx *c, int rtt, size_t *n_out, double *diff_sum, size_t *pairs)
{
    size_t n = 0;
    for (size_t i = 0; i < c->table.n; i++) {
        const struct flow *f = &c->table.flows[i];
        int d = flow_data_dir(f);
        if (counted(c, f))
            n += rtt ? f->half[d].rtt_ms.n : f->half[!d].ack_gap_ms.n;
    }
    double *all = xrealloc(NULL, n * sizeof(*all));
    size_t at = 0;
    for (size_t i = 0; i < c->table.n; i++) {
        const struct flow *f = &c->table.flows[i];
        int d = flow_data_dir(f);
        const struct dvec *v = rtt ? &f->half[d].rtt_ms : &f->half[!d].ack_gap_ms;
        if (!counted(c, f) || v->n == 0)
            continue;
        memcpy(all + at, v->v, v->n * sizeof(*all));
        abs_diff_sum(v->v, v->n, diff_sum, pairs);   /* consecutive within a flow, never across flows */
        at += v->n;
    }
    *n_out = n;
    return all;
}

static void write_summary(struct jsonw *j, const struct ctx *c)
{
    uint64_t bytes = 0, segments = 0, retransmits = 0, n_counted = 0;
    for (size_t i = 0; i < c->table.n; i++) {
        const struct flow *f = &c->table.flows[i];
        const struct half *h = &f->half[flow_data_dir(f)];
        if (!counted(c, f))
            continue;
        bytes += half_bytes(h);
        segments += h->data_segments;
        retransmits += h->retransmits;
        n_counted++;
    }
    jw_obj_open(j, "summary");
    jw_int(j, "flows", c->table.n);
    jw_int(j, "flows_counted", n_counted);
    jw_int(j, "min_flow_bytes", c->opt.min_flow_bytes);
    jw_int(j, "bytes", bytes);
    jw_int(j, "data_segments", segments);
    jw_int(j, "retransmits", retransmits);
    jw_num(j, "loss_rate", segments ? (double)retransmits / (double)segments : NAN);
    size_t n, pairs = 0;
    double diff_sum = 0;
    double *rtt = pool(c, 1, &n, &diff_sum, &pairs);
    jw_obj_open(j, "rtt");
    jw_int(j, "samples", n);
    jw_num(j, "mean_ms", mean_of(rtt, n));
    jw_num(j, "min_ms", min_of(rtt, n));
    jw_num(j, "max_ms", max_of(rtt, n));
    jw_num(j, "jitter_ms", pairs ? diff_sum / (double)pairs : NAN);
    jw_num(j, "p95_ms", percentile_inplace(rtt, n, 0.95));
    jw_obj_close(j);
    free(rtt);
    pairs = 0;
    double *gaps = pool(c, 0, &n, &diff_sum, &pairs);
    jw_obj_open(j, "ack_gaps");
    jw_int(j, "count", n);
    jw_num(j, "mean_ms", mean_of(gaps, n));
    jw_num(j, "p50_ms", percentile_of(gaps, n, 0.5));
    jw_num(j, "p95_ms", percentile_inplace(gaps, n, 0.95));
    jw_obj_close(j);
    free(gaps);
    jw_obj_close(j);
}

void write_report(const struct ctx *c, FILE *out)
{
    struct jsonw j;
    const char *link = pcap_datalink_val_to_name(c->linktype);
    jw_init(&j, out);
    jw_obj_open(&j, NULL);
    jw_str(&j, "file", c->opt.path);
    jw_str(&j, "link_type", link ? link : "unknown");
    jw_int(&j, "packets", c->packets);
    jw_int(&j, "tcp_packets", c->tcp_packets);
    jw_int(&j, "other_packets", c->other_packets);
    jw_int(&j, "short_packets", c->short_packets);
    jw_num(&j, "start_epoch_s", c->started ? (double)c->cfg.start_ns / 1e9 : NAN);
    jw_num(&j, "span_s", c->started ? rel_s(c, c->last_ns) : NAN);
    jw_num(&j, "interval_ms", c->opt.interval_ms);
    jw_arr_open(&j, "warnings");
    for (int i = 0; i < c->n_warnings; i++)
        jw_str(&j, NULL, c->warnings[i]);
    jw_arr_close(&j);
    write_summary(&j, c);
    jw_arr_open(&j, "flows");
    for (size_t i = 0; i < c->table.n; i++)
        write_flow(&j, c, &c->table.flows[i], i);
    jw_arr_close(&j);
    jw_obj_close(&j);
}
