/* cellab-modules: load, list, unload and configure the cellab BPF modules.
 *
 *   cellab-modules load NAME... [--netns NS] [--dev IF] [--holder-pid PID]
 *                                                     register (CC) or attach (tc) and pin the link; a CC
 *                                                     already registered is reused (one more holder)
 *   cellab-modules unload NAME...|--all [--netns NS] [--holder-pid PID] [--force]
 *                                                     let go; a CC is unregistered when no holder is left
 *   cellab-modules list [--netns NS]                  JSON: every module, loaded or not, and its params
 *   cellab-modules set NAME PARAM VALUE [--dst CIDR] [--netns NS]
 *                                                     one parameter: host-wide, or for one namespace
 *   cellab-modules clear [NAME...] --netns NS         drop a namespace's parameters
 *   cellab-modules stats NAME [--flows [--netns NS]]  JSON: the module's counters (c2tcp: its flows)
 *
 * Units: main.c (arguments, dispatch), load.c / unload.c (lifecycle), holders.c (who holds a module, the
 * loader's lock), params.c (set, clear, per-namespace entries), list.c / stats.c (JSON), netns.c, util.c,
 * registry.c (the modules). Links and maps are pinned under /sys/fs/bpf/cellab/<name>/ (bpffs is mounted
 * if needed), so the modules outlive this process; holders live under /run/cellab/modules/<name>/.
 * Exit codes: 0 ok, 1 failure, 2 bad input, 3 not root, 4 no BTF.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "holders.h"
#include "lifecycle.h"
#include "netns.h"
#include "params.h"
#include "report.h"

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: cellab-modules [-v] load NAME... [--netns NS] [--dev IF] [--holder-pid PID]\n"
		"       cellab-modules unload NAME...|--all [--netns NS] [--holder-pid PID] [--force]\n"
		"       cellab-modules list [--netns NS]\n"
		"       cellab-modules set NAME PARAM VALUE [--dst CIDR] [--netns NS]\n"
		"       cellab-modules clear [NAME...] --netns NS\n"
		"       cellab-modules stats NAME [--flows] [--netns NS]\n"
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

/* Options may appear anywhere; positional arguments keep their order. 0, or an exit code. */
static int parse_args(int argc, char **argv, struct ctx *c, const char **names, int *n)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-v"))
			c->verbose = 1;
		else if (!strcmp(a, "--all"))
			c->all = 1;
		else if (!strcmp(a, "--force"))
			c->force = 1;
		else if (!strcmp(a, "--flows"))
			c->flows = 1;
		else if (!strcmp(a, "--netns") || !strcmp(a, "--dev") || !strcmp(a, "--dst") || !strcmp(a, "--holder-pid")) {
			if (i + 1 >= argc)
				return fail(EXIT_INPUT, "%s needs a value", a);
			if (!strcmp(a, "--netns"))
				c->netns = argv[++i];
			else if (!strcmp(a, "--dev"))
				c->dev = argv[++i];
			else if (!strcmp(a, "--dst"))
				c->dst = argv[++i];
			else {
				char *end;
				long pid = strtol(argv[++i], &end, 10);

				if (*end || pid <= 0 || pid > 1 << 22)
					return fail(EXIT_INPUT, "--holder-pid %s is not a process id", argv[i]);
				c->holder_pid = (int)pid;
			}
		} else if (*n < MAX_ARGS)
			names[(*n)++] = a;
		else
			return fail(EXIT_INPUT, "too many arguments");
	}
	if (c->netns && !netns_name_ok(c->netns))
		return fail(EXIT_INPUT, "--netns %s is not a namespace name (allowed: [A-Za-z0-9_.-], 1..31 characters)",
			    c->netns);
	return 0;
}

static int need_root(const char *why)
{
	return geteuid() != 0 ? fail(EXIT_NOT_ROOT, "needs root to %s", why) : 0;
}

int main(int argc, char **argv)
{
	struct ctx c = { .bpffs = "/sys/fs/bpf", .btf_path = "/sys/kernel/btf/vmlinux", .state_dir = "/run/cellab/modules" };
	const char *names[MAX_ARGS];
	int n = 0, code;
	const char *cmd;

	if (getenv("CELLAB_KERNEL_BTF"))
		c.btf_path = getenv("CELLAB_KERNEL_BTF");
	code = parse_args(argc, argv, &c, names, &n);
	if (code)
		return code;
	if (n < 1) {
		usage();
		return EXIT_INPUT;
	}
	cmd = names[0];
	if (!c.verbose)
		libbpf_set_print(libbpf_quiet);

	if (!strcmp(cmd, "list"))
		return n == 1 ? cmd_list(&c) : (usage(), EXIT_INPUT);
	/* Every module name is checked before anything is touched. */
	for (int i = 1; i < n && (strcmp(cmd, "set") || i == 1); i++) {
		if (!registry_find(names[i])) {
			say_unknown_module(names[i]);
			return EXIT_INPUT;
		}
	}
	if (!strcmp(cmd, "stats")) {
		if (n != 2) {
			usage();
			return EXIT_INPUT;
		}
		return need_root("read BPF maps") ?: cmd_stats(&c, registry_find(names[1]));
	}
	if (!strcmp(cmd, "set")) {
		if (n != 4) {
			usage();
			return EXIT_INPUT;
		}
		return need_root("write BPF maps") ?: loader_lock(&c) ?: cmd_set(&c, registry_find(names[1]), names[2], names[3]);
	}
	if (!strcmp(cmd, "clear"))
		return need_root("write BPF maps") ?: loader_lock(&c) ?: cmd_clear(&c, names + 1, n - 1);
	if (!strcmp(cmd, "load")) {
		if (n < 2) {
			usage();
			return EXIT_INPUT;
		}
		return check_privileges(&c) ?: ensure_bpffs(&c) ?: loader_lock(&c) ?: cmd_load(&c, names + 1, n - 1);
	}
	if (!strcmp(cmd, "unload")) {
		code = need_root("unpin BPF links");
		if (code)
			return code;
		if (!c.all && n < 2) {
			usage();
			return EXIT_INPUT;
		}
		return loader_lock(&c) ?: cmd_unload(&c, names + 1, n - 1);
	}
	usage();
	return fail(EXIT_INPUT, "unknown command %s (allowed: load, unload, list, set, clear, stats)", cmd);
}
