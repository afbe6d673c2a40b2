/* load: open a module's skeleton, write its default parameters, register it (CC: struct_ops link) or attach
 * it (tc: tcx link in --netns on --dev), pin the link and maps under /sys/fs/bpf/cellab/<name>/.
 * A CC that is already registered is reused: this load becomes one more holder of it. */
#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "holders.h"
#include "lifecycle.h"
#include "netns.h"
#include "params.h"

static int write_defaults(const struct module_desc *m, struct bpf_object *obj)
{
	struct bpf_map *conf = bpf_object__find_map_by_name(obj, "conf");
	uint32_t val[CONF_WORDS] = { 0 }, zero = 0;

	if (!conf)
		return m->n_params ? -ENOENT : 0;
	for (unsigned i = 0; i < m->n_params; i++)
		val[m->params[i].field] = (uint32_t)(m->params[i].dflt * m->params[i].scale + 0.5);
	return bpf_map__update_elem(conf, &zero, sizeof(zero), val, bpf_map__value_size(conf), 0);
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
	uint32_t val[CONF_WORDS] = { 0 }, zero = 0;

	if (!conf || bpf_map__lookup_elem(conf, &zero, sizeof(zero), val, bpf_map__value_size(conf), 0))
		return -ENOENT;
	val[3] = (uint32_t)l2;
	return bpf_map__update_elem(conf, &zero, sizeof(zero), val, bpf_map__value_size(conf), 0);
}

/* libbpf 1.1 has no .struct_ops.link: let it fill in the program fds and write the map value (a BPF_F_LINK
 * map is not registered by that), then create the link ourselves. The link fd, or -errno. */
static int struct_ops_link(const struct module_desc *m, struct bpf_object *obj)
{
	struct bpf_map *map = bpf_object__find_map_by_name(obj, m->ops_map);
	struct bpf_link *tmp = bpf_map__attach_struct_ops(map);

	if (!tmp)
		return fail(EXIT_FAIL, "%s: cannot write the struct_ops map: %s", m->name, strerror(errno)), -EINVAL;
	bpf_link__disconnect(tmp);
	bpf_link__destroy(tmp);
	return bpf_link_create(bpf_map__fd(map), 0, CELLAB_BPF_STRUCT_OPS, NULL);
}

/* A tcx link on --dev inside --netns. The link fd; -1 with *code set when the input was wrong. */
static int tc_link(const struct ctx *c, const struct module_desc *m, struct bpf_object *obj, int *code)
{
	struct bpf_program *prog = bpf_object__find_program_by_name(obj, m->prog);
	int ifindex, l2, orig = -1, link_fd = -1;

	if (c->netns) {
		orig = netns_enter(c->netns);
		if (orig < 0) {
			*code = fail(EXIT_INPUT, "%s: netns %s: %s", m->name, c->netns, strerror(-orig));
			return -1;
		}
	}
	ifindex = if_nametoindex(c->dev);
	l2 = ifindex ? l2_header_bytes(c->dev) : -1;
	if (!ifindex)
		*code = fail(EXIT_INPUT, "%s: no interface %s%s%s", m->name, c->dev, c->netns ? " in netns " : "",
			     c->netns ? c->netns : "");
	else if (l2 < 0 || write_l2(obj, l2))
		*code = fail(EXIT_INPUT, "%s: %s is neither an Ethernet nor an L3 (TUN) device", m->name, c->dev);
	else
		link_fd = bpf_link_create(bpf_program__fd(prog), ifindex,
					  m->kind == KIND_TC_INGRESS ? CELLAB_BPF_TCX_INGRESS : CELLAB_BPF_TCX_EGRESS, NULL);
	if (orig >= 0 && netns_return(orig))
		fail(EXIT_FAIL, "cannot return to the original netns: %s", strerror(errno));
	return link_fd;
}

/* Pin every map a person or another command reads, then the link. 0 or an exit code. */
static int pin_all(const struct ctx *c, const struct module_desc *m, struct bpf_object *obj, int link_fd)
{
	char dir[PATH_MAX], path[PATH_MAX * 2];
	struct bpf_map *map;
	int err;

	module_dir(c, m->name, dir, sizeof(dir));
	if (mkdir_p(dir))
		return fail(EXIT_FAIL, "cannot create %s: %s", dir, strerror(errno));
	bpf_object__for_each_map(map, obj) {
		const char *mn = bpf_map__name(map);

		if (bpf_map__type(map) == BPF_MAP_TYPE_STRUCT_OPS || strchr(mn, '.') ||
		    bpf_map__type(map) == BPF_MAP_TYPE_SK_STORAGE || bpf_map__is_pinned(map))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, mn);
		err = bpf_map__pin(map, path);
		if (err)
			return fail(EXIT_FAIL, "%s: cannot pin map %s: %s", m->name, mn, strerror(-err));
	}
	snprintf(path, sizeof(path), "%s/link", dir);
	if (bpf_obj_pin(link_fd, path))
		return fail(EXIT_FAIL, "%s: cannot pin the link at %s: %s", m->name, path, strerror(errno));
	return 0;
}

/* Load one module; *fresh = 1 when this call registered/attached it (0: it was there already). */
static int load_one(const struct ctx *c, const struct module_desc *m, int *fresh)
{
	char shared[PATH_MAX];
	LIBBPF_OPTS(bpf_object_open_opts, opts);
	struct bpf_object *obj;
	struct bpf_map *map;
	void *skel;
	int err, link_fd = -1, code = EXIT_FAIL;

	*fresh = 0;
	if (is_loaded(c, m->name)) {
		if (m->kind == KIND_CC) {
			params_gc(c, m);
			code = holder_add(c, m);
			if (code)
				return code;
		}
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
	link_fd = m->kind == KIND_CC ? struct_ops_link(m, obj) : tc_link(c, m, obj, &code);
	if (link_fd < 0) {
		if (code == EXIT_FAIL)
			fail(EXIT_FAIL, "%s: cannot create the BPF link: %s", m->name, strerror(-link_fd));
		goto out;
	}
	code = pin_all(c, m, obj, link_fd);
	if (code)
		goto out_unpin;
	code = EXIT_FAIL;
	if (m->kind == KIND_CC && !cc_available(m->name)) {
		fail(EXIT_FAIL, "%s: registered, but not in tcp_available_congestion_control", m->name);
		goto out_unpin;
	}
	if (m->kind == KIND_CC) {
		holders_drop(c, m); /* whatever a module of this name left before is not ours */
		code = holder_add(c, m);
		if (code)
			goto out_unpin;
	}
	code = 0;
	*fresh = 1;
	printf("%s: loaded\n", m->name);
	goto out;

out_unpin:
	close(link_fd);
	link_fd = -1;
	m->destroy(skel);
	skel = NULL;
	remove_module(c, m);
out:
	if (link_fd >= 0)
		close(link_fd);
	if (skel)
		m->destroy(skel);
	if (code && m->uses_or_flows)
		cleanup_shared(c);
	return code;
}

int cmd_load(const struct ctx *c, const char *const *names, int n)
{
	int fresh[MAX_ARGS] = { 0 }, code;

	for (int i = 0; i < n; i++) {
		const struct module_desc *m = registry_find(names[i]);

		code = load_one(c, m, &fresh[i]);
		if (code) {
			/* Nothing half-loaded: undo what this command did before the failure. */
			for (int j = 0; j < i; j++) {
				const struct module_desc *u = registry_find(names[j]);

				if (fresh[j])
					unload_module(c, u, 1);
				else if (u->kind == KIND_CC)
					holder_release(c, u);
			}
			return code;
		}
	}
	return 0;
}
