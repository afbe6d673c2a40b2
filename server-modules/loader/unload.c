/* unload: a congestion control goes when its last live holder lets go (or with --force); a tc program goes
 * at once. Unregistering detaches the pinned link, unpins, and waits until the kernel has dropped the name;
 * established connections keep their congestion control. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "holders.h"
#include "lifecycle.h"
#include "params.h"

/* Remove every pin of one module, the link first: that unregisters (CC) or detaches (tc). */
static void unpin_dir(const struct ctx *c, const char *name)
{
	char dir[PATH_MAX], path[PATH_MAX * 2];

	module_dir(c, name, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/link", dir);
	unlink(path);
	remove_flat_dir(dir);
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

void cleanup_shared(const struct ctx *c)
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

void remove_module(const struct ctx *c, const struct module_desc *m)
{
	int was = is_loaded(c, m->name);

	if (was)
		detach_link(c, m);
	unpin_dir(c, m->name);
	if (m->kind == KIND_CC)
		holders_drop(c, m);
	if (was)
		wait_unregistered(m);
	if (m->uses_or_flows)
		cleanup_shared(c);
	else {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/cellab", c->bpffs);
		rmdir(path);
	}
}

/* This caller lets go of the module; it is unregistered when no live holder remains, or at once with force.
 * A namespace's parameters stay while the module does (`clear` drops them; they go with the namespace): an
 * agent that lets go in its safe state and comes back finds its instance's values where it left them.
 * only_held: leave the module alone unless this caller held it (`unload --all` for one namespace or process). */
static int release_module(const struct ctx *c, const struct module_desc *m, int force, int only_held)
{
	int was = is_loaded(c, m->name), held_it;
	char held[1024];

	if (m->kind == KIND_CC && was && !force) {
		held_it = holder_release(c, m);
		params_gc(c, m);
		if (only_held && !held_it)
			return 0;
		if (holders_live(c, m, 1, held, sizeof(held)) > 0) {
			printf("%s: still held by %s\n", m->name, held);
			return 0;
		}
	}
	remove_module(c, m);
	printf("%s: %s\n", m->name, was ? "unloaded" : "not loaded");
	return 0;
}

int unload_module(const struct ctx *c, const struct module_desc *m, int force)
{
	return release_module(c, m, force, 0);
}

/* --all: a namespace or process (--netns, --holder-pid) lets go of every congestion control it holds; without
 * either, everything goes that no live holder keeps (tc programs at once), and with --force everything. */
int cmd_unload(const struct ctx *c, const char *const *names, int n)
{
	int holder = (c->netns || c->holder_pid) && !c->force;

	if (c->all) {
		for (unsigned i = 0; i < registry_count(); i++) {
			const struct module_desc *m = registry_at(i);

			if (is_loaded(c, m->name) && (!holder || m->kind == KIND_CC))
				release_module(c, m, c->force, holder);
		}
		cleanup_shared(c);
		return 0;
	}
	for (int i = 0; i < n; i++)
		unload_module(c, registry_find(names[i]), c->force);
	return 0;
}
