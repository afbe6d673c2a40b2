/* Parameters: `set` (host-wide, per namespace, per destination), `clear`, and what `list` shows of them.
 *
 * A namespace's entry in `ns_conf` is always complete: the words it set (set_mask) and copies of the
 * host-wide words for the rest, rewritten here whenever a host-wide value changes, so the BPF side reads
 * one entry. Entries of namespaces that are gone (their name no longer resolves to their cookie) are
 * removed by every command that changes parameters or holders. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "netns.h"
#include "params.h"

#define NS_SCAN_MAX 1024    /* bpf/cellab_cc.h CELLAB_NETNS_MAX */
#define TARGETS_MAX 1024    /* bpf/c2tcp.bpf.c targets max_entries */

/* bpf/c2tcp.bpf.c struct c2tcp_target_key: netns cookie (0 = host-wide), then the v4-mapped address. */
struct target_key {
	uint32_t prefixlen;
	uint8_t data[24];
};

/* "10.1.0.0/16" or "fd00::/8" -> the v4-mapped 128-bit address and its prefix length over it. */
static int parse_prefix(const char *text, uint32_t *prefixlen, uint8_t addr[16])
{
	char buf[64], *slash, *end;
	long bits;
	struct in_addr a4;

	snprintf(buf, sizeof(buf), "%s", text);
	slash = strchr(buf, '/');
	if (slash)
		*slash++ = 0;
	memset(addr, 0, 16);
	if (inet_pton(AF_INET, buf, &a4) == 1) {
		bits = slash ? strtol(slash, &end, 10) : 32;
		if (bits < 0 || bits > 32 || (slash && *end))
			return -1;
		addr[10] = addr[11] = 0xff;
		memcpy(addr + 12, &a4, 4);
		*prefixlen = 96 + bits;
		return 0;
	}
	if (inet_pton(AF_INET6, buf, addr) == 1) {
		bits = slash ? strtol(slash, &end, 10) : 128;
		if (bits < 0 || bits > 128 || (slash && *end))
			return -1;
		*prefixlen = bits;
		return 0;
	}
	return -1;
}

static void format_prefix(const struct target_key *k, char *out, size_t n)
{
	const uint8_t *a = k->data + 8;
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	char text[INET6_ADDRSTRLEN];
	unsigned bits = k->prefixlen - 64;

	if (!memcmp(a, v4mapped, 12) && bits >= 96) {
		inet_ntop(AF_INET, a + 12, text, sizeof(text));
		snprintf(out, n, "%s/%u", text, bits - 96);
	} else {
		inet_ntop(AF_INET6, a, text, sizeof(text));
		snprintf(out, n, "%s/%u", text, bits);
	}
}

static int open_ns_conf(const struct ctx *c, const struct module_desc *m)
{
	int fd = open_pinned(c, m->name, "ns_conf");

	if (fd < 0)
		fail(EXIT_FAIL, "%s: no per-namespace parameter map pinned (loaded by an older loader?): unload and "
		     "load it again", m->name);
	return fd;
}

/* Every key of a hash/LPM map (at most max); the count. */
static int map_keys(int fd, void *keys, size_t key_size, int max)
{
	char prev[64], next[64];
	int n = 0, have = 0;

	while (n < max && !bpf_map_get_next_key(fd, have ? prev : NULL, next)) {
		memcpy((char *)keys + n * key_size, next, key_size);
		memcpy(prev, next, key_size);
		have = 1;
		n++;
	}
	return n;
}

/* Remove the per-destination Targets of one namespace cookie. */
static void drop_targets_of(const struct ctx *c, const struct module_desc *m, uint64_t cookie)
{
	static struct target_key keys[TARGETS_MAX];
	int fd, n;

	if (!m->has_prefix_targets || (fd = open_pinned(c, m->name, "targets")) < 0)
		return;
	n = map_keys(fd, keys, sizeof(keys[0]), TARGETS_MAX);
	for (int i = 0; i < n; i++)
		if (!memcmp(keys[i].data, &cookie, 8))
			bpf_map_delete_elem(fd, &keys[i]);
	close(fd);
}

/* Drop the entries (and per-destination Targets) of namespaces whose name no longer resolves to their
 * cookie: removed namespaces, or a new namespace under an old name. */
