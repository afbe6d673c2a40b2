/* Holders of registered congestion controls and the loader's lock (see holders.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "holders.h"
#include "netns.h"

#define LOCK_WAIT_S 120

/* Serialises every loader that changes something (load, unload, set, clear) on this host, across
 * checkouts: two lab instances asking for the same module at once see one register it and the other
 * find it registered. Held until the process exits; short (no loader waits on a flow). */
int loader_lock(const struct ctx *c)
{
	char path[PATH_MAX];
	int fd;

	if (mkdir_p(c->state_dir))
		return fail(EXIT_FAIL, "cannot create %s: %s", c->state_dir, strerror(errno));
	snprintf(path, sizeof(path), "%s/lock", c->state_dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return fail(EXIT_FAIL, "cannot open %s: %s", path, strerror(errno));
	for (int waited = 0; flock(fd, LOCK_EX | LOCK_NB); waited++) {
		if (errno != EWOULDBLOCK || waited >= LOCK_WAIT_S * 10) {
			close(fd);
			return fail(EXIT_FAIL, "%s stayed locked by another loader for %d s", path, LOCK_WAIT_S);
		}
		usleep(100 * 1000);
	}
	return 0; /* the fd stays open: the lock lasts as long as this process */
}

static unsigned long long pid_start_time(int pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	FILE *f;
	size_t got;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	got = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[got] = 0;
	p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
	if (!p)
		return 0;
	/* after ") ": state is field 3; starttime is field 22 */
	p++;
	for (int field = 3; field <= 22 && p; field++) {
		p = strchr(p + 1, ' ');
		if (field == 21 && p)
			start = strtoull(p + 1, NULL, 10);
	}
	return start;
}

/* This invocation's holder: its file name and what the file says. */
static int holder_self(const struct ctx *c, char *id, size_t idn, char *rec, size_t recn)
{
	if (c->netns) {
		uint64_t cookie;
		uint32_t inum;
		int err = netns_identity(c->netns, &cookie, &inum);

		if (err)
			return fail(EXIT_INPUT, "netns %s: %s", c->netns, strerror(-err));
		snprintf(id, idn, "netns-%s", c->netns);
		snprintf(rec, recn, "netns %s %llu\n", c->netns, (unsigned long long)cookie);
	} else if (c->holder_pid) {
		unsigned long long start = pid_start_time(c->holder_pid);

		if (!start)
			return fail(EXIT_INPUT, "--holder-pid %d: no such process", c->holder_pid);
		snprintf(id, idn, "pid-%d", c->holder_pid);
		snprintf(rec, recn, "pid %d %llu\n", c->holder_pid, start);
	} else {
		snprintf(id, idn, "host");
		snprintf(rec, recn, "host\n");
	}
	return 0;
}

static int holder_alive(const char *rec)
{
	char name[64];
	unsigned long long key;
	int pid;

	if (sscanf(rec, "netns %63s %llu", name, &key) == 2) {
		uint64_t cookie;
		uint32_t inum;

		return netns_identity(name, &cookie, &inum) == 0 && cookie == key;
	}
	if (sscanf(rec, "pid %d %llu", &pid, &key) == 2)
		return pid > 0 && pid_start_time(pid) == key;
	return strncmp(rec, "host", 4) == 0;
}

static void holders_path(const struct ctx *c, const struct module_desc *m, const char *id, char *out, size_t n)
{
	if (id)
		snprintf(out, n, "%s/%s/%s", c->state_dir, m->name, id);
	else
		snprintf(out, n, "%s/%s", c->state_dir, m->name);
}

int holder_add(const struct ctx *c, const struct module_desc *m)
{
	char id[96], rec[160], path[PATH_MAX];
	int code = holder_self(c, id, sizeof(id), rec, sizeof(rec)), fd;
	ssize_t len = (ssize_t)strlen(rec);

	if (code)
		return code;
	holders_path(c, m, NULL, path, sizeof(path));
	if (mkdir_p(path))
		return fail(EXIT_FAIL, "cannot create %s: %s", path, strerror(errno));
	holders_path(c, m, id, path, sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, rec, len) != len) {
		code = fail(EXIT_FAIL, "cannot write %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return code;
	}
	close(fd);
	return 0;
}

/* By name only: a namespace that is gone can still let go of what it held. */
int holder_release(const struct ctx *c, const struct module_desc *m)
{
	char id[96], path[PATH_MAX];

	if (c->netns)
		snprintf(id, sizeof(id), "netns-%s", c->netns);
	else if (c->holder_pid)
		snprintf(id, sizeof(id), "pid-%d", c->holder_pid);
	else
		snprintf(id, sizeof(id), "host");
	holders_path(c, m, id, path, sizeof(path));
	return unlink(path) == 0;
}

/* Live holders of a module (gc: remove the dead ones' files); their names, comma-separated, into names. */
int holders_live(const struct ctx *c, const struct module_desc *m, int gc, char *names, size_t n)
{
	char dir[PATH_MAX], path[PATH_MAX * 2], rec[160];
	struct dirent *e;
	int live = 0;
	DIR *d;

	if (names && n)
		names[0] = 0;
	holders_path(c, m, NULL, dir, sizeof(dir));
	d = opendir(dir);
	while (d && (e = readdir(d))) {
		FILE *f;
		size_t got;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		got = fread(rec, 1, sizeof(rec) - 1, f);
		fclose(f);
		rec[got] = 0;
		if (!holder_alive(rec)) {
			if (gc)
				unlink(path);
			continue;
		}
		live++;
		if (names && strlen(names) + strlen(e->d_name) + 3 < n)
			snprintf(names + strlen(names), n - strlen(names), "%s%s", live > 1 ? ", " : "", e->d_name);
	}
	if (d)
		closedir(d);
	return live;
}

void holders_drop(const struct ctx *c, const struct module_desc *m)
{
	char dir[PATH_MAX];

	holders_path(c, m, NULL, dir, sizeof(dir));
	remove_flat_dir(dir);
}

void holders_json(const struct ctx *c, const struct module_desc *m)
{
	char names[2048], *tok, *save = NULL;
	int first = 1;

	holders_live(c, m, 0, names, sizeof(names));
	printf("[");
	for (tok = strtok_r(names, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		printf("%s", first ? "" : ", ");
		json_name(tok);
		first = 0;
	}
	printf("]");
}
