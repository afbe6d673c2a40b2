/* cellab_sctp_stream: LD_PRELOAD library that lets a server written for one-to-one kernel SCTP
 * (SOCK_STREAM: listen, accept per peer, sctp_recvmsg/sctp_sendmsg) serve peers that use the srsRAN
 * bundle's shim (../shared/tools/srsran/src/sctpshim.c) on a kernel without SCTP. Wire format of that
 * shim: one AF_UNIX datagram per SCTP message, sockets named "\0sctpshim-IP:PORT".
 *
 * The listening socket is a datagram socket bound to that name; a thread owns it and demultiplexes by
 * sender name: a new sender gets a SOCK_SEQPACKET socketpair whose one end accept() returns, and whose
 * other end the thread relays both ways. The application's listening fd number is made to refer to a
 * notification socket that becomes readable once per new peer, so poll/select/epoll then accept() work.
 * Notifications are never produced. Written for NextEPC's MME (S1AP on 36412); used by tests only.
 * Build: cc -shared -fPIC -O2 -o cellab_sctp_stream.so cellab_sctp_stream.c -ldl -lpthread */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/sctp.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_FD 4096
#define MAX_PEERS 64
#define MAX_MSG_BYTES 65536
#define STREAMS 30 /* reported in SCTP_STATUS: the application sizes its stream ids by it */

enum { FD_PLAIN, FD_LISTEN_RAW, FD_LISTEN, FD_ACCEPTED };

struct peer {
    struct sockaddr_un name;
    socklen_t name_len;
    int relay_fd; /* thread's end of the pair; -1 when unused */
};

struct listener {
    int bound_fd;  /* the datagram socket bound to the shim name (thread-owned) */
    int notify_fd; /* thread writes one byte per new peer */
    pthread_mutex_t lock;
    struct peer peers[MAX_PEERS];
    int pending[MAX_PEERS]; /* application ends waiting for accept() */
    struct sockaddr_in pending_addr[MAX_PEERS];
    int n_pending;
};

static unsigned char fd_kind[MAX_FD];
static struct sockaddr_in accepted_peer[MAX_FD];
static struct listener *listener_of[MAX_FD];

#define REAL(name) static __typeof__(name) *real_##name; if (!real_##name) real_##name = dlsym(RTLD_NEXT, #name)

static int kind(int fd) { return fd >= 0 && fd < MAX_FD ? fd_kind[fd] : FD_PLAIN; }

