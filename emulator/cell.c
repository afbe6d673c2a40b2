/* cellab-cell: a virtual LTE cell moving IP packets between TUN devices on a 1 ms TTI clock.
 * See emulator/README.md for the model, its constants and the TTI log format. */
#include "cell.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "lte_tables.h"
#include "radio.h"
#include "ttilog.h"

#define NS_PER_TTI 1000000ULL
#define TELEMETRY_TTI 100
#define MAX_CATCHUP_TTI 200 /* further behind than this, the clock resyncs (counted) */
/* Outer-loop link adaptation: srsENB's default target_bler is 0.05; +-step per first-transmission outcome,
 * offset bounded to [-10, +2] dB. */
#define OLLA_TARGET_BLER 0.05
#define OLLA_STEP_DB 0.5
#define OLLA_MAX_DB 2.0

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: reproducible per seed, state in the context. */
static double rng_uniform(struct cell *c)
{
    c->rng ^= c->rng >> 12;
    c->rng ^= c->rng << 25;
    c->rng ^= c->rng >> 27;
    return (double)((c->rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static double rng_normal(struct cell *c)
{
    double u1 = rng_uniform(c), u2 = rng_uniform(c);
    if (u1 < 1e-12)
        u1 = 1e-12;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cellab-cell: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

/* ---------- packet FIFOs ---------- */

static void fifo_push(struct fifo *q, struct pkt *p)
{
    p->next = NULL;
    if (q->tail)
        q->tail->next = p;
    else
        q->head = p;
    q->tail = p;
    q->bytes += p->len;
    q->count++;
}

static struct pkt *fifo_pop(struct fifo *q)
{
    struct pkt *p = q->head;
    if (!p)
        return NULL;
    q->head = p->next;
    if (!q->head)
        q->tail = NULL;
    q->bytes -= p->len;
    q->count--;
    return p;
}

static void fifo_free(struct fifo *q)
{
    struct pkt *p;
    while ((p = fifo_pop(q)))
        free(p);
}

static struct pkt *pkt_new(const uint8_t *data, uint32_t len)
{
    struct pkt *p = malloc(sizeof(*p) + len);
    if (!p)
        return NULL;
    memcpy(p->data, data, len);
    p->len = len;
    p->next = NULL;
    p->end_off = 0;
    p->release_tti = 0;
    return p;
}

/* Release TTI for a packet entering a delay line: the fixed core delay plus, when configured, a jitter of
 * 0..J whole ms drawn uniformly (a software EPC/eNB's processing), never overtaking the packet ahead. */
static uint64_t delay_release(struct cell *c, struct fifo *line, uint64_t base_tti)
{
    uint64_t rel = base_tti + c->delay_ticks;
    if (c->p.core_jitter_ms > 0)
        rel += (uint64_t)(rng_uniform(c) * (c->p.core_jitter_ms + 1));
    if (line->tail && line->tail->release_tti > rel)
        rel = line->tail->release_tti;
    return rel;
}

/* ---------- TUN devices ---------- */

static int open_tun_in_netns(const char *netns, const char *name)
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

static void tun_write(struct cell *c, int fd, const struct pkt *p)
{
    if (write(fd, p->data, p->len) < 0)
        c->tun_write_drops++; /* the namespace's stack refused it (its backlog is full) */
}

/* ---------- parameters ---------- */

static int in_list(int v, const int *allowed, int n)
{
    for (int i = 0; i < n; i++)
        if (allowed[i] == v)
            return 1;
    return 0;
}

static long parse_long(const char *opt, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi)
        die("--%s: %s is not an integer in [%ld, %ld]", opt, s, lo, hi);
    return v;
}

static double parse_double(const char *opt, const char *s, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !(v >= lo && v <= hi))
        die("--%s: %s is not a number in [%g, %g]", opt, s, lo, hi);
    return v;
}

static void split_ns_tun(const char *opt, const char *arg, char *ns, size_t ns_len, char *tun, size_t tun_len,
                         char *rest, size_t rest_len)
{
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "%s", arg);
    char *a = strtok(tmp, ":"), *b = strtok(NULL, ":"), *r = strtok(NULL, ":");
    if (!a || !b || strlen(a) >= ns_len || strlen(b) >= tun_len || strlen(b) >= IFNAMSIZ ||
        (rest && !r) || (!rest && r))
        die("--%s: %s must be %s", opt, arg, rest ? "NETNS:TUN:IPV4" : "NETNS:TUN");
    snprintf(ns, ns_len, "%s", a);
    snprintf(tun, tun_len, "%s", b);
    if (rest)
        snprintf(rest, rest_len, "%s", r);
}

static void usage(void)
{
    fputs("usage: cellab-cell --srv NETNS:TUN --ue NETNS:TUN:IPV4 [--ue ...] [options]\n"
          "  --n-prb 6|15|25|50|75|100   --sr-period-ms 5|10|20|40|80   --cqi-period-ms 2|5|10|20|40|80|160\n"
          "  --cqi-delay-ms N   --rlc-queue-bytes N   --ul-buffer-bytes N   --ul-policy srsenb|sr-strict\n"
          "  --ul-prb N   --ul-mcs 0..28   --bsr-timer-ms N   --harq-max-tx 1..8   --core-delay-ms X\n"
          "  --internet-delay-ms X   --core-jitter-ms N   --attenuation-db A[,A...]   --seed N   --fading-db SIGMA\n"
          "  --fading-coherence-ms X   --trace FILE   --trace-up FILE   --unlimited   --realtime   --plain-copy   --ctl EP   --pub EP\n"
          "  --tti-log FILE   --pid-file FILE   --duration-s X\n",
          stderr);
}

static void parse_args(struct cell *c, int argc, char **argv)
{
    struct cell_params *p = &c->p;
    *p = (struct cell_params){.n_prb = 25, .sr_period_ms = 20, .cqi_period_ms = 40, .cqi_delay_ms = 4,
                              .ul_prb = -1, .ul_mcs = 20, .bsr_timer_ms = 20, .harq_max_tx = 4,
                              .harq_rtt_ms = 8, .ul_policy = UL_SRSENB, .rlc_queue_bytes = 4u << 20,
                              .ul_buffer_bytes = 4u << 20, .fading_coherence_ms = 100.0, .seed = 1,
                              .poll_grant_prb = 2};
    static const struct option opts[] = {
        {"srv", 1, 0, 'S'}, {"ue", 1, 0, 'U'}, {"n-prb", 1, 0, 'n'}, {"sr-period-ms", 1, 0, 'r'},
        {"cqi-period-ms", 1, 0, 'q'}, {"cqi-delay-ms", 1, 0, 'Q'}, {"rlc-queue-bytes", 1, 0, 'b'},
        {"ul-buffer-bytes", 1, 0, 'B'}, {"ul-policy", 1, 0, 'P'}, {"ul-prb", 1, 0, 'u'}, {"ul-mcs", 1, 0, 'm'},
        {"bsr-timer-ms", 1, 0, 'T'}, {"harq-max-tx", 1, 0, 'h'}, {"core-delay-ms", 1, 0, 'c'},
        {"internet-delay-ms", 1, 0, 'i'}, {"core-jitter-ms", 1, 0, 'j'}, {"attenuation-db", 1, 0, 'a'}, {"seed", 1, 0, 's'},
        {"fading-db", 1, 0, 'f'}, {"fading-coherence-ms", 1, 0, 'F'}, {"trace", 1, 0, 't'}, {"trace-up", 1, 0, 'y'},
        {"unlimited", 0, 0, 'L'}, {"realtime", 0, 0, 'R'}, {"plain-copy", 0, 0, 'X'}, {"ctl", 1, 0, 'C'}, {"pub", 1, 0, 'p'},
        {"tti-log", 1, 0, 'l'}, {"pid-file", 1, 0, 'I'}, {"duration-s", 1, 0, 'D'}, {"help", 0, 0, 'H'},
        {0, 0, 0, 0}};
    char atten_arg[512] = "";
    int opt;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 'S':
            split_ns_tun("srv", optarg, p->srv_netns, sizeof(p->srv_netns), p->srv_tun, sizeof(p->srv_tun), NULL,
                         0);
            break;
        case 'U': {
            if (p->n_ues >= CELL_MAX_UES)
                die("--ue: at most %d UEs", CELL_MAX_UES);
            struct ue *u = &c->ue[p->n_ues];
            char addr[64];
            split_ns_tun("ue", optarg, u->netns, sizeof(u->netns), u->tun, sizeof(u->tun), addr, sizeof(addr));
            unsigned a, b, cc, d;
            char extra;
            if (sscanf(addr, "%u.%u.%u.%u%c", &a, &b, &cc, &d, &extra) != 4 || a > 255 || b > 255 || cc > 255 ||
                d > 255)
                die("--ue: %s is not an IPv4 address", addr);
            uint8_t *ab = (uint8_t *)&u->addr_be;
            ab[0] = (uint8_t)a, ab[1] = (uint8_t)b, ab[2] = (uint8_t)cc, ab[3] = (uint8_t)d;
            p->n_ues++;
            break;
        }
        case 'n': {
            static const int ok[] = {6, 15, 25, 50, 75, 100};
            p->n_prb = (int)parse_long("n-prb", optarg, 1, 110);
            if (!in_list(p->n_prb, ok, 6))
                die("--n-prb: %d not allowed (allowed: 6, 15, 25, 50, 75, 100)", p->n_prb);
            break;
        }
        case 'r': {
            static const int ok[] = {5, 10, 20, 40, 80};
            p->sr_period_ms = (int)parse_long("sr-period-ms", optarg, 1, 1000);
            if (!in_list(p->sr_period_ms, ok, 5))
                die("--sr-period-ms: %d not allowed (allowed: 5, 10, 20, 40, 80)", p->sr_period_ms);
            break;
        }
        case 'q': {
            static const int ok[] = {2, 5, 10, 20, 40, 80, 160};
            p->cqi_period_ms = (int)parse_long("cqi-period-ms", optarg, 1, 1000);
            if (!in_list(p->cqi_period_ms, ok, 7))
                die("--cqi-period-ms: %d not allowed (allowed: 2, 5, 10, 20, 40, 80, 160)", p->cqi_period_ms);
            break;
        }
        case 'Q': p->cqi_delay_ms = (int)parse_long("cqi-delay-ms", optarg, 0, 100); break;
        case 'b': p->rlc_queue_bytes = (uint64_t)parse_long("rlc-queue-bytes", optarg, 1500, 1L << 30); break;
        case 'B': p->ul_buffer_bytes = (uint64_t)parse_long("ul-buffer-bytes", optarg, 1500, 1L << 30); break;
        case 'P':
            if (!strcmp(optarg, "srsenb"))
                p->ul_policy = UL_SRSENB;
            else if (!strcmp(optarg, "sr-strict"))
                p->ul_policy = UL_SR_STRICT;
            else
                die("--ul-policy: %s not allowed (allowed: srsenb, sr-strict)", optarg);
            break;
        case 'u': p->ul_prb = (int)parse_long("ul-prb", optarg, 1, 100); break;
        case 'm': p->ul_mcs = (int)parse_long("ul-mcs", optarg, 0, 28); break;
        case 'T': p->bsr_timer_ms = (int)parse_long("bsr-timer-ms", optarg, 5, 2560); break;
        case 'h': p->harq_max_tx = (int)parse_long("harq-max-tx", optarg, 1, 8); break;
        case 'c': p->core_delay_ms = parse_double("core-delay-ms", optarg, 0, 10000); break;
        case 'i': p->internet_delay_ms = parse_double("internet-delay-ms", optarg, 0, 10000); break;
        case 'j': p->core_jitter_ms = (int)parse_long("core-jitter-ms", optarg, 0, 1000); break;
        case 'a': snprintf(atten_arg, sizeof(atten_arg), "%s", optarg); break;
        case 's': p->seed = (uint64_t)parse_long("seed", optarg, 0, 0x7fffffffffffffffL); break;
        case 'f': p->fading_sigma_db = parse_double("fading-db", optarg, 0, 30); break;
        case 'F': p->fading_coherence_ms = parse_double("fading-coherence-ms", optarg, 1, 100000); break;
        case 't': p->trace_path = optarg; break;
        case 'y': p->trace_up_path = optarg; break;
        case 'L': p->unlimited = 1; break;
        case 'R': p->realtime = 1; break;
        case 'X': p->plain_copy = 1; break;
        case 'C': p->ctl_ep = optarg; break;
        case 'p': p->pub_ep = optarg; break;
        case 'l': p->tti_log_path = optarg; break;
        case 'I': p->pid_path = optarg; break;
        case 'D': p->duration_s = parse_double("duration-s", optarg, 0, 1e7); break;
        case 'H': usage(); exit(0);
        default: usage(); exit(2);
        }
    }
    if (optind < argc)
        die("unexpected argument %s", argv[optind]);
    if (!p->srv_netns[0])
        die("--srv NETNS:TUN is required");
    if (p->n_ues == 0)
        die("--ue NETNS:TUN:IPV4 is required (one per UE)");
    if (p->ul_prb < 0)
        p->ul_prb = p->n_prb > 6 ? p->n_prb - 4 : 4; /* PUCCH takes PRBs at both band edges */
    if (p->ul_prb > p->n_prb)
        die("--ul-prb: %d exceeds --n-prb %d", p->ul_prb, p->n_prb);
    /* attenuation: one value for every UE, or one per UE */
    for (int i = 0; i < p->n_ues; i++)
        c->ue[i].attenuation_db = 0.0;
    if (atten_arg[0]) {
        char *save = NULL, *tok = strtok_r(atten_arg, ",", &save);
        int i = 0;
        double last = 0;
        while (tok) {
            if (i >= p->n_ues)
                die("--attenuation-db: more values than UEs (%d)", p->n_ues);
            last = parse_double("attenuation-db", tok, 0, 200);
            c->ue[i++].attenuation_db = last;
            tok = strtok_r(NULL, ",", &save);
        }
        if (i == 1)
            for (int k = 1; k < p->n_ues; k++)
                c->ue[k].attenuation_db = last;
        else if (i != p->n_ues)
            die("--attenuation-db: give one value or one per UE (%d)", p->n_ues);
    }
    if (p->trace_path) {
        char err[512] = "";
        if (trace_load(&c->trace, p->trace_path, err, sizeof(err)) < 0)
            die("--trace: %s", err);
        c->have_trace = 1;
    }
    if (p->trace_up_path) {
        char err[512] = "";
        if (trace_load(&c->trace_up, p->trace_up_path, err, sizeof(err)) < 0)
            die("--trace-up: %s", err);
        c->have_trace_up = 1;
    }
}

