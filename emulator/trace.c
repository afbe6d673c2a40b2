/* Mahimahi capacity traces: one line per 1500-byte delivery opportunity, a time in ms. */
#include "trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int trace_load(struct trace *tr, const char *path, char *err, int err_len)
{
    memset(tr, 0, sizeof(*tr));
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, err_len, "%s: cannot open trace: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    uint64_t *ts = malloc(cap * sizeof(*ts));
    char line[128];
    uint64_t lineno = 0;
    int rc = -1;
    while (ts && fgets(line, sizeof(line), f)) {
        lineno++;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(line, &end, 10);
        while (*end == '\n' || *end == '\r' || *end == ' ')
            end++;
        if (end == line || *end != '\0' || errno || line[0] == '-') {
            snprintf(err, err_len, "%s: line %llu: expected a non-negative integer (ms)", path,
                     (unsigned long long)lineno);
            goto out;
        }
        if (n > 0 && v < ts[n - 1]) {
            snprintf(err, err_len, "%s: line %llu: timestamps must be monotonically nondecreasing", path,
                     (unsigned long long)lineno);
            goto out;
        }
        if (v > 100000000ULL) {
            snprintf(err, err_len, "%s: line %llu: timestamp beyond 1e8 ms", path, (unsigned long long)lineno);
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
    fclose(f);
    return rc;
}

void trace_free(struct trace *tr)
{
    free(tr->per_ms);
    tr->per_ms = NULL;
}
