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
 *   cellab-zmq-broker --enb-tx tcp://127.0.0.1:2000 --enb-rx tcp://127.0.0.1:2001 \
 *       --ue rx=tcp://127.0.0.1:2100,tx=tcp://127.0.0.1:2101[,dl_gain_db=-3] --ue ... [--stats-s 5]
 *
 * stdin: "gain I DB" sets UE I's downlink gain while the stream runs (an attenuation schedule's step), taken at
 * the next downlink block; answered on stdout with {"gain_ue":I,"dl_gain_db":DB} or {"error":...}.
 * stdout: "ready" once bound, then every --stats-s seconds a JSON line with the sample rates moved.
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
};

static struct {
    const char *enb_tx_ep, *enb_rx_ep;
    void *enb_tx_req, *enb_rx_rep;
    struct ue ue[MAX_UES];
    int n_ues;
    double stats_s;
} B = {.stats_s = 5.0};

static _Atomic uint64_t dl_bytes, ul_bytes, dl_blocks, ul_blocks;
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
        } else {
            usage("unknown option (allowed: --enb-tx, --enb-rx, --ue, --stats-s)");
        }
    }
    if (!B.enb_tx_ep || !B.enb_rx_ep || B.n_ues == 0)
        usage("--enb-tx, --enb-rx and at least one --ue are required");
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

static void *downlink(void *arg)
{
    (void)arg;
    float *scaled = malloc(MAX_BLOCK_BYTES);
    zmq_msg_t block;
    if (!scaled)
        die("out of memory for", "the downlink");
    for (;;) {
        for (int i = 0; i < B.n_ues; i++) {
            dl_waits_for = B.ue[i].rx_ep;
            await_request(B.ue[i].dl_rep, B.ue[i].rx_ep);
        }
        dl_waits_for = B.enb_tx_ep;
        ask(B.enb_tx_req, B.enb_tx_ep);
        zmq_msg_init(&block);
        if (zmq_msg_recv(&block, B.enb_tx_req, 0) < 0)
            die("downlink block from", B.enb_tx_ep);
        size_t len = zmq_msg_size(&block);
        if (len > MAX_BLOCK_BYTES || len % SAMPLE_BYTES) {
            fprintf(stderr, "cellab-zmq-broker: srsenb sent a %zu-byte block (not whole cf_t samples "
                            "or over %u bytes)\n", len, MAX_BLOCK_BYTES);
            exit(1);
        }
        const float *samples = zmq_msg_data(&block);
        for (int i = 0; i < B.n_ues; i++) {
            const void *out = samples;
            float amplitude = B.ue[i].dl_amplitude; /* one value for the whole block */
            if (amplitude != 1.0f) {
                for (size_t k = 0; k < len / sizeof(float); k++)
                    scaled[k] = samples[k] * amplitude;
                out = scaled;
            }
            if (zmq_send(B.ue[i].dl_rep, out, len, 0) < 0)
                die("downlink block to", B.ue[i].rx_ep);
        }
        zmq_msg_close(&block);
        dl_bytes += len;
        dl_blocks++;
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

static void *uplink(void *arg)
{
    (void)arg;
    float *sum = malloc(MAX_BACKLOG_BYTES);
    if (!sum)
        die("out of memory for", "the uplink");
    for (;;) {
        ul_waits_for = B.enb_rx_ep;
        await_request(B.enb_rx_rep, B.enb_rx_ep);
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
        for (int i = 0; i < B.n_ues; i++) {
            struct ue *u = &B.ue[i];
            memmove(u->ul_buf, u->ul_buf + need, u->ul_len - need);
            u->ul_len -= need;
        }
        if (zmq_send(B.enb_rx_rep, sum, need, 0) < 0)
            die("uplink block to", B.enb_rx_ep);
        ul_bytes += need;
        ul_blocks++;
    }
    return NULL;
}

static void say(const char *line)
{
    pthread_mutex_lock(&stdout_lock);
    fputs(line, stdout);
    fflush(stdout);
    pthread_mutex_unlock(&stdout_lock);
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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    void *ctx = zmq_ctx_new();
    if (!ctx)
        die("context", NULL);
    B.enb_tx_req = open_socket(ctx, ZMQ_REQ, B.enb_tx_ep, 0);
    B.enb_rx_rep = open_socket(ctx, ZMQ_REP, B.enb_rx_ep, 1);
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
    uint64_t last_dl = 0, last_ul = 0;
    for (;;) {
        usleep((useconds_t)(B.stats_s * 1e6));
        double t = now_s();
        uint64_t d = dl_bytes, u = ul_bytes;
        snprintf(line, sizeof line, "{\"t_s\":%.1f,\"dl_msps\":%.3f,\"ul_msps\":%.3f,\"dl_blocks\":%llu,"
                 "\"ul_blocks\":%llu,\"dl_waits_for\":\"%s\",\"ul_waits_for\":\"%s\"}\n",
                 t - t0, (double)(d - last_dl) / SAMPLE_BYTES / (t - last) / 1e6,
                 (double)(u - last_ul) / SAMPLE_BYTES / (t - last) / 1e6, (unsigned long long)dl_blocks,
                 (unsigned long long)ul_blocks, dl_waits_for, ul_waits_for);
        say(line);
        last_dl = d, last_ul = u, last = t;
    }
}
