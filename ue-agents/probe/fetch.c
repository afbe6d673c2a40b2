/* `cellab-probe fetch`: ask a cellab-send server for one or several concurrent flows, time every
 * packet, run the estimators and (optionally) control the receive window. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "capture.h"
#include "commands.h"
#include "flowproto.h"
#include "pipeline.h"
#include "srprobe.h"
#include "util.h"

#define MAX_MSGS 8

enum fstate { F_PENDING, F_CONNECTING, F_RESP, F_DATA, F_DONE, F_FAILED };

struct flow_spec {
    int mode;
    uint64_t amount;
    uint64_t start_ms;
    char cc[17];
    uint64_t tag;
};

struct fetch_flow {
    struct flow_spec spec;
    int fd;
    int state;
    uint8_t req[FLOWPROTO_REQ_BYTES];
    uint8_t resp[FLOWPROTO_RESP_BYTES];
    size_t resp_got;
    uint16_t status;
    uint64_t flow_id;
    uint64_t bytes_read;
    uint64_t t_connect_ns, t_first_byte_ns, t_done_ns;
    int complete;
    char error[240];
    int pipe_idx;
    uint32_t rcvbuf_bytes;
};

struct fetch_opts {
    const char *server;
    int port;
    const char *summary_path;
    const char *log_path;
    const char *ms_log_path;
    const char *capture_mode; /* auto | packet | socket */
    const char *iface;
    int control;
    double timeout_s;
    double connect_timeout_s;
    uint64_t rcvbuf_bytes;
    uint32_t chunk_bytes;
    int sr_probes;
};

struct fetch_ctx {
    struct fetch_opts o;
    struct fetch_flow flows[PIPE_MAX_FLOWS];
    int n_flows;
    struct pipeline pl;
    struct capture cap;
    int packet_mode;
    struct addrinfo *addr;
    char errors[MAX_MSGS][240];
    int n_errors;
    char missing[MAX_MSGS][240];
    int n_missing;
    uint64_t t_start_ns;
    int timed_out;
    int sig_fd;       /* SIGTERM/SIGINT as a readable fd: stop, then write the partial summary */
    int interrupted;
    struct srprobe_result probes;
    double probes_elapsed_ms;
    char probe_error[240];
    uint8_t buf[256 * 1024];
};

static void add_msg(char list[][240], int *n, const char *text)
{
    if (*n < MAX_MSGS)
        snprintf(list[(*n)++], 240, "%s", text);
}

static void usage(FILE *out)
{
    fputs("usage: cellab-probe fetch --server ADDR [--port 5301] (--bytes SIZE | --seconds S) [--flows N]\n"
          "         [--flow bytes=SIZE|seconds=S[,start_ms=M][,cc=NAME][,tag=N]]... [--cc NAME]\n"
          "         [--control none|exll|dfcsd] [--capture auto|packet|socket] [--iface NAME]\n"
          "         [--summary FILE] [--log FILE] [--ms-log FILE] [--timeout S] [--connect-timeout S]\n"
          "         [--rcvbuf SIZE] [--chunk SIZE] [--exll-alpha PKTS] [--exll-gamma G] [--dfcsd-beta PKTS]\n"
          "         [--sr-probes N]   (N idle-uplink ICMP probes before the flows, for the SR period; 0..256)\n",
          out);
}

