/* cellab-zmq-broker's stack clock: per direction, the wall-clock time (CLOCK_REALTIME, the clock of packet
 * captures) at which the last sample of each TTI passed the broker. Over ZMQ srsRAN is clocked by its samples, so
 * these are the TTIs the stack actually ran, whatever the host let it do.
 *
 * File per direction (DIR/stack-clock-dl.bin, DIR/stack-clock-ul.bin): one JSON line (format, version, direction,
 * sample_rate_hz, samples_per_tti, clock, run_id, first_tti), then one little-endian int64 per TTI: ns since the
 * epoch at which the last sample of TTI first_tti + i passed. TTI k of a direction's stream is its samples
 * k*spt .. (k+1)*spt-1 since the broker started (spt = srate_hz / 1000): the downlink counts what every UE got
 * (srsenb's blocks and the silence while srsenb is gone), the uplink what srsenb's rx got.
 *
 * Cheap: the hot path takes the direction's (uncontended) lock, reads the vDSO clock and stores into a fixed buffer
 * of CLOCK_CHUNK records; one write() per CLOCK_CHUNK TTIs. The rest is written by clock_stop (stdin's
 * "clock_stop", a new "clock_start", or SIGTERM/SIGINT: zmq_broker.c's main). Times are strictly increasing: a
 * block carrying several TTIs spreads them evenly since the direction's previous record (the samples were made in
 * between), and a time not after the previous record (the wall clock stepped back) is the previous + 1 ns. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "broker.h"

struct stack_clock clock_dl = {.lock = PTHREAD_MUTEX_INITIALIZER, .direction = "dl", .fd = -1};
struct stack_clock clock_ul = {.lock = PTHREAD_MUTEX_INITIALIZER, .direction = "ul", .fd = -1};
static char run_id[CLOCK_RUN_ID_MAX + 1];

static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t samples_per_tti(void)
{
    return (uint64_t)(B.srate_hz / 1000.0);
}

/* the buffered records to the file (under c->lock); a failed write ends the recording, named at clock_stop */
static void flush_locked(struct stack_clock *c)
{
    size_t bytes = c->n * sizeof c->buf[0], done = 0;
    while (c->fd >= 0 && done < bytes) {
        ssize_t w = write(c->fd, (const char *)c->buf + done, bytes - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            c->write_errno = w < 0 ? errno : EIO;
            close(c->fd);
            c->fd = -1;
            break;
        }
        done += (size_t)w;
    }
    c->written += c->fd >= 0 ? c->n : 0;
    c->n = 0;
}

void clock_passed(struct stack_clock *c, uint64_t samples)
{
    uint64_t spt = samples_per_tti();
    if (spt == 0 || samples == 0)
        return;
    pthread_mutex_lock(&c->lock);
    uint64_t done_before = c->samples / spt;
    c->samples += samples;
    uint64_t count = c->samples / spt - done_before; /* TTIs whose last sample passed with this block */
    if (c->fd >= 0 && count > 0) {
        int64_t now = realtime_ns(), prev = c->last_ns ? c->last_ns : now - (int64_t)count;
        for (uint64_t j = 1; j <= count; j++) {
            int64_t t = prev + (int64_t)((double)(now - prev) * (double)j / (double)count);
            if (t <= c->last_ns)
                t = c->last_ns + 1;
            c->buf[c->n++] = c->last_ns = t;
            if (c->n == CLOCK_CHUNK)
                flush_locked(c);
        }
    }
    pthread_mutex_unlock(&c->lock);
}

/* ends c's recording (under c->lock): its records so far in the file; appends `"dl_ttis":N,` (or the error) */
static void stop_locked(struct stack_clock *c, char *out, size_t len)
{
    if (c->fd >= 0 || c->write_errno) {
        flush_locked(c);
        if (c->fd >= 0 && close(c->fd) != 0 && !c->write_errno)
            c->write_errno = errno;
        c->fd = -1;
        if (c->write_errno)
            snprintf(out, len, "\"%s_error\":\"writing its clock: %s\",", c->direction, strerror(c->write_errno));
        else
            snprintf(out, len, "\"%s_ttis\":%llu,", c->direction, (unsigned long long)c->written);
    } else {
        snprintf(out, len, "\"%s_ttis\":0,", c->direction);
    }
    c->write_errno = 0, c->written = 0, c->n = 0, c->last_ns = 0;
}

