/* cellab-probe fetch: one flow's life: the connection, the request (flow protocol), the sender's response,
 * the data (coarse per-read events without packet capture), its end or failure. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fetch.h"
#include "util.h"

void fetch_fail_flow(struct fetch_ctx *c, struct fetch_flow *f, const char *what, int err)
{
    char msg[240];
    if (err)
        snprintf(msg, sizeof(msg), "flow %d (%s:%d): %s: %s", (int)(f - c->flows), c->o.server, c->o.port, what,
                 strerror(err));
    else
        snprintf(msg, sizeof(msg), "flow %d (%s:%d): %s", (int)(f - c->flows), c->o.server, c->o.port, what);
    snprintf(f->error, sizeof(f->error), "%s", msg);
    add_msg(c->errors, &c->n_errors, msg);
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    f->state = F_FAILED;
    f->t_done_ns = now_realtime_ns();
    if (f->pipe_idx >= 0)
        pipe_flow_done(&c->pl, f->pipe_idx, f->t_done_ns);
}

void fetch_start_flow(struct fetch_ctx *c, struct fetch_flow *f)
{
    f->t_connect_ns = now_realtime_ns();
    f->fd = socket(c->addr->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
    if (f->fd < 0) {
        fetch_fail_flow(c, f, "socket", errno);
        return;
    }
    if (!c->packet_mode) {
        int on = 1;
        setsockopt(f->fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on));
    }
    if (connect(f->fd, c->addr->ai_addr, c->addr->ai_addrlen) < 0 && errno != EINPROGRESS) {
        fetch_fail_flow(c, f, "connect", errno);
        return;
    }
    f->state = F_CONNECTING;
}

static void sockaddr_to_endpoint(const struct sockaddr_storage *ss, struct tcp_endpoint *e)
{
    memset(e, 0, sizeof(*e));
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *s = (const struct sockaddr_in *)ss;
        e->family = 4;
        memcpy(e->addr, &s->sin_addr, 4);
        e->port = ntohs(s->sin_port);
    } else {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)ss;
        e->family = 6;
        memcpy(e->addr, &s->sin6_addr, 16);
        e->port = ntohs(s->sin6_port);
    }
}

void fetch_on_connected(struct fetch_ctx *c, struct fetch_flow *f)
{
    int err = 0;
    socklen_t l = sizeof(err);
    getsockopt(f->fd, SOL_SOCKET, SO_ERROR, &err, &l);
    if (err) {
        fetch_fail_flow(c, f, "connect", err);
        return;
    }
    struct sockaddr_storage la, ra;
    socklen_t ll = sizeof(la), rl = sizeof(ra);
    getsockname(f->fd, (struct sockaddr *)&la, &ll);
    getpeername(f->fd, (struct sockaddr *)&ra, &rl);
    struct tcp_endpoint le, re;
    sockaddr_to_endpoint(&la, &le);
    sockaddr_to_endpoint(&ra, &re);
    char label[64];
    snprintf(label, sizeof(label), "flow%d", (int)(f - c->flows));
    f->pipe_idx = pipe_add_flow(&c->pl, label, &le, &re, now_realtime_ns());
    if (c->o.control != CONTROL_NONE && f->pipe_idx >= 0) {
        /* Lock autotuning with a large buffer, or the kernel overwrites TCP_WINDOW_CLAMP as it grows
         * the buffer. Done after the handshake, not before: on this kernel a buffer locked before
         * connect is offered whole in the handshake's window (a right edge Linux never takes back),
         * while an unlocked socket takes its window scale from tcp_rmem[2] and opens with ~64 KiB.
         * The clamp then starts small and follows the controller (pipe_tick). */
        int v = (int)c->o.rcvbuf_bytes;
        if (setsockopt(f->fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) < 0)
            setsockopt(f->fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
        int got = 0;
        socklen_t gl = sizeof(got);
        getsockopt(f->fd, SOL_SOCKET, SO_RCVBUF, &got, &gl);
        f->rcvbuf_bytes = (uint32_t)got;
        int clamp = 65536;
        if (setsockopt(f->fd, IPPROTO_TCP, TCP_WINDOW_CLAMP, &clamp, sizeof(clamp)) == 0)
            c->pl.flows[f->pipe_idx]->rwnd_applied = (uint32_t)clamp;
    }
    flowproto_encode_request(f->req, f->spec.mode, f->spec.amount, f->spec.cc, f->spec.tag, c->o.chunk_bytes);
    ssize_t n = send(f->fd, f->req, sizeof(f->req), MSG_NOSIGNAL);
    if (n != (ssize_t)sizeof(f->req)) { /* 64 bytes into an empty send buffer: all or an error */
        fetch_fail_flow(c, f, "sending the request", n < 0 ? errno : EIO);
        return;
    }
    f->state = F_RESP;
}