/* ---------- SR configuration (TS 36.213 Table 10.1.5-1, assigned as srsENB does) ---------- */

static void assign_sr(struct cell *c, int k)
{
    struct ue *u = &c->ue[k];
    int period = c->p.sr_period_ms;
    /* srsENB: I_SR = period - 5 + sf_mapping[j], sf_mapping = {0, 2, 4, ...} (period/2 slots, SR on even
     * subframes), UE k taking the least-loaded slot j = k mod (period/2). */
    int slots = period / 2;
    int i_sr = period - 5 + 2 * (k % slots);
    u->i_sr = i_sr;
    for (int i = 0; i < lte_sr_table_len; i++) {
        const struct lte_sr_cfg *s = &lte_sr_table[i];
        if (i_sr >= s->i_sr_min && i_sr <= s->i_sr_max) {
            u->sr_period_ms = s->period_ms;
            u->sr_offset = i_sr - s->offset_base;
            return;
        }
    }
    die("I_SR %d outside Table 10.1.5-1", i_sr);
}

static int sr_occasion(const struct ue *u, uint64_t t)
{
    /* (10 n_f + floor(n_s/2) - N_OFFSET,SR) mod SR_PERIODICITY == 0, with t = 10 n_f + subframe */
    uint64_t sfn_sf = t % 10240;
    return ((sfn_sf + 10240 * 8 - (uint64_t)u->sr_offset) % (uint64_t)u->sr_period_ms) == 0;
}

