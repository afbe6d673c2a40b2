/* Per-connection state: both directions of one TCP 5-tuple, each tracked as a sender. */
#ifndef FLOWSTAT_FLOW_H
#define FLOWSTAT_FLOW_H

#include <stddef.h>
#include <stdint.h>

#include "decode.h"
#include "vec.h"

/* What the capture point knows about a data segment until an ACK covers it. */
enum sent_state { SENT_WAITING, SENT_SAMPLED, SENT_AMBIGUOUS };

struct sent_segment {
    int64_t start_seq, end_seq;   /* unwrapped */
    int64_t t_ns;
    uint8_t state;
};

/* Segments awaiting their ACK, in sequence order (new data only ever appends). */
struct sent_ring {
    struct sent_segment *v;
    size_t head, n, cap;   /* cap is a power of two */
};

/* One direction of a connection, seen as a sender of data (and of ACKs for the other direction). */
struct half {
    int seq_known;              /* a SYN or data segment set the sequence origin */
    int64_t base_seq;           /* the first data byte's sequence number (unwrapped) */
    int64_t snd_max;            /* highest end sequence sent so far (unwrapped) */
    uint64_t payload_bytes;     /* all payload, retransmissions included */
    uint64_t data_segments, retransmits;
    int64_t first_data_ns, last_data_ns, fin_ns;
    int syn_seen, fin_seen, rst_seen, sack_seen;
    struct sent_ring waiting;
    struct dvec rtt_ms, rtt_t_s;   /* samples for this direction's data, with the ACK's time */
    struct u64vec bin_bytes;       /* new bytes per throughput interval, from first_bin on */
    int64_t first_bin;
    uint64_t unbinned_bytes;       /* new bytes too far from first_bin (a timestamp jump) for the series */
    int64_t last_pure_ack_ns;      /* -1 before the first */
    struct dvec ack_gap_ms;        /* gaps between this direction's consecutive pure ACKs */
};

struct flow_key {
    uint8_t family;
    uint8_t pad;
    uint16_t port[2];
    uint8_t addr[2][16];   /* [0] is the smaller (address, port) endpoint */
};

struct flow {
    struct flow_key key;
    int first_dir;          /* the direction of the first packet seen */
    int64_t first_ns, last_ns;
    int64_t syn_ns;         /* first SYN of either side, -1 if none */
    uint64_t packets;
    struct half half[2];    /* half[d] sends from key endpoint d */
};

/* A throughput series longer than this (a clock jump in the capture) stops growing: 32 MiB per flow. */
#define MAX_SERIES_BINS (1 << 22)

/* Settings the analysis needs from main's context. */
struct flow_settings {
    int64_t start_ns;      /* capture start: origin of every relative time */
    int64_t interval_ns;   /* throughput series bin */
};

void flow_init(struct flow *f, const struct flow_key *key, int dir, int64_t t_ns);
void flow_free(struct flow *f);
void flow_segment(struct flow *f, int dir, const struct segment *s, const struct flow_settings *cfg);
/* The direction that carried the data: more new bytes, else the opener. */
int flow_data_dir(const struct flow *f);
uint64_t half_bytes(const struct half *h);   /* unique payload bytes (highest end sequence - origin) */
/* True when a SYN on this 5-tuple starts a new connection rather than repeating the open. */
int flow_is_reused_by(const struct flow *f, const struct segment *s);

#endif
