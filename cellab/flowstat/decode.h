/* From a captured frame (Ethernet, Linux cooked SLL/SLL2, raw IP, BSD loopback) to a TCP segment. */
#ifndef FLOWSTAT_DECODE_H
#define FLOWSTAT_DECODE_H

#include <stdint.h>

#define SACK_MAX_BLOCKS 4

enum { TCP_FIN = 0x01, TCP_SYN = 0x02, TCP_RST = 0x04, TCP_ACK = 0x10 };

struct segment {
    int64_t t_ns;
    uint8_t family;   /* 4 or 6 */
    uint8_t src[16], dst[16];
    uint16_t sport, dport;
    uint32_t seq, ack;
    uint8_t flags;
    uint8_t sack_permitted;
    uint8_t n_sack;
    uint32_t payload_bytes;   /* from the IP length: correct under a short snaplen */
    uint32_t sack_left[SACK_MAX_BLOCKS], sack_right[SACK_MAX_BLOCKS];
};

enum decode_result {
    DECODE_TCP,     /* *out holds the segment */
    DECODE_OTHER,   /* not TCP (ARP, UDP, ICMP, a later IP fragment...) */
    DECODE_SHORT,   /* TCP, or maybe TCP, but cut before the headers end */
};

/* Offset of the network header for a link type we read, or -1 when we cannot read that link type. */
int link_header_bytes(int linktype);
const char *supported_link_types(void);
/* caplen: bytes captured; wirelen: bytes on the wire (for GSO frames whose IP length field is 0). */
enum decode_result decode_frame(int linktype, const uint8_t *frame, uint32_t caplen, uint32_t wirelen,
                                struct segment *out);

#endif
