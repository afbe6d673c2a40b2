/* cellab-cell: the state of the virtual LTE cell (one context struct owned by main) and the interfaces of the
 * units that make up the program, one concern each (emulator/README.md lists them). */
#ifndef CELLAB_CELL_H
#define CELLAB_CELL_H

#include <stdint.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "trace.h"

#define CELL_MAX_UES 16
#define CELL_MAX_TB 16          /* in-flight downlink TBs per UE (8 HARQ processes + slack) */
#define CELL_DL_HARQ_PROCS 8
#define CELL_UL_HARQ_PROCS 8
#define CELL_MAX_LOST 16
#define CELL_PKT_MAX 2048
#define CELL_DELAY_LINE_MAX_BYTES (64u << 20) /* bound on packets held for core/Internet delay, per direction */
/* how late a TTI ran: a host's scheduling noise (< 1 ms) shifts deliveries by less than a TTI; a stall of
 * several ms shifts whole bursts, so the runs' validity rule looks at the magnitude (cellab.campaign.Retry) */
#define CELL_N_LATE_BINS 6
static const uint64_t cell_late_bins_us[CELL_N_LATE_BINS] = {500, 1000, 2000, 5000, 10000, 50000};
/* the TTIs run more than CELL_STALL_MIN_US late, newest CELL_STALL_RING kept: `stalls` over the control socket
 * tells a measurement which of its samples the host delayed (a ping whose flight spans one) */
#define CELL_STALL_RING 4096
#define CELL_STALL_MIN_US 1000
#define CELL_ERR_HIST_US 2001                 /* delivery-time error histogram, 1 us bins, last = overflow */
#define NS_PER_TTI 1000000ULL

/* Fixed LTE timings (FDD, TS 36.213): an SR on PUCCH is answered by a UL grant SR_TO_GRANT subframes later
 * (eNB processing), the UE sends PUSCH 4 subframes after the grant (TS 36.213 8.0), the eNB uses a BSR
 * 4 subframes after decoding it; a downlink TB is decoded by the end of its subframe. */
#define CELL_SR_TO_GRANT_TTI 4
#define CELL_GRANT_TO_PUSCH_TTI 4
#define CELL_BSR_PROCESS_TTI 4

enum ul_policy { UL_SRSENB = 0, UL_SR_STRICT = 1 };
/* downlink RLC queue: srsenb's (SDU-count limit + PDCP discard timer) or a byte limit (deep buffers) */
enum dl_queue_policy { DLQ_SRSENB = 0, DLQ_BYTES = 1 };
/* uplink RLC queue of each UE: srsue's (SDU-count limit, tail drop) or a byte limit */
enum ul_queue_policy { ULQ_SRSUE = 0, ULQ_BYTES = 1 };
#define SRSUE_RLC_TX_QUEUE_SDUS 256 /* srsRAN's RLC_TX_QUEUE_LEN, the UE's default tx_queue_length too */

struct pkt {
    struct pkt *next;
    uint64_t end_off;     /* stream offset just past this packet's last byte */
    uint64_t release_tti; /* delay lines: TTI at which the packet moves on */
    uint64_t enq_tti;     /* downlink RLC queue: TTI it reached the eNB (the PDCP discard timer's start) */
    uint32_t len;
    uint8_t data[];
};

struct fifo {
    struct pkt *head, *tail;
    uint64_t bytes;
    uint32_t count;
};

enum tb_state { TB_FREE = 0, TB_WAIT_OUTCOME, TB_WAIT_RETX, TB_DONE, TB_LOST };

struct dl_tb {
    uint64_t start, end; /* byte range of the UE's downlink stream */
    uint64_t event_tti;  /* outcome or retransmission due */
    uint64_t tx_tti;
    int n_prb, mcs, tbs_bits, n_re, tx_count;
    enum tb_state state;
};

struct ul_grant {
    uint64_t pusch_tti;
    uint32_t bytes;
    int active;
};

