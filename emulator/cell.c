/* cellab-cell: a virtual LTE cell moving IP packets between TUN devices on a 1 ms TTI clock.
 * This file: the process (setup, teardown) and the TTI clock's event loop; the model is in the other units
 * (README.md lists them). See emulator/README.md for the model, its constants and the TTI log format. */
#include "cell.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_CATCHUP_TTI 200 /* further behind than this, the clock resyncs (counted) */

static void count_lateness(struct cell *c, uint64_t deadline_ns, uint64_t late_ns)
{
    uint64_t late_us = late_ns / 1000;
    if (late_us > c->late_max_us)
        c->late_max_us = late_us;
    if (late_us > CELL_STALL_MIN_US) {
        uint64_t i = c->n_stalls++ % CELL_STALL_RING;
        c->stalls[i].deadline_ns = deadline_ns;
        c->stalls[i].late_us = late_us > UINT32_MAX ? UINT32_MAX : (uint32_t)late_us;
    }
    for (int i = 0; i < CELL_N_LATE_BINS && late_us > cell_late_bins_us[i]; i++)
        c->late_over[i]++;
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
    clock_start(c, c->start_ns);
    while (!c->stop) {
        uint64_t now = now_ns();
        if (end_ns && now >= end_ns)
            break;
        uint64_t deadline = c->start_ns + tti_offset_ns(c, c->tti); /* k ms, or the recorded clock's */
        if (now >= deadline) {
            if ((now - deadline) / NS_PER_TTI > MAX_CATCHUP_TTI) {
                /* too far behind (process stopped?): skip the model clock ahead instead of racing */
                c->resyncs++;
                c->start_ns = now - tti_offset_ns(c, c->tti);
            }
            if (now - deadline > NS_PER_TTI / 2)
                c->late_ttis++;
            count_lateness(c, deadline, now - deadline);
            clock_tti_ran(c, c->tti, now);
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
    c->cpu_latency_fd = c->p.cpus_awake ? hold_cpus_awake() : -1;
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
    ttilog_open(c);
    clock_out_open(c);
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
    if (c->clock_out)
        fclose(c->clock_out);
    free(c->clock.t_ns);
    for (int k = 0; k < c->p.n_ues; k++) {
        fifo_free(&c->ue[k].dlq);
        fifo_free(&c->ue[k].ulq);
        close(c->ue[k].fd);
    }
    fifo_free(&c->dl_delay);
    fifo_free(&c->ul_delay);
    control_close(c);
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
