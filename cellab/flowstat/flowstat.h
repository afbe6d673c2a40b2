/* cellab-flowstat: per-TCP-flow metrics from one pass over a pcap. main's context, shared with the report. */
#ifndef FLOWSTAT_H
#define FLOWSTAT_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "flowtab.h"

#define MAX_WARNINGS 16
#define WARNING_BYTES 600

struct options {
    const char *path;
    const char *out_path;     /* NULL: stdout */
    double interval_ms;       /* throughput series bin */
    size_t max_points;        /* RTT and ACK-gap samples kept per flow in the output */
    uint64_t min_flow_bytes;  /* flows with fewer data bytes stay out of the summary */
};

struct ctx {
    struct options opt;
    int linktype;
    uint64_t packets, tcp_packets, other_packets, short_packets;
    int started;
    int64_t last_ns;
    struct flow_settings cfg;
    struct flowtab table;
    int n_warnings;
    char warnings[MAX_WARNINGS][WARNING_BYTES];
};

void add_warning(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The JSON document: {"packets", "warnings", "summary", "flows", ...}. */
void write_report(const struct ctx *c, FILE *out);

#endif
