/* cellab-modules: load, list, unload and configure the cellab BPF modules.
 *
 *   cellab-modules load NAME... [--netns NS --dev IF]   register (CC) or attach (tc) and pin the link
 *   cellab-modules unload NAME...|--all                 unpin: unregisters; established flows keep theirs
 *   cellab-modules list                                 JSON: every module, loaded or not, and its params
 *   cellab-modules set NAME PARAM VALUE [--dst CIDR]    write one parameter into the module's conf map
 *   cellab-modules stats NAME                           JSON: the module's counters
 *
 * Links and maps are pinned under /sys/fs/bpf/cellab/<name>/ (bpffs is mounted if needed), so the
 * modules outlive this process. Exit codes: 0 ok, 1 failure, 2 bad input, 3 not root, 4 no BTF.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "registry.h"

/* Kernel uapi values newer than Debian 12's linux-libc-dev 6.1 headers (include/uapi/linux/bpf.h). */
#define CELLAB_BPF_STRUCT_OPS 44     /* enum bpf_attach_type, Linux 6.4 */
#define CELLAB_BPF_TCX_INGRESS 46    /* Linux 6.6 */
#define CELLAB_BPF_TCX_EGRESS 47
#define CELLAB_BPF_F_LINK (1U << 13) /* struct_ops map registered through a link, Linux 6.4 */
#define BPF_FS_MAGIC_VALUE 0xcafe4a11

#define EXIT_FAIL 1
#define EXIT_INPUT 2
#define EXIT_NOT_ROOT 3
#define EXIT_NO_BTF 4

struct ctx {
	const char *bpffs;     /* /sys/fs/bpf */
	const char *btf_path;  /* the running kernel's BTF */
	const char *netns;     /* tc modules: namespace of --dev */
	const char *dev;
	const char *dst;       /* set: destination prefix */
	int verbose;
};

static int fail(int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "cellab-modules: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	return code;
}

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static void module_dir(const struct ctx *c, const char *name, char *out, size_t n)
{
	snprintf(out, n, "%s/cellab/%s", c->bpffs, name);
}

static int is_loaded(const struct ctx *c, const char *name)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/cellab/%s/link", c->bpffs, name);
	return stat(path, &st) == 0;
}

static int cc_available(const char *name)
{
	char buf[4096], *tok, *save = NULL;
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_congestion_control", "r");

	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return 0;
	}
	fclose(f);
	for (tok = strtok_r(buf, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save))
		if (strcmp(tok, name) == 0)
			return 1;
	return 0;
}

static int mkdir_p(const char *path)
{
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0700) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

static int ensure_bpffs(const struct ctx *c)
{
	struct statfs sf;

	if (statfs(c->bpffs, &sf) == 0 && (unsigned long)sf.f_type == BPF_FS_MAGIC_VALUE)
		return 0;
	if (mkdir_p(c->bpffs))
		return fail(EXIT_FAIL, "cannot create %s: %s", c->bpffs, strerror(errno));
	if (mount("bpf", c->bpffs, "bpf", 0, "mode=0700"))
		return fail(EXIT_FAIL, "cannot mount bpffs at %s: %s", c->bpffs, strerror(errno));
	return 0;
}

