/* cellab-probe: shared types. One packet event is what every estimator consumes, whether it came
 * from a live AF_PACKET capture, a pcap file or a synthetic event log. */
#ifndef CELLAB_PROBE_H
#define CELLAB_PROBE_H

#include <stddef.h>
#include <stdint.h>

#define PROBE_VERSION "0.1.0"

#define NS_PER_MS 1000000ULL
#define NS_PER_US 1000ULL

enum pkt_dir {
    DIR_DATA_IN = 0, /* sender -> receiver (downlink data) */
    DIR_ACK_OUT = 1, /* receiver -> sender (our ACKs, uplink) */
};

#define PKT_FIN 0x01
#define PKT_SYN 0x02
#define PKT_RST 0x04
#define PKT_ACK 0x10

/* One TCP segment seen at the receiver, in one flow. */
struct pkt_event {
    uint64_t t_ns;      /* capture time (CLOCK_REALTIME ns) */
    uint8_t dir;        /* enum pkt_dir */
    uint8_t has_ts;     /* TCP timestamp option present */
    uint8_t tcp_flags;  /* PKT_FIN...; 0 = not known (event logs carry no flags) */
    uint32_t seq;       /* sequence number of the first payload byte */
    uint32_t ack;       /* acknowledgement number */
    uint32_t payload_bytes;
    uint32_t win_raw;   /* window field, unscaled */
    uint32_t tsval, tsecr;
};

/* Serial-number comparisons (RFC 1982) for 32-bit TCP sequence numbers and timestamps. */
static inline int seq_before(uint32_t a, uint32_t b) { return (int32_t)(a - b) < 0; }
static inline int seq_after(uint32_t a, uint32_t b) { return (int32_t)(b - a) < 0; }

#endif