struct ue {
    char netns[64], tun[32];
    uint32_t addr_be; /* IPv4 address, network order: downlink packets to it go to this UE */
    int fd;
    /* channel */
    double attenuation_db, fading_db, rsrp_dbm, sinr_db;
    int cqi_true, cqi_used, cqi_pending_at_valid;
    double sinr_pending_db, sinr_reported_db, olla_db; /* CQI reports carry the SINR they quantise */
    uint64_t cqi_pending_at;
    /* downlink */
    struct fifo dlq;             /* RLC queue: packets not yet fully delivered */
    struct pkt *dl_next_new;     /* first packet of dlq with no byte scheduled yet, NULL = none */
    uint32_t dl_new_pkts;        /* packets from dl_next_new on: srsenb's RLC TX SDU queue */
    uint64_t dl_in_off, dl_sched_off, dl_done_off;
    struct dl_tb tb[CELL_MAX_TB]; /* ring ordered by start */
    int tb_head, tb_count;
    uint64_t lost_lo[CELL_MAX_LOST], lost_hi[CELL_MAX_LOST];
    int n_lost;
    double pf_avg_bits;
    /* uplink */
    struct fifo ulq;
    uint64_t ul_in_off, ul_sent_off;
    int sr_period_ms, sr_offset, i_sr;
    int sr_waiting;              /* data waits for an SR occasion */
    uint64_t bsr_bytes;          /* buffer size the eNB knows (last BSR minus grants since) */
    uint64_t bsr_usable_at;      /* TTI from which the last BSR is known to the eNB */
    uint64_t bsr_pending_value;
    int bsr_pending;
    uint64_t poll_pusch_tti;     /* srsenb: periodic-BSR grant, 0 = none */
    struct ul_grant grants[CELL_UL_HARQ_PROCS];
    /* counters */
    uint64_t dl_delivered_bytes, dl_delivered_pkts, dl_drop_bytes, dl_drop_pkts, dl_lost_pkts;
    uint64_t dl_discard_bytes, dl_discard_pkts; /* PDCP discard timer (dl_drop_*: the queue was full) */
    uint64_t ul_delivered_bytes, ul_delivered_pkts, ul_drop_pkts, harq_retx, sr_sent, grants_issued;
    uint64_t win_dl_bytes, win_ul_bytes, win_retx, win_dl_tbs_bits;
    /* RRC (rrc.c, only with --rlf): radio link monitoring, re-establishment, a new connection */
    int rrc_state;               /* enum rrc_state */
    int t310_on, n_oos, n_is, ctx_released; /* ctx_released: the eNB released the UE's context */
    uint64_t t310_start, rlf_tti, rrc_done_tti, enb_release_tti;
    uint64_t rrc_drop_bytes, rrc_drop_pkts, s1_drop_pkts, s1_drop_bytes, rlf_count, reest_count, conn_count;
    /* the UE's host paused (control op set_ue_host, fault ue_pause): the modem stays connected, but what it
     * receives reaches no host and the host's namespace sends nothing */
    int host_down;
    uint64_t host_dl_drop_pkts, host_dl_drop_bytes, host_ul_drop_pkts;
    /* per-TTI record fields, reset every TTI */
    uint32_t r_tbs_bits, r_delivered, r_ul_grant, r_ul_delivered, r_drop_bytes;
    int r_prb, r_retx, r_mcs, r_flags;
};

/* RRC states of a UE (rrc.c): connected; after a radio link failure, looking for the cell (T311 running);
 * re-establishing; idle (T311 expired); setting up a new connection */
enum rrc_state { RRC_CONNECTED = 0, RRC_SEARCH, RRC_REEST, RRC_IDLE, RRC_CONNECTING };

struct cell_params {
    int n_prb, sr_period_ms, cqi_period_ms, cqi_delay_ms, ul_prb, ul_mcs, bsr_timer_ms, harq_max_tx;
    int harq_rtt_ms, n_ues, unlimited, plain_copy, poll_grant_prb, core_jitter_ms, realtime, cpus_awake;
    enum ul_policy ul_policy;
    enum dl_queue_policy dl_queue;
    enum ul_queue_policy ul_queue;
    int rlc_queue_sdus, pdcp_discard_ms; /* DLQ_SRSENB */
    /* radio link failure model (rrc.c), off unless --rlf: T310/N310/N311/T311 as srsenb's SIB2 gives them, the
     * eNB's rlf_release_timer_ms, and how long re-establishment and a new connection take once the cell is back */
    int rlf, t310_ms, n310, n311, t311_ms, rlf_release_ms, reest_ms, connect_ms;
    uint64_t rlc_queue_bytes, ul_buffer_bytes; /* DLQ_BYTES, ULQ_BYTES */
    double core_delay_ms, internet_delay_ms, fading_sigma_db, fading_coherence_ms, duration_s;
    uint64_t seed;
    const char *trace_path, *trace_up_path, *ctl_ep, *pub_ep, *tti_log_path, *pid_path;
    const char *clock_path, *clock_out_path; /* --clock: a recorded stack clock; --clock-out: the cell's own */
    uint64_t log_max_bytes; /* --log-max-bytes: each log and its older segment together at most this; 0 = no cap */
    const char *stdout_log_path; /* --stdout-log: the file stdout is (its events), kept within log_max_bytes too */
    char srv_netns[64], srv_tun[32];
};

