/* cellab-cell: the TTI clock's schedule. By default TTI k is due k ms after the cell's start; given a recorded
 * stack clock (--clock FILE, the broker's format: ran-config/README.md, emulator/README.md "Recorded clock") TTI k
 * is due at the recorded time of the file's k-th TTI, offset so that its first TTI is the cell's start; past the
 * recording's end the cell goes on at real time (announced once: event clock_end). Also the cell's own clock
 * (--clock-out FILE, the same format): the wall time at which each TTI ran. */
#include "cell.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define CLOCK_FORMAT "cellab-stack-clock"
#define CLOCK_VERSION 1
#define CLOCK_HEADER_MAX 4096
#define CLOCK_MAX_RECORDS (1ULL << 27) /* 37 hours of TTIs */
#define CLOCK_OUT_BUFFER_BYTES (1 << 16)

static int fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* The header line's fields as the format fixes them; 0, or -1 with the reason in err. */
static int check_header(struct stack_clock *k, const char *line, char *err, size_t n)
{
    json_error_t jerr;
    json_t *h = json_loads(line, 0, &jerr);
    if (!h || !json_is_object(h)) {
        json_decref(h);
        return fail(err, n, "header: not a JSON object (%s)", h ? "another JSON value" : jerr.text);
    }
    int rc = -1;
    const char *format = json_string_value(json_object_get(h, "format"));
    const char *direction = json_string_value(json_object_get(h, "direction"));
    const char *clock = json_string_value(json_object_get(h, "clock"));
    json_t *version = json_object_get(h, "version"), *rate = json_object_get(h, "sample_rate_hz");
    json_t *spt = json_object_get(h, "samples_per_tti"), *first = json_object_get(h, "first_tti");
    if (!format || strcmp(format, CLOCK_FORMAT))
        fail(err, n, "header: format %s (expected \"%s\")", format ? format : "missing", CLOCK_FORMAT);
    else if (!json_is_integer(version) || json_integer_value(version) != CLOCK_VERSION)
        fail(err, n, "header: version not supported (supported: %d)", CLOCK_VERSION);
    else if (!direction || (strcmp(direction, "dl") && strcmp(direction, "ul")))
        fail(err, n, "header: direction %s not allowed (allowed: dl, ul)", direction ? direction : "missing");
    else if (!clock || strcmp(clock, "CLOCK_REALTIME"))
        fail(err, n, "header: clock %s not allowed (allowed: CLOCK_REALTIME)", clock ? clock : "missing");
    else if (!json_is_integer(rate) || json_integer_value(rate) < 1000 || json_integer_value(rate) % 1000)
        fail(err, n, "header: sample_rate_hz must be a positive whole number of kHz");
    else if (!json_is_integer(spt) || json_integer_value(spt) != json_integer_value(rate) / 1000)
        fail(err, n, "header: samples_per_tti must be sample_rate_hz / 1000 (%lld)",
             (long long)(json_integer_value(rate) / 1000));
    else if (!json_is_string(json_object_get(h, "run_id")))
        fail(err, n, "header: run_id must be a string (empty when unknown)");
    else if (!json_is_integer(first) || json_integer_value(first) < 0)
        fail(err, n, "header: first_tti must be an integer >= 0");
    else {
        k->sample_rate_hz = (int64_t)json_integer_value(rate);
        k->first_tti = (int64_t)json_integer_value(first);
        rc = 0;
    }
    json_decref(h);
    return rc;
}

int stack_clock_load(struct stack_clock *k, const char *path, char *err, size_t n)
{
    memset(k, 0, sizeof(*k));
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(err, n, "%s", strerror(errno));
    int rc = -1;
    char line[CLOCK_HEADER_MAX + 1];
    size_t got = fread(line, 1, CLOCK_HEADER_MAX, f);
    line[got] = 0;
    char *nl = memchr(line, '\n', got);
    struct stat st;
    if (!nl) {
        fail(err, n, "header: no line end within the first %d bytes (not a %s file)", CLOCK_HEADER_MAX, CLOCK_FORMAT);
        goto out;
    }
    *nl = 0;
    if (check_header(k, line, err, n) < 0 || fstat(fileno(f), &st) < 0)
        goto out;
    uint64_t body = (uint64_t)st.st_size - (uint64_t)(nl + 1 - line), n_rec = body / 8;
    if (body % 8) {
        fail(err, n, "record %llu is truncated (%llu of 8 bytes)", (unsigned long long)n_rec,
             (unsigned long long)(body % 8));
        goto out;
    }
    if (n_rec == 0 || n_rec > CLOCK_MAX_RECORDS) {
        fail(err, n, "%llu TTI records (allowed: 1..%llu)", (unsigned long long)n_rec, CLOCK_MAX_RECORDS);
        goto out;
    }
    k->t_ns = malloc(n_rec * sizeof(int64_t));
    if (!k->t_ns || fseek(f, nl + 1 - line, SEEK_SET) < 0 || fread(k->t_ns, 8, n_rec, f) != n_rec) {
        fail(err, n, "cannot read the records");
        goto out;
    }
    for (uint64_t i = 0; i < n_rec; i++) { /* little-endian on disk, as on every host the cell builds for */
        if (k->t_ns[i] <= 0) {
            fail(err, n, "record %llu (TTI %lld): time %lld ns is not a time since the epoch", (unsigned long long)i,
                 (long long)(k->first_tti + (int64_t)i), (long long)k->t_ns[i]);
            goto out;
        }
        if (i && k->t_ns[i] <= k->t_ns[i - 1]) {
            fail(err, n, "record %llu (TTI %lld): time %lld ns is not after record %llu's %lld ns (not monotonic)",
                 (unsigned long long)i, (long long)(k->first_tti + (int64_t)i), (long long)k->t_ns[i],
                 (unsigned long long)(i - 1), (long long)k->t_ns[i - 1]);
            goto out;
        }
    }
    k->n = n_rec;
    rc = 0;
out:
    fclose(f);
    if (rc < 0) {
        free(k->t_ns);
        k->t_ns = NULL;
    }
    return rc;
}

