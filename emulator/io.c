/* cellab-cell: packet I/O: opening the TUN devices inside their namespaces, reading packets into the cell
 * (downlink routed by destination address into the delay line, uplink into the UE's buffer), writing them out. */
#include "cell.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int open_tun_in_netns(const char *netns, const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), "/run/netns/%s", netns);
    int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int target = open(path, O_RDONLY | O_CLOEXEC);
    if (self < 0 || target < 0)
        die("namespace %s: %s (create it first: cellab vlab up)", netns, strerror(errno));
    if (setns(target, CLONE_NEWNET) < 0)
        die("setns %s: %s", netns, strerror(errno));
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        die("/dev/net/tun: %s", strerror(errno));
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0)
        die("TUNSETIFF %s in %s: %s", name, netns, strerror(errno));
    if (setns(self, CLONE_NEWNET) < 0)
        die("setns back: %s", strerror(errno));
    close(self);
    close(target);
    return fd;
}

void tun_write(struct cell *c, int fd, const struct pkt *p)
{
    if (write(fd, p->data, p->len) < 0)
        c->tun_write_drops++; /* the namespace's stack refused it (its backlog is full) */
}

void read_srv(struct cell *c)
{
    for (int budget = 0; budget < 512; budget++) {
        ssize_t n = read(c->srv_fd, c->buf, sizeof(c->buf));
        if (n <= 0)
            return;
        if (n < 20 || (c->buf[0] >> 4) != 4) {
            c->no_route_pkts++;
            continue;
        }
        uint32_t dst;
        memcpy(&dst, c->buf + 16, 4);
        int k = -1;
        for (int i = 0; i < c->p.n_ues; i++)
            if (c->ue[i].addr_be == dst)
                k = i;
        if (k < 0) {
            c->no_route_pkts++;
            continue;
        }
        if (c->sgi_down) { /* the SGi path is cut: lost between the server and the core */
            c->sgi_drop_pkts++;
            c->sgi_drop_bytes += (uint64_t)n;
            continue;
        }
        if (c->dl_delay.bytes + (uint64_t)n > CELL_DELAY_LINE_MAX_BYTES) {
            c->delay_drop_pkts++;
            continue;
        }
        struct pkt *p = pkt_new(c->buf, (uint32_t)n);
        if (!p) {
            c->delay_drop_pkts++;
            continue;
        }
        p->release_tti = delay_release(c, &c->dl_delay, c->tti);
        p->end_off = (uint64_t)k;
        fifo_push(&c->dl_delay, p);
    }
}

/* srsue's RLC drops an SDU arriving at a full TX SDU queue (rlc_um_base::write_sdu, try_write): at most
 * SRSUE_RLC_TX_QUEUE_SDUS packets not yet started. Started ones have left that queue; finished ones are popped
 * at once (ul_complete), so only the head can be a started packet still queued here. */
static int ul_queue_full(const struct cell *c, const struct ue *u, uint64_t len)
{
    if (c->p.ul_queue == ULQ_BYTES)
        return u->ulq.bytes + len > c->p.ul_buffer_bytes;
    const struct pkt *head = u->ulq.head;
    uint32_t started = head && head->end_off - head->len < u->ul_sent_off;
    return u->ulq.count - started >= SRSUE_RLC_TX_QUEUE_SDUS;
}

void read_ue(struct cell *c, struct ue *u)
{
    for (int budget = 0; budget < 512; budget++) {
        ssize_t n = read(u->fd, c->buf, sizeof(c->buf));
        if (n <= 0)
            return;
        if (u->host_down) { /* a paused host sends nothing: what its namespace's kernel still sends is lost */
            u->host_ul_drop_pkts++;
            continue;
        }
        if (ul_queue_full(c, u, (uint64_t)n)) {
            u->ul_drop_pkts++;
            continue;
        }
        struct pkt *p = pkt_new(c->buf, (uint32_t)n);
        if (!p) {
            u->ul_drop_pkts++;
            continue;
        }
        u->ul_in_off += (uint64_t)n;
        p->end_off = u->ul_in_off;
        fifo_push(&u->ulq, p);
    }
}
