#include "decode.h"
#include "tcpopt.h"

#include <pcap/pcap.h>
#include <string.h>

#define ETHERTYPE_IPV4 0x0800
#define ETHERTYPE_IPV6 0x86dd
#define ETHERTYPE_VLAN 0x8100
#define ETHERTYPE_QINQ 0x88a8
#define IPPROTO_TCP_ 6

#ifndef DLT_LINUX_SLL2
#define DLT_LINUX_SLL2 276
#endif
#ifndef DLT_IPV4
#define DLT_IPV4 228
#endif
#ifndef DLT_IPV6
#define DLT_IPV6 229
#endif

static uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int link_header_bytes(int linktype)
{
    switch (linktype) {
    case DLT_EN10MB: return 14;
    case DLT_LINUX_SLL: return 16;
    case DLT_LINUX_SLL2: return 20;
    case DLT_RAW: case DLT_IPV4: case DLT_IPV6: return 0;
    case DLT_NULL: case DLT_LOOP: return 4;
    default: return -1;
    }
}

const char *supported_link_types(void)
{
    return "EN10MB, LINUX_SLL, LINUX_SLL2, RAW, IPV4, IPV6, NULL, LOOP";
}

/* The EtherType a link header announces (0 when it only carries IP and the version nibble tells). */
static int link_ethertype(int linktype, const uint8_t *frame, uint32_t caplen, uint32_t *offset)
{
    *offset = (uint32_t)link_header_bytes(linktype);
    if (caplen < *offset)
        return -1;
    switch (linktype) {
    case DLT_EN10MB: {
        uint16_t type = be16(frame + 12);
        while ((type == ETHERTYPE_VLAN || type == ETHERTYPE_QINQ) && caplen >= *offset + 4) {
            type = be16(frame + *offset + 2);   /* a tag: TCI, then the inner type */
            *offset += 4;
        }
        return type;
    }
    case DLT_LINUX_SLL: return be16(frame + 14);
    case DLT_LINUX_SLL2: return be16(frame);
    default: return 0;
    }
}

static void parse_tcp_options(const uint8_t *opt, uint32_t len, struct segment *out)
{
    struct tcp_option o;
    size_t pos = 0;
    while (tcp_option_next(opt, len, &pos, &o)) {
        if (o.kind == 4) {
            out->sack_permitted = 1;
        } else if (o.kind == 5) {
            for (uint32_t b = 0; b + 8 <= (uint32_t)o.len - 2 && out->n_sack < SACK_MAX_BLOCKS; b += 8) {
                out->sack_left[out->n_sack] = be32(o.data + b);
                out->sack_right[out->n_sack] = be32(o.data + b + 4);
                out->n_sack++;
            }
        }
    }
}

/* ip points at the IPv4 header; fills addresses, returns the TCP header offset or a decode result < 0. */
static int ipv4_header(const uint8_t *ip, uint32_t caplen, uint32_t wirelen, struct segment *out,
                       uint32_t *ip_total)
{
    if (caplen < 20)
        return -DECODE_SHORT;
    uint32_t hlen = (uint32_t)(ip[0] & 0x0f) * 4;
    if (hlen < 20 || ip[9] != IPPROTO_TCP_ || (be16(ip + 6) & 0x1fff) != 0)
        return -DECODE_OTHER;   /* not TCP, or a later fragment without a TCP header */
    *ip_total = be16(ip + 2);
    if (*ip_total == 0)
        *ip_total = wirelen;   /* a GSO frame larger than 64 KiB carries length 0 */
    out->family = 4;
    memset(out->src, 0, sizeof(out->src));
    memset(out->dst, 0, sizeof(out->dst));
    memcpy(out->src, ip + 12, 4);
    memcpy(out->dst, ip + 16, 4);
    return (int)hlen;
}

static int is_ipv6_extension(uint8_t next)
{
    return next == 0 || next == 43 || next == 60;   /* hop-by-hop, routing, destination options */
}

static int ipv6_header(const uint8_t *ip, uint32_t caplen, uint32_t wirelen, struct segment *out,
                       uint32_t *ip_total)
{
    if (caplen < 40)
        return -DECODE_SHORT;
    uint8_t next = ip[6];
    uint32_t off = 40;
    while (is_ipv6_extension(next) || next == 44) {
        if (caplen < off + 8)
            return -DECODE_SHORT;
        if (next == 44) {   /* fragment header: only the first fragment holds the TCP header */
            if ((be16(ip + off + 2) & 0xfff8) != 0)
                return -DECODE_OTHER;
            next = ip[off];
            off += 8;
        } else {
            next = ip[off];
            off += ((uint32_t)ip[off + 1] + 1) * 8;
        }
    }
    if (next != IPPROTO_TCP_)
        return -DECODE_OTHER;
    uint32_t payload = be16(ip + 4);
    *ip_total = payload ? 40 + payload : wirelen;   /* 0: jumbogram or BIG TCP GSO frame */
    out->family = 6;
    memcpy(out->src, ip + 8, 16);
    memcpy(out->dst, ip + 24, 16);
    return (int)off;
}

enum decode_result decode_frame(int linktype, const uint8_t *frame, uint32_t caplen, uint32_t wirelen,
                                struct segment *out)
{
    uint32_t off;
    int ethertype = link_ethertype(linktype, frame, caplen, &off);
    if (ethertype < 0 || caplen < off + 1)
        return DECODE_SHORT;
    const uint8_t *ip = frame + off;
    uint32_t ip_caplen = caplen - off, ip_wirelen = wirelen > off ? wirelen - off : 0;
    unsigned version = ip[0] >> 4;
    if ((ethertype != 0 && ethertype != ETHERTYPE_IPV4 && ethertype != ETHERTYPE_IPV6) || (version != 4 && version != 6))
        return DECODE_OTHER;
    uint32_t ip_total = 0;
    int tcp_off = version == 4 ? ipv4_header(ip, ip_caplen, ip_wirelen, out, &ip_total)
                               : ipv6_header(ip, ip_caplen, ip_wirelen, out, &ip_total);
    if (tcp_off < 0)
        return (enum decode_result)-tcp_off;
    if (ip_caplen < (uint32_t)tcp_off + 20)
        return DECODE_SHORT;
    const uint8_t *tcp = ip + tcp_off;
    uint32_t tcp_hlen = (uint32_t)(tcp[12] >> 4) * 4;
    if (tcp_hlen < 20 || ip_total < (uint32_t)tcp_off + tcp_hlen)
        return DECODE_OTHER;   /* malformed: a header longer than the packet */
    out->sport = be16(tcp);
    out->dport = be16(tcp + 2);
    out->seq = be32(tcp + 4);
    out->ack = be32(tcp + 8);
    out->flags = tcp[13];
    out->payload_bytes = ip_total - (uint32_t)tcp_off - tcp_hlen;
    out->sack_permitted = 0;
    out->n_sack = 0;
    uint32_t opt_captured = ip_caplen - (uint32_t)tcp_off - 20;   /* options past the snaplen are not read */
    uint32_t opt_len = tcp_hlen - 20 < opt_captured ? tcp_hlen - 20 : opt_captured;
    parse_tcp_options(tcp + 20, opt_len, out);
    return DECODE_TCP;
}
