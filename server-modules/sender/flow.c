/* Serving one flow of docs/flow-protocol.md, with TCP_INFO samples at a fixed interval. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <linux/tcp.h>

#include "flow.h"
#include "proto.h"

#define REQUEST_TIMEOUT_S 5

uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

struct flow {
	struct sender_ctx *ctx;
	struct flow_arg *arg;
	struct flow_request req;
	uint64_t id;
	char cc[FLOW_CC_NAME_BYTES + 1];
	uint8_t *buf;
	size_t chunk_len, chunk_pos;  /* current chunk and how much of it is sent */
	uint64_t sent_bytes;
	uint64_t last_stamp_ns;       /* stamp of the block that straddles a chunk boundary */
	uint64_t start_mono_ns, start_real_ns, fin_mono_ns, end_mono_ns;
	FILE *samples;
	/* summary accumulators */
	uint64_t n_samples, rtt_sum_us;
	uint32_t rtt_min_us, rtt_max_us;
	struct tcp_info last;
	int have_last;
	const char *end_reason;
};

static int read_full(int fd, uint8_t *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = recv(fd, buf + got, n - got, 0);

		if (r == 0)
			return -1;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		got += (size_t)r;
	}
	return 0;
}

static int write_full(int fd, const uint8_t *buf, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t w = send(fd, buf + done, n - done, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		done += (size_t)w;
	}
	return 0;
}

/* Payload for stream offsets [off, off+len): zero, with an 8-byte LE CLOCK_REALTIME stamp at the
 * start of every 1024-byte block; a stamp split across chunks keeps its first value. */
static void fill_chunk(struct flow *f, uint64_t off, size_t len)
{
	uint64_t end = off + len, now = realtime_ns();

	memset(f->buf, 0, len);
	for (uint64_t o = off - off % FLOW_BLOCK_BYTES; o < end; o += FLOW_BLOCK_BYTES) {
		uint64_t st = o < off ? f->last_stamp_ns : now;

		if (o >= off)
			f->last_stamp_ns = st;
		for (int k = 0; k < 8; k++) {
			uint64_t p = o + (uint64_t)k;

			if (p >= off && p < end)
				f->buf[p - off] = (uint8_t)(st >> (8 * k));
		}
	}
}

static void sample(struct flow *f, int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	uint64_t now = monotonic_ns();

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len))
		return;
	f->last = ti;
	f->have_last = 1;
	if (ti.tcpi_rtt) {
		f->n_samples++;
		f->rtt_sum_us += ti.tcpi_rtt;
		if (!f->rtt_min_us || ti.tcpi_rtt < f->rtt_min_us)
			f->rtt_min_us = ti.tcpi_rtt;
		if (ti.tcpi_rtt > f->rtt_max_us)
			f->rtt_max_us = ti.tcpi_rtt;
	}
	if (!f->samples)
		return;
	fprintf(f->samples,
		"{\"flow_id\": %llu, \"t_ns\": %llu, \"elapsed_ms\": %.3f, \"rtt_us\": %u, \"rttvar_us\": %u, "
		"\"min_rtt_us\": %u, \"cwnd_pkts\": %u, \"ssthresh_pkts\": %u, \"ca_state\": %u, "
		"\"delivery_rate_bps\": %llu, \"pacing_rate_bps\": %llu, \"bytes_sent\": %llu, \"bytes_acked\": %llu, "
		"\"unacked_pkts\": %u, \"retrans_pkts\": %u, \"total_retrans\": %u, \"bytes_retrans\": %llu, "
		"\"rwnd_limited_us\": %llu, \"sndbuf_limited_us\": %llu, \"busy_us\": %llu, \"notsent_bytes\": %u, "
		"\"snd_mss\": %u}\n",
		(unsigned long long)f->id, (unsigned long long)realtime_ns(),
		(double)(now - f->start_mono_ns) / 1e6, ti.tcpi_rtt, ti.tcpi_rttvar, ti.tcpi_min_rtt,
		ti.tcpi_snd_cwnd, ti.tcpi_snd_ssthresh, ti.tcpi_ca_state,
		(unsigned long long)ti.tcpi_delivery_rate * 8, (unsigned long long)ti.tcpi_pacing_rate * 8,
		(unsigned long long)ti.tcpi_bytes_sent, (unsigned long long)ti.tcpi_bytes_acked, ti.tcpi_unacked,
		ti.tcpi_retrans, ti.tcpi_total_retrans, (unsigned long long)ti.tcpi_bytes_retrans,
		(unsigned long long)ti.tcpi_rwnd_limited, (unsigned long long)ti.tcpi_sndbuf_limited,
		(unsigned long long)ti.tcpi_busy_time, ti.tcpi_notsent_bytes, ti.tcpi_snd_mss);
}