/* Remove every pin of one module, the link first: that unregisters (CC) or detaches (tc). */
static void unpin_dir(const struct ctx *c, const char *name)
{
	char dir[PATH_MAX], path[PATH_MAX * 2];
	struct dirent *e;
	DIR *d;

	module_dir(c, name, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/link", dir);
	unlink(path);
	d = opendir(dir);
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

static int any_or_user_loaded(const struct ctx *c)
{
	for (unsigned i = 0; i < registry_count(); i++) {
		const struct module_desc *m = registry_at(i);

		if (m->uses_or_flows && is_loaded(c, m->name))
			return 1;
	}
	return 0;
}

static void cleanup_shared(const struct ctx *c)
{
	char path[PATH_MAX];

	if (any_or_user_loaded(c))
		return;
	snprintf(path, sizeof(path), "%s/cellab/shared/or_flows", c->bpffs);
	unlink(path);
	snprintf(path, sizeof(path), "%s/cellab/shared", c->bpffs);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/cellab", c->bpffs);
	rmdir(path); /* only succeeds when empty */
}

static int write_defaults(const struct module_desc *m, struct bpf_object *obj)
{
	struct bpf_map *conf = bpf_object__find_map_by_name(obj, "conf");
	uint32_t val[16] = { 0 }, zero = 0;

	if (!conf)
		return m->n_params ? -ENOENT : 0;
	for (unsigned i = 0; i < m->n_params; i++)
		val[m->params[i].field] = (uint32_t)(m->params[i].dflt * m->params[i].scale + 0.5);
	return bpf_map__update_elem(conf, &zero, sizeof(zero), val, bpf_map__value_size(conf), 0);
}

static int enter_netns(const char *netns)
{
	char path[PATH_MAX];
	int fd, err;

	if (!netns)
		return 0;
	snprintf(path, sizeof(path), "/run/netns/%s", netns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = setns(fd, CLONE_NEWNET) ? -errno : 0;
	close(fd);
	return err;
}

/* Link-layer header length of an interface in the current netns: 14 on Ethernet, 0 on TUN. */
static int l2_header_bytes(const char *dev)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), type;

	if (fd < 0)
		return -1;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev);
	type = ioctl(fd, SIOCGIFHWADDR, &ifr) ? -1 : ifr.ifr_hwaddr.sa_family;
	close(fd);
	if (type == ARPHRD_ETHER)
		return 14;
	if (type == ARPHRD_NONE)
		return 0;
	return -1;
}

/* The tc programs keep the link-layer length in conf field 3. */
static int write_l2(struct bpf_object *obj, int l2)
{
	struct bpf_map *conf = bpf_object__find_map_by_name(obj, "conf");
	uint32_t val[16] = { 0 }, zero = 0;

	if (!conf || bpf_map__lookup_elem(conf, &zero, sizeof(zero), val, bpf_map__value_size(conf), 0))
		return -ENOENT;
	val[3] = (uint32_t)l2;
	return bpf_map__update_elem(conf, &zero, sizeof(zero), val, bpf_map__value_size(conf), 0);
}

