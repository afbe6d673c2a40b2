/* stats: a module's counters (host-wide), or with --flows c2tcp's record of every flow (its namespace, its
 * Target and where that came from), --netns keeping one namespace's flows. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "netns.h"
#include "report.h"

#define FLOW_LOG_MAX 4096   /* bpf/c2tcp.bpf.c C2TCP_FLOW_LOG */
#define NAME_CACHE 64

/* bpf/c2tcp.bpf.c struct c2tcp_flow_key / struct c2tcp_flow */
struct flow_key {
	uint64_t netns_cookie;
	uint8_t daddr[16];
	uint16_t sport, dport;
	uint32_t pad;
};

struct flow_val {
	uint64_t start_ns, end_ns;
	uint32_t netns_inum, target_us, target_source, alpha_fp, min_rtt_us, last_avg_rtt_us, bad_events,
		tuner_updates;
};

struct flow {
	struct flow_key k;
	struct flow_val v;
};

static const char *const target_sources[] = { "host", "host_dst", "netns", "netns_dst" };

static int by_start(const void *a, const void *b)
{
	const struct flow *x = a, *y = b;

	return x->v.start_ns < y->v.start_ns ? -1 : x->v.start_ns > y->v.start_ns;
}

/* The namespace's name, resolved once per cookie ("" when it is gone). */
static const char *name_of(uint64_t cookie, uint32_t inum)
{
	static struct { uint64_t cookie; char name[64]; } cache[NAME_CACHE];
	static int used;

	for (int i = 0; i < used; i++)
		if (cache[i].cookie == cookie)
			return cache[i].name;
	if (used == NAME_CACHE)
		used = 0;
	cache[used].cookie = cookie;
	if (netns_name_of(cookie, inum, cache[used].name, sizeof(cache[used].name)))
		cache[used].name[0] = 0;
	return cache[used++].name;
}

static void print_addr(const uint8_t a[16])
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	char text[INET6_ADDRSTRLEN];

	if (!memcmp(a, v4mapped, 12))
		inet_ntop(AF_INET, a + 12, text, sizeof(text));
	else
		inet_ntop(AF_INET6, a, text, sizeof(text));
	printf("\"%s\"", text);
}

static int print_flows(const struct ctx *c, const struct module_desc *m)
{
	static struct flow flows[FLOW_LOG_MAX];
	struct flow_key prev, next;
	uint64_t only = 0;
	uint32_t inum;
	struct timespec now;
	int fd = open_pinned(c, m->name, "flow_log"), n = 0, have = 0, shown = 0;

	if (fd < 0)
		return fail(EXIT_INPUT, "%s: not loaded", m->name);
	if (c->netns && netns_identity(c->netns, &only, &inum)) {
		close(fd);
		return fail(EXIT_INPUT, "netns %s: no such namespace under /run/netns", c->netns);
	}
	while (n < FLOW_LOG_MAX && !bpf_map_get_next_key(fd, have ? &prev : NULL, &next)) {
		prev = next;
		have = 1;
		if (bpf_map_lookup_elem(fd, &next, &flows[n].v) || (only && next.netns_cookie != only))
			continue;
		flows[n++].k = next;
	}
	close(fd);
	qsort(flows, n, sizeof(flows[0]), by_start);
	clock_gettime(CLOCK_MONOTONIC, &now);
	printf("{\"module\": \"%s\", \"now_ns\": %llu, \"flows\": [", m->name,
	       (unsigned long long)now.tv_sec * 1000000000ULL + now.tv_nsec);
	for (int i = 0; i < n; i++) {
		const struct flow *f = &flows[i];
		const char *name = name_of(f->k.netns_cookie, f->v.netns_inum);
		const char *source = f->v.target_source < 4 ? target_sources[f->v.target_source] : "?";

		printf("%s\n  {\"netns\": ", shown++ ? "," : "");
		if (*name)
			json_name(name);
		else
			printf("null");
		printf(", \"netns_cookie\": %llu, \"netns_inum\": %u, \"dst\": ", (unsigned long long)f->k.netns_cookie,
		       f->v.netns_inum);
		print_addr(f->k.daddr);
		printf(", \"sport\": %u, \"dport\": %u, \"target_ms\": %.10g, \"target_source\": \"%s\", \"alpha\": %.4f, "
		       "\"min_rtt_us\": %u, \"last_avg_rtt_us\": %u, \"bad_events\": %u, \"tuner_updates\": %u, "
		       "\"start_ns\": %llu, \"end_ns\": %llu}",
		       f->k.sport, f->k.dport, f->v.target_us / 1000.0, source, f->v.alpha_fp / 1024.0,
		       f->v.min_rtt_us == ~0u ? 0 : f->v.min_rtt_us, f->v.last_avg_rtt_us, f->v.bad_events,
		       f->v.tuner_updates, (unsigned long long)f->v.start_ns, (unsigned long long)f->v.end_ns);
	}
	printf("\n]}\n");
	return 0;
}

int cmd_stats(const struct ctx *c, const struct module_desc *m)
{
	int fd;

	if (c->flows) {
		if (!m->has_flow_log)
			return fail(EXIT_INPUT, "%s: keeps no per-flow records (--flows: c2tcp)", m->name);
		return print_flows(c, m);
	}
	if (c->netns)
		return fail(EXIT_INPUT, "%s: the counters are host-wide; one namespace's flows: stats %s --flows --netns NS",
			    m->name, m->name);
	fd = open_pinned(c, m->name, "stats");
	if (fd < 0)
		return fail(EXIT_INPUT, "%s: not loaded", m->name);
	printf("{\"module\": \"%s\"", m->name);
	for (uint32_t i = 0; i < m->n_counters; i++) {
		uint64_t v = 0;

		bpf_map_lookup_elem(fd, &i, &v);
		printf(", \"%s\": %llu", m->counters[i], (unsigned long long)v);
	}
	printf("}\n");
	close(fd);
	return 0;
}