/* ---------- channel ---------- */

static void channel_update(struct cell *c, struct ue *u, uint64_t t)
{
    if (c->p.fading_sigma_db > 0) {
        /* Gauss-Markov shadow fading: correlation exp(-1/coherence) per TTI, stationary sigma. */
        double rho = exp(-1.0 / c->p.fading_coherence_ms);
        u->fading_db = rho * u->fading_db + sqrt(1 - rho * rho) * c->p.fading_sigma_db * rng_normal(c);
    }
    u->rsrp_dbm = radio_rsrp_dbm(u->attenuation_db, u->fading_db);
    u->sinr_db = radio_sinr_db(u->rsrp_dbm);
    u->cqi_true = radio_cqi(u->sinr_db);
    int k = (int)(u - c->ue);
    /* periodic CQI: measured now, usable by the scheduler cqi_delay_ms later */
    if ((t + (uint64_t)k) % (uint64_t)c->p.cqi_period_ms == 0) {
        u->sinr_pending_db = u->sinr_db;
        u->cqi_pending_at = t + (uint64_t)c->p.cqi_delay_ms;
        u->cqi_pending_at_valid = 1;
    }
    if (u->cqi_pending_at_valid && t >= u->cqi_pending_at) {
        u->sinr_reported_db = u->sinr_pending_db;
        u->cqi_pending_at_valid = 0;
    }
    /* the CQI the scheduler uses: the last report, corrected by outer-loop link adaptation */
    u->cqi_used = radio_cqi(u->sinr_reported_db + u->olla_db);
}

/* ---------- downlink ---------- */

static void dl_enqueue(struct cell *c, struct ue *u, struct pkt *p)
{
    if (u->dlq.bytes + p->len > c->p.rlc_queue_bytes) {
        u->dl_drop_bytes += p->len;
        u->dl_drop_pkts++;
        u->r_drop_bytes += p->len;
        free(p);
        return;
    }
    u->dl_in_off += p->len;
    p->end_off = u->dl_in_off;
    fifo_push(&u->dlq, p);
}

static void record_delivery_error(struct cell *c, uint64_t t)
{
    uint64_t model = c->start_ns + t * NS_PER_TTI, real = now_ns();
    uint64_t err_us = (real > model ? real - model : model - real) / 1000;
    c->err_hist[err_us < CELL_ERR_HIST_US - 1 ? err_us : CELL_ERR_HIST_US - 1]++;
    c->err_count++;
}

static int overlaps_lost(struct ue *u, uint64_t lo, uint64_t hi)
{
    for (int i = 0; i < u->n_lost; i++)
        if (lo < u->lost_hi[i] && hi > u->lost_lo[i])
            return 1;
    return 0;
}

/* Deliver (or drop, when a lost TB carried part of them) every packet whose last byte is done. */
static void dl_deliver(struct cell *c, struct ue *u, uint64_t t)
{
    while (u->dlq.head && u->dlq.head->end_off <= u->dl_done_off) {
        struct pkt *p = fifo_pop(&u->dlq);
        if (u->n_lost && overlaps_lost(u, p->end_off - p->len, p->end_off)) {
            u->dl_lost_pkts++;
        } else {
            record_delivery_error(c, t);
            tun_write(c, u->fd, p);
            u->dl_delivered_bytes += p->len;
            u->dl_delivered_pkts++;
            u->r_delivered += p->len;
            u->win_dl_bytes += p->len;
            c->fwd_pkts++;
            c->fwd_bytes += p->len;
        }
        /* lost ranges wholly behind the queue head can be forgotten */
        uint64_t head_start = u->dlq.head ? u->dlq.head->end_off - u->dlq.head->len : u->dl_done_off;
        for (int i = 0; i < u->n_lost;) {
            if (u->lost_hi[i] <= head_start) {
                u->lost_lo[i] = u->lost_lo[u->n_lost - 1];
                u->lost_hi[i] = u->lost_hi[u->n_lost - 1];
                u->n_lost--;
            } else {
                i++;
            }
        }
        free(p);
    }
}

static struct dl_tb *tb_at(struct ue *u, int i) { return &u->tb[(u->tb_head + i) % CELL_MAX_TB]; }

static int dl_harq_busy(struct ue *u)
{
    int n = 0;
    for (int i = 0; i < u->tb_count; i++) {
        enum tb_state s = tb_at(u, i)->state;
        n += (s == TB_WAIT_OUTCOME || s == TB_WAIT_RETX);
    }
    return n;
}

static void dl_advance(struct cell *c, struct ue *u, uint64_t t)
{
    while (u->tb_count > 0) {
        struct dl_tb *tb = tb_at(u, 0);
        if (tb->state != TB_DONE && tb->state != TB_LOST)
            break;
        if (tb->state == TB_LOST && u->n_lost < CELL_MAX_LOST) {
            u->lost_lo[u->n_lost] = tb->start;
            u->lost_hi[u->n_lost] = tb->end;
            u->n_lost++;
        }
        u->dl_done_off = tb->end;
        tb->state = TB_FREE;
        u->tb_head = (u->tb_head + 1) % CELL_MAX_TB;
        u->tb_count--;
    }
    dl_deliver(c, u, t);
}

