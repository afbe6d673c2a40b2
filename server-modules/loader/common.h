/* What every unit of cellab-modules shares: the invocation's options, exit codes, kernel constants, and
 * small helpers over bpffs pins and the module state directory (util.c). */
#ifndef CELLAB_LOADER_COMMON_H
#define CELLAB_LOADER_COMMON_H

#include <stddef.h>
#include <stdint.h>

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

#define CONF_WORDS 16        /* bpf/cellab_cc.h CELLAB_CONF_WORDS */
#define NETNS_NAME_MAX 32    /* bpf/cellab_cc.h CELLAB_NETNS_NAME, NUL included */
#define MAX_ARGS 32

/* bpf/cellab_cc.h struct cellab_ns_conf: one namespace's parameters in a module's `ns_conf` map. */
struct ns_conf_val {
	uint32_t val[CONF_WORDS];
	uint32_t set_mask;
	uint32_t inum;
	uint64_t cookie;
	char name[NETNS_NAME_MAX];
};

struct ctx {
	const char *bpffs;      /* /sys/fs/bpf */
	const char *btf_path;   /* the running kernel's BTF */
	const char *state_dir;  /* /run/cellab/modules: the loader's lock and the modules' holders */
	const char *netns;      /* tc modules: namespace of --dev; CC modules: the namespace a load/set/... is for */
	const char *dev;
	const char *dst;        /* set: destination prefix */
	int holder_pid;         /* --holder-pid: the process a load is for (0: none) */
	int verbose, all, force, flows;
};

int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void say_unknown_module(const char *name);
int mkdir_p(const char *path);
void remove_flat_dir(const char *dir);
int ensure_bpffs(const struct ctx *c);
int cc_available(const char *name);
void module_dir(const struct ctx *c, const char *name, char *out, size_t n);
int is_loaded(const struct ctx *c, const char *name);
int open_pinned(const struct ctx *c, const char *name, const char *map);
int read_host_conf(const struct ctx *c, const struct module_desc *m, uint32_t val[CONF_WORDS]);
const char *param_scope(const struct module_desc *m, const struct param_desc *p);
void json_name(const char *s);

#endif
