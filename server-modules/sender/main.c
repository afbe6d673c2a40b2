/* cellab-send: the traffic sender of docs/flow-protocol.md.
 *
 *   cellab-send serve [--bind ADDR] [--port N] [--cc NAME] [--log-dir DIR] [--sample-ms MS]
 *                     [--max-flows N] [--linger-s S]
 *
 * Serves N-byte, timed and until-close flows, each on its own connection (sequential or
 * concurrent, as the receivers open them), with the congestion control the request names (or
 * --cc). Writes DIR/flows.jsonl (one summary per flow) and DIR/flow-<id>.jsonl (TCP_INFO every
 * --sample-ms). Without --log-dir, DIR is a fresh $TMPDIR/cellab-send-XXXXXX (never the working
 * directory: callers that forgot the option used to leave flows.jsonl in a source checkout).
 * Prints one JSON line {"event": "listening", "log_dir": DIR, ...} when ready; SIGTERM/SIGINT stop it.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <linux/tcp.h>

#include "flow.h"
#include "proto.h"

#define STOP_GRACE_S 5
#define DEFAULT_TMPDIR "/tmp"

static int usage(void)
{
	fprintf(stderr,
		"usage: cellab-send serve [--bind ADDR] [--port N (default %d)] [--cc NAME]\n"
		"                         [--log-dir DIR (default: a new $TMPDIR/cellab-send-XXXXXX)]\n"
		"                         [--sample-ms MS (default 10, 0 = none)] [--max-flows N (default 64)]\n"
		"                         [--linger-s S (default 30)]\n",
		FLOW_DEFAULT_PORT);
	return 2;
}

static int parse_uint(const char *opt, const char *text, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(text, &end, 10);
	if (errno || end == text || *end || v > max || text[0] == '-') {
		fprintf(stderr, "cellab-send: %s: %s is not an integer in 0..%lu\n", opt, text, max);
		return -1;
	}
	*out = v;
	return 0;
}

/* The log folder when none is given: a new one under $TMPDIR, so nothing lands in the CWD. */
static const char *default_log_dir(char *buf, size_t n)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(buf, n, "%s/cellab-send-XXXXXX", tmp && *tmp ? tmp : DEFAULT_TMPDIR);
	return mkdtemp(buf);
}

static int open_listener(const char *bind_addr, unsigned port, unsigned *bound_port)
{
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port) };
	struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct sockaddr_storage got;
	socklen_t glen = sizeof(got);
	int one = 1, fd, v6 = 0;

	if (bind_addr && inet_pton(AF_INET, bind_addr, &a4.sin_addr) != 1) {
		if (inet_pton(AF_INET6, bind_addr, &a6.sin6_addr) != 1) {
			fprintf(stderr, "cellab-send: --bind: %s is not an IPv4 or IPv6 address\n", bind_addr);
			return -1;
		}
		v6 = 1;
	}
	fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if ((v6 ? bind(fd, (struct sockaddr *)&a6, sizeof(a6)) : bind(fd, (struct sockaddr *)&a4, sizeof(a4))) ||
	    listen(fd, 128)) {
		fprintf(stderr, "cellab-send: cannot listen on %s port %u: %s\n", bind_addr ? bind_addr : "*", port,
			strerror(errno));
		close(fd);
		return -1;
	}
	getsockname(fd, (struct sockaddr *)&got, &glen);
	*bound_port = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
						      : ((struct sockaddr_in *)&got)->sin_port);
	return fd;
}

static void peer_text(const struct sockaddr_storage *ss, char *out, size_t n)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;

		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		port = ntohs(a->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)ss;

		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		port = ntohs(a->sin6_port);
	}
	snprintf(out, n, "%s:%u", host, port);
}

