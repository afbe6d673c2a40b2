/* Light uplink probes: a few ICMP echoes at random spacing before the download. Each one finds the
 * uplink idle, so it waits for an SR occasion whatever the eNB does under load (srsENB grants a
 * saturated uplink from BSRs, hiding the SR period from the flow's ACKs). Their RTT spread gives
 * T̂_SR = 2 (avg - min), as the srsRAN sample measured with ping. */
#ifndef CELLAB_SRPROBE_H
#define CELLAB_SRPROBE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct srprobe_result {
    int sent, received;
    double rtt_us[256];
    int64_t reply_wall_ns[256]; /* CLOCK_REALTIME (the clock of captures and of the lab's stack clock) at each
                                 * reply, same order as rtt_us: the controller puts the replies on the stack's TTIs */
    const char *socket_kind; /* "icmp-dgram" | "icmp-raw" */
};

#define SRPROBE_STEP 5
#define SRPROBE_EXPECTED_S 0.25 /* one probe's time, gap and RTT, for budget checks */

/* Blocking, one probe at a time, each a random min_gap..max_gap ms after the previous reply: n probes,
 * then SRPROBE_STEP more at a time up to n_max (and 256) until the wait fit leads by SR_FIT_HIGH_NATS; bounded by
 * n_max * (max_gap_ms + 1 s). 0 on success (even with losses), -1 when no ICMP
 * socket could be opened (err says why). */
int srprobe_run(const struct sockaddr *dst, socklen_t dst_len, int n, int n_max, double min_gap_ms, double max_gap_ms,
                uint32_t seed, struct srprobe_result *res, char *err, size_t errlen);

#endif
