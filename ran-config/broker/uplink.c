/* cellab-zmq-broker's uplink: what srsenb's rx hears is the sample-wise sum of every UE's uplink, each weighted by
 * its own ul_gain_db, as many samples as every UE has (the rest stays buffered). Never more: a srsue sends its tx
 * only from its next rx call, which waits for downlink srsenb sends only after this reply (srsRAN's rf_zmq_recv
 * aligns tx to rx first), so waiting for more could deadlock. While srsenb is gone (zmq_broker.c's silence) each
 * UE's uplink is dropped up to the downlink it got; a new srsenb's first request gets every UE's stream from the
 * sample its downlink began with. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "broker.h"

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

/* the first `bytes` of every UE's buffered uplink, each weighted by its ul_gain_db, summed into `sum` */
static void add_uplinks(float *sum, size_t bytes)
{
    size_t n = bytes / sizeof(float);
    for (int i = 0; i < B.n_ues; i++) {
        const float *x = (const float *)B.ue[i].ul_buf;
        float a = B.ue[i].ul_amplitude; /* one value for the whole reply */
        if (i == 0 && a == 1.0f)
            memcpy(sum, x, bytes);
        else if (i == 0)
            for (size_t k = 0; k < n; k++)
                sum[k] = a * x[k];
        else if (a == 1.0f)
            for (size_t k = 0; k < n; k++)
                sum[k] += x[k];
        else
            for (size_t k = 0; k < n; k++)
                sum[k] += a * x[k];
    }
}

void *uplink(void *arg)
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
        add_uplinks(sum, need);
        for (int i = 0; i < B.n_ues; i++)
            take_uplink(&B.ue[i], need);
        clock_passed(&clock_ul, need / SAMPLE_BYTES); /* as srsenb's rx is handed it (see the downlink's) */
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