int main(int argc, char **argv)
{
	struct sender_ctx ctx = { .log_dir = NULL, .sample_ms = 10, .max_flows = 64, .linger_s = 30, .next_flow_id = 1 };
	const char *bind_addr = NULL;
	unsigned long port = FLOW_DEFAULT_PORT, v;
	unsigned bound_port = 0;
	char path[PATH_MAX], tmp_dir[PATH_MAX];
	sigset_t mask;
	int lfd, sfd;

	if (argc < 2 || strcmp(argv[1], "serve"))
		return usage();
	for (int i = 2; i < argc; i++) {
		const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!val)
			return usage();
		i++;
		if (!strcmp(opt, "--bind"))
			bind_addr = val;
		else if (!strcmp(opt, "--port")) {
			if (parse_uint(opt, val, 65535, &port))
				return 2;
		} else if (!strcmp(opt, "--cc")) {
			if (strlen(val) >= FLOW_CC_NAME_BYTES) {
				fprintf(stderr, "cellab-send: --cc: %s is longer than 15 characters\n", val);
				return 2;
			}
			ctx.default_cc = val;
		} else if (!strcmp(opt, "--log-dir"))
			ctx.log_dir = val;
		else if (!strcmp(opt, "--sample-ms")) {
			if (parse_uint(opt, val, 60000, &v))
				return 2;
			ctx.sample_ms = (unsigned)v;
		} else if (!strcmp(opt, "--max-flows")) {
			if (parse_uint(opt, val, 100000, &v) || v == 0)
				return 2;
			ctx.max_flows = (unsigned)v;
		} else if (!strcmp(opt, "--linger-s")) {
			if (parse_uint(opt, val, 3600, &v))
				return 2;
			ctx.linger_s = (unsigned)v;
		} else
			return usage();
	}
	if (bind_addr) {
		unsigned char probe_addr[sizeof(struct in6_addr)];

		if (inet_pton(AF_INET, bind_addr, probe_addr) != 1 && inet_pton(AF_INET6, bind_addr, probe_addr) != 1) {
			fprintf(stderr, "cellab-send: --bind: %s is not an IPv4 or IPv6 address\n", bind_addr);
			return 2;
		}
	}
	/* A default CC that the kernel does not know is an input error, found before serving. */
	if (ctx.default_cc) {
		int probe = socket(AF_INET, SOCK_STREAM, 0);

		if (probe >= 0 && setsockopt(probe, IPPROTO_TCP, TCP_CONGESTION, ctx.default_cc, (socklen_t)strlen(ctx.default_cc))) {
			fprintf(stderr, "cellab-send: --cc: %s is not available (see net.ipv4.tcp_available_congestion_control)\n",
				ctx.default_cc);
			close(probe);
			return 2;
		}
		if (probe >= 0)
			close(probe);
	}
	if (!ctx.log_dir && !(ctx.log_dir = default_log_dir(tmp_dir, sizeof(tmp_dir)))) {
		fprintf(stderr, "cellab-send: cannot create a log folder in %s: %s\n", tmp_dir, strerror(errno));
		return 1;
	}
	if (mkdir(ctx.log_dir, 0755) && errno != EEXIST) {
		fprintf(stderr, "cellab-send: --log-dir: cannot create %s: %s\n", ctx.log_dir, strerror(errno));
		return 2;
	}
	snprintf(path, sizeof(path), "%s/flows.jsonl", ctx.log_dir);
	ctx.summary = fopen(path, "a");
	if (!ctx.summary) {
		fprintf(stderr, "cellab-send: cannot open %s: %s\n", path, strerror(errno));
		return 1;
	}
	pthread_mutex_init(&ctx.summary_lock, NULL);

	/* Signals arrive on a signalfd in the accept loop; flow threads inherit the blocked mask. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	lfd = open_listener(bind_addr, (unsigned)port, &bound_port);
	if (lfd < 0 || sfd < 0)
		return 1;
	printf("{\"event\": \"listening\", \"port\": %u, \"bind\": \"%s\", \"log_dir\": \"%s\", \"pid\": %d}\n", bound_port,
	       bind_addr ? bind_addr : "0.0.0.0", ctx.log_dir, (int)getpid());
	fflush(stdout);

	for (;;) {
		struct pollfd p[2] = { { .fd = lfd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		struct flow_arg *arg;
		pthread_t th;
		pthread_attr_t attr;
		int cfd;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		cfd = accept4(lfd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
		if (cfd < 0)
			continue;
		arg = calloc(1, sizeof(*arg));
		if (!arg) {
			close(cfd);
			continue;
		}
		arg->ctx = &ctx;
		arg->fd = cfd;
		arg->accept_ns = realtime_ns();
		peer_text(&peer, arg->peer, sizeof(arg->peer));
		atomic_fetch_add(&ctx.active, 1);
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&th, &attr, flow_serve, arg)) {
			atomic_fetch_sub(&ctx.active, 1);
			close(cfd);
			free(arg);
		}
		pthread_attr_destroy(&attr);
	}
	/* Stop: no new flows; running flows end at their next loop turn and write their summaries. */
	atomic_store(&ctx.stopping, 1);
	close(lfd);
	for (int i = 0; i < STOP_GRACE_S * 100 && atomic_load(&ctx.active); i++) {
		struct timespec ts = { .tv_nsec = 10000000 };

		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&ctx.summary_lock);
	fclose(ctx.summary);
	ctx.summary = NULL;
	pthread_mutex_unlock(&ctx.summary_lock);
	printf("{\"event\": \"stopped\", \"flows_served\": %llu, \"still_active\": %u}\n",
	       (unsigned long long)atomic_load(&ctx.next_flow_id) - 1, atomic_load(&ctx.active));
	return 0;
}
