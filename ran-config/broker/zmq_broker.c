/* cellab-zmq-broker: one srsenb and N srsue over srsRAN's ZMQ radio (the srsran-zmq lab with several UEs).
 *
 * srsRAN's ZMQ radio is lock-step request/reply: a receiver (REQ) sends a 1-byte request, the transmitter
 * (REP) answers with the complex float samples (cf_t: 2 floats) it has for its next tx call, any count.
 * Sample k of a stream is time k for both ends, so the broker never drops or inserts samples:
 *   downlink (here): once every UE asked (REP per UE), ask srsenb's tx (REQ) for one block and answer every UE
 *             with a copy, scaled by that UE's dl_gain_db;
 *   uplink (uplink.c): when srsenb's rx asks, the sum of every UE's uplink, each scaled by its ul_gain_db.
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
 *       --ue rx=tcp://127.0.0.1:2100,tx=tcp://127.0.0.1:2101[,dl_gain_db=-3][,ul_gain_db=-3] --ue ... \
 *       [--stats-s 5] [--srate-hz HZ]
 *
 * stdin (control.c): "gain I DB" sets UE I's downlink gain, "ul_gain I DB" its uplink gain, while the stream runs
 * (an attenuation schedule's step), taken at that direction's next block; answered on stdout with
 * {"gain_ue":I,"dl_gain_db":DB} / {"gain_ue":I,"ul_gain_db":DB} or {"error":...}.
 * stdin (clock.c): "clock_start RUN_ID DIR" records the stack clock (when each TTI's last sample passed, per
 * direction) into DIR/stack-clock-dl.bin and DIR/stack-clock-ul.bin (needs --srate-hz), answered
 * {"clock":"started","run_id":...,"dl_first_tti":N,"ul_first_tti":M}; "clock_stop" writes the rest and closes them,
 * answered {"clock":"stopped","dl_ttis":N,"ul_ttis":M,"run_id":...} (a new clock_start and SIGTERM/SIGINT stop too).
 * stdout: "ready" once bound, then every --stats-s seconds a JSON line with the sample rates moved (srsenb's
 * blocks only; "silent_blocks": zero blocks the UEs got in that period), and {"event":"enb_lost"|"enb_back",...}.
 * Exit 2 on bad arguments, 1 on a ZMQ or stream error (named on stderr). */
#include <errno.h>
#include <signal.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "broker.h"

struct broker B = {.stats_s = 5.0};
pthread_mutex_t enb_lock = PTHREAD_MUTEX_INITIALIZER;
struct enb_presence E;
_Atomic uint64_t dl_bytes, ul_bytes, dl_blocks, ul_blocks, silent_blocks, enb_losses;
_Atomic uint64_t dl_samples;
const char *_Atomic dl_waits_for = "start", *_Atomic ul_waits_for = "start";
static pthread_mutex_t stdout_lock = PTHREAD_MUTEX_INITIALIZER; /* stats and control replies: whole lines */

void die(const char *what, const char *endpoint)
{
    fprintf(stderr, "cellab-zmq-broker: %s %s: %s\n", what, endpoint ? endpoint : "", zmq_strerror(zmq_errno()));
    exit(1);
}

void say(const char *line)
{
    pthread_mutex_lock(&stdout_lock);
    fputs(line, stdout);
    fflush(stdout);
    pthread_mutex_unlock(&stdout_lock);
}

float amplitude_of_db(double db)
{
    return (float)pow(10.0, db / 20.0);
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

void ask(void *req, const char *endpoint)
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
        /* counted as it is handed to the UEs (a send to a waiting REQ does not block): a UE that has the block
         * finds its TTIs counted, so a clock started after it never counts them again */
        clock_passed(&clock_dl, len / SAMPLE_BYTES); /* silence too: it is the UEs' time */
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

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    /* SIGTERM/SIGINT are taken by main's loop (the clock's last records written first); every thread inherits
     * the mask */
    sigset_t ending;
    sigemptyset(&ending);
    sigaddset(&ending, SIGTERM);
    sigaddset(&ending, SIGINT);
    pthread_sigmask(SIG_BLOCK, &ending, NULL);
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
        struct timespec wait = {(time_t)B.stats_s, (long)((B.stats_s - (double)(time_t)B.stats_s) * 1e9)};
        int sig = sigtimedwait(&ending, NULL, &wait);
        if (sig > 0) { /* the recording complete on disk, then the signal's own end (the exit status says it) */
            clock_stop(line, sizeof line);
            signal(sig, SIG_DFL);
            pthread_sigmask(SIG_UNBLOCK, &ending, NULL);
            raise(sig);
        }
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
