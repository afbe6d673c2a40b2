#include "srprobe.h"

#include "srest.h"

#include <errno.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint32_t xorshift(uint32_t *s)
{
    uint32_t x = *s ? *s : 0x9e3779b9u;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

static double probe_gap_ms(double min_gap_ms, double max_gap_ms, uint32_t *rng)
{
    return min_gap_ms + (max_gap_ms - min_gap_ms) * (xorshift(rng) / 4294967296.0);
}

static uint16_t csum(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint32_t sum = 0;
    for (size_t i = 0; i + 1 < len; i += 2)
        sum += (uint32_t)(p[i] << 8 | p[i + 1]);
    if (len & 1)
        sum += (uint32_t)p[len - 1] << 8;
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return htons((uint16_t)~sum);
}

int srprobe_run(const struct sockaddr *dst, socklen_t dst_len, int n, int n_max, double min_gap_ms, double max_gap_ms,
                uint32_t seed, struct srprobe_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof(*res));
    const int max_probes = (int)(sizeof(res->rtt_us) / sizeof(res->rtt_us[0]));
    if (n > max_probes)
        n = max_probes;
    int v6 = dst->sa_family == AF_INET6;
    int raw = 0;
    int fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP);
    if (fd < 0 && !v6) { /* ping sockets not allowed by net.ipv4.ping_group_range: raw needs CAP_NET_RAW */
        fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
        raw = 1;
    }
    if (fd < 0) {
        snprintf(err, errlen, "no ICMP socket for the SR probes (%s): needs net.ipv4.ping_group_range or CAP_NET_RAW",
                 strerror(errno));
        return -1;
    }
    res->socket_kind = raw ? "icmp-raw" : "icmp-dgram";
    uint16_t ident = (uint16_t)(getpid() ^ seed);
    uint64_t sent_at[256] = { 0 };
    uint32_t rng = seed | 1;
    /* sequential: n probes, then 5 more at a time (up to n_max) while the fit of the waits is not yet
     * clear (sr_probe_margin below SR_FIT_HIGH_NATS): an unlucky draw of 30 from a uniform wait (e.g.
     * all within 54 ms of an 80 ms cycle) looks like the period below, P and 2P stay close on a stack
     * slower than real time; more probes settle it */
    n_max = n_max < n ? n : (n_max < max_probes ? n_max : max_probes);
    uint64_t next_send = mono_ns();
    uint64_t end = 0, waiting_since = 0;
    int seq = 0;
    while (1) {
        uint64_t now = mono_ns();
        if (seq < n && now >= next_send) {
            uint8_t pkt[64] = { 0 };
            pkt[0] = v6 ? ICMP6_ECHO_REQUEST : ICMP_ECHO;
            pkt[4] = (uint8_t)(ident >> 8);
            pkt[5] = (uint8_t)ident;
            pkt[6] = (uint8_t)(seq >> 8);
            pkt[7] = (uint8_t)seq;
            memcpy(pkt + 8, "cellab-probe sr", 15);
            if (raw) {
                uint16_t c = csum(pkt, 32);
                memcpy(pkt + 2, &c, 2);
            }
            sent_at[seq] = mono_ns();
            if (sendto(fd, pkt, 32, 0, dst, dst_len) == 32)
                res->sent++;
            seq++;
            next_send = UINT64_MAX; /* set when this probe's reply (or its timeout) comes */
            waiting_since = sent_at[seq - 1];
            if (seq == n)
                end = sent_at[seq - 1] + 1000000000ULL; /* 1 s for the last reply */
        }
        if (seq < n && next_send == UINT64_MAX && now > waiting_since + 1000000000ULL)
            next_send = now; /* lost: move on */
        if (seq == n && (now >= end || res->received == res->sent)) {
            if (n >= n_max || res->received < 2 || sr_probe_margin(res->rtt_us, (size_t)res->received) >= SR_FIT_HIGH_NATS)
                break;
            n = n + SRPROBE_STEP < n_max ? n + SRPROBE_STEP : n_max;
            next_send = now + (uint64_t)(probe_gap_ms(min_gap_ms, max_gap_ms, &rng) * 1e6);
            continue;
        }
        uint64_t wake = seq < n ? (next_send == UINT64_MAX ? waiting_since + 1000000000ULL : next_send) : end;
        int timeout_ms = wake > now ? (int)((wake - now) / 1000000ULL) + 1 : 0;
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        if (poll(&pfd, 1, timeout_ms) <= 0)
            continue;
        uint8_t buf[256];
        ssize_t r = recv(fd, buf, sizeof(buf), 0);
        uint64_t t = mono_ns();
        struct timespec wall;
        clock_gettime(CLOCK_REALTIME, &wall);
        if (r <= 0)
            continue;
        const uint8_t *icmp = buf;
        if (raw) {
            size_t ihl = (size_t)(buf[0] & 0x0f) * 4;
            if ((size_t)r < ihl + 8)
                continue;
            icmp = buf + ihl;
            if (icmp[0] != ICMP_ECHOREPLY || (uint16_t)(icmp[4] << 8 | icmp[5]) != ident)
                continue;
        } else if (r < 8 || icmp[0] != (v6 ? ICMP6_ECHO_REPLY : ICMP_ECHOREPLY)) {
            continue; /* ping sockets rewrite the id to the socket's port and filter on it */
        }
        int s = icmp[6] << 8 | icmp[7];
        if (s < seq && sent_at[s]) {
            res->reply_wall_ns[res->received] = (int64_t)wall.tv_sec * 1000000000LL + wall.tv_nsec;
            res->rtt_us[res->received++] = (double)(t - sent_at[s]) / 1e3;
            sent_at[s] = 0; /* a duplicate reply counts once */
            if (s == seq - 1 && seq < n) {
                /* One probe at a time, each after a random gap from the last reply: the uplink is idle
                 * again (srsENB polls an emptied UE once, 20 ms after its last PUSCH: min_gap must
                 * exceed that), and a gap spread over max_gap - min_gap >= 80 ms puts the probes at
                 * every phase of any SR cycle. */
                next_send = t + (uint64_t)(probe_gap_ms(min_gap_ms, max_gap_ms, &rng) * 1e6);
            }
        }
    }
    close(fd);
    return 0;
}
