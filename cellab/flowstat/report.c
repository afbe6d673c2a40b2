/* The JSON document: capture counters, warnings, a summary over all flows, and one object per flow. */
#include <arpa/inet.h>
#include <math.h>
#include <pcap/pcap.h>
#include <stdlib.h>
#include <string.h>

#include "flowstat.h"
#include "json.h"

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

static void write_address(struct json *j, const char *key, const struct flow_key *k, int side)
{
    char addr[INET6_ADDRSTRLEN] = "?";
    inet_ntop(k->family == 6 ? AF_INET6 : AF_INET, k->addr[side], addr, sizeof(addr));
    json_string(j, key, addr);
}

/* Up to max_points values, evenly picked, as an array. */
static void write_downsampled(struct json *j, const char *key, const double *v, size_t n, size_t max_points)
{
    json_array(j, key);
    size_t points = n < max_points ? n : max_points;
    for (size_t i = 0; i < points; i++)
        json_double(j, NULL, v[n <= max_points ? i : downsample_index(i, n, max_points)]);
    json_close_array(j);
}

static void write_rtt(struct json *j, const struct half *h, size_t max_points)
{
    const double *v = h->rtt_ms.v;
    size_t n = h->rtt_ms.n, pairs = 0;
    double diff_sum = 0;
    abs_diff_sum(v, n, &diff_sum, &pairs);
    json_object(j, "rtt");
    json_u64(j, "samples", n);
    json_double(j, "mean_ms", mean_of(v, n));
    json_double(j, "min_ms", min_of(v, n));
    json_double(j, "p95_ms", percentile_of(v, n, 0.95));
    json_double(j, "max_ms", max_of(v, n));
    json_double(j, "jitter_ms", pairs ? diff_sum / (double)pairs : NAN);
    json_object(j, "series");
    write_downsampled(j, "t_s", h->rtt_t_s.v, n, max_points);
    write_downsampled(j, "rtt_ms", v, n, max_points);
    json_close_object(j);
    json_close_object(j);
}

static void write_throughput_series(struct json *j, const struct ctx *c, const struct half *h)
{
    double interval_s = (double)c->cfg.interval_ns / 1e9;
    json_object(j, "throughput_series");
    json_double(j, "interval_s", interval_s);
    json_u64(j, "unbinned_bytes", h->unbinned_bytes);
    json_array(j, "t_s");
    for (size_t i = 0; i < h->bin_bytes.n; i++)
        json_double(j, NULL, (double)(h->first_bin + (int64_t)i) * interval_s);
    json_close_array(j);
    json_array(j, "bps");
    for (size_t i = 0; i < h->bin_bytes.n; i++)
        json_double(j, NULL, (double)h->bin_bytes.v[i] * 8.0 / interval_s);
    json_close_array(j);
    json_close_object(j);
}

static void write_ack_gap_hist(struct json *j, const double *v, size_t n)
{
    uint64_t counts[N_ACK_GAP_BINS] = {0};
    for (size_t i = 0; i < n; i++) {
        size_t b = N_ACK_GAP_BINS - 1;
        while (b > 0 && v[i] < ACK_GAP_EDGES_MS[b])
            b--;
        counts[b]++;
    }
    json_object(j, "hist");
    json_array(j, "lower_edges_ms");
    for (size_t b = 0; b < N_ACK_GAP_BINS; b++)
        json_double(j, NULL, ACK_GAP_EDGES_MS[b]);
    json_close_array(j);
    json_array(j, "counts");
    for (size_t b = 0; b < N_ACK_GAP_BINS; b++)
        json_u64(j, NULL, counts[b]);
    json_close_array(j);
    json_close_object(j);
}

