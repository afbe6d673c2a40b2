#include "flowtab.h"

#include <stdlib.h>
#include <string.h>

#define FLOWTAB_FIRST_SLOTS 1024

void flowtab_init(struct flowtab *t)
{
    memset(t, 0, sizeof(*t));
    t->n_slots = FLOWTAB_FIRST_SLOTS;
    t->slots = xrealloc(NULL, t->n_slots * sizeof(*t->slots));
    memset(t->slots, 0xff, t->n_slots * sizeof(*t->slots));
}

void flowtab_free(struct flowtab *t)
{
    for (size_t i = 0; i < t->n; i++)
        flow_free(&t->flows[i]);
    free(t->flows);
    free(t->slots);
    memset(t, 0, sizeof(*t));
}

/* Both directions map to one key: the smaller (address, port) endpoint goes first. */
static int make_key(const struct segment *s, struct flow_key *key)
{
    int cmp = memcmp(s->src, s->dst, sizeof(s->src));
    int src_first = cmp < 0 || (cmp == 0 && s->sport <= s->dport);
    memset(key, 0, sizeof(*key));
    key->family = s->family;
    memcpy(key->addr[src_first ? 0 : 1], s->src, 16);
    memcpy(key->addr[src_first ? 1 : 0], s->dst, 16);
    key->port[src_first ? 0 : 1] = s->sport;
    key->port[src_first ? 1 : 0] = s->dport;
    return src_first ? 0 : 1;
}

static uint64_t key_hash(const struct flow_key *key)
{
    const uint8_t *p = (const uint8_t *)key;
    uint64_t h = 1469598103934665603ULL;   /* FNV-1a */
    for (size_t i = 0; i < sizeof(*key); i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h ^ (h >> 29);
}

static size_t slot_of(const struct flowtab *t, const struct flow_key *key)
{
    size_t mask = t->n_slots - 1;
    size_t i = key_hash(key) & mask;
    while (t->slots[i] >= 0 && memcmp(&t->flows[t->slots[i]].key, key, sizeof(*key)) != 0)
        i = (i + 1) & mask;
    return i;
}

static void grow_slots(struct flowtab *t)
{
    int32_t *old = t->slots;
    size_t old_n = t->n_slots;
    t->n_slots *= 2;
    t->slots = xrealloc(NULL, t->n_slots * sizeof(*t->slots));
    memset(t->slots, 0xff, t->n_slots * sizeof(*t->slots));
    for (size_t i = 0; i < old_n; i++)
        if (old[i] >= 0)
            t->slots[slot_of(t, &t->flows[old[i]].key)] = old[i];
    free(old);
}

static int32_t add_flow(struct flowtab *t, const struct flow_key *key, int dir, int64_t t_ns)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        t->flows = xrealloc(t->flows, t->cap * sizeof(*t->flows));
    }
    flow_init(&t->flows[t->n], key, dir, t_ns);
    return (int32_t)t->n++;
}

struct flow *flowtab_find(struct flowtab *t, const struct segment *s, int *dir)
{
    struct flow_key key;
    *dir = make_key(s, &key);
    if (t->n > 0 && memcmp(&t->flows[t->last].key, &key, sizeof(key)) == 0
        && !flow_is_reused_by(&t->flows[t->last], s))
        return &t->flows[t->last];
    if (2 * (t->used + 1) > t->n_slots)
        grow_slots(t);
    size_t slot = slot_of(t, &key);
    if (t->slots[slot] < 0)
        t->used++;
    if (t->slots[slot] < 0 || flow_is_reused_by(&t->flows[t->slots[slot]], s))
        t->slots[slot] = add_flow(t, &key, *dir, s->t_ns);
    t->last = (size_t)t->slots[slot];
    return &t->flows[t->last];
}