void params_gc(const struct ctx *c, const struct module_desc *m)
{
	static uint64_t keys[NS_SCAN_MAX];
	struct ns_conf_val e;
	uint64_t cookie;
	uint32_t inum;
	int fd = m->kind == KIND_CC ? open_pinned(c, m->name, "ns_conf") : -1, n;

	if (fd < 0)
		return;
	n = map_keys(fd, keys, sizeof(keys[0]), NS_SCAN_MAX);
	for (int i = 0; i < n; i++) {
		if (bpf_map_lookup_elem(fd, &keys[i], &e))
			continue;
		e.name[NETNS_NAME_MAX - 1] = 0;
		if (netns_identity(e.name, &cookie, &inum) == 0 && cookie == keys[i])
			continue;
		bpf_map_delete_elem(fd, &keys[i]);
		drop_targets_of(c, m, keys[i]);
	}
	close(fd);
}

/* Remove every override of the namespace called name (its entries under any cookie). The count. */
int params_clear_netns(const struct ctx *c, const struct module_desc *m, const char *name)
{
	static uint64_t keys[NS_SCAN_MAX];
	struct ns_conf_val e;
	uint64_t cookie = 0;
	uint32_t inum;
	int fd = m->kind == KIND_CC ? open_pinned(c, m->name, "ns_conf") : -1, n, removed = 0;

	if (fd < 0)
		return 0;
	if (netns_identity(name, &cookie, &inum))
		cookie = 0;
	n = map_keys(fd, keys, sizeof(keys[0]), NS_SCAN_MAX);
	for (int i = 0; i < n; i++) {
		if (bpf_map_lookup_elem(fd, &keys[i], &e))
			continue;
		e.name[NETNS_NAME_MAX - 1] = 0;
		if (strcmp(e.name, name) && keys[i] != cookie)
			continue;
		bpf_map_delete_elem(fd, &keys[i]);
		drop_targets_of(c, m, keys[i]);
		removed++;
	}
	if (cookie)
		drop_targets_of(c, m, cookie);
	close(fd);
	return removed;
}

/* The values a flow in --netns sees (the host-wide ones without --netns or without an entry). */
int params_effective(const struct ctx *c, const struct module_desc *m, uint32_t val[CONF_WORDS])
{
	struct ns_conf_val e;
	uint64_t cookie;
	uint32_t inum;
	int err = read_host_conf(c, m, val), fd;

	if (err || !c->netns || m->kind != KIND_CC)
		return err;
	if (netns_identity(c->netns, &cookie, &inum))
		return -ENOENT;
	fd = open_pinned(c, m->name, "ns_conf");
	if (fd < 0)
		return 0;
	if (!bpf_map_lookup_elem(fd, &cookie, &e))
		memcpy(val, e.val, sizeof(e.val));
	close(fd);
	return 0;
}

static const struct param_desc *find_param(const struct module_desc *m, const char *pname)
{
	for (unsigned i = 0; i < m->n_params; i++)
		if (strcmp(m->params[i].name, pname) == 0)
			return &m->params[i];
	return NULL;
}

/* The namespace's entry, or a new one (host-wide copies, nothing set) if it has none. */
static int ns_entry(const struct ctx *c, const struct module_desc *m, int fd, uint64_t cookie, uint32_t inum,
		    struct ns_conf_val *e)
{
	if (!bpf_map_lookup_elem(fd, &cookie, e))
		return 0;
	memset(e, 0, sizeof(*e));
	if (read_host_conf(c, m, e->val))
		return -ENOENT;
	e->cookie = cookie;
	e->inum = inum;
	snprintf(e->name, sizeof(e->name), "%s", c->netns);
	return 0;
}

static int set_dst(const struct ctx *c, const struct module_desc *m, const struct param_desc *p, uint32_t stored,
		   uint64_t cookie, uint32_t inum)
{
	struct target_key key = { 0 };
	struct ns_conf_val e;
	uint32_t bits;
	int fd, nfd;

	if (strcmp(p->name, "target_ms") != 0)
		return fail(EXIT_INPUT, "%s: --dst applies to target_ms only", m->name);
	if (parse_prefix(c->dst, &bits, key.data + 8))
		return fail(EXIT_INPUT, "%s: --dst %s is not an IPv4/IPv6 prefix (allowed: A.B.C.D/N, X::/N)",
			    m->name, c->dst);
	key.prefixlen = 64 + bits;
	memcpy(key.data, &cookie, 8);
	if (c->netns) { /* an entry records the namespace's name, so its Targets go when it goes */
		nfd = open_ns_conf(c, m);
		if (nfd < 0)
			return EXIT_FAIL;
		if (ns_entry(c, m, nfd, cookie, inum, &e) || bpf_map_update_elem(nfd, &cookie, &e, 0)) {
			close(nfd);
			return fail(EXIT_FAIL, "%s: cannot record netns %s: %s", m->name, c->netns, strerror(errno));
		}
		close(nfd);
	}
	fd = open_pinned(c, m->name, "targets");
	if (fd < 0)
		return fail(EXIT_INPUT, "%s: not loaded", m->name);
	if (bpf_map_update_elem(fd, &key, &stored, 0)) {
		close(fd);
		return fail(EXIT_FAIL, "%s: cannot store the target for %s: %s", m->name, c->dst, strerror(errno));
	}
	close(fd);
	return 0;
}

