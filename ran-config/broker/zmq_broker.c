/* cellab-zmq-broker: one srsenb and N srsue over srsRAN's ZMQ radio (the srsran-zmq lab with several UEs).
 *
 * srsRAN's ZMQ radio is lock-step request/reply: a receiver (REQ) sends a 1-byte request, the transmitter
 * (REP) answers with the complex float samples (cf_t: 2 floats) it has for its next tx call, any count.
 * Sample k of a stream is time k for both ends, so the broker never drops or inserts samples:
 *   downlink: once every UE asked (REP per UE), ask srsenb's tx (REQ) for one block and answer every UE with a
 *             copy, scaled by that UE's dl_gain_db;
 *   uplink:   when srsenb's rx asks (REP), ask every UE with nothing buffered for its next block (REQ per UE)
 *             and answer with the sum of as many samples as every UE has (the rest stays buffered). Never more:
 *             a srsue sends its tx only from its next rx call, which waits for downlink that srsenb sends only
 *             after this reply (srsRAN's rf_zmq_recv aligns tx to rx first): waiting for more could deadlock.
 *
 * srsenb restarted under running UEs (the enb_restart fault): the broker's request to srsenb's tx dies with its
 * TCP connection (ZMQ's REQ never asks again), so it watches that connection (a socket monitor). Once it drops:
 *   silence:  the UEs' downlink requests are answered with zero blocks (no cell: srsue loses sync, T310, RLF),
 *             paced at the cell's sample rate (--srate-hz; 1 ms a block without it), and their uplink is taken
 *             and dropped, never past the downlink they got (a UE's uplink sample k is its time k);
 *   a new srsenb (a fresh REQ to the same port): its first block is the UEs' downlink sample D, so its first uplink
 *             request gets each UE's stream from sample D on, as a fresh start pairs sample 0 with 0 (an
 *             offset there would delay the UEs' uplink at the new srsenb: no PRACH). Requests still queued from
 *             the dead srsenb (another peer on the uplink ROUTER) are left unanswered.
 *
 *   cellab-zmq-broker --enb-tx tcp://127.0.0.1:2000 --enb-rx tcp://127.0.0.1:2001 \
 *       --ue rx=tcp://127.0.0.1:2100,tx=tcp://127.0.0.1:2101[,dl_gain_db=-3] --ue ... [--stats-s 5] [--srate-hz HZ]
 *
 * stdin: "gain I DB" sets UE I's downlink gain while the stream runs (an attenuation schedule's step), taken at
 * the next downlink block; answered on stdout with {"gain_ue":I,"dl_gain_db":DB} or {"error":...}.
 * stdout: "ready" once bound, then every --stats-s seconds a JSON line with the sample rates moved (srsenb's
 * blocks only; "silent_blocks": zero blocks the UEs got in that period), and {"event":"enb_lost"|"enb_back",...}.
 * Exit 2 on bad arguments, 1 on a ZMQ or stream error (named on stderr). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define MAX_UES 16
#define SAMPLE_BYTES 8                      /* cf_t: two floats (srsRAN's default fc32 format) */
#define MAX_BLOCK_BYTES (3072000u * 8u)     /* srsRAN's ZMQ_MAX_BUFFER_SIZE: 10 subframes at 20 MHz */
#define MAX_BACKLOG_BYTES (4u * MAX_BLOCK_BYTES) /* a UE's uplink this far ahead of another's is a broken stream */
#define MIN_GAIN_DB (-100.0)                /* a UE's gain is against the eNB's cell_gain, which may be lower */
#define MAX_GAIN_DB 100.0

struct ue {
    const char *rx_ep, *tx_ep;  /* the UE's rx_port (we serve it) and tx_port (we ask it) */
    _Atomic float dl_amplitude; /* 10^(dl_gain_db/20); the control thread may change it at any time */
    void *dl_rep, *ul_req;
    uint8_t *ul_buf;            /* uplink samples received, not yet summed */
    size_t ul_len;
    uint64_t ul_taken;          /* samples of its uplink stream summed or dropped: the index of ul_buf[0] */
};

static struct {
    const char *enb_tx_ep, *enb_rx_ep;
    void *ctx, *enb_tx_req, *enb_rx_router;
    struct ue ue[MAX_UES];
    int n_ues;
    double stats_s, srate_hz;
} B = {.stats_s = 5.0};

