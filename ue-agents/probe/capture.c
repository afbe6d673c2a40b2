#include "capture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int capture_open(struct capture *c, const char *ifname)
{
    memset(c, 0, sizeof(*c));
    c->fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
    if (c->fd < 0)
        return -1;
    int on = 1;
    if (setsockopt(c->fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) < 0)
        goto fail;
    int rcvbuf = 16 << 20; /* bursts of a few thousand packets must not overflow it */
    if (setsockopt(c->fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) < 0)
        setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    if (ifname) {
        struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL) };
        sll.sll_ifindex = (int)if_nametoindex(ifname);
        if (sll.sll_ifindex == 0 || bind(c->fd, (struct sockaddr *)&sll, sizeof(sll)) < 0)
            goto fail;
    }
    return 0;
fail:;
    int saved = errno;
    close(c->fd);
    c->fd = -1;
    errno = saved;
    return -1;
}

int capture_next(struct capture *c, uint8_t *buf, size_t cap, size_t *len, uint64_t *t_ns, int *outgoing)
{
    struct sockaddr_ll from;
    char control[256];
    struct iovec iov = { .iov_base = buf, .iov_len = cap };
    struct msghdr msg = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iov, .msg_iovlen = 1,
                          .msg_control = control, .msg_controllen = sizeof(control) };
    ssize_t n = recvmsg(c->fd, &msg, MSG_TRUNC);
    if (n < 0)
        return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -1;
    c->packets++;
    *len = (size_t)n < cap ? (size_t)n : cap;
    *outgoing = from.sll_pkttype == PACKET_OUTGOING;
    *t_ns = 0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
            *t_ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
        }
    }
    if (*t_ns == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        *t_ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    }
    return 1;
}

void capture_close(struct capture *c)
{
    if (c->fd >= 0) {
        struct tpacket_stats st;
        socklen_t l = sizeof(st);
        if (getsockopt(c->fd, SOL_PACKET, PACKET_STATISTICS, &st, &l) == 0)
            c->kernel_drops += st.tp_drops;
        close(c->fd);
    }
    c->fd = -1;
}