/* a recorded stack clock (stack_clock.c): the time of each TTI, ns since the epoch, strictly increasing */
struct stack_clock {
    int64_t *t_ns;
    uint64_t n; /* records; 0 = no recorded clock (real time) */
    int64_t first_tti, sample_rate_hz;
    int ended;  /* the cell has run past the recording (on at real time since) */
};

struct cell {
    struct cell_params p;
    struct stack_clock clock;
    FILE *clock_out;
    int64_t wall_start_ns, clock_out_last_ns; /* CLOCK_REALTIME at start_mono_ns; the last time written */
    uint64_t start_mono_ns;
    struct ue ue[CELL_MAX_UES];
    int srv_fd, sig_fd;
    int cpu_latency_fd; /* -1: CPUs not held awake (--cpus-awake not given, or not allowed) */
    void *zctx, *ctl, *pub;
    int ctl_fd;
    FILE *tti_log;
    uint64_t tti_log_bytes, clock_out_bytes, clock_out_records; /* in the current segments; clock records ever */
    int64_t tti_log_start_unix_s;                              /* every segment's header says the cell's start */
    struct trace trace, trace_up;
    int have_trace, have_trace_up;
    uint64_t tti, delay_ticks, start_ns, rng;
    int paused, stop;
    int s1_down; /* the S1 path is cut (control op set_s1): packets between the eNB and the core are lost */
    uint64_t s1_cuts;
    int sgi_down; /* the SGi path is cut (control op set_sgi): packets between the core and the server are lost */
    uint64_t sgi_cuts, sgi_drop_pkts, sgi_drop_bytes;
    int enb_down; /* the eNB is restarting (control op set_enb, with --rlf): no cell on the air, no UE context */
    uint64_t enb_restarts, host_cuts;
    struct fifo dl_delay, ul_delay;
    /* counters */
    uint64_t no_route_pkts, delay_drop_pkts, tun_write_drops, late_ttis, resyncs;
    uint64_t late_over[CELL_N_LATE_BINS]; /* TTIs run more than cell_late_bins_us[i] late */
    uint64_t late_max_us;
    struct {
        uint64_t deadline_ns; /* CLOCK_MONOTONIC */
        uint32_t late_us;
    } stalls[CELL_STALL_RING];
    uint64_t n_stalls; /* ever recorded; stalls[i % CELL_STALL_RING] */
    uint64_t err_hist[CELL_ERR_HIST_US];
    uint64_t err_count;
    uint64_t fwd_pkts, fwd_bytes;
    uint8_t buf[CELL_PKT_MAX];
};

/* util.c: the monotonic clock; a fatal error (message on stderr, exit 2) */
uint64_t now_ns(void);
int hold_cpus_awake(void);
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* rng.c: the model's random numbers, reproducible per --seed */
double rng_uniform(struct cell *c);
double rng_normal(struct cell *c);

/* pktq.c: packet FIFOs and the delay line's release TTI */
void fifo_push(struct fifo *q, struct pkt *p);
struct pkt *fifo_pop(struct fifo *q);
void fifo_free(struct fifo *q);
struct pkt *pkt_new(const uint8_t *data, uint32_t len);
uint64_t delay_release(struct cell *c, struct fifo *line, uint64_t base_tti);

/* args.c: the command line into c->p (and per-UE names, addresses, attenuation, traces); dies on bad input */
void parse_args(struct cell *c, int argc, char **argv);

/* io.c: TUN devices and packet input/output */
int open_tun_in_netns(const char *netns, const char *name);
void tun_write(struct cell *c, int fd, const struct pkt *p);
void read_srv(struct cell *c);
void read_ue(struct cell *c, struct ue *u);