static void write_ack_gaps(struct json *j, const struct half *acker, size_t max_points)
{
    const double *v = acker->ack_gap_ms.v;
    size_t n = acker->ack_gap_ms.n;
    json_object(j, "ack_gaps");
    json_u64(j, "count", n);
    json_double(j, "mean_ms", mean_of(v, n));
    json_double(j, "p50_ms", percentile_of(v, n, 0.5));
    json_double(j, "p95_ms", percentile_of(v, n, 0.95));
    write_ack_gap_hist(j, v, n);
    write_downsampled(j, "samples_ms", v, n, max_points);
    json_close_object(j);
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

static void write_transfer(struct json *j, const struct ctx *c, const struct half *data, const struct half *rev)
{
    uint64_t bytes = half_bytes(data);
    double duration_s = data->first_data_ns >= 0 ? (double)(data->last_data_ns - data->first_data_ns) / 1e9 : NAN;
    json_u64(j, "bytes", bytes);
    json_u64(j, "payload_bytes", data->payload_bytes);
    json_u64(j, "reverse_bytes", half_bytes(rev));
    json_u64(j, "data_segments", data->data_segments);
    json_u64(j, "retransmits", data->retransmits);
    json_double(j, "loss_rate", data->data_segments ? (double)data->retransmits / (double)data->data_segments : NAN);
    json_double(j, "first_data_s", rel_s(c, data->first_data_ns));
    json_double(j, "last_data_s", rel_s(c, data->last_data_ns));
    json_double(j, "duration_s", duration_s);
    json_double(j, "throughput_bps", duration_s > 0 ? (double)bytes * 8.0 / duration_s : NAN);
}

static void write_flow(struct json *j, const struct ctx *c, const struct flow *f, size_t index)
{
    int d = flow_data_dir(f);
    const struct half *data = &f->half[d], *rev = &f->half[!d];
    char src[64], dst[64], label[140];
    format_endpoint(src, sizeof(src), &f->key, d);
    format_endpoint(dst, sizeof(dst), &f->key, !d);
    snprintf(label, sizeof(label), "%s>%s", src, dst);
    json_object(j, NULL);
    json_u64(j, "index", index);
    json_bool(j, "counted", counted(c, f));
    json_string(j, "flow", label);
    json_u64(j, "ip_version", f->key.family);
    write_address(j, "src", &f->key, d);
    json_u64(j, "sport", f->key.port[d]);
    write_address(j, "dst", &f->key, !d);
    json_u64(j, "dport", f->key.port[!d]);
    json_u64(j, "packets", f->packets);
    json_double(j, "start_s", rel_s(c, f->first_ns));
    json_double(j, "end_s", rel_s(c, f->last_ns));
    write_transfer(j, c, data, rev);
    json_bool(j, "syn", f->syn_ns >= 0);
    json_bool(j, "fin", data->fin_seen);
    json_bool(j, "rst", data->rst_seen || rev->rst_seen);
    json_bool(j, "sack", data->sack_seen || rev->sack_seen);
    json_double(j, "fct_s", flow_fct_s(f, data));
    json_bool(j, "complete", data->fin_seen && data->first_data_ns >= 0);
    write_rtt(j, data, c->opt.max_points);
    write_throughput_series(j, c, data);
    write_ack_gaps(j, rev, c->opt.max_points);
    json_close_object(j);
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

static void write_summary(struct json *j, const struct ctx *c)
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
    json_object(j, "summary");
    json_u64(j, "flows", c->table.n);
    json_u64(j, "flows_counted", n_counted);
    json_u64(j, "min_flow_bytes", c->opt.min_flow_bytes);
    json_u64(j, "bytes", bytes);
    json_u64(j, "data_segments", segments);
    json_u64(j, "retransmits", retransmits);
    json_double(j, "loss_rate", segments ? (double)retransmits / (double)segments : NAN);
    size_t n, pairs = 0;
    double diff_sum = 0;
    double *rtt = pool(c, 1, &n, &diff_sum, &pairs);
    json_object(j, "rtt");
    json_u64(j, "samples", n);
    json_double(j, "mean_ms", mean_of(rtt, n));
    json_double(j, "min_ms", min_of(rtt, n));
    json_double(j, "max_ms", max_of(rtt, n));
    json_double(j, "jitter_ms", pairs ? diff_sum / (double)pairs : NAN);
    json_double(j, "p95_ms", percentile_inplace(rtt, n, 0.95));
    json_close_object(j);
    free(rtt);
    pairs = 0;
    double *gaps = pool(c, 0, &n, &diff_sum, &pairs);
    json_object(j, "ack_gaps");
    json_u64(j, "count", n);
    json_double(j, "mean_ms", mean_of(gaps, n));
    json_double(j, "p50_ms", percentile_of(gaps, n, 0.5));
    json_double(j, "p95_ms", percentile_inplace(gaps, n, 0.95));
    json_close_object(j);
    free(gaps);
    json_close_object(j);
}

void write_report(const struct ctx *c, FILE *out)
{
    struct json j;
    const char *link = pcap_datalink_val_to_name(c->linktype);
    json_begin(&j, out);
    json_object(&j, NULL);
    json_string(&j, "file", c->opt.path);
    json_string(&j, "link_type", link ? link : "unknown");
    json_u64(&j, "packets", c->packets);
    json_u64(&j, "tcp_packets", c->tcp_packets);
    json_u64(&j, "other_packets", c->other_packets);
    json_u64(&j, "short_packets", c->short_packets);
    json_double(&j, "start_epoch_s", c->started ? (double)c->cfg.start_ns / 1e9 : NAN);
    json_double(&j, "span_s", c->started ? rel_s(c, c->last_ns) : NAN);
    json_double(&j, "interval_ms", c->opt.interval_ms);
    json_array(&j, "warnings");
    for (int i = 0; i < c->n_warnings; i++)
        json_string(&j, NULL, c->warnings[i]);
    json_close_array(&j);
    write_summary(&j, c);
    json_array(&j, "flows");
    for (size_t i = 0; i < c->table.n; i++)
        write_flow(&j, c, &c->table.flows[i], i);
    json_close_array(&j);
    json_close_object(&j);
    json_end(&j);
}