static socklen_t name_for(const struct sockaddr_in *in, struct sockaddr_un *un)
{
    char ip[INET_ADDRSTRLEN];
    memset(un, 0, sizeof *un);
    un->sun_family = AF_UNIX;
    inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
    int n = snprintf(un->sun_path + 1, sizeof un->sun_path - 1, "sctpshim-%s:%u", ip, ntohs(in->sin_port));
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static void in_from_name(const struct sockaddr_un *un, socklen_t len, struct sockaddr_in *in)
{
    char buf[108] = {0};
    size_t off = offsetof(struct sockaddr_un, sun_path) + 1;
    size_t n = len > off ? len - off : 0;
    if (n >= sizeof buf) n = sizeof buf - 1;
    memcpy(buf, un->sun_path + 1, n);
    memset(in, 0, sizeof *in);
    in->sin_family = AF_INET;
    char *colon = strrchr(buf, ':');
    if (strncmp(buf, "sctpshim-", 9) == 0 && colon) {
        *colon = 0;
        inet_pton(AF_INET, buf + 9, &in->sin_addr);
        in->sin_port = htons((uint16_t)atoi(colon + 1));
    }
}

static struct peer *peer_for(struct listener *l, const struct sockaddr_un *name, socklen_t len, int *is_new)
{
    struct peer *free_slot = NULL;
    *is_new = 0;
    for (int i = 0; i < MAX_PEERS; i++) {
        struct peer *p = &l->peers[i];
        if (p->relay_fd >= 0 && p->name_len == len && memcmp(&p->name, name, len) == 0) return p;
        if (p->relay_fd < 0 && !free_slot) free_slot = p;
    }
    if (!free_slot || l->n_pending == MAX_PEERS) return NULL;
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return NULL;
    free_slot->name = *name;
    free_slot->name_len = len;
    free_slot->relay_fd = pair[1];
    pthread_mutex_lock(&l->lock);
    l->pending[l->n_pending] = pair[0];
    in_from_name(name, len, &l->pending_addr[l->n_pending]);
    l->n_pending++;
    pthread_mutex_unlock(&l->lock);
    *is_new = 1;
    return free_slot;
}

/* The relay: datagrams in -> the sender's pair; messages from a pair -> datagrams to its peer. */
static void *relay(void *arg)
{
    struct listener *l = arg;
    static char buf[MAX_MSG_BYTES];
    for (;;) {
        struct pollfd pfd[MAX_PEERS + 1];
        int who[MAX_PEERS + 1], n = 0;
        pfd[n].fd = l->bound_fd, pfd[n].events = POLLIN, who[n++] = -1;
        for (int i = 0; i < MAX_PEERS; i++)
            if (l->peers[i].relay_fd >= 0) pfd[n].fd = l->peers[i].relay_fd, pfd[n].events = POLLIN, who[n++] = i;
        if (poll(pfd, (nfds_t)n, -1) < 0) {
            if (errno == EINTR) continue;
            return NULL;
        }
        if (pfd[0].revents & POLLIN) {
            struct sockaddr_un from;
            socklen_t from_len = sizeof from;
            ssize_t got = recvfrom(l->bound_fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &from_len);
            int is_new = 0;
            struct peer *p = got >= 0 ? peer_for(l, &from, from_len, &is_new) : NULL;
            if (p) {
                send(p->relay_fd, buf, (size_t)got, MSG_NOSIGNAL);
                if (is_new) (void)!write(l->notify_fd, "a", 1);
            }
        }
        for (int k = 1; k < n; k++) {
            if (!(pfd[k].revents & (POLLIN | POLLHUP))) continue;
            struct peer *p = &l->peers[who[k]];
            ssize_t got = recv(p->relay_fd, buf, sizeof buf, 0);
            if (got <= 0) { /* the application closed its end */
                close(p->relay_fd);
                p->relay_fd = -1;
                continue;
            }
            sendto(l->bound_fd, buf, (size_t)got, MSG_NOSIGNAL, (struct sockaddr *)&p->name, p->name_len);
        }
    }
}

int socket(int domain, int type, int protocol)
{
    REAL(socket);
    if (domain == AF_INET && protocol == IPPROTO_SCTP && (type & 0xf) == SOCK_STREAM) {
        int fd = real_socket(AF_UNIX, SOCK_DGRAM | (type & SOCK_CLOEXEC), 0);
        if (fd >= 0 && fd < MAX_FD) fd_kind[fd] = FD_LISTEN_RAW;
        return fd;
    }
    return real_socket(domain, type, protocol);
}

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    REAL(bind);
    if (kind(fd) == FD_LISTEN_RAW && addr->sa_family == AF_INET) {
        struct sockaddr_un un;
        socklen_t l = name_for((const struct sockaddr_in *)addr, &un);
        return real_bind(fd, (struct sockaddr *)&un, l);
    }
    return real_bind(fd, addr, len);
}

int listen(int fd, int backlog)
{
    REAL(listen);
    if (kind(fd) != FD_LISTEN_RAW) return real_listen(fd, backlog);
    struct listener *l = calloc(1, sizeof *l);
    int notify[2];
    if (!l || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, notify) != 0) return -1;
    for (int i = 0; i < MAX_PEERS; i++) l->peers[i].relay_fd = -1;
    pthread_mutex_init(&l->lock, NULL);
    l->bound_fd = dup(fd);                   /* the thread keeps the bound socket ... */
    l->notify_fd = notify[1];
    if (l->bound_fd < 0 || dup2(notify[0], fd) < 0) return -1; /* ... the app's fd becomes the notifier */
    close(notify[0]);
    fd_kind[fd] = FD_LISTEN;
    listener_of[fd] = l;
    pthread_t thread;
    if (pthread_create(&thread, NULL, relay, l) != 0) return -1;
    pthread_detach(thread);
    return 0;
}