/* srsenb's presence, as the downlink thread sees it; the uplink thread follows (under enb_lock) */
static pthread_mutex_t enb_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int silent;         /* srsenb's connection dropped: the UEs hear zero blocks */
    unsigned epoch;     /* srsenb losses so far */
    int resumed;        /* this epoch's new srsenb sent its first block */
    uint64_t resume_at; /* the UEs' downlink sample index of that block's first sample */
} E;

static _Atomic uint64_t dl_bytes, ul_bytes, dl_blocks, ul_blocks, silent_blocks, enb_losses;
static _Atomic uint64_t dl_samples; /* downlink samples every UE got (srsenb's and silence) */
/* what each direction waits for now (the stats line names it: a stalled stream says where) */
static const char *_Atomic dl_waits_for = "start", *_Atomic ul_waits_for = "start";
static pthread_mutex_t stdout_lock = PTHREAD_MUTEX_INITIALIZER; /* stats and control replies: whole lines */

static void die(const char *what, const char *endpoint)
{
    fprintf(stderr, "cellab-zmq-broker: %s %s: %s\n", what, endpoint ? endpoint : "", zmq_strerror(zmq_errno()));
    exit(1);
}

static void usage(const char *problem)
{
    fprintf(stderr, "cellab-zmq-broker: %s\nusage: cellab-zmq-broker --enb-tx EP --enb-rx EP "
                    "--ue rx=EP,tx=EP[,dl_gain_db=DB] [--ue ...] [--stats-s S]   (1..%d UEs)\n", problem, MAX_UES);
    exit(2);
}

/* "rx=EP,tx=EP,dl_gain_db=DB": endpoints hold no commas, so the value runs to the next comma */
static void parse_ue(char *spec, struct ue *u)
{
    u->dl_amplitude = 1.0f;
    for (char *save = NULL, *kv = strtok_r(spec, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq)
            usage("--ue: each field is key=value (keys rx, tx, dl_gain_db)");
        *eq = '\0';
        const char *val = eq + 1;
        if (!strcmp(kv, "rx")) {
            u->rx_ep = val;
        } else if (!strcmp(kv, "tx")) {
            u->tx_ep = val;
        } else if (!strcmp(kv, "dl_gain_db")) {
            char *end;
            double db = strtod(val, &end);
            if (*val == '\0' || *end != '\0' || !isfinite(db) || db > MAX_GAIN_DB || db < MIN_GAIN_DB)
                usage("--ue dl_gain_db: a number of dB in -100..100");
            u->dl_amplitude = (float)pow(10.0, db / 20.0);
        } else {
            usage("--ue: unknown key (allowed: rx, tx, dl_gain_db)");
        }
    }
    if (!u->rx_ep || !u->tx_ep)
        usage("--ue needs rx=EP and tx=EP");
}

static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        if (i + 1 >= argc)
            usage("an option without its value");
        char *val = argv[++i];
        if (!strcmp(opt, "--enb-tx")) {
            B.enb_tx_ep = val;
        } else if (!strcmp(opt, "--enb-rx")) {
            B.enb_rx_ep = val;
        } else if (!strcmp(opt, "--ue")) {
            if (B.n_ues == MAX_UES)
                usage("too many --ue");
            char *spec = strdup(val); /* parsed in place: argv stays whole for ps */
            if (!spec)
                die("out of memory for", "--ue");
            parse_ue(spec, &B.ue[B.n_ues++]);
        } else if (!strcmp(opt, "--stats-s")) {
            char *end;
            B.stats_s = strtod(val, &end);
            if (*end != '\0' || !(B.stats_s > 0 && B.stats_s <= 3600))
                usage("--stats-s: seconds in (0, 3600]");
        } else if (!strcmp(opt, "--srate-hz")) {
            char *end;
            B.srate_hz = strtod(val, &end);
            if (*val == '\0' || *end != '\0' || !(B.srate_hz >= 1e5 && B.srate_hz <= 1e9))
                usage("--srate-hz: the cell's sample rate in Hz, 1e5..1e9");
        } else {
            usage("unknown option (allowed: --enb-tx, --enb-rx, --ue, --stats-s, --srate-hz)");
        }
    }
    if (!B.enb_tx_ep || !B.enb_rx_ep || B.n_ues == 0)
        usage("--enb-tx, --enb-rx and at least one --ue are required");
}