void clock_stop(char *reply, size_t len)
{
    char dl[160], ul[160];
    pthread_mutex_lock(&clock_dl.lock);
    stop_locked(&clock_dl, dl, sizeof dl);
    pthread_mutex_unlock(&clock_dl.lock);
    pthread_mutex_lock(&clock_ul.lock);
    stop_locked(&clock_ul, ul, sizeof ul);
    pthread_mutex_unlock(&clock_ul.lock);
    snprintf(reply, len, "{\"clock\":\"stopped\",%s%s\"run_id\":\"%s\"}\n", dl, ul, run_id);
}

/* the file and header of c's new recording (under c->lock); 0, or errno */
static int start_locked(struct stack_clock *c, const char *dir)
{
    char path[CLOCK_DIR_MAX + 32], header[CLOCK_HEADER_MAX];
    uint64_t spt = samples_per_tti();
    snprintf(path, sizeof path, "%s/stack-clock-%s.bin", dir, c->direction);
    int n = snprintf(header, sizeof header, "{\"format\": \"cellab-stack-clock\", \"version\": 1, \"direction\": "
                     "\"%s\", \"sample_rate_hz\": %llu, \"samples_per_tti\": %llu, \"clock\": \"CLOCK_REALTIME\", "
                     "\"run_id\": \"%s\", \"first_tti\": %llu}\n", c->direction,
                     (unsigned long long)(spt * 1000), (unsigned long long)spt, run_id,
                     (unsigned long long)(c->samples / spt));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644); /* never through a link */
    if (fd < 0)
        return errno;
    if (write(fd, header, (size_t)n) != n) {
        int e = errno ? errno : EIO;
        close(fd);
        return e;
    }
    c->fd = fd, c->n = 0, c->written = 0, c->last_ns = 0, c->write_errno = 0;
    return 0;
}

/* a run id of [A-Za-z0-9._-] (it goes into a JSON string and the lab's checks) */
static int run_id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > CLOCK_RUN_ID_MAX)
        return 0;
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
              *p == '_' || *p == '-'))
            return 0;
    return 1;
}

void clock_start(const char *id, const char *dir, char *reply, size_t len)
{
    struct stat st;
    char stopped[CLOCK_REPLY_MAX];
    if (samples_per_tti() == 0 || samples_per_tti() * 1000 != (uint64_t)B.srate_hz) {
        snprintf(reply, len, "{\"error\":\"clock_start: the broker needs --srate-hz, a whole number of kHz (a TTI "
                 "is srate_hz/1000 samples)\"}\n");
        return;
    }
    if (!run_id_ok(id) || strlen(dir) > CLOCK_DIR_MAX || dir[0] != '/' || stat(dir, &st) != 0 ||
        !S_ISDIR(st.st_mode)) {
        snprintf(reply, len, "{\"error\":\"expected 'clock_start RUN_ID DIR': RUN_ID 1..%d of [A-Za-z0-9._-], DIR "
                 "an existing folder's absolute path (no spaces, at most %d bytes)\"}\n", CLOCK_RUN_ID_MAX,
                 CLOCK_DIR_MAX);
        return;
    }
    clock_stop(stopped, sizeof stopped); /* the previous run's, if any, is complete on disk */
    pthread_mutex_lock(&clock_dl.lock);
    pthread_mutex_lock(&clock_ul.lock);
    snprintf(run_id, sizeof run_id, "%s", id);
    int e = start_locked(&clock_dl, dir);
    if (!e && (e = start_locked(&clock_ul, dir)) != 0) {
        close(clock_dl.fd);
        clock_dl.fd = -1;
    }
    uint64_t dl_first = clock_dl.samples / samples_per_tti(), ul_first = clock_ul.samples / samples_per_tti();
    pthread_mutex_unlock(&clock_ul.lock);
    pthread_mutex_unlock(&clock_dl.lock);
    if (e)
        snprintf(reply, len, "{\"error\":\"clock_start: cannot write %s/stack-clock-*.bin: %s\"}\n", dir,
                 strerror(e));
    else
        snprintf(reply, len, "{\"clock\":\"started\",\"run_id\":\"%s\",\"dl_first_tti\":%llu,\"ul_first_tti\":%llu}\n",
                 id, (unsigned long long)dl_first, (unsigned long long)ul_first);
}