static void dl_outcomes(struct cell *c, struct ue *u, uint64_t t)
{
    for (int i = 0; i < u->tb_count; i++) {
        struct dl_tb *tb = tb_at(u, i);
        if (tb->state != TB_WAIT_OUTCOME || tb->event_tti > t)
            continue;
        double bler = radio_bler(u->sinr_db, tb->tbs_bits, tb->n_re);
        int ok = rng_uniform(c) >= bler;
        if (tb->tx_count == 1) {
            /* outer-loop link adaptation on first transmissions: converges to OLLA_TARGET_BLER */
            u->olla_db += ok ? OLLA_STEP_DB * OLLA_TARGET_BLER / (1.0 - OLLA_TARGET_BLER) : -OLLA_STEP_DB;
            if (u->olla_db > OLLA_MAX_DB)
                u->olla_db = OLLA_MAX_DB;
            if (u->olla_db < -OLLA_MAX_DB * 5)
                u->olla_db = -OLLA_MAX_DB * 5;
        }
        if (ok) {
            tb->state = TB_DONE;
        } else if (tb->tx_count < c->p.harq_max_tx) {
            tb->state = TB_WAIT_RETX;
            tb->event_tti = tb->tx_tti + (uint64_t)c->p.harq_rtt_ms;
        } else {
            tb->state = TB_LOST; /* HARQ gives up; RLC UM semantics: the packets it carried are lost */
            u->r_flags |= TTILOG_HARQ_LOST;
        }
    }
    dl_advance(c, u, t);
}

/* Retransmissions first (they keep their PRBs), then new data shared proportionally fair. */
static void dl_schedule(struct cell *c, uint64_t t)
{
    int avail = c->p.n_prb, sf = (int)(t % 10);
    for (int k = 0; k < c->p.n_ues; k++) {
        struct ue *u = &c->ue[k];
        for (int i = 0; i < u->tb_count && avail > 0; i++) {
            struct dl_tb *tb = tb_at(u, i);
            if (tb->state != TB_WAIT_RETX || tb->event_tti > t || tb->n_prb > avail)
                continue;
            avail -= tb->n_prb;
            tb->state = TB_WAIT_OUTCOME;
            tb->tx_tti = t;
            tb->event_tti = t + 1;
            tb->tx_count++;
            tb->n_re = radio_pdsch_re(c->p.n_prb, tb->n_prb, sf);
            u->harq_retx++;
            u->win_retx++;
            u->r_retx++;
            u->r_tbs_bits += (uint32_t)tb->tbs_bits;
            u->r_prb += tb->n_prb;
        }
    }
    int done[CELL_MAX_UES] = {0};
    while (avail > 0) {
        int best = -1;
        double best_metric = -1;
        for (int k = 0; k < c->p.n_ues; k++) {
            struct ue *u = &c->ue[k];
            if (done[k] || u->cqi_used <= 0 || u->dl_in_off == u->dl_sched_off ||
                dl_harq_busy(u) >= CELL_DL_HARQ_PROCS || u->tb_count >= CELL_MAX_TB)
                continue;
            double rate = radio_dl_alloc(u->cqi_used, c->p.n_prb, c->p.n_prb, sf).tbs_bits;
            double metric = rate / (u->pf_avg_bits + 1.0);
            if (metric > best_metric)
                best_metric = metric, best = k;
        }
        if (best < 0)
            break;
        struct ue *u = &c->ue[best];
        done[best] = 1;
        uint64_t pending_bits = (u->dl_in_off - u->dl_sched_off) * 8;
        int n = 1;
        struct radio_alloc a = radio_dl_alloc(u->cqi_used, c->p.n_prb, n, sf);
        while (n < avail && (uint64_t)a.tbs_bits < pending_bits) /* fewest PRBs that carry the queue */
            a = radio_dl_alloc(u->cqi_used, c->p.n_prb, ++n, sf);
        if ((uint64_t)a.tbs_bits < pending_bits) /* the queue outgrows the PRBs: the largest TB they allow */
            a = radio_dl_best_alloc(u->cqi_used, c->p.n_prb, avail, sf, &n);
        if (a.tbs_bits < 8)
            continue;
        uint64_t carry = (uint64_t)a.tbs_bits / 8;
        if (carry > u->dl_in_off - u->dl_sched_off)
            carry = u->dl_in_off - u->dl_sched_off;
        struct dl_tb *tb = &u->tb[(u->tb_head + u->tb_count) % CELL_MAX_TB];
        *tb = (struct dl_tb){.start = u->dl_sched_off, .end = u->dl_sched_off + carry, .event_tti = t + 1,
                             .tx_tti = t, .n_prb = n, .mcs = a.mcs, .tbs_bits = a.tbs_bits,
                             .n_re = radio_pdsch_re(c->p.n_prb, n, sf), .tx_count = 1, .state = TB_WAIT_OUTCOME};
        u->tb_count++;
        u->dl_sched_off += carry;
        avail -= n;
        u->r_tbs_bits += (uint32_t)a.tbs_bits;
        u->win_dl_tbs_bits += (uint64_t)a.tbs_bits;
        u->r_prb += n;
        u->r_mcs = a.mcs;
    }
}

/* Trace mode: each UE's link gets the trace's 1500-byte opportunities of this ms (Mahimahi's rule). */
static void dl_trace(struct cell *c, uint64_t t)
{
    uint64_t cap = (uint64_t)trace_opportunities(&c->trace, t) * TRACE_OPPORTUNITY_BYTES;
    for (int k = 0; k < c->p.n_ues; k++) {
        struct ue *u = &c->ue[k];
        uint64_t carry = u->dl_in_off - u->dl_sched_off;
        if (carry > cap)
            carry = cap; /* an unused opportunity is wasted */
        u->dl_sched_off += carry;
        u->dl_done_off = u->dl_sched_off;
        u->r_tbs_bits = (uint32_t)(cap * 8);
        dl_deliver(c, u, t);
    }
}

/* Radio limit lifted (benchmark): everything queued leaves in this TTI. */
static void dl_unlimited(struct cell *c, uint64_t t)
{
    for (int k = 0; k < c->p.n_ues; k++) {
        struct ue *u = &c->ue[k];
        u->dl_sched_off = u->dl_done_off = u->dl_in_off;
        dl_deliver(c, u, t);
    }
}

/* ---------- uplink ---------- */

static uint32_t ul_full_grant_bytes(struct cell *c)
{
    return (uint32_t)radio_ul_tbs_bits(c->p.ul_mcs, c->p.ul_prb) / 8;
}

/* Smallest grant (in whole PRBs) that carries `bytes`, capped at the uplink PRBs. */
static uint32_t ul_grant_for(struct cell *c, uint64_t bytes)
{
    for (int n = 1; n <= c->p.ul_prb; n++) {
        uint32_t b = (uint32_t)radio_ul_tbs_bits(c->p.ul_mcs, n) / 8;
        if (b >= bytes)
            return b;
    }
    return ul_full_grant_bytes(c);
}

static int ul_grants_out(const struct ue *u)
{
    int n = 0;
    for (int i = 0; i < CELL_UL_HARQ_PROCS; i++)
        n += u->grants[i].active;
    return n;
}