static void say(const char *line)
{
    pthread_mutex_lock(&stdout_lock);
    fputs(line, stdout);
    fflush(stdout);
    pthread_mutex_unlock(&stdout_lock);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *open_socket(void *ctx, int type, const char *endpoint, int bind)
{
    void *s = zmq_socket(ctx, type);
    int zero = 0;
    if (!s)
        die("socket for", endpoint);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if ((bind ? zmq_bind(s, endpoint) : zmq_connect(s, endpoint)) != 0)
        die(bind ? "cannot bind" : "cannot connect", endpoint);
    return s;
}

static void ask(void *req, const char *endpoint)
{
    uint8_t request = 0xff; /* what srsRAN's receiver sends; its transmitter ignores the value */
    if (zmq_send(req, &request, 1, 0) != 1)
        die("request to", endpoint);
}

static void await_request(void *rep, const char *endpoint)
{
    uint8_t request;
    if (zmq_recv(rep, &request, 1, 0) < 0)
        die("waiting for a request on", endpoint);
}

/* srsenb's tx socket (a REQ connected to its port) and a PAIR that hears when its connection drops */
static void *enb_tx_monitored(void **monitor)
{
    static unsigned n;
    char name[64];
    void *req = open_socket(B.ctx, ZMQ_REQ, B.enb_tx_ep, 0);
    snprintf(name, sizeof name, "inproc://enb-tx-monitor-%u", n++);
    if (zmq_socket_monitor(req, name, ZMQ_EVENT_DISCONNECTED) != 0)
        die("monitor for", B.enb_tx_ep);
    *monitor = zmq_socket(B.ctx, ZMQ_PAIR);
    if (!*monitor || zmq_connect(*monitor, name) != 0)
        die("monitor connection for", B.enb_tx_ep);
    return req;
}

/* one monitor event (a first frame of uint16 event + uint32 value, then the endpoint): its event number */
static int monitor_event(void *monitor)
{
    zmq_msg_t frame;
    int event = -1;
    zmq_msg_init(&frame);
    if (zmq_msg_recv(&frame, monitor, 0) >= 6) {
        uint16_t e;
        memcpy(&e, zmq_msg_data(&frame), sizeof e);
        event = e;
    }
    while (zmq_msg_more(&frame)) {
        zmq_msg_close(&frame);
        zmq_msg_init(&frame);
        if (zmq_msg_recv(&frame, monitor, 0) < 0)
            break;
    }
    zmq_msg_close(&frame);
    return event;
}

static void say_event(const char *event, uint64_t at_sample)
{
    char line[200];
    snprintf(line, sizeof line, "{\"event\":\"%s\",\"wall_s\":%.3f,\"dl_sample\":%llu,\"enb_losses\":%llu}\n",
             event, wall_s(), (unsigned long long)at_sample, (unsigned long long)enb_losses);
    say(line);
}

/* a zero block's duration in ms at the cell's rate (1 ms, srsRAN's subframe, without --srate-hz) */
static long silence_ms(size_t len)
{
    if (B.srate_hz <= 0)
        return 1;
    long ms = (long)(1000.0 * (double)(len / SAMPLE_BYTES) / B.srate_hz + 0.5);
    return ms < 1 ? 1 : ms;
}

static void *downlink(void *arg)
{
    (void)arg;
    float *scaled = malloc(MAX_BLOCK_BYTES);
    float *zeros = calloc(1, MAX_BLOCK_BYTES);
    zmq_msg_t block;
    void *monitor;
    int asked = 0;
    size_t silent_len = B.srate_hz > 0 ? (size_t)(B.srate_hz / 1000) * SAMPLE_BYTES : 1920 * SAMPLE_BYTES;
    if (!scaled || !zeros)
        die("out of memory for", "the downlink");
    B.enb_tx_req = enb_tx_monitored(&monitor);
    for (;;) {
        for (int i = 0; i < B.n_ues; i++) {
            dl_waits_for = B.ue[i].rx_ep;
            await_request(B.ue[i].dl_rep, B.ue[i].rx_ep);
        }
        dl_waits_for = B.enb_tx_ep;
        if (!asked) {
            ask(B.enb_tx_req, B.enb_tx_ep);
            asked = 1;
        }
        const float *samples = zeros;
        size_t len = silent_len;
        int from_enb = 0;
        zmq_msg_init(&block);
        for (;;) {
            zmq_pollitem_t items[2] = {{B.enb_tx_req, 0, ZMQ_POLLIN, 0}, {monitor, 0, ZMQ_POLLIN, 0}};
            int n = zmq_poll(items, 2, E.silent ? silence_ms(silent_len) : -1);
            if (n < 0) {
                if (zmq_errno() == EINTR)
                    continue;
                die("polling", B.enb_tx_ep);
            }
            if (items[1].revents & ZMQ_POLLIN) {
                if (monitor_event(monitor) != ZMQ_EVENT_DISCONNECTED)
                    continue;
                /* srsenb is gone and the request it had died with it: a new socket asks whoever binds next */
                zmq_close(monitor);
                zmq_close(B.enb_tx_req);
                B.enb_tx_req = enb_tx_monitored(&monitor);
                ask(B.enb_tx_req, B.enb_tx_ep);
                pthread_mutex_lock(&enb_lock);
                int was_silent = E.silent;
                E.silent = 1, E.resumed = 0;
                if (!was_silent)
                    E.epoch++;
                pthread_mutex_unlock(&enb_lock);
                if (!was_silent) {
                    enb_losses++;
                    say_event("enb_lost", dl_samples);
                }
                continue;
            }
            if (items[0].revents & ZMQ_POLLIN) {
                if (zmq_msg_recv(&block, B.enb_tx_req, 0) < 0)
                    die("downlink block from", B.enb_tx_ep);
                asked = 0, from_enb = 1;
                len = zmq_msg_size(&block);
                samples = zmq_msg_data(&block);
                break;
            }
            break; /* silence: this zero block took its own duration */
        }
        if (len > MAX_BLOCK_BYTES || len % SAMPLE_BYTES) {
            fprintf(stderr, "cellab-zmq-broker: srsenb sent a %zu-byte block (not whole cf_t samples "
                            "or over %u bytes)\n", len, MAX_BLOCK_BYTES);
            exit(1);
        }
        if (from_enb && E.silent) { /* a new srsenb: its sample 0 is the UEs' sample dl_samples */
            pthread_mutex_lock(&enb_lock);
            E.silent = 0, E.resumed = 1, E.resume_at = dl_samples;
            pthread_mutex_unlock(&enb_lock);
            say_event("enb_back", dl_samples);
        }
        if (from_enb && len > 0)
            silent_len = len;
        for (int i = 0; i < B.n_ues; i++) {
            const void *out = samples;
            float amplitude = B.ue[i].dl_amplitude; /* one value for the whole block */
            if (from_enb && amplitude != 1.0f) {
                for (size_t k = 0; k < len / sizeof(float); k++)
                    scaled[k] = samples[k] * amplitude;
                out = scaled;
            }
            if (zmq_send(B.ue[i].dl_rep, out, len, 0) < 0)
                die("downlink block to", B.ue[i].rx_ep);
        }
        zmq_msg_close(&block);
        dl_samples += len / SAMPLE_BYTES;
        if (from_enb) {
            dl_bytes += len;
            dl_blocks++;
        } else {
            silent_blocks++;
        }
    }
    return NULL;
}

/* one block from UE i's tx appended to its buffer */
static void pull_uplink(struct ue *u)
{
    zmq_msg_t block;
    ul_waits_for = u->tx_ep;
    zmq_msg_init(&block);
    if (zmq_msg_recv(&block, u->ul_req, 0) < 0)
        die("uplink block from", u->tx_ep);
    size_t len = zmq_msg_size(&block);
    if (len % SAMPLE_BYTES || u->ul_len + len > MAX_BACKLOG_BYTES) {
        fprintf(stderr, "cellab-zmq-broker: UE %s sent a %zu-byte block (whole cf_t samples, at most %u "
                        "bytes ahead of another UE)\n", u->tx_ep, len, MAX_BACKLOG_BYTES);
        exit(1);
    }
    memcpy(u->ul_buf + u->ul_len, zmq_msg_data(&block), len);
    u->ul_len += len;
    zmq_msg_close(&block);
}

static void take_uplink(struct ue *u, size_t bytes)
{
    memmove(u->ul_buf, u->ul_buf + bytes, u->ul_len - bytes);
    u->ul_len -= bytes;
    u->ul_taken += bytes / SAMPLE_BYTES;
}

/* no srsenb to hear them: each UE's uplink dropped up to sample `until` (asked again once its buffer is
 * empty: a srsue whose tx is not asked for stops receiving too); 1 once every UE is there */
static int drop_uplink_until(uint64_t until)
{
    int there = 1;
    for (int i = 0; i < B.n_ues; i++) {
        struct ue *u = &B.ue[i];
        if (u->ul_taken >= until)
            continue;
        if (u->ul_len == 0) {
            ask(u->ul_req, u->tx_ep);
            pull_uplink(u);
        }
        uint64_t behind = until - u->ul_taken;
        size_t bytes = u->ul_len / SAMPLE_BYTES < behind ? u->ul_len : (size_t)behind * SAMPLE_BYTES;
        take_uplink(u, bytes);
        there &= u->ul_taken >= until;
    }
    return there;
}

/* srsenb's next uplink request (a ROUTER: [peer][empty][request]); 0 after timeout_ms without one */
static int uplink_request(zmq_msg_t *peer, long timeout_ms)
{
    zmq_pollitem_t item = {B.enb_rx_router, 0, ZMQ_POLLIN, 0};
    int n = zmq_poll(&item, 1, timeout_ms);
    if (n < 0 && zmq_errno() != EINTR)
        die("polling", B.enb_rx_ep);
    if (n <= 0)
        return 0;
    zmq_msg_t part;
    if (zmq_msg_recv(peer, B.enb_rx_router, 0) < 0)
        die("waiting for a request on", B.enb_rx_ep);
    int more = zmq_msg_more(peer);
    while (more) { /* the REQ's empty delimiter, then its 1-byte request */
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, B.enb_rx_router, 0) < 0)
            die("waiting for a request on", B.enb_rx_ep);
        more = zmq_msg_more(&part);
        zmq_msg_close(&part);
    }
    return 1;
}

