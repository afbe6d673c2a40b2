/* Helpers every command uses: messages, directories, bpffs, pinned maps, the registered CCs. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "common.h"

int fail(int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "cellab-modules: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	return code;
}

void say_unknown_module(const char *name)
{
	fprintf(stderr, "cellab-modules: unknown module %s (allowed:", name);
	for (unsigned j = 0; j < registry_count(); j++)
		fprintf(stderr, " %s", registry_at(j)->name);
	fprintf(stderr, ")\n");
}

int mkdir_p(const char *path)
{
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

/* A state folder and the files in it (it holds no subfolders); a missing one is fine. */
void remove_flat_dir(const char *dir)
{
	char path[PATH_MAX * 2];
	struct dirent *e;
	DIR *d = opendir(dir);

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

int ensure_bpffs(const struct ctx *c)
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

int cc_available(const char *name)
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

void module_dir(const struct ctx *c, const char *name, char *out, size_t n)
{
	snprintf(out, n, "%s/cellab/%s", c->bpffs, name);
}

int is_loaded(const struct ctx *c, const char *name)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/cellab/%s/link", c->bpffs, name);
	return stat(path, &st) == 0;
}

int open_pinned(const struct ctx *c, const char *name, const char *map)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/cellab/%s/%s", c->bpffs, name, map);
	return bpf_obj_get(path);
}

/* The host-wide conf entry (words beyond the module's own stay 0). 0, or -errno. */
int read_host_conf(const struct ctx *c, const struct module_desc *m, uint32_t val[CONF_WORDS])
{
	uint32_t zero = 0;
	int fd = open_pinned(c, m->name, "conf"), err;

	memset(val, 0, CONF_WORDS * sizeof(uint32_t));
	if (fd < 0)
		return -ENOENT;
	err = bpf_map_lookup_elem(fd, &zero, val) ? -errno : 0;
	close(fd);
	return err;
}

/* As the registry declares it (registry.h): "netns", every flow reads it from its own namespace's entry;
 * "host", one value for the whole host. Only a congestion control has per-namespace entries, so a tc
 * program's parameter is host-scoped whatever its declaration says. */
const char *param_scope(const struct module_desc *m, const struct param_desc *p)
{
	return m->kind == KIND_CC && p->scope == SCOPE_NETNS ? "netns" : "host";
}

/* A JSON string of a name we stored (namespace names are checked on the way in; this is belt and braces). */
void json_name(const char *s)
{
	putchar('"');
	for (; *s; s++)
		putchar((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
				strchr("_.-", *s) ? *s : '?');
	putchar('"');
}
