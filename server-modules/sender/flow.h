/* One flow: read the request, pick the congestion control, stream the payload, sample TCP_INFO. */
#ifndef CELLAB_SEND_FLOW_H
#define CELLAB_SEND_FLOW_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

struct sender_ctx {
	const char *log_dir;
	const char *default_cc;    /* NULL: the namespace default */
	unsigned sample_ms;        /* 0: no samples, only the summary */
	unsigned max_flows;
	unsigned linger_s;         /* after the last byte: wait this long for the receiver to close */
	atomic_uint active;
	atomic_ullong next_flow_id;
	atomic_int stopping;
	pthread_mutex_t summary_lock;
	FILE *summary;             /* flows.jsonl: one line per flow */
};

struct flow_arg {
	struct sender_ctx *ctx;
	int fd;
	char peer[64];
	uint64_t accept_ns;
};

/* Thread entry: serves one connection, then frees arg and closes fd. */
void *flow_serve(void *arg);

uint64_t realtime_ns(void);
uint64_t monotonic_ns(void);

#endif
