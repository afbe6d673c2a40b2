/* Mahimahi capacity traces: one line per 1500-byte delivery opportunity, a time in ms (grammar: trace.h). */
#include "trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

/* One line as getline read it (len bytes, NULs included): its number, or -1 when it breaks the grammar. */
static int parse_line(const char *line, size_t len, uint64_t *v)
{
    if (len && line[len - 1] == '\n')
        len--;
    if (len && line[len - 1] == '\r')
        len--;
    if (len == 0 || len > TRACE_MAX_DIGITS)
        return -1;
    uint64_t value = 0;
    for (size_t i = 0; i < len; i++) {
        if (line[i] < '0' || line[i] > '9')
            return -1;
        value = value * 10 + (uint64_t)(line[i] - '0');
    }
    *v = value;
    return 0;
}

int trace_load(struct trace *tr, const char *path, char *err, int err_len)
{
    memset(tr, 0, sizeof(*tr));
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, err_len, "%s: cannot open trace: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > TRACE_MAX_BYTES) {
        snprintf(err, err_len, "%s: not a regular file of at most %llu MiB", path, TRACE_MAX_BYTES >> 20);
        fclose(f);
        return -1;
    }
    size_t cap = 1 << 16, n = 0, line_cap = 0;
    uint64_t *ts = malloc(cap * sizeof(*ts));
    char *line = NULL;
    ssize_t len;
    uint64_t lineno = 0;
    int rc = -1;
    while (ts && (len = getline(&line, &line_cap, f)) > 0) {
        lineno++;
        uint64_t v;
        if (parse_line(line, (size_t)len, &v) < 0) {
            snprintf(err, err_len, "%s: line %llu: expected a non-negative integer (ms): 1 to %d ASCII digits "
                     "alone on the line", path, (unsigned long long)lineno, TRACE_MAX_DIGITS);
            goto out;
        }
        if (n > 0 && v < ts[n - 1]) {
            snprintf(err, err_len, "%s: line %llu: timestamps must be monotonically nondecreasing", path,
                     (unsigned long long)lineno);
            goto out;
        }
        if (v > TRACE_MAX_MS) {
            snprintf(err, err_len, "%s: line %llu: timestamp beyond %llu ms (a day)", path,
                     (unsigned long long)lineno, TRACE_MAX_MS);
            goto out;
        }
        if (n == cap) {
            uint64_t *bigger = realloc(ts, 2 * cap * sizeof(*ts));
            if (!bigger)
                goto out;
            ts = bigger;
            cap *= 2;
        }
        ts[n++] = v;
    }
    if (ts && ferror(f)) {
        snprintf(err, err_len, "%s: cannot read trace: %s", path, strerror(errno));
        goto out;
    }
    if (n == 0 || ts[n - 1] == 0) {
        snprintf(err, err_len, "%s: trace must last for a nonzero amount of time", path);
        goto out;
    }
    tr->period_ms = (uint32_t)ts[n - 1];
    tr->per_ms = calloc(tr->period_ms, sizeof(*tr->per_ms));
    if (!tr->per_ms)
        goto out;
    for (size_t i = 0; i < n; i++) {
        /* the opportunity at the last timestamp falls on ms 0 of the next repetition */
        uint16_t *slot = &tr->per_ms[ts[i] % tr->period_ms];
        if (*slot < UINT16_MAX)
            (*slot)++;
    }
    tr->lines = n;
    rc = 0;
out:
    if (rc != 0 && err[0] == '\0')
        snprintf(err, err_len, "%s: out of memory", path);
    free(ts);
    free(line);
    fclose(f);
    return rc;
}

void trace_free(struct trace *tr)
{
    free(tr->per_ms);
    tr->per_ms = NULL;
}