static int set_netns(const struct ctx *c, const struct module_desc *m, const struct param_desc *p, uint32_t stored,
		     uint64_t cookie, uint32_t inum)
{
	struct ns_conf_val e;
	int fd = open_ns_conf(c, m);

	if (fd < 0)
		return EXIT_FAIL;
	if (ns_entry(c, m, fd, cookie, inum, &e)) {
		close(fd);
		return fail(EXIT_FAIL, "%s: cannot read conf", m->name);
	}
	e.val[p->field] = stored;
	e.set_mask |= 1u << p->field;
	if (bpf_map_update_elem(fd, &cookie, &e, 0)) {
		close(fd);
		return fail(EXIT_FAIL, "%s: cannot write netns %s's parameters: %s", m->name, c->netns, strerror(errno));
	}
	close(fd);
	return 0;
}

/* Host-wide: the conf entry, then every namespace entry that does not set this word itself. */
static int set_host(const struct ctx *c, const struct module_desc *m, const struct param_desc *p, uint32_t stored)
{
	static uint64_t keys[NS_SCAN_MAX];
	uint32_t val[CONF_WORDS], zero = 0;
	struct ns_conf_val e;
	int fd = open_pinned(c, m->name, "conf"), n;

	if (fd < 0)
		return fail(EXIT_INPUT, "%s: not loaded", m->name);
	if (bpf_map_lookup_elem(fd, &zero, val)) {
		close(fd);
		return fail(EXIT_FAIL, "%s: cannot read conf: %s", m->name, strerror(errno));
	}
	val[p->field] = stored;
	if (bpf_map_update_elem(fd, &zero, val, 0)) {
		close(fd);
		return fail(EXIT_FAIL, "%s: cannot write conf: %s", m->name, strerror(errno));
	}
	close(fd);
	fd = m->kind == KIND_CC ? open_pinned(c, m->name, "ns_conf") : -1;
	if (fd < 0)
		return 0;
	n = map_keys(fd, keys, sizeof(keys[0]), NS_SCAN_MAX);
	for (int i = 0; i < n; i++)
		if (!bpf_map_lookup_elem(fd, &keys[i], &e) && !(e.set_mask & (1u << p->field))) {
			e.val[p->field] = stored;
			bpf_map_update_elem(fd, &keys[i], &e, BPF_EXIST);
		}
	close(fd);
	return 0;
}

int cmd_set(const struct ctx *c, const struct module_desc *m, const char *pname, const char *vtext)
{
	const struct param_desc *p = find_param(m, pname);
	uint64_t cookie = 0;
	uint32_t inum = 0, stored;
	char *end;
	double v;
	int code, err;

	if (!p) {
		fprintf(stderr, "cellab-modules: %s: unknown parameter %s (allowed:", m->name, pname);
		for (unsigned i = 0; i < m->n_params; i++)
			fprintf(stderr, " %s", m->params[i].name);
		fprintf(stderr, ")\n");
		return EXIT_INPUT;
	}
	errno = 0;
	v = strtod(vtext, &end);
	if (errno || end == vtext || *end || v < p->min || v > p->max)
		return fail(EXIT_INPUT, "%s: %s = %s is out of range (allowed: %g..%g %s)", m->name, pname, vtext,
			    p->min, p->max, p->unit);
	/* a whole-number parameter (scale 1: packets, switches) would round 0.5 to 1 without a word */
	if (p->scale == 1 && v != (double)(long long)v)
		return fail(EXIT_INPUT, "%s: %s = %s is not a whole number (allowed: %g..%g %s, in steps of 1)", m->name,
			    pname, vtext, p->min, p->max, p->unit);
	if (c->dst && !m->has_prefix_targets)
		return fail(EXIT_INPUT, "%s: --dst is only for c2tcp target_ms", m->name);
	if (c->netns && strcmp(param_scope(m, p), "netns"))
		return fail(EXIT_INPUT, "%s: %s is one value per host (scope host): it takes no --netns", m->name, pname);
	if (!is_loaded(c, m->name))
		return fail(EXIT_INPUT, "%s: not loaded", m->name);
	if (c->netns && (err = netns_identity(c->netns, &cookie, &inum)))
		return fail(EXIT_INPUT, "%s: netns %s: %s", m->name, c->netns, strerror(-err));
	params_gc(c, m);
	stored = (uint32_t)(v * p->scale + 0.5);
	if (c->dst)
		code = set_dst(c, m, p, stored, cookie, inum);
	else if (c->netns)
		code = set_netns(c, m, p, stored, cookie, inum);
	else
		code = set_host(c, m, p, stored);
	if (code)
		return code;
	if (!c->netns && !strcmp(m->name, "burst_drop")) {
		/* burst_drop: a new setting re-arms the dropper (its counters are its state). */
		int sfd = open_pinned(c, m->name, "stats");
		uint64_t z = 0;

		for (uint32_t i = 0; sfd >= 0 && i < m->n_counters; i++)
			bpf_map_update_elem(sfd, &i, &z, 0);
		if (sfd >= 0)
			close(sfd);
	}
	printf("%s: %s = %g%s%s%s%s\n", m->name, pname, v, c->dst ? " for " : "", c->dst ? c->dst : "",
	       c->netns ? " in netns " : "", c->netns ? c->netns : "");
	return 0;
}