static int parse_flow_spec(const char *text, struct flow_spec *s, const char *default_cc, char *err, size_t errlen)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", text);
    memset(s, 0, sizeof(*s));
    snprintf(s->cc, sizeof(s->cc), "%s", default_cc ? default_cc : "");
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            snprintf(err, errlen, "--flow: item '%s' is not KEY=VALUE (keys: bytes, seconds, start_ms, cc, tag)", tok);
            return -1;
        }
        *eq = '\0';
        const char *k = tok, *v = eq + 1;
        double d;
        uint64_t u;
        if (!strcmp(k, "bytes")) {
            if (parse_size(v, &u) || u == 0) {
                snprintf(err, errlen, "--flow: bytes '%s' is not a positive size (e.g. 1500, 64K, 10M)", v);
                return -1;
            }
            s->mode = FLOW_MODE_BYTES;
            s->amount = u;
        } else if (!strcmp(k, "seconds")) {
            if (parse_double(v, &d) || !(d > 0) || d > 86400) {
                snprintf(err, errlen, "--flow: seconds '%s' must be in (0, 86400]", v);
                return -1;
            }
            s->mode = FLOW_MODE_MS;
            s->amount = (uint64_t)llround(d * 1000);
        } else if (!strcmp(k, "start_ms")) {
            if (parse_double(v, &d) || d < 0) {
                snprintf(err, errlen, "--flow: start_ms '%s' must be >= 0", v);
                return -1;
            }
            s->start_ms = (uint64_t)d;
        } else if (!strcmp(k, "cc")) {
            if (strlen(v) > 16) {
                snprintf(err, errlen, "--flow: cc '%s' is longer than 16 characters", v);
                return -1;
            }
            snprintf(s->cc, sizeof(s->cc), "%s", v);
        } else if (!strcmp(k, "tag")) {
            if (parse_size(v, &u)) {
                snprintf(err, errlen, "--flow: tag '%s' is not a number", v);
                return -1;
            }
            s->tag = u;
        } else {
            snprintf(err, errlen, "--flow: unknown key '%s' (allowed: bytes, seconds, start_ms, cc, tag)", k);
            return -1;
        }
    }
    if (s->mode == 0) {
        snprintf(err, errlen, "--flow '%s': needs bytes= or seconds=", text);
        return -1;
    }
    return 0;
}

static void fail_flow(struct fetch_ctx *c, struct fetch_flow *f, const char *what, int err)
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

