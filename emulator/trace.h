/* Mahimahi capacity traces: one line per 1500-byte delivery opportunity, a time in ms. */
#ifndef CELLAB_TRACE_H
#define CELLAB_TRACE_H

#include <stdint.h>

#define TRACE_OPPORTUNITY_BYTES 1500

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