static void write_summary(struct flow *f, int status)
{
	struct sender_ctx *c = f->ctx;
	uint64_t end = f->end_mono_ns ? f->end_mono_ns : monotonic_ns();
	double dur_s = f->start_mono_ns ? (double)(end - f->start_mono_ns) / 1e9 : 0;
	const struct tcp_info *t = &f->last;

	pthread_mutex_lock(&c->summary_lock);
	if (!c->summary) {  /* the sender is shutting down */
		pthread_mutex_unlock(&c->summary_lock);
		return;
	}
	fprintf(c->summary,
		"{\"flow_id\": %llu, \"flow_tag\": %llu, \"peer\": \"%s\", \"status\": %d, \"cc\": \"%s\", "
		"\"mode\": %u, \"amount\": %llu, \"chunk_bytes\": %u, \"start_ns\": %llu, \"duration_ms\": %.3f, "
		"\"fin_ms\": %.3f, \"bytes_sent\": %llu, \"goodput_bps\": %.0f, \"end\": \"%s\", \"samples\": %llu, "
		"\"avg_rtt_us\": %.1f, \"min_rtt_us\": %u, \"max_rtt_us\": %u, \"total_retrans\": %u, "
		"\"bytes_retrans\": %llu, \"rwnd_limited_us\": %llu, \"sndbuf_limited_us\": %llu, \"busy_us\": %llu}\n",
		(unsigned long long)f->id, (unsigned long long)f->req.flow_tag, f->arg->peer, status, f->cc,
		f->req.mode, (unsigned long long)f->req.amount, f->req.chunk_bytes,
		(unsigned long long)f->start_real_ns, dur_s * 1e3,
		f->fin_mono_ns ? (double)(f->fin_mono_ns - f->start_mono_ns) / 1e6 : 0.0,
		(unsigned long long)f->sent_bytes, dur_s > 0 ? (double)f->sent_bytes * 8 / dur_s : 0.0,
		f->end_reason ? f->end_reason : "", (unsigned long long)f->n_samples,
		f->n_samples ? (double)f->rtt_sum_us / (double)f->n_samples : 0.0, f->rtt_min_us, f->rtt_max_us,
		t->tcpi_total_retrans, (unsigned long long)t->tcpi_bytes_retrans,
		(unsigned long long)t->tcpi_rwnd_limited, (unsigned long long)t->tcpi_sndbuf_limited,
		(unsigned long long)t->tcpi_busy_time);
	fflush(c->summary);
	pthread_mutex_unlock(&c->summary_lock);
}

static int sending_done(const struct flow *f, uint64_t now)
{
	if (f->req.mode == MODE_BYTES)
		return f->sent_bytes >= f->req.amount;
	if (f->req.mode == MODE_TIME_MS)
		return now >= f->start_mono_ns + f->req.amount * 1000000ULL && f->chunk_pos == f->chunk_len;
	return 0;
}