static void ul_add_grant(struct ue *u, uint64_t pusch_tti, uint32_t bytes)
{
    for (int i = 0; i < CELL_UL_HARQ_PROCS; i++) {
        if (!u->grants[i].active) {
            u->grants[i] = (struct ul_grant){pusch_tti, bytes, 1};
            u->grants_issued++;
            u->r_flags |= TTILOG_UL_GRANT;
            return;
        }
    }
}

/* Packets whose last byte went out reach the eNB at the end of this subframe, then the core. */
static void ul_complete(struct cell *c, struct ue *u, uint64_t t)
{
    while (u->ulq.head && u->ulq.head->end_off <= u->ul_sent_off) {
        struct pkt *p = fifo_pop(&u->ulq);
        p->release_tti = delay_release(c, &c->ul_delay, t + 1);
        u->ul_delivered_bytes += p->len;
        u->ul_delivered_pkts++;
        u->r_ul_delivered += p->len;
        u->win_ul_bytes += p->len;
        if (c->ul_delay.bytes + p->len > CELL_DELAY_LINE_MAX_BYTES) {
            c->delay_drop_pkts++;
            free(p);
        } else {
            fifo_push(&c->ul_delay, p);
        }
    }
}

static void ul_transmit(struct cell *c, struct ue *u, uint64_t t, uint32_t grant_bytes)
{
    uint64_t pending = u->ul_in_off - u->ul_sent_off;
    uint64_t send = pending < grant_bytes ? pending : grant_bytes;
    u->ul_sent_off += send;
    u->r_ul_grant += grant_bytes;
    u->r_flags |= TTILOG_PUSCH;
    ul_complete(c, u, t);
    /* the PUSCH carries a BSR of what is left; the eNB can use it a few TTIs later */
    u->bsr_pending_value = u->ul_in_off - u->ul_sent_off;
    u->bsr_usable_at = t + CELL_BSR_PROCESS_TTI;
    u->bsr_pending = 1;
    /* srsenb: a UE that just reported an empty buffer gets its next chance when the periodic BSR timer
     * (restarted by this BSR) expires, without an SR; sr-strict: it goes back to SR at once. */
    if (c->p.ul_policy == UL_SRSENB && u->bsr_pending_value == 0)
        u->poll_pusch_tti = t + (uint64_t)c->p.bsr_timer_ms;
}

static void ul_tti(struct cell *c, struct ue *u, uint64_t t)
{
    int sr_occ = sr_occasion(u, t);
    if (sr_occ)
        u->r_flags |= TTILOG_SR_OCCASION;
    /* PUSCH on grants due now, or overdue: a pause skips TTIs, and a grant left active forever would keep
     * the UE from ever sending an SR again */
    for (int i = 0; i < CELL_UL_HARQ_PROCS; i++) {
        struct ul_grant *g = &u->grants[i];
        if (g->active && g->pusch_tti <= t) {
            g->active = 0;
            ul_transmit(c, u, t, g->bytes);
        }
    }
    uint64_t pending = u->ul_in_off - u->ul_sent_off;
    /* srsenb: periodic BSR timer expiry gives an active UE a small grant without an SR */
    if (u->poll_pusch_tti && t >= u->poll_pusch_tti) {
        u->poll_pusch_tti = 0;
        if (pending > 0)
            ul_transmit(c, u, t, (uint32_t)radio_ul_tbs_bits(c->p.ul_mcs, c->p.poll_grant_prb) / 8);
        pending = u->ul_in_off - u->ul_sent_off;
    }
    /* the eNB learns a BSR */
    if (u->bsr_pending && t >= u->bsr_usable_at) {
        u->bsr_pending = 0;
        uint64_t in_flight = 0; /* grants issued after that PUSCH also carry part of the reported buffer */
        for (int i = 0; i < CELL_UL_HARQ_PROCS; i++)
            if (u->grants[i].active)
                in_flight += u->grants[i].bytes;
        u->bsr_bytes = u->bsr_pending_value > in_flight ? u->bsr_pending_value - in_flight : 0;
    }
    /* BSR-driven grants while the eNB knows of data (8 UL HARQ processes) */
    if (u->bsr_bytes > 0 && ul_grants_out(u) < CELL_UL_HARQ_PROCS) {
        uint32_t bytes = c->p.ul_policy == UL_SR_STRICT ? ul_full_grant_bytes(c) : ul_grant_for(c, u->bsr_bytes);
        ul_add_grant(u, t + CELL_GRANT_TO_PUSCH_TTI, bytes);
        u->bsr_bytes = u->bsr_bytes > bytes ? u->bsr_bytes - bytes : 0;
    }
    /* new data with no grant in sight (as the UE sees it: no grant received, no non-empty BSR awaiting its
     * grants, no periodic-BSR chance pending) waits for its SR occasion */
    int idle = ul_grants_out(u) == 0 && !(u->bsr_pending && u->bsr_pending_value > 0) && u->bsr_bytes == 0 &&
               u->poll_pusch_tti == 0;
    if (pending > 0 && idle && !u->sr_waiting)
        u->sr_waiting = 1;
    if (u->sr_waiting && sr_occ) {
        u->sr_waiting = 0;
        u->sr_sent++;
        u->r_flags |= TTILOG_SR_SENT;
        /* the SR grant: the eNB does not know the size yet and grants the UE's full uplink allocation */
        ul_add_grant(u, t + CELL_SR_TO_GRANT_TTI + CELL_GRANT_TO_PUSCH_TTI, ul_full_grant_bytes(c));
    }
}

/* Uplink trace mode: the trace's 1500-byte opportunities of this ms, no SR or grants (Mahimahi's rule). */
static void ul_trace(struct cell *c, struct ue *u, uint64_t t)
{
    uint64_t cap = (uint64_t)trace_opportunities(&c->trace_up, t) * TRACE_OPPORTUNITY_BYTES;
    uint64_t pending = u->ul_in_off - u->ul_sent_off;
    u->ul_sent_off += pending < cap ? pending : cap; /* an unused opportunity is wasted */
    u->r_ul_grant = (uint32_t)cap;
    ul_complete(c, u, t);
}

static void ul_unlimited(struct cell *c, struct ue *u, uint64_t t)
{
    uint64_t pending = u->ul_in_off - u->ul_sent_off;
    if (pending)
        ul_transmit(c, u, t, (uint32_t)(pending > UINT32_MAX ? UINT32_MAX : pending));
    u->bsr_pending = 0;
}

/* ---------- the TTI ---------- */

/* What the UE could have received this TTI with the whole cell: the capacity reports compare against. */
static uint32_t dl_capacity_bytes(const struct cell *c, const struct ue *u, uint64_t t)
{
    uint64_t bits = 0;
    if (c->paused || c->p.unlimited)
        bits = 0;
    else if (c->have_trace)
        bits = u->r_tbs_bits;
    else if (u->cqi_used > 0)
        bits = (uint64_t)radio_dl_best_alloc(u->cqi_used, c->p.n_prb, c->p.n_prb, (int)(t % 10), NULL).tbs_bits;
    return bits / 8 > UINT16_MAX ? UINT16_MAX : (uint32_t)(bits / 8);
}