static int load_one(const struct ctx *c, const struct module_desc *m)
{
	char dir[PATH_MAX], path[PATH_MAX * 2], shared[PATH_MAX];
	LIBBPF_OPTS(bpf_object_open_opts, opts);
	struct bpf_object *obj;
	struct bpf_map *map;
	void *skel;
	int err, link_fd = -1, code = EXIT_FAIL;

	if (is_loaded(c, m->name)) {
		printf("%s: already loaded\n", m->name);
		return 0;
	}
	if (m->kind == KIND_CC && cc_available(m->name))
		return fail(EXIT_FAIL, "%s: a congestion control of that name is already registered by someone else", m->name);
	if (m->kind != KIND_CC && !c->dev)
		return fail(EXIT_INPUT, "%s: needs --dev IFNAME (and --netns NS when the interface is in a namespace)", m->name);

	snprintf(shared, sizeof(shared), "%s/cellab/shared", c->bpffs);
	if (m->uses_or_flows && mkdir_p(shared))
		return fail(EXIT_FAIL, "cannot create %s: %s", shared, strerror(errno));
	opts.pin_root_path = shared;
	skel = m->open(&opts);
	if (!skel)
		return fail(EXIT_FAIL, "%s: cannot open the BPF object: %s", m->name, strerror(errno));
	obj = m->obj(skel);
	if (m->kind == KIND_CC) {
		map = bpf_object__find_map_by_name(obj, m->ops_map);
		if (!map || bpf_map__set_map_flags(map, bpf_map__map_flags(map) | CELLAB_BPF_F_LINK)) {
			fail(EXIT_FAIL, "%s: struct_ops map missing", m->name);
			goto out;
		}
	}
	err = m->load(skel);
	if (err) {
		fail(EXIT_FAIL, "%s: the kernel refused the BPF programs (%s); the verifier log is above",
		     m->name, strerror(-err));
		goto out;
	}
	err = write_defaults(m, obj);
	if (err) {
		fail(EXIT_FAIL, "%s: cannot write default parameters: %s", m->name, strerror(-err));
		goto out;
	}

	if (m->kind == KIND_CC) {
		struct bpf_link *tmp;

		map = bpf_object__find_map_by_name(obj, m->ops_map);
		/* libbpf 1.1 has no .struct_ops.link: let it fill in the program fds and write the map
		 * value (a BPF_F_LINK map is not registered by that), then create the link ourselves. */
		tmp = bpf_map__attach_struct_ops(map);
		if (!tmp) {
			fail(EXIT_FAIL, "%s: cannot write the struct_ops map: %s", m->name, strerror(errno));
			goto out;
		}
		bpf_link__disconnect(tmp);
		bpf_link__destroy(tmp);
		link_fd = bpf_link_create(bpf_map__fd(map), 0, CELLAB_BPF_STRUCT_OPS, NULL);
	} else {
		struct bpf_program *prog = bpf_object__find_program_by_name(obj, m->prog);
		int ifindex, orig_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);

		err = enter_netns(c->netns);
		if (err) {
			fail(EXIT_INPUT, "%s: netns %s: %s", m->name, c->netns, strerror(-err));
			close(orig_ns);
			code = EXIT_INPUT;
			goto out;
		}
		ifindex = if_nametoindex(c->dev);
		if (!ifindex) {
			fail(EXIT_INPUT, "%s: no interface %s%s%s", m->name, c->dev, c->netns ? " in netns " : "",
			     c->netns ? c->netns : "");
			setns(orig_ns, CLONE_NEWNET);
			close(orig_ns);
			code = EXIT_INPUT;
			goto out;
		}
		err = l2_header_bytes(c->dev);
		if (err < 0 || write_l2(obj, err)) {
			fail(EXIT_INPUT, "%s: %s is neither an Ethernet nor an L3 (TUN) device", m->name, c->dev);
			setns(orig_ns, CLONE_NEWNET);
			close(orig_ns);
			code = EXIT_INPUT;
			goto out;
		}
		link_fd = bpf_link_create(bpf_program__fd(prog), ifindex,
					  m->kind == KIND_TC_INGRESS ? CELLAB_BPF_TCX_INGRESS : CELLAB_BPF_TCX_EGRESS, NULL);
		if (setns(orig_ns, CLONE_NEWNET))
			fail(EXIT_FAIL, "cannot return to the original netns: %s", strerror(errno));
		close(orig_ns);
	}
	if (link_fd < 0) {
		fail(EXIT_FAIL, "%s: cannot create the BPF link: %s", m->name, strerror(-link_fd));
		goto out;
	}

	module_dir(c, m->name, dir, sizeof(dir));
	if (mkdir_p(dir)) {
		fail(EXIT_FAIL, "cannot create %s: %s", dir, strerror(errno));
		goto out;
	}
	bpf_object__for_each_map(map, obj) {
		const char *mn = bpf_map__name(map);

		if (bpf_map__type(map) == BPF_MAP_TYPE_STRUCT_OPS || strchr(mn, '.') ||
		    bpf_map__type(map) == BPF_MAP_TYPE_SK_STORAGE || bpf_map__is_pinned(map))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, mn);
		err = bpf_map__pin(map, path);
		if (err) {
			fail(EXIT_FAIL, "%s: cannot pin map %s: %s", m->name, mn, strerror(-err));
			goto out_unpin;
		}
	}
	snprintf(path, sizeof(path), "%s/link", dir);
	if (bpf_obj_pin(link_fd, path)) {
		fail(EXIT_FAIL, "%s: cannot pin the link at %s: %s", m->name, path, strerror(errno));
		goto out_unpin;
	}
	if (m->kind == KIND_CC && !cc_available(m->name)) {
		fail(EXIT_FAIL, "%s: registered, but not in tcp_available_congestion_control", m->name);
		goto out_unpin;
	}
	code = 0;
	printf("%s: loaded\n", m->name);
	goto out;

out_unpin:
	unpin_dir(c, m->name);