static void flow_finished(struct fetch_ctx *c, struct fetch_flow *f)
{
    f->t_done_ns = now_realtime_ns();
    f->state = F_DONE;
    f->complete = f->spec.mode == FLOW_MODE_BYTES ? f->bytes_read >= f->spec.amount : 1;
    if (!f->complete) {
        char msg[240];
        snprintf(msg, sizeof(msg), "flow %d: sender closed after %llu of %llu bytes", (int)(f - c->flows),
                 (unsigned long long)f->bytes_read, (unsigned long long)f->spec.amount);
        add_msg(c->errors, &c->n_errors, msg);
    }
    close(f->fd);
    f->fd = -1;
    pipe_flow_done(&c->pl, f->pipe_idx, f->t_done_ns);
}

void fetch_on_readable(struct fetch_ctx *c, struct fetch_flow *f)
{
    if (f->state == F_RESP) {
        ssize_t n = recv(f->fd, f->resp + f->resp_got, sizeof(f->resp) - f->resp_got, 0);
        if (n == 0) {
            fetch_fail_flow(c, f, "sender closed before its response", 0);
            return;
        }
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR)
                fetch_fail_flow(c, f, "reading the response", errno);
            return;
        }
        f->resp_got += (size_t)n;
        if (f->resp_got < sizeof(f->resp))
            return;
        if (flowproto_decode_response(f->resp, &f->status, &f->flow_id) != 0) {
            fetch_fail_flow(c, f, "response has no CLB1 magic: not a cellab-send server?", 0);
            return;
        }
        if (f->status != 0) {
            char msg[120];
            snprintf(msg, sizeof(msg), "sender refused the flow: status %u (%s)", f->status,
                     flowproto_status_text(f->status));
            fetch_fail_flow(c, f, msg, 0);
            return;
        }
        f->state = F_DATA;
        return;
    }
    for (int rounds = 0; rounds < 8; rounds++) {
        char control[128];
        struct iovec iov = { .iov_base = c->buf, .iov_len = sizeof(c->buf) };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                              .msg_controllen = sizeof(control) };
        ssize_t n = recvmsg(f->fd, &msg, 0);
        if (n == 0) {
            flow_finished(c, f);
            return;
        }
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR)
                fetch_fail_flow(c, f, "receiving", errno);
            return;
        }
        uint64_t t = 0;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
            if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
                struct timespec ts;
                memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
                t = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
            }
        }
        if (f->t_first_byte_ns == 0)
            f->t_first_byte_ns = now_realtime_ns();
        if (!c->packet_mode) {
            /* coarse: one event per read, stamped with the last segment's receive time */
            struct pkt_event ev = { .t_ns = t ? t : now_realtime_ns(), .dir = DIR_DATA_IN,
                                    .seq = (uint32_t)f->bytes_read, .payload_bytes = (uint32_t)n };
            pipe_event(&c->pl, f->pipe_idx, &ev);
        }
        f->bytes_read += (uint64_t)n;
        if ((size_t)n < sizeof(c->buf))
            return;
    }
}