static void write_tti_records(struct cell *c, uint64_t t)
{
    if (!c->tti_log)
        return;
    for (int k = 0; k < c->p.n_ues; k++) {
        struct ue *u = &c->ue[k];
        struct ttilog_rec r = {
            .tti = (uint32_t)t, .ue = (uint16_t)k, .cqi = (uint8_t)u->cqi_used,
            .mcs = (uint8_t)(u->r_mcs < 0 ? 255 : u->r_mcs),
            .dl_queue_bytes = (uint32_t)(u->dlq.bytes > UINT32_MAX ? UINT32_MAX : u->dlq.bytes),
            .dl_tbs_bits = u->r_tbs_bits, .dl_delivered_bytes = u->r_delivered,
            .ul_buffer_bytes = (uint32_t)(u->ulq.bytes > UINT32_MAX ? UINT32_MAX : u->ulq.bytes),
            .ul_grant_bytes = u->r_ul_grant, .ul_delivered_bytes = u->r_ul_delivered,
            .dl_drop_bytes = u->r_drop_bytes, .dl_prb = (uint16_t)u->r_prb, .harq_retx = (uint8_t)u->r_retx,
            .flags = (uint8_t)(u->r_flags | (c->paused ? TTILOG_PAUSED : 0)),
            .sinr_db_x100 = (int16_t)lround(u->sinr_db * 100.0),
            .dl_capacity_bytes = (uint16_t)dl_capacity_bytes(c, u, t)};
        fwrite(&r, sizeof(r), 1, c->tti_log);
    }
}

static void publish_telemetry(struct cell *c, uint64_t t)
{
    if (c->tti_log)
        fflush(c->tti_log);
    if (!c->pub)
        return;
    for (int k = 0; k < c->p.n_ues; k++) {
        struct ue *u = &c->ue[k];
        json_t *o = json_pack("{s:s,s:I,s:i,s:f,s:f,s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:f}", "type", "cell.summary",
                              "tti", (json_int_t)t, "ue", k, "rsrp_dbm", u->rsrp_dbm, "sinr_db", u->sinr_db,
                              "cqi", u->cqi_used, "dl_bytes", (json_int_t)u->win_dl_bytes, "ul_bytes",
                              (json_int_t)u->win_ul_bytes, "queue_bytes", (json_int_t)u->dlq.bytes,
                              "harq_retx", (json_int_t)u->win_retx, "dl_tbs_bits", (json_int_t)u->win_dl_tbs_bits,
                              "dl_drop_bytes", (json_int_t)u->dl_drop_bytes, "attenuation_db", u->attenuation_db);
        char *s = json_dumps(o, JSON_COMPACT);
        if (s) {
            zmq_send(c->pub, "cell", 4, ZMQ_SNDMORE | ZMQ_DONTWAIT);
            zmq_send(c->pub, s, strlen(s), ZMQ_DONTWAIT);
            free(s);
        }
        json_decref(o);
        u->win_dl_bytes = u->win_ul_bytes = u->win_retx = u->win_dl_tbs_bits = 0;
    }
}

static void run_tti(struct cell *c, uint64_t t)
{
    for (int k = 0; k < c->p.n_ues; k++) {
        struct ue *u = &c->ue[k];
        u->r_tbs_bits = u->r_delivered = u->r_ul_grant = u->r_ul_delivered = u->r_drop_bytes = 0;
        u->r_prb = u->r_retx = u->r_flags = 0;
        u->r_mcs = -1;
    }
    /* uplink packets leaving the core toward the server */
    while (c->ul_delay.head && c->ul_delay.head->release_tti <= t) {
        struct pkt *p = fifo_pop(&c->ul_delay);
        tun_write(c, c->srv_fd, p);
        free(p);
    }
    /* downlink packets reaching the eNB after the core/Internet delay */
    while (c->dl_delay.head && c->dl_delay.head->release_tti <= t) {
        struct pkt *p = fifo_pop(&c->dl_delay);
        dl_enqueue(c, &c->ue[p->end_off], p); /* end_off holds the UE index while in the delay line */
    }
    for (int k = 0; k < c->p.n_ues; k++)
        channel_update(c, &c->ue[k], t);
    if (!c->paused) {
        if (c->p.unlimited) {
            dl_unlimited(c, t);
            for (int k = 0; k < c->p.n_ues; k++)
                ul_unlimited(c, &c->ue[k], t);
        } else {
            if (c->have_trace) {
                dl_trace(c, t);
            } else {
                for (int k = 0; k < c->p.n_ues; k++)
                    dl_outcomes(c, &c->ue[k], t);
                dl_schedule(c, t);
            }
            for (int k = 0; k < c->p.n_ues; k++) {
                if (c->have_trace_up)
                    ul_trace(c, &c->ue[k], t);
                else
                    ul_tti(c, &c->ue[k], t);
            }
        }
        for (int k = 0; k < c->p.n_ues; k++) {
            struct ue *u = &c->ue[k];
            u->pf_avg_bits = 0.99 * u->pf_avg_bits + 0.01 * u->r_tbs_bits; /* PF window: 100 TTIs */
        }
    }
    write_tti_records(c, t);
    if (t % TELEMETRY_TTI == TELEMETRY_TTI - 1)
        publish_telemetry(c, t);
}

/* ---------- packet input ---------- */

static void read_srv(struct cell *c)
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