out:
	if (link_fd >= 0)
		close(link_fd);
	m->destroy(skel);
	if (code && m->uses_or_flows)
		cleanup_shared(c);
	return code;
}

/* Detach the pinned link before unpinning: freeing a bpffs inode waits for an RCU grace period,
 * so unpinning alone would leave the congestion control registered for an unbounded while. */
static void detach_link(const struct ctx *c, const struct module_desc *m)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/cellab/%s/link", c->bpffs, m->name);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return;
	if (bpf_link_detach(fd))
		fprintf(stderr, "%s: link detach failed (%s); waiting for the kernel to release it\n", m->name,
			strerror(errno));
	close(fd);
}

static void wait_unregistered(const struct module_desc *m)
{
	const int step_ms = 10, limit_ms = 10000;

	for (int waited_ms = 0; m->kind == KIND_CC && cc_available(m->name) && waited_ms < limit_ms;
	     waited_ms += step_ms)
		usleep(step_ms * 1000);
	if (m->kind == KIND_CC && cc_available(m->name))
		fprintf(stderr, "%s: still registered %d s after unpinning\n", m->name, limit_ms / 1000);
}

static int unload_one(const struct ctx *c, const struct module_desc *m)
{
	int was = is_loaded(c, m->name);

	if (was)
		detach_link(c, m);
	unpin_dir(c, m->name);
	if (was)
		wait_unregistered(m);
	if (m->uses_or_flows)
		cleanup_shared(c);
	else {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/cellab", c->bpffs);
		rmdir(path);
	}
	printf("%s: %s\n", m->name, was ? "unloaded" : "not loaded");
	return 0;
}

static int open_pinned(const struct ctx *c, const char *name, const char *map)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/cellab/%s/%s", c->bpffs, name, map);
	return bpf_obj_get(path);
}

static void print_params(const struct ctx *c, const struct module_desc *m)
{
	uint32_t val[16] = { 0 }, zero = 0;
	int fd = open_pinned(c, m->name, "conf");
	int have = fd >= 0 && bpf_map_lookup_elem(fd, &zero, val) == 0;

	printf("\"params\": {");
	for (unsigned i = 0; i < m->n_params; i++) {
		const struct param_desc *p = &m->params[i];
		double v = have ? val[p->field] / p->scale : p->dflt;

		printf("%s\"%s\": %.10g", i ? ", " : "", p->name, v);
	}
	printf("}");
	if (fd >= 0)
		close(fd);
}

static int cmd_list(const struct ctx *c)
{
	printf("{\"modules\": [");
	for (unsigned i = 0; i < registry_count(); i++) {
		const struct module_desc *m = registry_at(i);
		int loaded = is_loaded(c, m->name);

		printf("%s\n  {\"name\": \"%s\", \"kind\": \"%s\", \"loaded\": %s, \"registered\": %s, ", i ? "," : "",
		       m->name, m->kind == KIND_CC ? "congestion_control" : (m->kind == KIND_TC_INGRESS ? "tc_ingress" : "tc_egress"),
		       loaded ? "true" : "false", m->kind == KIND_CC && cc_available(m->name) ? "true" : "false");
		print_params(c, m);
		printf(", \"param_ranges\": {");
		for (unsigned j = 0; j < m->n_params; j++)
			printf("%s\"%s\": [%.10g, %.10g, \"%s\"]", j ? ", " : "", m->params[j].name, m->params[j].min,
			       m->params[j].max, m->params[j].unit);
		printf("}}");
	}
	printf("\n]}\n");
	return 0;
}

