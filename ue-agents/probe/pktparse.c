#include "pktparse.h"
#include "tcpopt.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

static void parse_options(const uint8_t *opt, size_t len, struct tcp_segment *out)
{
    struct tcp_option o;
    size_t pos = 0;
    while (tcp_option_next(opt, len, &pos, &o)) {
        if (o.kind == 8 && o.len == 10) {
            out->has_ts = 1;
            out->tsval = rd32(o.data);
            out->tsecr = rd32(o.data + 4);
        } else if (o.kind == 3 && o.len == 3) {
            out->wscale_present = 1;
            out->wscale = o.data[0];
        }
    }
}

int parse_ip_tcp(const uint8_t *pkt, size_t caplen, struct tcp_segment *out)
{
    memset(out, 0, sizeof(*out));
    if (caplen < 1)
        return -1;
    unsigned version = pkt[0] >> 4;
    size_t ip_hlen, ip_total;
    if (version == 4) {
        if (caplen < 20)
            return -1;
        ip_hlen = (size_t)(pkt[0] & 0x0f) * 4;
        ip_total = rd16(pkt + 2);
        if (ip_hlen < 20 || caplen < ip_hlen || pkt[9] != 6)
            return -1;
        if ((rd16(pkt + 6) & 0x1fff) != 0) /* a non-first fragment carries no TCP header */
            return -1;
        out->src.family = out->dst.family = 4;
        memcpy(out->src.addr, pkt + 12, 4);
        memcpy(out->dst.addr, pkt + 16, 4);
    } else if (version == 6) {
        if (caplen < 40 || pkt[6] != 6) /* extension headers: not followed, treated as non-TCP */
            return -1;
        ip_hlen = 40;
        ip_total = 40 + (size_t)rd16(pkt + 4);
        out->src.family = out->dst.family = 6;
        memcpy(out->src.addr, pkt + 8, 16);
        memcpy(out->dst.addr, pkt + 24, 16);
    } else {
        return -1;
    }
    const uint8_t *tcp = pkt + ip_hlen;
    if (caplen < ip_hlen + 20)
        return -1;
    size_t tcp_hlen = (size_t)(tcp[12] >> 4) * 4;
    if (tcp_hlen < 20 || ip_total < ip_hlen + tcp_hlen)
        return -1;
    out->src.port = rd16(tcp);
    out->dst.port = rd16(tcp + 2);
    out->seq = rd32(tcp + 4);
    out->ack = rd32(tcp + 8);
    out->flags = tcp[13];
    out->win_raw = rd16(tcp + 14);
    out->payload_bytes = (uint32_t)(ip_total - ip_hlen - tcp_hlen);
    size_t opt_avail = caplen >= ip_hlen + tcp_hlen ? tcp_hlen - 20 : caplen - ip_hlen - 20;
    parse_options(tcp + 20, opt_avail, out);
    return 0;
}

int endpoint_equal(const struct tcp_endpoint *a, const struct tcp_endpoint *b)
{
    size_t n = a->family == 4 ? 4 : 16;
    return a->family == b->family && a->port == b->port && memcmp(a->addr, b->addr, n) == 0;
}

void endpoint_format(const struct tcp_endpoint *e, char *buf, size_t len)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    inet_ntop(e->family == 4 ? AF_INET : AF_INET6, e->addr, ip, sizeof(ip));
    if (e->family == 6)
        snprintf(buf, len, "[%s]:%u", ip, e->port);
    else
        snprintf(buf, len, "%s:%u", ip, e->port);
}
