/* Parse an IPv4/IPv6 + TCP header from raw bytes (no link header). Pure, no allocation. */
#ifndef CELLAB_PKTPARSE_H
#define CELLAB_PKTPARSE_H

#include <stddef.h>
#include <stdint.h>

struct tcp_endpoint {
    uint8_t family;    /* 4 or 6 */
    uint8_t addr[16];  /* IPv4 in the first 4 bytes */
    uint16_t port;     /* host order */
};

struct tcp_segment {
    struct tcp_endpoint src, dst;
    uint32_t seq, ack, payload_bytes, win_raw;
    uint8_t flags;
    uint8_t has_ts;
    uint8_t wscale_present, wscale;
    uint32_t tsval, tsecr;
};

/* 0 on success; -1 when not TCP over IP or the headers are cut off (payload may be cut: the length
 * comes from the IP header, so a short snaplen is fine). */
int parse_ip_tcp(const uint8_t *pkt, size_t caplen, struct tcp_segment *out);

int endpoint_equal(const struct tcp_endpoint *a, const struct tcp_endpoint *b);
void endpoint_format(const struct tcp_endpoint *e, char *buf, size_t len);

#endif
