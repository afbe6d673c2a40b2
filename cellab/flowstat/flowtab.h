/* Connections by 5-tuple: an open-addressing hash of indexes into a growing array of flows. */
#ifndef FLOWSTAT_FLOWTAB_H
#define FLOWSTAT_FLOWTAB_H

#include <stddef.h>
#include <stdint.h>

#include "flow.h"

struct flowtab {
    struct flow *flows;   /* in order of first packet */
    size_t n, cap;
    int32_t *slots;       /* -1 empty, else an index into flows (the newest use of the 5-tuple) */
    size_t n_slots, used;
    size_t last;          /* the previous packet's flow: consecutive packets mostly share one */
};

void flowtab_init(struct flowtab *t);
void flowtab_free(struct flowtab *t);
/* The flow s belongs to (created when new or when a SYN reopens a closed 5-tuple); *dir its side. */
struct flow *flowtab_find(struct flowtab *t, const struct segment *s, int *dir);

#endif
