/* cell_replay: drives the cell's model (the same units cellab-cell links) through a fixed, seeded packet load
 * without TUN devices, a clock or namespaces, so its outputs are deterministic: the TTI log records, a hash of
 * every packet delivered at each end with the TTI it left in, and the final stats. test_replay.py compares
 * them with a fingerprint of the model; a refactoring of the C units must leave them byte-identical.
 *
 * usage: cell_replay N_TTI cellab-cell-options...   (give --tti-log FILE for the records; no header written)
 * Built with -DREPLAY_MONOLITHIC it includes a single-file cell.c instead (how the split was checked). */
#ifdef REPLAY_MONOLITHIC
#define main cellab_cell_main
#include "cell.c"
#undef main
#else
#include "cell.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#endif

#include <fcntl.h>
#include <sys/socket.h>

#define REPLAY_MAX_ARGS 128

struct load {
    uint64_t s;
};

static uint32_t load_next(struct load *l)
{
    l->s ^= l->s << 13;
    l->s ^= l->s >> 7;
    l->s ^= l->s << 17;
    return (uint32_t)(l->s >> 11);
}

static void nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

/* peer[k]: the harness's end of the UE k "TUN"; peer_srv: of the server's */
static void make_pair(int *cell_end, int *peer)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) < 0) {
        perror("socketpair");
        exit(1);
    }
    int big = 8 << 20;
    for (int i = 0; i < 2; i++) {
        setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
        setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
        nonblock(sv[i]);
    }
    *cell_end = sv[0];
    *peer = sv[1];
}

static void send_ipv4(int fd, struct load *l, uint32_t dst_be, uint32_t len, uint8_t version)
{
    uint8_t pkt[CELL_PKT_MAX];
    memset(pkt, 0, len);
    pkt[0] = (uint8_t)(version << 4 | 5);
    memcpy(pkt + 16, &dst_be, 4);
    for (uint32_t i = 20; i < len; i++)
        pkt[i] = (uint8_t)load_next(l);
    if (write(fd, pkt, len) < 0) /* the harness never fills the queues it drains each TTI */
        fprintf(stderr, "cell_replay: write: %s\n", strerror(errno));
}

static uint64_t drain(int fd, uint64_t h, uint64_t t)
{
    uint8_t buf[CELL_PKT_MAX];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        h = (h ^ t) * 1099511628211ULL;
        for (ssize_t i = 0; i < n; i++)
            h = (h ^ buf[i]) * 1099511628211ULL;
    }
    return h;
}

static void control(struct cell *c, const char *req)
{
    json_t *rep = handle_request(c, req, strlen(req));
    json_object_del(rep, "delivery_err_p50_us"); /* wall-clock measurements: not the model's */
    json_object_del(rep, "delivery_err_p99_us");
    json_object_del(rep, "late_ttis_over_us"); /* the TTI clock's lateness: the host's, not the model's */
    json_object_del(rep, "late_max_us");
    char *s = json_dumps(rep, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(10));
    printf("%s\n", s);
    free(s);
    json_decref(rep);
}

/* The offered load of UE k in TTI t: a saturating UE, a light random one, a bursty one, then repeats. */
static void offer(struct cell *c, struct load *l, int srv_peer, const int *peer, uint64_t t)
{
    for (int k = 0; k < c->p.n_ues; k++) {
        uint32_t dst = c->ue[k].addr_be;
        switch (k % 3) {
        case 0:
            send_ipv4(srv_peer, l, dst, 1400, 4);
            send_ipv4(srv_peer, l, dst, 1400, 4);
            break;
        case 1:
            if (load_next(l) % 2)
                send_ipv4(srv_peer, l, dst, 40 + load_next(l) % 1461, 4);
            break;
        default:
            if (t % 100 < 3)
                for (int i = 0; i < 10; i++)
                    send_ipv4(srv_peer, l, dst, 1500, 4);
        }
        if (load_next(l) % 10 < 3)
            send_ipv4(peer[k], l, 0x0100c80a, 60, 4); /* an ACK toward 10.200.0.1 */
        if (k % 3 == 2 && t % 250 == 7)
            for (int i = 0; i < 8; i++)
                send_ipv4(peer[k], l, 0x0100c80a, 1200, 4);
    }
    if (t % 97 == 0)
        send_ipv4(srv_peer, l, 0x630101c0, 100, 4); /* no route */
    if (t % 131 == 0)
        send_ipv4(srv_peer, l, 0, 80, 6); /* not IPv4 */
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > REPLAY_MAX_ARGS) {
        fputs("usage: cell_replay N_TTI cellab-cell-options...\n", stderr);
        return 2;
    }
    long n_tti = strtol(argv[1], NULL, 10);
    char *args[REPLAY_MAX_ARGS];
    args[0] = "cellab-cell";
    for (int i = 2; i < argc; i++)
        args[i - 1] = argv[i];
    struct cell *c = calloc(1, sizeof(*c));
    parse_args(c, argc - 1, args);
    /* as main() does, without TUN devices */
    c->rng = c->p.seed * 0x9E3779B97F4A7C15ULL + 1;
    c->delay_ticks = (uint64_t)llround(c->p.core_delay_ms + c->p.internet_delay_ms);
    int srv_peer, peer[CELL_MAX_UES];
    make_pair(&c->srv_fd, &srv_peer);
    for (int k = 0; k < c->p.n_ues; k++) {
        make_pair(&c->ue[k].fd, &peer[k]);
        assign_sr(c, k);
        channel_update(c, &c->ue[k], 0);
        c->ue[k].sinr_reported_db = c->ue[k].sinr_db;
        channel_update(c, &c->ue[k], 0);
        c->ue[k].cqi_pending_at_valid = 0;
    }
    if (c->p.tti_log_path && !(c->tti_log = fopen(c->p.tti_log_path, "wb"))) {
        perror(c->p.tti_log_path);
        return 1;
    }
    struct load l = {0x2545F4914F6CDD1DULL};
    uint64_t h_dl = 14695981039346656037ULL, h_ul = h_dl;
    for (uint64_t t = 0; t < (uint64_t)n_tti; t++) {
        c->tti = t;
        offer(c, &l, srv_peer, peer, t);
        read_srv(c);
        for (int k = 0; k < c->p.n_ues; k++)
            read_ue(c, &c->ue[k]);
        if (t == (uint64_t)n_tti / 3)
            control(c, "{\"op\":\"set_attenuation\",\"ue\":0,\"attenuation_db\":48.5}");
        if (t == (uint64_t)n_tti / 2)
            control(c, "{\"op\":\"pause\"}");
        if (t == (uint64_t)n_tti / 2 + 40)
            control(c, "{\"op\":\"resume\"}");
        run_tti(c, t);
        for (int k = 0; k < c->p.n_ues; k++)
            h_dl = drain(peer[k], h_dl, t);
        h_ul = drain(srv_peer, h_ul, t);
    }
    c->tti = (uint64_t)n_tti;
    control(c, "{\"op\":\"get_attenuation\",\"ue\":0}");
    control(c, "{\"op\":\"stats\"}");
    printf("{\"dl_hash\":\"%016llx\",\"ul_hash\":\"%016llx\"}\n", (unsigned long long)h_dl,
           (unsigned long long)h_ul);
    if (c->tti_log)
        fclose(c->tti_log);
    return 0;
}