static int same_peer(zmq_msg_t *a, const uint8_t *b, size_t b_len)
{
    return zmq_msg_size(a) == b_len && !memcmp(zmq_msg_data(a), b, b_len);
}

static void *uplink(void *arg)
{
    (void)arg;
    float *sum = malloc(MAX_BACKLOG_BYTES);
    uint8_t served[256]; /* the srsenb this thread answers (its ROUTER routing id) and since which loss */
    size_t served_len = 0;
    unsigned served_epoch = 0;
    if (!sum)
        die("out of memory for", "the uplink");
    for (;;) {
        zmq_msg_t peer;
        zmq_msg_init(&peer);
        ul_waits_for = B.enb_rx_ep;
        if (!uplink_request(&peer, 10)) {
            zmq_msg_close(&peer);
            pthread_mutex_lock(&enb_lock);
            int silent = E.silent;
            uint64_t until = E.resumed ? E.resume_at : dl_samples;
            pthread_mutex_unlock(&enb_lock);
            if (silent)
                drop_uplink_until(until);
            continue;
        }
        pthread_mutex_lock(&enb_lock);
        unsigned epoch = E.epoch;
        pthread_mutex_unlock(&enb_lock);
        if (epoch != served_epoch) {
            if (served_len && same_peer(&peer, served, served_len)) { /* queued by the srsenb that died */
                zmq_msg_close(&peer);
                continue;
            }
            /* a new srsenb: its rx starts at the UEs' sample where its downlink began */
            for (;;) {
                pthread_mutex_lock(&enb_lock);
                int resumed = E.resumed && E.epoch == epoch;
                uint64_t until = resumed ? E.resume_at : dl_samples;
                pthread_mutex_unlock(&enb_lock);
                if (drop_uplink_until(until) && resumed) /* one pull may hold less than the way to `until` */
                    break;
                if (!resumed)
                    usleep(1000);
            }
            served_epoch = epoch;
        }
        if (zmq_msg_size(&peer) <= sizeof served) {
            served_len = zmq_msg_size(&peer);
            memcpy(served, zmq_msg_data(&peer), served_len);
        }
        /* ask every UE that has nothing buffered at once, so their replies overlap */
        for (int i = 0; i < B.n_ues; i++)
            if (B.ue[i].ul_len == 0)
                ask(B.ue[i].ul_req, B.ue[i].tx_ep);
        for (int i = 0; i < B.n_ues; i++)
            if (B.ue[i].ul_len == 0)
                pull_uplink(&B.ue[i]);
        size_t need = B.ue[0].ul_len; /* what every UE has: asking one for more would wait on its next rx */
        for (int i = 1; i < B.n_ues; i++)
            need = B.ue[i].ul_len < need ? B.ue[i].ul_len : need;
        memcpy(sum, B.ue[0].ul_buf, need);
        for (int i = 1; i < B.n_ues; i++) {
            const float *x = (const float *)B.ue[i].ul_buf;
            for (size_t k = 0; k < need / sizeof(float); k++)
                sum[k] += x[k];
        }
        for (int i = 0; i < B.n_ues; i++)
            take_uplink(&B.ue[i], need);
        /* the reply: to the peer that asked (gone: ZMQ drops it) */
        if (zmq_msg_send(&peer, B.enb_rx_router, ZMQ_SNDMORE) < 0 || zmq_send(B.enb_rx_router, "", 0, ZMQ_SNDMORE) < 0 ||
            zmq_send(B.enb_rx_router, sum, need, 0) < 0)
            die("uplink block to", B.enb_rx_ep);
        zmq_msg_close(&peer);
        ul_bytes += need;
        ul_blocks++;
    }
    return NULL;
}