/* channel.c: one UE's channel and CQI reporting, every TTI */
void channel_update(struct cell *c, struct ue *u, uint64_t t);

/* dlq.c: the downlink RLC queue: admission (SDU or byte limit), the PDCP discard timer, transmission start */
void dl_enqueue(struct cell *c, struct ue *u, struct pkt *p, uint64_t t);
void dl_mark_scheduled(struct ue *u);
void dl_discard_expired(struct cell *c, struct ue *u, uint64_t t);
uint64_t dl_discard_all_new(struct cell *c, struct ue *u, uint64_t t);

/* harq.c: HARQ outcomes and in-order delivery */
static inline struct dl_tb *tb_at(struct ue *u, int i) { return &u->tb[(u->tb_head + i) % CELL_MAX_TB]; }
void dl_deliver(struct cell *c, struct ue *u, uint64_t t);
int dl_harq_busy(struct ue *u);
void dl_outcomes(struct cell *c, struct ue *u, uint64_t t);
void dl_reset_harq(struct cell *c, struct ue *u, uint64_t t);

/* rrc.c: radio link monitoring (T310/N310/N311), RLF, re-establishment (T311) or a new connection; the eNB's
 * context release; events on stdout. Without --rlf every UE stays connected and nothing here runs. */
static inline int ue_connected(const struct cell *c, const struct ue *u)
{
    return (!c->p.rlf || u->rrc_state == RRC_CONNECTED) && !c->enb_down; /* no eNB: nothing scheduled either */
}
void rrc_tti(struct cell *c, struct ue *u, uint64_t t);
/* the eNB restarting (fault enb_restart): every UE's context and queues gone at once; the UEs lose the cell
 * (T310, RLF) and come back with a new connection once it is on the air again */
void rrc_enb_down(struct cell *c, uint64_t t);
void rrc_enb_up(struct cell *c, uint64_t t);
void cell_event(struct cell *c, const char *event, int ue, const char *extra_json);

/* dl_sched.c: the downlink scheduler (radio model, trace mode, unlimited) */
void dl_schedule(struct cell *c, uint64_t t);
void dl_trace(struct cell *c, uint64_t t);
void dl_unlimited(struct cell *c, uint64_t t);

/* ul.c: SR configuration and the uplink of one UE per TTI */
void assign_sr(struct cell *c, int k);
void ul_tti(struct cell *c, struct ue *u, uint64_t t);
void ul_trace(struct cell *c, struct ue *u, uint64_t t);
void ul_unlimited(struct cell *c, struct ue *u, uint64_t t);

/* ttilog.c: the ground-truth log */
void ttilog_open(struct cell *c);
void write_tti_records(struct cell *c, uint64_t t);

/* control.c: the control socket and telemetry */
void setup_zmq(struct cell *c);
void serve_control(struct cell *c);
json_t *handle_request(struct cell *c, const char *text, size_t len);
json_t *stats_json(struct cell *c);
void publish_telemetry(struct cell *c, uint64_t t);
void control_close(struct cell *c);

/* stack_clock.c: when each TTI is due (real time, or a recorded stack clock) and the cell's own clock file */
int stack_clock_load(struct stack_clock *k, const char *path, char *err, size_t n);
uint64_t tti_offset_ns(const struct cell *c, uint64_t tti); /* TTI tti is due this long after TTI 0 */
void clock_out_open(struct cell *c);
void clock_start(struct cell *c, uint64_t start_mono);
void clock_tti_ran(struct cell *c, uint64_t t, uint64_t now_mono);
int64_t cell_wall_ns(const struct cell *c); /* the cell's own clock now (telemetry's wall_ns) */
json_t *clock_json(const struct cell *c);

/* logcap.c: a log in segments of at most log_max_bytes / 2 (PATH, then PATH.1) */
FILE *log_create(const char *path, size_t buffer_bytes); /* O_NOFOLLOW; NULL on failure (errno) */
int log_full(uint64_t max_bytes, uint64_t written_bytes, size_t more_bytes);
FILE *log_rotate(FILE *f, const char *path, size_t buffer_bytes); /* PATH -> PATH.1, a new PATH; NULL: stopped */
void stdout_log_room(const struct cell *c, size_t more_bytes); /* --stdout-log rotated before a line that passes N/2 */

/* tti.c: one TTI of the model */
void run_tti(struct cell *c, uint64_t t);

#endif
