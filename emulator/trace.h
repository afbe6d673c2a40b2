/* Mahimahi capacity traces: one line per 1500-byte delivery opportunity, a time in ms. */
#ifndef CELLAB_TRACE_H
#define CELLAB_TRACE_H

#include <stdint.h>

#define TRACE_OPPORTUNITY_BYTES 1500
/* The one grammar cellab's validator (cellab/campaign/traces.py) reads too: every line 1..TRACE_MAX_DIGITS
 * ASCII digits and its newline ("\r\n" too; the last newline may be missing), nothing else (no blank line,
 * blank, sign, '_' or non-ASCII digit); non-decreasing, at most TRACE_MAX_MS, the last above 0; the file at
 * most TRACE_MAX_BYTES. */
#define TRACE_MAX_MS 86400000ULL /* a day */
#define TRACE_MAX_DIGITS 12
#define TRACE_MAX_BYTES (256ULL << 20)

struct trace {
    uint32_t period_ms;  /* the last timestamp: the trace repeats with this period */
    uint16_t *per_ms;    /* opportunities in each ms of [0, period_ms) */
    uint64_t lines;
};

/* Load a trace; on error returns -1 and writes a message naming the file and rule into err. */
int trace_load(struct trace *tr, const char *path, char *err, int err_len);
/* Opportunities in ms t of the (wrapped) trace. */
static inline uint32_t trace_opportunities(const struct trace *tr, uint64_t t_ms)
{
    return tr->per_ms[t_ms % tr->period_ms];
}
void trace_free(struct trace *tr);

#endif