uint64_t tti_offset_ns(const struct cell *c, uint64_t tti)
{
    const struct stack_clock *k = &c->clock;
    if (!k->n)
        return tti * NS_PER_TTI;
    if (tti < k->n)
        return (uint64_t)(k->t_ns[tti] - k->t_ns[0]);
    return (uint64_t)(k->t_ns[k->n - 1] - k->t_ns[0]) + (tti - (k->n - 1)) * NS_PER_TTI;
}

/* The nominal LTE sample rate of the cell's bandwidth (FFT size x 15 kHz), for its own clock's header. */
static int64_t lte_sample_rate_hz(int n_prb)
{
    return n_prb <= 6 ? 1920000 : n_prb <= 15 ? 3840000 : n_prb <= 25 ? 7680000 : n_prb <= 50 ? 15360000
           : n_prb <= 75 ? 23040000 : 30720000;
}

/* A segment's header: its first record is the cell's clock_out_records-th (first_tti counts them). */
static void clock_out_header(struct cell *c)
{
    int64_t rate = c->clock.n ? c->clock.sample_rate_hz : lte_sample_rate_hz(c->p.n_prb);
    int n = fprintf(c->clock_out,
                    "{\"format\": \"%s\", \"version\": %d, \"direction\": \"dl\", \"sample_rate_hz\": %lld, "
                    "\"samples_per_tti\": %lld, \"clock\": \"CLOCK_REALTIME\", \"run_id\": \"\", \"first_tti\": %llu, "
                    "\"source\": \"cellab-cell\"}\n",
                    CLOCK_FORMAT, CLOCK_VERSION, (long long)rate, (long long)(rate / 1000),
                    (unsigned long long)c->clock_out_records);
    c->clock_out_bytes = n > 0 ? (uint64_t)n : 0;
}

void clock_out_open(struct cell *c)
{
    if (!c->p.clock_out_path)
        return;
    c->clock_out = log_create(c->p.clock_out_path, CLOCK_OUT_BUFFER_BYTES);
    if (!c->clock_out)
        die("--clock-out %s: %s", c->p.clock_out_path, strerror(errno));
    clock_out_header(c);
    fflush(c->clock_out);
}

/* TTI t runs now (now_mono: CLOCK_MONOTONIC): its time in the cell's own clock (the wall clock at the cell's
 * start plus monotonic time since, so a step of the wall clock cannot make it go back), and the recording's end. */
void clock_tti_ran(struct cell *c, uint64_t t, uint64_t now_mono)
{
    if (c->clock.n && t == c->clock.n) {
        char extra[160];
        snprintf(extra, sizeof(extra), "\"clock_ttis\": %llu, \"then\": \"real time\"",
                 (unsigned long long)c->clock.n);
        cell_event(c, "clock_end", -1, extra);
        c->clock.ended = 1;
    }
    if (!c->clock_out)
        return;
    int64_t wall = c->wall_start_ns + (int64_t)(now_mono - c->start_mono_ns);
    if (wall <= c->clock_out_last_ns)
        wall = c->clock_out_last_ns + 1;
    c->clock_out_last_ns = wall;
    if (log_full(c->p.log_max_bytes, c->clock_out_bytes, sizeof(wall))) {
        c->clock_out = log_rotate(c->clock_out, c->p.clock_out_path, CLOCK_OUT_BUFFER_BYTES);
        if (!c->clock_out)
            return;
        clock_out_header(c);
    }
    fwrite(&wall, sizeof(wall), 1, c->clock_out);
    c->clock_out_bytes += sizeof(wall);
    c->clock_out_records++;
}

/* The cell's own clock now: ns since the epoch (the wall clock at its start plus monotonic time since). */
int64_t cell_wall_ns(const struct cell *c)
{
    return c->wall_start_ns + (int64_t)(now_ns() - c->start_mono_ns);
}

void clock_start(struct cell *c, uint64_t start_mono)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    c->start_mono_ns = start_mono;
    c->wall_start_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

json_t *clock_json(const struct cell *c)
{
    return json_pack("{s:s,s:I,s:I,s:b,s:f}", "file", c->p.clock_path, "ttis", (json_int_t)c->clock.n, "first_tti",
                     (json_int_t)c->clock.first_tti, "ended", c->clock.ended, "recorded_s",
                     (double)(c->clock.t_ns[c->clock.n - 1] - c->clock.t_ns[0]) / 1e9);
}
