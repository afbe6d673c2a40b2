/* cellab-probe fetch: the poll loop that runs every flow to its end, the timeout or a stop signal, feeding
 * the captured packets to the pipeline and applying the window control's clamps. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fetch.h"
#include "pktparse.h"
#include "util.h"

static void drain_capture(struct fetch_ctx *c)
{
    uint8_t pkt[256];
    for (int i = 0; i < 4096; i++) {
        size_t len;
        uint64_t t;
        int outgoing;
        int r = capture_next(&c->cap, pkt, sizeof(pkt), &len, &t, &outgoing);
        if (r <= 0)
            return;
        struct tcp_segment seg;
        if (parse_ip_tcp(pkt, len, &seg) != 0)
            continue;
        int dir;
        int idx = pipe_match(&c->pl, &seg, &dir);
        if (idx < 0)
            continue;
        /* on lo every packet is seen twice (out and in): keep data as received, ACKs as sent */
        if ((dir == DIR_DATA_IN) == (outgoing != 0))
            continue;
        struct pkt_event ev = { .t_ns = t, .dir = (uint8_t)dir, .has_ts = seg.has_ts, .tcp_flags = seg.flags,
                                .seq = seg.seq, .ack = seg.ack, .payload_bytes = seg.payload_bytes,
                                .win_raw = seg.win_raw, .tsval = seg.tsval, .tsecr = seg.tsecr };
        pipe_event(&c->pl, idx, &ev);
    }
}

static void apply_windows(struct fetch_ctx *c)
{
    for (int i = 0; i < c->n_flows; i++) {
        struct fetch_flow *f = &c->flows[i];
        if (f->pipe_idx < 0 || f->fd < 0)
            continue;
        struct pipe_flow *pf = c->pl.flows[f->pipe_idx];
        if (!pf->rwnd_dirty)
            continue;
        pf->rwnd_dirty = 0;
        int v = (int)pf->rwnd_wanted;
        if (setsockopt(f->fd, IPPROTO_TCP, TCP_WINDOW_CLAMP, &v, sizeof(v)) == 0)
            pf->rwnd_applied = pf->rwnd_wanted;
    }
}

int fetch_run(struct fetch_ctx *c)
{
    c->t_start_ns = now_realtime_ns();
    uint64_t deadline = c->t_start_ns + (uint64_t)(c->o.timeout_s * 1e9);
    struct pollfd pfd[PIPE_MAX_FLOWS + 2];
    for (;;) {
        uint64_t now = now_realtime_ns();
        int live = 0, np = 0;
        int map[PIPE_MAX_FLOWS + 2];
        for (int i = 0; i < c->n_flows; i++) {
            struct fetch_flow *f = &c->flows[i];
            if (f->state == F_PENDING && now >= c->t_start_ns + f->spec.start_ms * NS_PER_MS)
                fetch_start_flow(c, f);
            if (f->state == F_CONNECTING && now > f->t_connect_ns + (uint64_t)(c->o.connect_timeout_s * 1e9))
                fetch_fail_flow(c, f, "connect: no answer within the connect timeout", 0);
            if (f->state == F_PENDING || f->state == F_CONNECTING || f->state == F_RESP || f->state == F_DATA)
                live++;
            if (f->fd >= 0 && f->state != F_PENDING) {
                pfd[np].fd = f->fd;
                pfd[np].events = f->state == F_CONNECTING ? POLLOUT : POLLIN;
                pfd[np].revents = 0;
                map[np++] = i;
            }
        }
        if (!live)
            break;
        if (now > deadline) {
            c->timed_out = 1;
            char msg[240];
            snprintf(msg, sizeof(msg), "timeout: flows still running after %.1f s (--timeout)", c->o.timeout_s);
            add_msg(c->errors, &c->n_errors, msg);
            break;
        }
        if (c->packet_mode) {
            pfd[np].fd = c->cap.fd;
            pfd[np].events = POLLIN;
            pfd[np].revents = 0;
            map[np++] = -1;
        }
        if (c->sig_fd >= 0) {
            pfd[np].fd = c->sig_fd;
            pfd[np].events = POLLIN;
            pfd[np].revents = 0;
            map[np++] = -2;
        }
        int r = poll(pfd, (nfds_t)np, 1);
        if (r < 0 && errno != EINTR)
            break;
        if (c->sig_fd >= 0 && pfd[np - 1].revents) {
            struct signalfd_siginfo si;
            if (read(c->sig_fd, &si, sizeof(si)) > 0) {
                c->interrupted = 1;
                char msg[240];
                snprintf(msg, sizeof(msg), "interrupted by signal %u: flows stopped early", si.ssi_signo);
                add_msg(c->errors, &c->n_errors, msg);
                break;
            }
        }
        if (c->packet_mode)
            drain_capture(c);
        for (int k = 0; k < np; k++) {
            if (map[k] < 0 || !pfd[k].revents)
                continue;
            struct fetch_flow *f = &c->flows[map[k]];
            if (f->state == F_CONNECTING)
                fetch_on_connected(c, f);
            else if (f->state == F_RESP || f->state == F_DATA)
                fetch_on_readable(c, f);
        }
        if (c->packet_mode)
            drain_capture(c);
        pipe_tick(&c->pl, now_realtime_ns());
        apply_windows(c);
    }
    if (c->packet_mode) {
        /* the last packets of each flow may still sit in the capture socket */
        drain_capture(c);
        capture_close(&c->cap);
    }
    for (int i = 0; i < c->n_flows; i++)
        if (c->flows[i].fd >= 0)
            close(c->flows[i].fd);
    pipe_flush_logs(&c->pl);
    return 0;
}