int cmd_clear(const struct ctx *c, const char *const *names, int n)
{
	if (!c->netns)
		return fail(EXIT_INPUT, "clear needs --netns NAME (the namespace whose parameters go)");
	for (unsigned i = 0; i < (n ? (unsigned)n : registry_count()); i++) {
		const struct module_desc *m = n ? registry_find(names[i]) : registry_at(i);

		if (m->kind != KIND_CC || !is_loaded(c, m->name)) {
			if (n)
				printf("%s: %s\n", m->name, m->kind != KIND_CC ? "host-wide parameters only" : "not loaded");
			continue;
		}
		int removed = params_clear_netns(c, m, c->netns);

		printf("%s: %d parameter entr%s of netns %s cleared\n", m->name, removed, removed == 1 ? "y" : "ies",
		       c->netns);
		params_gc(c, m);
	}
	return 0;
}

/* "netns_params": {NAME: {param: value}} (the values each namespace set itself) and, for c2tcp,
 * "dst_targets": [{"netns": NAME | null, "dst": CIDR, "target_ms": v}]. */
void params_overrides_json(const struct ctx *c, const struct module_desc *m)
{
	static uint64_t keys[NS_SCAN_MAX];
	static struct target_key tkeys[TARGETS_MAX];
	struct ns_conf_val e;
	int fd = m->kind == KIND_CC ? open_pinned(c, m->name, "ns_conf") : -1, n = 0, first = 1;

	printf("\"netns_params\": {");
	if (fd >= 0)
		n = map_keys(fd, keys, sizeof(keys[0]), NS_SCAN_MAX);
	for (int i = 0; i < n; i++) {
		if (bpf_map_lookup_elem(fd, &keys[i], &e))
			continue;
		e.name[NETNS_NAME_MAX - 1] = 0;
		printf("%s", first ? "" : ", ");
		json_name(e.name);
		printf(": {");
		for (unsigned j = 0, k = 0; j < m->n_params; j++)
			if (e.set_mask & (1u << m->params[j].field))
				printf("%s\"%s\": %.10g", k++ ? ", " : "", m->params[j].name,
				       e.val[m->params[j].field] / m->params[j].scale);
		printf("}");
		first = 0;
	}
	printf("}");
	if (m->has_prefix_targets) {
		int tfd = open_pinned(c, m->name, "targets"), tn = 0, shown = 0;
		const struct param_desc *tp = find_param(m, "target_ms");
		char text[80];
		uint32_t t;
		uint64_t cookie;

		printf(", \"dst_targets\": [");
		if (tfd >= 0)
			tn = map_keys(tfd, tkeys, sizeof(tkeys[0]), TARGETS_MAX);
		for (int i = 0; i < tn; i++) {
			if (bpf_map_lookup_elem(tfd, &tkeys[i], &t))
				continue;
			memcpy(&cookie, tkeys[i].data, 8);
			format_prefix(&tkeys[i], text, sizeof(text));
			printf("%s{\"netns\": ", shown++ ? ", " : "");
			if (!cookie)
				printf("null");
			else if (fd >= 0 && !bpf_map_lookup_elem(fd, &cookie, &e) && (e.name[NETNS_NAME_MAX - 1] = 0, 1))
				json_name(e.name);
			else
				printf("\"?\"");
			printf(", \"dst\": \"%s\", \"target_ms\": %.10g}", text, t / (tp ? tp->scale : 1000.0));
		}
		printf("]");
		if (tfd >= 0)
			close(tfd);
	}
	if (fd >= 0)
		close(fd);
}