static void read_ue(struct cell *c, struct ue *u)
{
    for (int budget = 0; budget < 512; budget++) {
        ssize_t n = read(u->fd, c->buf, sizeof(c->buf));
        if (n <= 0)
            return;
        if (u->ulq.bytes + (uint64_t)n > c->p.ul_buffer_bytes) {
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

/* ---------- control (ZeroMQ REP, JSON) ---------- */

static uint64_t err_percentile_us(const struct cell *c, double q)
{
    if (!c->err_count)
        return 0;
    uint64_t target = (uint64_t)ceil(q * (double)c->err_count), acc = 0;
    for (int i = 0; i < CELL_ERR_HIST_US; i++) {
        acc += c->err_hist[i];
        if (acc >= target)
            return (uint64_t)i;
    }
    return CELL_ERR_HIST_US - 1;
}

static json_t *stats_json(struct cell *c)
{
    json_t *ues = json_array();
    for (int k = 0; k < c->p.n_ues; k++) {
        struct ue *u = &c->ue[k];
        json_t *o = json_pack(
            "{s:i,s:f,s:f,s:f,s:i,s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:i,s:i,s:i}", "ue", k,
            "attenuation_db", u->attenuation_db, "rsrp_dbm", u->rsrp_dbm, "sinr_db", u->sinr_db, "cqi",
            u->cqi_used, "mcs", radio_dl_alloc(u->cqi_used, c->p.n_prb, c->p.n_prb, 1).mcs, "queue_bytes",
            (json_int_t)u->dlq.bytes, "delivered_bytes", (json_int_t)u->dl_delivered_bytes, "delivered_pkts",
            (json_int_t)u->dl_delivered_pkts, "dl_drop_pkts", (json_int_t)u->dl_drop_pkts, "dl_drop_bytes",
            (json_int_t)u->dl_drop_bytes, "dl_lost_pkts", (json_int_t)u->dl_lost_pkts, "harq_retx",
            (json_int_t)u->harq_retx, "ul_delivered_bytes", (json_int_t)u->ul_delivered_bytes, "ul_buffer_bytes",
            (json_int_t)u->ulq.bytes, "sr_sent", (json_int_t)u->sr_sent, "ul_grants", (json_int_t)u->grants_issued,
            "i_sr", u->i_sr, "sr_period_ms", u->sr_period_ms, "sr_offset", u->sr_offset);
        json_object_set_new(o, "olla_db", json_real(u->olla_db));
        json_array_append_new(ues, o);
    }
    return json_pack("{s:b,s:I,s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o}", "ok", 1, "tti", (json_int_t)c->tti,
                     "paused", c->paused, "fwd_pkts", (json_int_t)c->fwd_pkts, "fwd_bytes", (json_int_t)c->fwd_bytes,
                     "no_route_pkts", (json_int_t)c->no_route_pkts, "delay_drop_pkts",
                     (json_int_t)c->delay_drop_pkts, "tun_write_drops", (json_int_t)c->tun_write_drops,
                     "late_ttis", (json_int_t)c->late_ttis, "resyncs", (json_int_t)c->resyncs,
                     "delivery_err_p50_us", (json_int_t)err_percentile_us(c, 0.5), "delivery_err_p99_us",
                     (json_int_t)err_percentile_us(c, 0.99), "delivery_err_count", (json_int_t)c->err_count, "ues",
                     ues);
}

static json_t *err_reply(const char *msg)
{
    return json_pack("{s:b,s:s}", "ok", 0, "error", msg);
}

static json_t *ue_from_request(struct cell *c, json_t *req, int *k, char *err, size_t err_len)
{
    json_t *jue = json_object_get(req, "ue");
    if (!json_is_integer(jue) || json_integer_value(jue) < 0 || json_integer_value(jue) >= c->p.n_ues) {
        snprintf(err, err_len, "ue: must be an integer in [0, %d]", c->p.n_ues - 1);
        return err_reply(err);
    }
    *k = (int)json_integer_value(jue);
    return NULL;
}

static json_t *handle_request(struct cell *c, const char *text, size_t len)
{
    json_error_t jerr;
    json_t *req = json_loadb(text, len, 0, &jerr);
    if (!json_is_object(req)) {
        json_decref(req);
        return err_reply("request must be a JSON object with \"op\"");
    }
    const char *op = json_string_value(json_object_get(req, "op"));
    json_t *rep = NULL;
    char err[160];
    int k = 0;
    if (!op) {
        rep = err_reply("op: missing (allowed: set_attenuation, get_attenuation, pause, resume, stats)");
    } else if (!strcmp(op, "set_attenuation")) {
        json_t *v = json_object_get(req, "attenuation_db");
        if (!(rep = ue_from_request(c, req, &k, err, sizeof(err)))) {
            if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 200)
                rep = err_reply("attenuation_db: must be a number in [0, 200]");
            else {
                struct ue *u = &c->ue[k];
                u->attenuation_db = json_number_value(v);
                /* the UE's RSRP follows at once (a calibration reads it right after setting) */
                u->rsrp_dbm = radio_rsrp_dbm(u->attenuation_db, u->fading_db);
                u->sinr_db = radio_sinr_db(u->rsrp_dbm);
                u->cqi_true = radio_cqi(u->sinr_db);
                rep = json_pack("{s:b,s:i,s:f,s:I}", "ok", 1, "ue", k, "attenuation_db", c->ue[k].attenuation_db,
                                "tti", (json_int_t)c->tti);
            }
        }
    } else if (!strcmp(op, "get_attenuation")) {
        if (!(rep = ue_from_request(c, req, &k, err, sizeof(err))))
            rep = json_pack("{s:b,s:i,s:f,s:f,s:I}", "ok", 1, "ue", k, "attenuation_db", c->ue[k].attenuation_db,
                            "rsrp_dbm", c->ue[k].rsrp_dbm, "tti", (json_int_t)c->tti);
    } else if (!strcmp(op, "pause") || !strcmp(op, "resume")) {
        c->paused = !strcmp(op, "pause");
        rep = json_pack("{s:b,s:b,s:I}", "ok", 1, "paused", c->paused, "tti", (json_int_t)c->tti);
    } else if (!strcmp(op, "stats")) {
        if (c->tti_log)
            fflush(c->tti_log);
        rep = stats_json(c);
    } else {
        snprintf(err, sizeof(err), "op: %.40s unknown (allowed: set_attenuation, get_attenuation, pause, resume, stats)",
                 op);
        rep = err_reply(err);
    }
    json_decref(req);
    return rep;
}

static void serve_control(struct cell *c)
{
    if (!c->ctl)
        return;
    for (int i = 0; i < 16; i++) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, c->ctl, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&msg);
            return;
        }
        int more = zmq_msg_more(&msg);
        json_t *rep = more ? err_reply("one frame per request") : handle_request(c, zmq_msg_data(&msg), zmq_msg_size(&msg));
        zmq_msg_close(&msg);
        while (more) { /* drain a multipart request so the REP socket stays in step */
            zmq_msg_init(&msg);
            zmq_msg_recv(&msg, c->ctl, 0);
            more = zmq_msg_more(&msg);
            zmq_msg_close(&msg);
        }
        char *s = json_dumps(rep, JSON_COMPACT | JSON_REAL_PRECISION(6));
        zmq_send(c->ctl, s ? s : "{\"ok\":false}", s ? strlen(s) : 12, 0);
        free(s);
        json_decref(rep);
    }
}

/* ---------- setup and main loop ---------- */

static void setup_zmq(struct cell *c)
{
    if (!c->p.ctl_ep && !c->p.pub_ep)
        return;
    c->zctx = zmq_ctx_new();
    int linger = 0;
    if (c->p.ctl_ep) {
        c->ctl = zmq_socket(c->zctx, ZMQ_REP);
        zmq_setsockopt(c->ctl, ZMQ_LINGER, &linger, sizeof(linger));
        if (zmq_bind(c->ctl, c->p.ctl_ep) < 0)
            die("--ctl %s: %s", c->p.ctl_ep, zmq_strerror(errno));
        size_t sz = sizeof(c->ctl_fd);
        zmq_getsockopt(c->ctl, ZMQ_FD, &c->ctl_fd, &sz);
    }
    if (c->p.pub_ep) {
        c->pub = zmq_socket(c->zctx, ZMQ_PUB);
        zmq_setsockopt(c->pub, ZMQ_LINGER, &linger, sizeof(linger));
        if (zmq_bind(c->pub, c->p.pub_ep) < 0)
            die("--pub %s: %s", c->p.pub_ep, zmq_strerror(errno));
    }
}

static void setup_signals(struct cell *c)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    c->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