static int take_pending(int fd, struct sockaddr *addr, socklen_t *addrlen)
{
    struct listener *l = listener_of[fd];
    char c;
    if (read(fd, &c, 1) != 1) return -1; /* EAGAIN on a non-blocking notifier: no peer yet */
    pthread_mutex_lock(&l->lock);
    int conn = l->pending[0];
    struct sockaddr_in in = l->pending_addr[0];
    l->n_pending--;
    memmove(l->pending, l->pending + 1, (size_t)l->n_pending * sizeof l->pending[0]);
    memmove(l->pending_addr, l->pending_addr + 1, (size_t)l->n_pending * sizeof l->pending_addr[0]);
    pthread_mutex_unlock(&l->lock);
    if (conn >= 0 && conn < MAX_FD) fd_kind[conn] = FD_ACCEPTED, accepted_peer[conn] = in;
    if (addr && addrlen) {
        socklen_t n = *addrlen < sizeof in ? *addrlen : (socklen_t)sizeof in;
        memcpy(addr, &in, n);
        *addrlen = sizeof in;
    }
    return conn;
}

int accept(int fd, struct sockaddr *addr, socklen_t *addrlen)
{
    REAL(accept);
    return kind(fd) == FD_LISTEN ? take_pending(fd, addr, addrlen) : real_accept(fd, addr, addrlen);
}

int accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags)
{
    REAL(accept4);
    return kind(fd) == FD_LISTEN ? take_pending(fd, addr, addrlen) : real_accept4(fd, addr, addrlen, flags);
}

int close(int fd)
{
    REAL(close);
    if (fd >= 0 && fd < MAX_FD) fd_kind[fd] = FD_PLAIN;
    return real_close(fd);
}

int getpeername(int fd, struct sockaddr *addr, socklen_t *addrlen)
{
    REAL(getpeername);
    if (kind(fd) != FD_ACCEPTED) return real_getpeername(fd, addr, addrlen);
    socklen_t n = *addrlen < sizeof accepted_peer[fd] ? *addrlen : (socklen_t)sizeof accepted_peer[fd];
    memcpy(addr, &accepted_peer[fd], n);
    *addrlen = sizeof accepted_peer[fd];
    return 0;
}

int setsockopt(int fd, int level, int opt, const void *val, socklen_t len)
{
    REAL(setsockopt);
    if (kind(fd) != FD_PLAIN) return 0; /* SCTP, IP and socket options of an emulated socket: nothing to set */
    return real_setsockopt(fd, level, opt, val, len);
}

int getsockopt(int fd, int level, int opt, void *val, socklen_t *len)
{
    REAL(getsockopt);
    if (kind(fd) != FD_PLAIN && (level == IPPROTO_SCTP || level == SOL_SCTP)) {
        if (val && len) memset(val, 0, *len);
        if (opt == SCTP_STATUS && val && len && *len >= sizeof(struct sctp_status)) {
            struct sctp_status *st = val;
            st->sstat_state = SCTP_ESTABLISHED;
            st->sstat_instrms = st->sstat_outstrms = STREAMS;
        }
        return 0;
    }
    return real_getsockopt(fd, level, opt, val, len);
}

int sctp_recvmsg(int fd, void *msg, size_t len, struct sockaddr *from, socklen_t *fromlen,
                 struct sctp_sndrcvinfo *sinfo, int *flags)
{
    ssize_t n = recv(fd, msg, len, 0);
    if (n < 0) return -1;
    if (from && fromlen && *fromlen >= sizeof(struct sockaddr_in) && kind(fd) == FD_ACCEPTED) {
        memcpy(from, &accepted_peer[fd], sizeof accepted_peer[fd]);
        *fromlen = sizeof(struct sockaddr_in);
    }
    if (sinfo) {
        memset(sinfo, 0, sizeof *sinfo);
        sinfo->sinfo_ppid = htonl(18); /* S1AP */
    }
    if (flags) *flags = MSG_EOR;
    return (int)n;
}

int sctp_sendmsg(int fd, const void *msg, size_t len, struct sockaddr *to, socklen_t tolen, uint32_t ppid,
                 uint32_t flags, uint16_t stream, uint32_t ttl, uint32_t context)
{
    (void)to; (void)tolen; (void)ppid; (void)flags; (void)stream; (void)ttl; (void)context;
    return (int)send(fd, msg, len, MSG_NOSIGNAL);
}

int sctp_send(int fd, const void *msg, size_t len, const struct sctp_sndrcvinfo *sinfo, int flags)
{
    (void)sinfo;
    return (int)send(fd, msg, len, (flags & MSG_NOSIGNAL) | MSG_NOSIGNAL);
}