static int cmd_stats(const struct ctx *c, const struct module_desc *m)
{
	int fd = open_pinned(c, m->name, "stats");

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

/* "10.1.0.0/16" or "fd00::/8" -> v4-mapped 128-bit key with its prefix length. */
static int parse_prefix(const char *text, uint32_t *prefixlen, uint8_t addr[16])
{
	char buf[64], *slash;
	long bits;
	struct in_addr a4;

	snprintf(buf, sizeof(buf), "%s", text);
	slash = strchr(buf, '/');
	if (slash)
		*slash++ = 0;
	memset(addr, 0, 16);
	if (inet_pton(AF_INET, buf, &a4) == 1) {
		bits = slash ? strtol(slash, NULL, 10) : 32;
		if (bits < 0 || bits > 32)
			return -1;
		addr[10] = addr[11] = 0xff;
		memcpy(addr + 12, &a4, 4);
		*prefixlen = 96 + bits;
		return 0;
	}
	if (inet_pton(AF_INET6, buf, addr) == 1) {
		bits = slash ? strtol(slash, NULL, 10) : 128;
		if (bits < 0 || bits > 128)
			return -1;
		*prefixlen = bits;
		return 0;
	}
	return -1;
}

static int cmd_set(const struct ctx *c, const struct module_desc *m, const char *pname, const char *vtext)
{
	const struct param_desc *p = NULL;
	char *end;
	double v;
	uint32_t val[16] = { 0 }, zero = 0, stored;
	int fd;

	for (unsigned i = 0; i < m->n_params; i++)
		if (strcmp(m->params[i].name, pname) == 0)
			p = &m->params[i];
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
	if (c->dst && !m->has_prefix_targets)
		return fail(EXIT_INPUT, "%s: --dst is only for c2tcp target_ms", m->name);
	stored = (uint32_t)(v * p->scale + 0.5);
	if (c->dst) {
		struct { uint32_t prefixlen; uint8_t addr[16]; } key;

		if (strcmp(pname, "target_ms") != 0)
			return fail(EXIT_INPUT, "%s: --dst applies to target_ms only", m->name);
		if (parse_prefix(c->dst, &key.prefixlen, key.addr))
			return fail(EXIT_INPUT, "%s: --dst %s is not an IPv4/IPv6 prefix (allowed: A.B.C.D/N, X::/N)",
				    m->name, c->dst);
		fd = open_pinned(c, m->name, "targets");
		if (fd < 0)
			return fail(EXIT_INPUT, "%s: not loaded", m->name);
		if (bpf_map_update_elem(fd, &key, &stored, 0)) {
			close(fd);
			return fail(EXIT_FAIL, "%s: cannot store the target for %s: %s", m->name, c->dst, strerror(errno));
		}
		close(fd);
		printf("%s: %s = %g for %s\n", m->name, pname, v, c->dst);
		return 0;
	}
	fd = open_pinned(c, m->name, "conf");
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
	if (!strcmp(m->name, "burst_drop")) {
		/* burst_drop: a new setting re-arms the dropper (its counters are its state). */
		int sfd = open_pinned(c, m->name, "stats");
		uint64_t z = 0;

		for (uint32_t i = 0; sfd >= 0 && i < m->n_counters; i++)
			bpf_map_update_elem(sfd, &i, &z, 0);
		if (sfd >= 0)
			close(sfd);
	}
	printf("%s: %s = %g\n", m->name, pname, v);
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: cellab-modules [-v] load NAME... [--netns NS] [--dev IF]\n"
		"       cellab-modules unload NAME...|--all\n"
		"       cellab-modules list\n"
		"       cellab-modules set NAME PARAM VALUE [--dst CIDR]\n"
		"       cellab-modules stats NAME\n"
		"modules:");
	for (unsigned i = 0; i < registry_count(); i++)
		fprintf(stderr, " %s", registry_at(i)->name);
	fprintf(stderr, "\n");
}

static int check_privileges(const struct ctx *c)
{
	if (geteuid() != 0)
		return fail(EXIT_NOT_ROOT, "needs root (CAP_BPF and CAP_NET_ADMIN) to load BPF programs");
	if (access(c->btf_path, R_OK))
		return fail(EXIT_NO_BTF, "no kernel BTF at %s: the modules need a kernel built with CONFIG_DEBUG_INFO_BTF=y",
			    c->btf_path);
	return 0;
}