/* "gain I DB" lines on stdin; anything else is answered with an error and changes nothing */
static void *control(void *arg)
{
    (void)arg;
    char line[128], reply[160];
    while (fgets(line, sizeof line, stdin)) {
        int ue, used = 0;
        double db;
        if (sscanf(line, "gain %d %lf %n", &ue, &db, &used) != 2 || line[used] != '\0' || ue < 0 ||
            ue >= B.n_ues || !isfinite(db) || db < MIN_GAIN_DB || db > MAX_GAIN_DB) {
            snprintf(reply, sizeof reply, "{\"error\":\"expected 'gain UE DB' with UE 0..%d and DB in "
                     "-100..100\"}\n", B.n_ues - 1);
            say(reply);
            continue;
        }
        B.ue[ue].dl_amplitude = (float)pow(10.0, db / 20.0);
        snprintf(reply, sizeof reply, "{\"gain_ue\":%d,\"dl_gain_db\":%.3f}\n", ue, db);
        say(reply);
    }
    return NULL; /* stdin closed: the gains stay as they are */
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    void *ctx = B.ctx = zmq_ctx_new();
    if (!ctx)
        die("context", NULL);
    /* srsenb's tx socket is the downlink thread's own (it renews it when srsenb goes); its rx asks a ROUTER, so
     * that a request the dead srsenb left queued is told from the new srsenb's */
    B.enb_rx_router = open_socket(ctx, ZMQ_ROUTER, B.enb_rx_ep, 1);
    for (int i = 0; i < B.n_ues; i++) {
        B.ue[i].dl_rep = open_socket(ctx, ZMQ_REP, B.ue[i].rx_ep, 1);
        B.ue[i].ul_req = open_socket(ctx, ZMQ_REQ, B.ue[i].tx_ep, 0);
        B.ue[i].ul_buf = malloc(MAX_BACKLOG_BYTES);
        if (!B.ue[i].ul_buf)
            die("out of memory for", B.ue[i].tx_ep);
    }
    pthread_t dl, ul, ctl;
    if (pthread_create(&dl, NULL, downlink, NULL) || pthread_create(&ul, NULL, uplink, NULL) ||
        pthread_create(&ctl, NULL, control, NULL)) {
        fprintf(stderr, "cellab-zmq-broker: cannot start its threads\n");
        return 1;
    }
    char line[512];
    snprintf(line, sizeof line, "ready: %d UEs\n", B.n_ues);
    say(line);
    double t0 = now_s(), last = t0;
    uint64_t last_dl = 0, last_ul = 0, last_silent = 0;
    for (;;) {
        usleep((useconds_t)(B.stats_s * 1e6));
        double t = now_s();
        uint64_t d = dl_bytes, u = ul_bytes, z = silent_blocks;
        snprintf(line, sizeof line, "{\"t_s\":%.1f,\"dl_msps\":%.3f,\"ul_msps\":%.3f,\"dl_blocks\":%llu,"
                 "\"ul_blocks\":%llu,\"silent_blocks\":%llu,\"enb_losses\":%llu,\"dl_waits_for\":\"%s\","
                 "\"ul_waits_for\":\"%s\"}\n",
                 t - t0, (double)(d - last_dl) / SAMPLE_BYTES / (t - last) / 1e6,
                 (double)(u - last_ul) / SAMPLE_BYTES / (t - last) / 1e6, (unsigned long long)dl_blocks,
                 (unsigned long long)ul_blocks, (unsigned long long)(z - last_silent), (unsigned long long)enb_losses,
                 dl_waits_for, ul_waits_for);
        say(line);
        last_dl = d, last_ul = u, last_silent = z, last = t;
    }
}
