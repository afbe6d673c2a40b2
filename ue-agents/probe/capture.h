/* Live per-packet capture with AF_PACKET (cooked, so it works on veth, TUN and lo alike) and
 * kernel nanosecond receive/transmit stamps. Needs CAP_NET_RAW. */
#ifndef CELLAB_CAPTURE_H
#define CELLAB_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

struct capture {
    int fd;
    uint64_t packets, kernel_drops;
};

/* 0 on success; -1 with errno set (EPERM/EACCES without privileges). ifname NULL = all interfaces. */
int capture_open(struct capture *c, const char *ifname);
/* Read one packet without blocking: 1 = got one, 0 = none waiting, -1 = error.
 * outgoing: 1 when the packet left this host (our ACKs), 0 when it arrived. */
int capture_next(struct capture *c, uint8_t *buf, size_t cap, size_t *len, uint64_t *t_ns, int *outgoing);
void capture_close(struct capture *c);

#endif