int main(int argc, char **argv)
{
	struct ctx c = { .bpffs = "/sys/fs/bpf", .btf_path = "/sys/kernel/btf/vmlinux" };
	const char *names[32];
	int n = 0, all = 0, code = 0;
	const char *cmd;

	if (getenv("CELLAB_KERNEL_BTF"))
		c.btf_path = getenv("CELLAB_KERNEL_BTF");
	/* Options may appear anywhere; positional arguments keep their order. */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-v"))
			c.verbose = 1;
		else if (!strcmp(argv[i], "--all"))
			all = 1;
		else if (!strcmp(argv[i], "--netns") || !strcmp(argv[i], "--dev") || !strcmp(argv[i], "--dst")) {
			if (i + 1 >= argc)
				return fail(EXIT_INPUT, "%s needs a value", argv[i]);
			if (!strcmp(argv[i], "--netns"))
				c.netns = argv[++i];
			else if (!strcmp(argv[i], "--dev"))
				c.dev = argv[++i];
			else
				c.dst = argv[++i];
		} else if (n < 32)
			names[n++] = argv[i];
		else
			return fail(EXIT_INPUT, "too many arguments");
	}
	if (n < 1) {
		usage();
		return EXIT_INPUT;
	}
	cmd = names[0];
	if (!c.verbose)
		libbpf_set_print(libbpf_quiet);

	if (!strcmp(cmd, "list"))
		return cmd_list(&c);
	/* Every module name is checked before anything is touched. */
	for (int i = 1; i < n && strcmp(cmd, "set"); i++) {
		if (!registry_find(names[i])) {
			fprintf(stderr, "cellab-modules: unknown module %s (allowed:", names[i]);
			for (unsigned j = 0; j < registry_count(); j++)
				fprintf(stderr, " %s", registry_at(j)->name);
			fprintf(stderr, ")\n");
			return EXIT_INPUT;
		}
	}
	if (!strcmp(cmd, "stats")) {
		if (n != 2) {
			usage();
			return EXIT_INPUT;
		}
		if (geteuid() != 0)
			return fail(EXIT_NOT_ROOT, "needs root to read BPF maps");
		return cmd_stats(&c, registry_find(names[1]));
	}
	if (!strcmp(cmd, "set")) {
		const struct module_desc *m;

		if (n != 4) {
			usage();
			return EXIT_INPUT;
		}
		m = registry_find(names[1]);
		if (!m) {
			fprintf(stderr, "cellab-modules: unknown module %s (allowed:", names[1]);
			for (unsigned j = 0; j < registry_count(); j++)
				fprintf(stderr, " %s", registry_at(j)->name);
			fprintf(stderr, ")\n");
			return EXIT_INPUT;
		}
		if (geteuid() != 0)
			return fail(EXIT_NOT_ROOT, "needs root to write BPF maps");
		return cmd_set(&c, m, names[2], names[3]);
	}
	if (!strcmp(cmd, "load")) {
		int done[32] = { 0 };

		if (n < 2) {
			usage();
			return EXIT_INPUT;
		}
		code = check_privileges(&c);
		if (code)
			return code;
		code = ensure_bpffs(&c);
		if (code)
			return code;
		for (int i = 1; i < n; i++) {
			const struct module_desc *m = registry_find(names[i]);
			int was = is_loaded(&c, m->name);

			code = load_one(&c, m);
			if (code) {
				/* Nothing half-loaded: undo what this command loaded before the failure. */
				for (int j = 1; j < i; j++)
					if (done[j])
						unload_one(&c, registry_find(names[j]));
				return code;
			}
			done[i] = !was;
		}
		return 0;
	}
	if (!strcmp(cmd, "unload")) {
		if (geteuid() != 0)
			return fail(EXIT_NOT_ROOT, "needs root to unpin BPF links");
		if (all) {
			for (unsigned i = 0; i < registry_count(); i++)
				if (is_loaded(&c, registry_at(i)->name))
					unload_one(&c, registry_at(i));
			cleanup_shared(&c);
			return 0;
		}
		if (n < 2) {
			usage();
			return EXIT_INPUT;
		}
		for (int i = 1; i < n; i++)
			unload_one(&c, registry_find(names[i]));
		return 0;
	}
	usage();
	return fail(EXIT_INPUT, "unknown command %s (allowed: load, unload, list, set, stats)", cmd);
}