/* Baseline for the benchmark: the least a TUN-to-TUN forwarder can do (read, write, nothing else). */
static void plain_copy_loop(struct cell *c, uint64_t end_ns)
{
    struct pollfd pf[3] = {{c->srv_fd, POLLIN, 0}, {c->ue[0].fd, POLLIN, 0}, {c->sig_fd, POLLIN, 0}};
    while (!c->stop && (!end_ns || now_ns() < end_ns)) {
        if (poll(pf, 3, 100) < 0 && errno != EINTR)
            break;
        if (pf[2].revents)
            break;
        for (int i = 0; i < 2; i++) {
            if (!(pf[i].revents & POLLIN))
                continue;
            for (int budget = 0; budget < 512; budget++) {
                ssize_t n = read(pf[i].fd, c->buf, sizeof(c->buf));
                if (n <= 0)
                    break;
                if (write(pf[1 - i].fd, c->buf, (size_t)n) < 0)
                    c->tun_write_drops++;
                else if (i == 0)
                    c->fwd_pkts++, c->fwd_bytes += (uint64_t)n;
            }
        }
    }
}

static void main_loop(struct cell *c, uint64_t end_ns)
{
    int n_fds = 0;
    struct pollfd pf[CELL_MAX_UES + 3];
    pf[n_fds++] = (struct pollfd){c->srv_fd, POLLIN, 0};
    for (int k = 0; k < c->p.n_ues; k++)
        pf[n_fds++] = (struct pollfd){c->ue[k].fd, POLLIN, 0};
    pf[n_fds++] = (struct pollfd){c->sig_fd, POLLIN, 0};
    int ctl_idx = -1;
    if (c->ctl) {
        ctl_idx = n_fds;
        pf[n_fds++] = (struct pollfd){c->ctl_fd, POLLIN, 0};
    }
    c->start_ns = now_ns();
    c->tti = 0;
    while (!c->stop) {
        uint64_t now = now_ns();
        if (end_ns && now >= end_ns)
            break;
        uint64_t deadline = c->start_ns + c->tti * NS_PER_TTI;
        if (now >= deadline) {
            if ((now - deadline) / NS_PER_TTI > MAX_CATCHUP_TTI) {
                /* too far behind (process stopped?): skip the model clock ahead instead of racing */
                c->resyncs++;
                c->start_ns = now - c->tti * NS_PER_TTI;
            }
            if (now - deadline > NS_PER_TTI / 2)
                c->late_ttis++;
            run_tti(c, c->tti);
            c->tti++;
            serve_control(c); /* ZMQ_FD is edge-triggered: also look once per TTI */
            continue;
        }
        uint64_t wait_ns = deadline - now;
        struct timespec ts = {(time_t)(wait_ns / 1000000000ULL), (long)(wait_ns % 1000000000ULL)};
        int r = ppoll(pf, (nfds_t)n_fds, &ts, NULL);
        if (r <= 0)
            continue;
        /* woken (or stopped) past the deadline: run the TTIs due first, so that a packet joins the first TTI
         * not yet run; joining the overdue one would let it skip the stall and beat the model's delay */
        if (now_ns() >= deadline)
            continue;
        if (pf[0].revents & POLLIN)
            read_srv(c);
        for (int k = 0; k < c->p.n_ues; k++)
            if (pf[1 + k].revents & POLLIN)
                read_ue(c, &c->ue[k]);
        if (pf[1 + c->p.n_ues].revents & POLLIN)
            c->stop = 1;
        if (ctl_idx >= 0 && pf[ctl_idx].revents)
            serve_control(c);
    }
}

int main(int argc, char **argv)
{
    struct cell *c = calloc(1, sizeof(*c));
    if (!c)
        die("out of memory");
    parse_args(c, argc, argv);
    c->rng = c->p.seed * 0x9E3779B97F4A7C15ULL + 1;
    c->delay_ticks = (uint64_t)llround(c->p.core_delay_ms + c->p.internet_delay_ms);
    setup_signals(c);
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); /* 1 us: TTI wake-ups on time, not 50 us late */
    if (c->p.realtime) {
        /* opt-in: SCHED_FIFO keeps the TTI clock on time on a busy host (the kernel's RT throttling still
         * leaves 5% of each CPU to others) */
        struct sched_param sp = {.sched_priority = 30};
        if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
            die("--realtime: %s", strerror(errno));
    }
    c->srv_fd = open_tun_in_netns(c->p.srv_netns, c->p.srv_tun);
    for (int k = 0; k < c->p.n_ues; k++) {
        c->ue[k].fd = open_tun_in_netns(c->ue[k].netns, c->ue[k].tun);
        assign_sr(c, k);
        channel_update(c, &c->ue[k], 0);
        c->ue[k].sinr_reported_db = c->ue[k].sinr_db; /* the report at attach */
        channel_update(c, &c->ue[k], 0);
        c->ue[k].cqi_pending_at_valid = 0;
    }
    setup_zmq(c);
    if (c->p.tti_log_path) {
        c->tti_log = fopen(c->p.tti_log_path, "wb");
        if (!c->tti_log)
            die("--tti-log %s: %s", c->p.tti_log_path, strerror(errno));
        setvbuf(c->tti_log, NULL, _IOFBF, 1 << 20);
        struct ttilog_header h = {TTILOG_MAGIC, TTILOG_VERSION, sizeof(struct ttilog_rec), (uint16_t)c->p.n_ues,
                                  (uint16_t)c->p.n_prb, 0, (int64_t)time(NULL)};
        fwrite(&h, sizeof(h), 1, c->tti_log);
        fflush(c->tti_log);
    }
    if (c->p.pid_path) {
        FILE *f = fopen(c->p.pid_path, "w");
        if (f) {
            fprintf(f, "%d\n", (int)getpid());
            fclose(f);
        }
    }
    printf("{\"event\": \"ready\", \"pid\": %d, \"n_ues\": %d, \"n_prb\": %d}\n", (int)getpid(), c->p.n_ues,
           c->p.n_prb);
    fflush(stdout);
    uint64_t end_ns = c->p.duration_s > 0 ? now_ns() + (uint64_t)(c->p.duration_s * 1e9) : 0;
    if (c->p.plain_copy)
        plain_copy_loop(c, end_ns);
    else
        main_loop(c, end_ns);
    json_t *st = stats_json(c);
    char *s = json_dumps(st, JSON_COMPACT);
    printf("{\"event\": \"stopped\", \"stats\": %s}\n", s ? s : "null");
    fflush(stdout);
    free(s);
    json_decref(st);
    if (c->tti_log)
        fclose(c->tti_log);
    for (int k = 0; k < c->p.n_ues; k++) {
        fifo_free(&c->ue[k].dlq);
        fifo_free(&c->ue[k].ulq);
        close(c->ue[k].fd);
    }
    fifo_free(&c->dl_delay);
    fifo_free(&c->ul_delay);
    if (c->ctl)
        zmq_close(c->ctl);
    if (c->pub)
        zmq_close(c->pub);
    if (c->zctx)
        zmq_ctx_term(c->zctx);
    if (c->have_trace)
        trace_free(&c->trace);
    if (c->have_trace_up)
        trace_free(&c->trace_up);
    if (c->p.pid_path)
        unlink(c->p.pid_path);
    close(c->srv_fd);
    free(c);
    return 0;
}