/* Send what the socket takes now: at most one chunk per call, so samples stay on time. */
static int send_some(struct flow *f, int fd)
{
	ssize_t w;

	if (f->chunk_pos == f->chunk_len) {
		uint64_t left = f->req.mode == MODE_BYTES ? f->req.amount - f->sent_bytes : f->req.chunk_bytes;

		f->chunk_len = left < f->req.chunk_bytes ? (size_t)left : f->req.chunk_bytes;
		f->chunk_pos = 0;
		fill_chunk(f, f->sent_bytes, f->chunk_len);
	}
	w = send(fd, f->buf + f->chunk_pos, f->chunk_len - f->chunk_pos, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (w < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
	f->chunk_pos += (size_t)w;
	f->sent_bytes += (uint64_t)w;
	return 0;
}

static void stream(struct flow *f, int fd)
{
	struct sender_ctx *c = f->ctx;
	uint64_t period = (uint64_t)(c->sample_ms ? c->sample_ms : 100) * 1000000ULL;
	uint64_t next_sample = f->start_mono_ns, linger_end = 0;
	int sending = 1;
	uint8_t sink[4096];

	for (;;) {
		uint64_t now = monotonic_ns();
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int timeout_ms;

		if (now >= next_sample) {
			if (c->sample_ms)
				sample(f, fd);
			next_sample += period;
			if (next_sample < now)
				next_sample = now + period;
		}
		if (sending && sending_done(f, now)) {
			shutdown(fd, SHUT_WR);
			sending = 0;
			f->fin_mono_ns = now;
			linger_end = now + (uint64_t)c->linger_s * 1000000000ULL;
		}
		if (!sending && now >= linger_end) {
			f->end_reason = "linger_timeout";
			break;
		}
		if (atomic_load(&c->stopping)) {
			f->end_reason = "sender_stopped";
			break;
		}
		if (sending)
			p.events |= POLLOUT;
		timeout_ms = (int)((next_sample > now ? next_sample - now : 0) / 1000000ULL) + 1;
		if (f->req.mode == MODE_TIME_MS && sending) {
			uint64_t end = f->start_mono_ns + f->req.amount * 1000000ULL;
			int to_end = end > now ? (int)((end - now) / 1000000ULL) + 1 : 0;

			if (to_end < timeout_ms)
				timeout_ms = to_end;
		}
		if (poll(&p, 1, timeout_ms) < 0) {
			if (errno == EINTR)
				continue;
			f->end_reason = "poll_error";
			break;
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t r = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);

			if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
				f->end_reason = sending && f->req.mode != MODE_UNTIL_CLOSE ? "receiver_closed" : "done";
				break;
			}
		}
		if (sending && (p.revents & POLLOUT) &&
		    !(f->req.mode == MODE_TIME_MS && monotonic_ns() >= f->start_mono_ns + f->req.amount * 1000000ULL &&
		      f->chunk_pos == f->chunk_len)) {
			if (send_some(f, fd)) {
				f->end_reason = "send_error";
				break;
			}
		}
	}
	f->end_mono_ns = monotonic_ns();
	sample(f, fd);  /* the final state, also into the summary */
}

static void answer(int fd, uint16_t status, uint64_t id)
{
	uint8_t resp[FLOW_RESP_BYTES];

	flow_response_encode(resp, status, id);
	write_full(fd, resp, sizeof(resp));
}

void *flow_serve(void *varg)
{
	struct flow_arg *arg = varg;
	struct sender_ctx *c = arg->ctx;
	struct flow f = { .ctx = c, .arg = arg };
	uint8_t reqbuf[FLOW_REQ_BYTES];
	struct timeval tv = { .tv_sec = REQUEST_TIMEOUT_S };
	const char *why, *cc;
	socklen_t cclen = sizeof(f.cc);
	char path[4096];
	int fd = arg->fd;

	f.id = atomic_fetch_add(&c->next_flow_id, 1);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (read_full(fd, reqbuf, sizeof(reqbuf))) {
		f.end_reason = "no_request";
		write_summary(&f, STATUS_BAD_REQUEST);
		goto out;
	}
	why = flow_request_decode(reqbuf, &f.req);
	if (why) {
		answer(fd, STATUS_BAD_REQUEST, f.id);
		f.end_reason = why;
		write_summary(&f, STATUS_BAD_REQUEST);
		goto out;
	}
	if (atomic_load(&c->active) > c->max_flows) {
		answer(fd, STATUS_BUSY, f.id);
		f.end_reason = "busy";
		write_summary(&f, STATUS_BUSY);
		goto out;
	}
	cc = f.req.cc_name[0] ? f.req.cc_name : c->default_cc;
	if (cc && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc))) {
		snprintf(f.cc, sizeof(f.cc), "%s", cc);
		answer(fd, STATUS_UNKNOWN_CC, f.id);
		f.end_reason = "unknown_cc";
		write_summary(&f, STATUS_UNKNOWN_CC);
		goto out;
	}
	memset(f.cc, 0, sizeof(f.cc));
	getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, f.cc, &cclen);
	f.cc[FLOW_CC_NAME_BYTES] = 0;
	f.buf = malloc(f.req.chunk_bytes);
	if (!f.buf) {
		answer(fd, STATUS_BUSY, f.id);
		f.end_reason = "out_of_memory";
		write_summary(&f, STATUS_BUSY);
		goto out;
	}
	if (c->sample_ms) {
		snprintf(path, sizeof(path), "%s/flow-%llu.jsonl", c->log_dir, (unsigned long long)f.id);
		f.samples = fopen(path, "w");
	}
	f.start_real_ns = realtime_ns();
	f.start_mono_ns = monotonic_ns();
	answer(fd, STATUS_OK, f.id);
	stream(&f, fd);
	if (f.samples)  /* complete on disk before the summary announces the flow as finished */
		fclose(f.samples);
	write_summary(&f, STATUS_OK);
	free(f.buf);
out:
	close(fd);
	free(arg);
	atomic_fetch_sub(&c->active, 1);
	return NULL;
}