static void start_flow(struct fetch_ctx *c, struct fetch_flow *f)
{
    f->t_connect_ns = now_realtime_ns();
    f->fd = socket(c->addr->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
    if (f->fd < 0) {
        fail_flow(c, f, "socket", errno);
        return;
    }
    if (!c->packet_mode) {
        int on = 1;
        setsockopt(f->fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on));
    }
    if (connect(f->fd, c->addr->ai_addr, c->addr->ai_addrlen) < 0 && errno != EINPROGRESS) {
        fail_flow(c, f, "connect", errno);
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

static void on_connected(struct fetch_ctx *c, struct fetch_flow *f)
{
    int err = 0;
    socklen_t l = sizeof(err);
    getsockopt(f->fd, SOL_SOCKET, SO_ERROR, &err, &l);
    if (err) {
        fail_flow(c, f, "connect", err);
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
        fail_flow(c, f, "sending the request", n < 0 ? errno : EIO);
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

static void on_readable(struct fetch_ctx *c, struct fetch_flow *f)
{
    if (f->state == F_RESP) {
        ssize_t n = recv(f->fd, f->resp + f->resp_got, sizeof(f->resp) - f->resp_got, 0);
        if (n == 0) {
            fail_flow(c, f, "sender closed before its response", 0);
            return;
        }
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR)
                fail_flow(c, f, "reading the response", errno);
            return;
        }
        f->resp_got += (size_t)n;
        if (f->resp_got < sizeof(f->resp))
            return;
        if (flowproto_decode_response(f->resp, &f->status, &f->flow_id) != 0) {
            fail_flow(c, f, "response has no CLB1 magic: not a cellab-send server?", 0);
            return;
        }
        if (f->status != 0) {
            char msg[120];
            snprintf(msg, sizeof(msg), "sender refused the flow: status %u (%s)", f->status,
                     flowproto_status_text(f->status));
            fail_flow(c, f, msg, 0);
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
                fail_flow(c, f, "receiving", errno);
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

static void write_summary(struct fetch_ctx *c, FILE *out)
{
    struct jsonw w;
    jw_init(&w, out);
    int failed = 0, incomplete = 0;
    for (int i = 0; i < c->n_flows; i++) {
        failed += c->flows[i].state == F_FAILED;
        incomplete += c->flows[i].state != F_DONE || !c->flows[i].complete;
    }
    const char *status = failed == c->n_flows ? "error" : (incomplete || c->n_missing || c->n_errors ? "partial" : "ok");
    jw_obj_open(&w, NULL);
    jw_str(&w, "tool", "cellab-probe");
    jw_str(&w, "version", PROBE_VERSION);
    jw_str(&w, "command", "fetch");
    jw_str(&w, "status", status);
    char server[300];
    snprintf(server, sizeof(server), "%s:%d", c->o.server, c->o.port);
    jw_str(&w, "server", server);
    jw_str(&w, "control", control_name(c->o.control));
    jw_str(&w, "timestamps", c->packet_mode ? "packet-ns" : "socket-coarse");
    jw_num(&w, "start_ns", (double)c->t_start_ns);
    jw_bool(&w, "timed_out", c->timed_out);
    jw_bool(&w, "interrupted", c->interrupted);
    jw_obj_open(&w, "capture");
    jw_str(&w, "kind", c->packet_mode ? "af_packet" : "tcp-socket");
    jw_str(&w, "interface", c->o.iface ? c->o.iface : "any");
    jw_int(&w, "packets", (long long)c->cap.packets);
    jw_int(&w, "kernel_drops", (long long)c->cap.kernel_drops);
    jw_obj_close(&w);
    jw_obj_open(&w, "uplink_probes");
    jw_int(&w, "requested", c->o.sr_probes);
    jw_int(&w, "sent", c->probes.sent);
    jw_int(&w, "received", c->probes.received);
    jw_str(&w, "socket", c->probes.socket_kind);
    jw_num(&w, "elapsed_ms", c->probes_elapsed_ms);
    jw_arr_open(&w, "rtt_ms");
    for (int i = 0; i < c->probes.received; i++)
        jw_num(&w, NULL, c->probes.rtt_us[i] / 1e3);
    jw_arr_close(&w);
    jw_str(&w, "error", c->probe_error[0] ? c->probe_error : NULL);
    jw_obj_close(&w);
    jw_arr_open(&w, "errors");
    for (int i = 0; i < c->n_errors; i++)
        jw_str(&w, NULL, c->errors[i]);
    jw_arr_close(&w);
    jw_arr_open(&w, "missing");
    for (int i = 0; i < c->n_missing; i++)
        jw_str(&w, NULL, c->missing[i]);
    for (int i = 0; i < c->n_flows; i++) {
        const struct fetch_flow *f = &c->flows[i];
        char msg[300];
        if (f->state == F_FAILED)
            snprintf(msg, sizeof(msg), "flow %d: %s (%llu bytes received)", i,
                     f->bytes_read ? "measurements up to the failure only" : "no measurements",
                     (unsigned long long)f->bytes_read);
        else if (f->state != F_DONE)
            snprintf(msg, sizeof(msg), "flow %d: unfinished at the timeout, measurements up to it only", i);
        else if (!f->complete)
            snprintf(msg, sizeof(msg), "flow %d: %llu of %llu bytes", i, (unsigned long long)f->bytes_read,
                     (unsigned long long)f->spec.amount);
        else
            continue;
        jw_str(&w, NULL, msg);
    }
    jw_arr_close(&w);
    jw_arr_open(&w, "requests");
    for (int i = 0; i < c->n_flows; i++) {
        const struct fetch_flow *f = &c->flows[i];
        jw_obj_open(&w, NULL);
        jw_int(&w, "index", i);
        jw_str(&w, "mode", f->spec.mode == FLOW_MODE_BYTES ? "bytes" : "milliseconds");
        jw_int(&w, "amount", (long long)f->spec.amount);
        jw_int(&w, "start_ms", (long long)f->spec.start_ms);
        jw_str(&w, "cc", f->spec.cc);
        jw_int(&w, "tag", (long long)f->spec.tag);
        const char *st = f->state == F_DONE ? "done" : f->state == F_FAILED ? "failed" : "unfinished";
        jw_str(&w, "state", st);
        jw_bool(&w, "complete", f->state == F_DONE && f->complete);
        jw_int(&w, "bytes_read", (long long)f->bytes_read);
        jw_int(&w, "sender_status", f->status);
        jw_int(&w, "sender_flow_id", (long long)f->flow_id);
        jw_int(&w, "rcvbuf_bytes", f->rcvbuf_bytes);
        jw_num(&w, "fct_ms", f->state == F_DONE ? (double)(f->t_done_ns - f->t_connect_ns) / 1e6 : NAN);
        jw_int(&w, "pipeline_flow", f->pipe_idx);
        if (f->error[0])
            jw_str(&w, "error", f->error);
        jw_obj_close(&w);
    }
    jw_arr_close(&w);
    pipe_write_summary(&c->pl, &w);
    jw_obj_close(&w);
}

static int run(struct fetch_ctx *c)
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
                start_flow(c, f);
            if (f->state == F_CONNECTING && now > f->t_connect_ns + (uint64_t)(c->o.connect_timeout_s * 1e9))
                fail_flow(c, f, "connect: no answer within the connect timeout", 0);
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
                on_connected(c, f);
            else if (f->state == F_RESP || f->state == F_DATA)
                on_readable(c, f);
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

int cmd_fetch(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "server", required_argument, 0, 's' }, { "port", required_argument, 0, 'p' },
        { "bytes", required_argument, 0, 'b' }, { "seconds", required_argument, 0, 't' },
        { "flows", required_argument, 0, 'n' }, { "flow", required_argument, 0, 'f' },
        { "cc", required_argument, 0, 'c' }, { "control", required_argument, 0, 'C' },
        { "capture", required_argument, 0, 'K' }, { "iface", required_argument, 0, 'i' },
        { "summary", required_argument, 0, 'o' }, { "log", required_argument, 0, 'l' },
        { "ms-log", required_argument, 0, 'm' }, { "timeout", required_argument, 0, 'T' },
        { "connect-timeout", required_argument, 0, 'W' }, { "rcvbuf", required_argument, 0, 'R' },
        { "chunk", required_argument, 0, 'k' }, { "exll-alpha", required_argument, 0, 'A' },
        { "exll-gamma", required_argument, 0, 'G' }, { "dfcsd-beta", required_argument, 0, 'B' },
        { "sr-probes", required_argument, 0, 'P' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    struct fetch_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return 1;
    c->o.port = FLOWPROTO_DEFAULT_PORT;
    c->o.capture_mode = "auto";
    c->o.timeout_s = 60;
    c->o.connect_timeout_s = 5;
    c->o.rcvbuf_bytes = 8u << 20;
    const char *flow_texts[PIPE_MAX_FLOWS];
    int n_flow_texts = 0, n_same = 1;
    const char *bytes_s = NULL, *seconds_s = NULL, *cc = NULL;
    double alpha = NAN, gamma = NAN, beta = NAN;
    char err[300] = "";
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        double d;
        uint64_t u;
        switch (opt) {
        case 's': c->o.server = optarg; break;
        case 'p':
            if (parse_double(optarg, &d) || d < 1 || d > 65535 || d != floor(d)) {
                snprintf(err, sizeof(err), "--port '%s' must be an integer in 1..65535", optarg);
                goto usage_error;
            }
            c->o.port = (int)d;
            break;
        case 'b': bytes_s = optarg; break;
        case 't': seconds_s = optarg; break;
        case 'n':
            if (parse_double(optarg, &d) || d < 1 || d > PIPE_MAX_FLOWS || d != floor(d)) {
                snprintf(err, sizeof(err), "--flows '%s' must be an integer in 1..%d", optarg, PIPE_MAX_FLOWS);
                goto usage_error;
            }
            n_same = (int)d;
            break;
        case 'f':
            if (n_flow_texts >= PIPE_MAX_FLOWS) {
                snprintf(err, sizeof(err), "--flow: at most %d flows", PIPE_MAX_FLOWS);
                goto usage_error;
            }
            flow_texts[n_flow_texts++] = optarg;
            break;
        case 'c':
            if (strlen(optarg) > 16) {
                snprintf(err, sizeof(err), "--cc '%s' is longer than 16 characters", optarg);
                goto usage_error;
            }
            cc = optarg;
            break;
        case 'C':
            c->o.control = control_parse(optarg);
            if (c->o.control < 0) {
                snprintf(err, sizeof(err), "--control '%s' (allowed: none, exll, dfcsd)", optarg);
                goto usage_error;
            }
            break;
        case 'K':
            if (strcmp(optarg, "auto") && strcmp(optarg, "packet") && strcmp(optarg, "socket")) {
                snprintf(err, sizeof(err), "--capture '%s' (allowed: auto, packet, socket)", optarg);
                goto usage_error;
            }
            c->o.capture_mode = optarg;
            break;
        case 'i': c->o.iface = optarg; break;
        case 'o': c->o.summary_path = optarg; break;
        case 'l': c->o.log_path = optarg; break;
        case 'm': c->o.ms_log_path = optarg; break;
        case 'T':
            if (parse_double(optarg, &d) || !(d > 0) || d > 86400) {
                snprintf(err, sizeof(err), "--timeout '%s' must be in (0, 86400] seconds", optarg);
                goto usage_error;
            }
            c->o.timeout_s = d;
            break;
        case 'W':
            if (parse_double(optarg, &d) || !(d > 0) || d > 600) {
                snprintf(err, sizeof(err), "--connect-timeout '%s' must be in (0, 600] seconds", optarg);
                goto usage_error;
            }
            c->o.connect_timeout_s = d;
            break;
        case 'R':
            if (parse_size(optarg, &u) || u < 65536 || u > (1u << 30)) {
                snprintf(err, sizeof(err), "--rcvbuf '%s' must be a size in 64K..1G", optarg);
                goto usage_error;
            }
            c->o.rcvbuf_bytes = u;
            break;
        case 'k':
            if (parse_size(optarg, &u) || u > (1u << 30)) {
                snprintf(err, sizeof(err), "--chunk '%s' must be a size up to 1G (0 = sender default)", optarg);
                goto usage_error;
            }
            c->o.chunk_bytes = (uint32_t)u;
            break;
        case 'A':
            if (parse_double(optarg, &alpha) || !(alpha > 0)) {
                snprintf(err, sizeof(err), "--exll-alpha '%s' must be > 0 (packets)", optarg);
                goto usage_error;
            }
            break;
        case 'G':
            if (parse_double(optarg, &gamma) || !(gamma > 0) || gamma > 1) {
                snprintf(err, sizeof(err), "--exll-gamma '%s' must be in (0, 1]", optarg);
                goto usage_error;
            }
            break;
        case 'B':
            if (parse_double(optarg, &beta) || !(beta > 0)) {
                snprintf(err, sizeof(err), "--dfcsd-beta '%s' must be > 0 (packets)", optarg);
                goto usage_error;
            }
            break;
        case 'P':
            if (parse_double(optarg, &d) || d < 0 || d > 256 || d != floor(d)) {
                snprintf(err, sizeof(err), "--sr-probes '%s' must be an integer in 0..256", optarg);
                goto usage_error;
            }
            c->o.sr_probes = (int)d;
            break;
        case 'h': usage(stdout); free(c); return 0;
        default: free(c); usage(stderr); return 2;
        }
    }
    if (!c->o.server) {
        snprintf(err, sizeof(err), "--server is required");
        goto usage_error;
    }
    if (n_flow_texts == 0) {
        if (!!bytes_s == !!seconds_s) {
            snprintf(err, sizeof(err), "give exactly one of --bytes or --seconds (or --flow specs)");
            goto usage_error;
        }
        char spec[128];
        snprintf(spec, sizeof(spec), "%s=%s", bytes_s ? "bytes" : "seconds", bytes_s ? bytes_s : seconds_s);
        for (int i = 0; i < n_same; i++) {
            if (parse_flow_spec(spec, &c->flows[i].spec, cc, err, sizeof(err)))
                goto usage_error;
            c->flows[i].spec.tag = (uint64_t)i;
        }
        c->n_flows = n_same;
    } else {
        for (int i = 0; i < n_flow_texts; i++)
            if (parse_flow_spec(flow_texts[i], &c->flows[i].spec, cc, err, sizeof(err)))
                goto usage_error;
        c->n_flows = n_flow_texts;
    }
    for (int i = 0; i < c->n_flows; i++) {
        c->flows[i].fd = -1;
        c->flows[i].pipe_idx = -1;
    }

    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    c->sig_fd = -1;
    if (sigprocmask(SIG_BLOCK, &stop_signals, NULL) == 0)
        c->sig_fd = signalfd(-1, &stop_signals, SFD_NONBLOCK | SFD_CLOEXEC);
    pipe_init(&c->pl, c->o.control);
    if (!isnan(alpha)) c->pl.exll_p.alpha_pkts = alpha;
    if (!isnan(gamma)) c->pl.exll_p.gamma = gamma;
    if (!isnan(beta)) c->pl.dfcsd_p.beta_pkts = beta;
    c->pl.exll_p.rwnd_max_bytes = (uint32_t)c->o.rcvbuf_bytes;
    c->pl.dfcsd_p.rwnd_max_bytes = (uint32_t)c->o.rcvbuf_bytes;

    FILE *pkt_log = NULL, *ms_log = NULL;
    if (c->o.log_path) {
        pkt_log = fopen(c->o.log_path, "w");
        if (!pkt_log) {
            snprintf(err, sizeof(err), "--log %s: %s", c->o.log_path, strerror(errno));
            goto usage_error;
        }
        fputs("# cellab-probe events v1\nt_ns,flow,dir,seq,ack,len,win,has_ts,tsval,tsecr\n", pkt_log);
        c->pl.pkt_log = pkt_log;
    }
    if (c->o.ms_log_path) {
        ms_log = fopen(c->o.ms_log_path, "w");
        if (!ms_log) {
            snprintf(err, sizeof(err), "--ms-log %s: %s", c->o.ms_log_path, strerror(errno));
            goto usage_error;
        }
        fputs("ms,flow,bytes,packets,acks,rtt_mean_us,rwnd_bytes\n", ms_log);
        c->pl.ms_log = ms_log;
    }

    if (strcmp(c->o.capture_mode, "socket") != 0) {
        if (capture_open(&c->cap, c->o.iface) == 0) {
            c->packet_mode = 1;
        } else {
            char msg[240];
            snprintf(msg, sizeof(msg), "no per-packet capture (AF_PACKET: %s; needs root or CAP_NET_RAW)%s",
                     strerror(errno), c->o.iface ? " or bad --iface" : "");
            if (!strcmp(c->o.capture_mode, "packet")) {
                add_msg(c->errors, &c->n_errors, msg);
            }
            add_msg(c->missing, &c->n_missing, msg);
            add_msg(c->missing, &c->n_missing,
                    "per-packet RTT, SR estimate and window control inputs: receive times are per read (coarse)");
        }
    } else {
        add_msg(c->missing, &c->n_missing, "per-packet RTT and SR estimate: --capture socket gives per-read times");
    }
    c->cap.fd = c->packet_mode ? c->cap.fd : -1;

    int rc = 0;
    if (!strcmp(c->o.capture_mode, "packet") && !c->packet_mode) {
        rc = 1;
    } else {
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
        char port[8];
        snprintf(port, sizeof(port), "%d", c->o.port);
        int gai = getaddrinfo(c->o.server, port, &hints, &c->addr);
        if (gai != 0) {
            char msg[240];
            snprintf(msg, sizeof(msg), "server '%s': %s", c->o.server, gai_strerror(gai));
            add_msg(c->errors, &c->n_errors, msg);
            for (int i = 0; i < c->n_flows; i++) {
                c->flows[i].state = F_FAILED;
                snprintf(c->flows[i].error, sizeof(c->flows[i].error), "%s", msg);
            }
            rc = 1;
        } else {
            if (c->o.sr_probes > 0) {
                char perr[240] = "";
                uint64_t probes_t0 = now_realtime_ns();
                if (srprobe_run(c->addr->ai_addr, c->addr->ai_addrlen, c->o.sr_probes, 30, 110,
                                (uint32_t)now_realtime_ns(), &c->probes, perr, sizeof(perr)) != 0) {
                    snprintf(c->probe_error, sizeof(c->probe_error), "%s", perr);
                    add_msg(c->missing, &c->n_missing, perr);
                } else if (c->probes.received < c->o.sr_probes / 2) {
                    snprintf(c->probe_error, sizeof(c->probe_error), "only %d of %d SR probes answered",
                             c->probes.received, c->probes.sent);
                    add_msg(c->missing, &c->n_missing, c->probe_error);
                }
                c->probes_elapsed_ms = (double)(now_realtime_ns() - probes_t0) / 1e6;
                c->pl.ping_rtt_us = c->probes.rtt_us;
                c->pl.n_ping = (size_t)c->probes.received;
            }
            run(c);
            freeaddrinfo(c->addr);
        }
    }
    if (c->packet_mode && c->cap.fd >= 0)
        capture_close(&c->cap);

    struct outfile out;
    if (outfile_open(&out, c->o.summary_path) != 0) {
        fprintf(stderr, "cellab-probe: --summary %s: %s\n", c->o.summary_path, strerror(errno));
        rc = 1;
    } else {
        write_summary(c, out.f);
        if (outfile_close(&out) != 0) {
            fprintf(stderr, "cellab-probe: writing --summary %s failed\n", c->o.summary_path);
            rc = 1;
        }
    }
    for (int i = 0; i < c->n_errors; i++)
        fprintf(stderr, "cellab-probe: %s\n", c->errors[i]);
    for (int i = 0; i < c->n_flows; i++)
        if (c->flows[i].state != F_DONE || !c->flows[i].complete)
            rc = 1;
    if (pkt_log)
        fclose(pkt_log);
    if (ms_log)
        fclose(ms_log);
    if (c->sig_fd >= 0)
        close(c->sig_fd);
    pipe_free(&c->pl);
    free(c);
    return rc;

usage_error:
    fprintf(stderr, "cellab-probe fetch: %s\n", err);
    usage(stderr);
    free(c);
    return 2;
}
