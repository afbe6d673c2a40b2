/* cellab-zmq-broker's state shared by its units: zmq_broker.c (main, sockets, the downlink, stats), uplink.c (the
 * uplink sum and srsenb's restart on that side), control.c (the command line and stdin's commands), clock.c (the
 * stack clock: when each TTI passed, per direction). */
#ifndef CELLAB_ZMQ_BROKER_H
#define CELLAB_ZMQ_BROKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_UES 16
#define SAMPLE_BYTES 8                      /* cf_t: two floats (srsRAN's default fc32 format) */
#define MAX_BLOCK_BYTES (3072000u * 8u)     /* srsRAN's ZMQ_MAX_BUFFER_SIZE: 10 subframes at 20 MHz */
#define MAX_BACKLOG_BYTES (4u * MAX_BLOCK_BYTES) /* a UE's uplink this far ahead of another's is a broken stream */
#define MIN_GAIN_DB (-100.0)                /* a UE's gain is against the eNB's cell_gain, which may be lower */
#define MAX_GAIN_DB 100.0

struct ue {
    const char *rx_ep, *tx_ep;  /* the UE's rx_port (we serve it) and tx_port (we ask it) */
    _Atomic float dl_amplitude; /* 10^(dl_gain_db/20); the control thread may change it at any time */
    _Atomic float ul_amplitude; /* 10^(ul_gain_db/20): its uplink's weight in the sum srsenb hears */
    void *dl_rep, *ul_req;
    uint8_t *ul_buf;            /* uplink samples received, not yet summed */
    size_t ul_len;
    uint64_t ul_taken;          /* samples of its uplink stream summed or dropped: the index of ul_buf[0] */
};

struct broker {
    const char *enb_tx_ep, *enb_rx_ep;
    void *ctx, *enb_tx_req, *enb_rx_router;
    struct ue ue[MAX_UES];
    int n_ues;
    double stats_s, srate_hz;
};
extern struct broker B;

/* srsenb's presence, as the downlink thread sees it; the uplink thread follows (under enb_lock) */
struct enb_presence {
    int silent;         /* srsenb's connection dropped: the UEs hear zero blocks */
    unsigned epoch;     /* srsenb losses so far */
    int resumed;        /* this epoch's new srsenb sent its first block */
    uint64_t resume_at; /* the UEs' downlink sample index of that block's first sample */
};
extern pthread_mutex_t enb_lock;
extern struct enb_presence E;

extern _Atomic uint64_t dl_bytes, ul_bytes, dl_blocks, ul_blocks, silent_blocks, enb_losses;
extern _Atomic uint64_t dl_samples; /* downlink samples every UE got (srsenb's and silence) */
/* what each direction waits for now (the stats line names it: a stalled stream says where) */
extern const char *_Atomic dl_waits_for, *_Atomic ul_waits_for;

#define CLOCK_CHUNK 4096      /* stack clock records buffered per direction before one write (32 KiB) */
#define CLOCK_RUN_ID_MAX 128
#define CLOCK_DIR_MAX 1024
#define CLOCK_HEADER_MAX 512
#define CLOCK_REPLY_MAX 512

/* one direction's stack clock (clock.c); every field under `lock` */
struct stack_clock {
    pthread_mutex_t lock;
    const char *direction;      /* "dl" | "ul": the file's name and header */
    uint64_t samples;           /* the direction's samples since the broker started */
    int fd;                     /* the recording's file; -1: not recording */
    int write_errno;            /* a failed write ended the recording */
    int64_t last_ns;            /* the last record's time (0: none yet) */
    uint64_t written;           /* records written this recording */
    size_t n;                   /* records in buf */
    int64_t buf[CLOCK_CHUNK];
};
extern struct stack_clock clock_dl, clock_ul;
void clock_passed(struct stack_clock *c, uint64_t samples); /* the hot path: `samples` more passed */
void clock_start(const char *run_id, const char *dir, char *reply, size_t len);
void clock_stop(char *reply, size_t len);                    /* the reply names each direction's TTIs written */

void die(const char *what, const char *endpoint);
void say(const char *line);
void ask(void *req, const char *endpoint);
float amplitude_of_db(double db);
void parse_args(int argc, char **argv); /* control.c: exits 2 naming the problem */
void *control(void *arg);               /* control.c: stdin's gain commands */
void *uplink(void *arg);                /* uplink.c */

#endif
