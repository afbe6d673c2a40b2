/* The modules cellab-modules knows: their skeletons, kinds, parameters and counters. */
#ifndef CELLAB_REGISTRY_H
#define CELLAB_REGISTRY_H

#include <stdint.h>
#include <bpf/libbpf.h>

enum module_kind {
	KIND_CC,          /* struct_ops tcp_congestion_ops, registered through a pinned struct_ops link */
	KIND_TC_INGRESS,  /* tcx ingress program on one interface, pinned link */
	KIND_TC_EGRESS,   /* tcx egress program on one interface, pinned link */
};

/* One u32 field of the module's `conf` array entry (index = field position). */
/* Where a parameter's value lives: SCOPE_NETNS, each network namespace (a lab instance) has its own (every
 * congestion control's conf, keyed by netns cookie); SCOPE_HOST, one value for the whole host, it cannot be set
 * per namespace (a tc program's: one attachment per host). `list` reports it as param_scopes, and cellab's
 * dispatcher never runs two runs that disagree on a SCOPE_HOST parameter on one host at once. */
enum param_scope_kind { SCOPE_NETNS, SCOPE_HOST };

struct param_desc {
	const char *name;
	unsigned field;
	double min, max;    /* in the user's unit */
	double scale;       /* stored = value * scale */
	double dflt;        /* in the user's unit */
	const char *unit;
	enum param_scope_kind scope;
};

struct module_desc {
	const char *name;
	enum module_kind kind;
	const char *ops_map;          /* struct_ops map (KIND_CC) */
	const char *prog;             /* tc program (KIND_TC_*) */
	void *(*open)(const struct bpf_object_open_opts *opts);
	int (*load)(void *skel);
	void (*destroy)(void *skel);
	struct bpf_object *(*obj)(void *skel);
	const struct param_desc *params;
	unsigned n_params;
	unsigned conf_fields;         /* u32 fields in the conf entry */
	const char *const *counters;  /* names of the stats map entries */
	unsigned n_counters;
	int uses_or_flows;            /* shares the or_flows map */
	int has_prefix_targets;       /* LPM map `targets` (c2tcp): set ... --dst PREFIX */
	int has_flow_log;             /* LRU map `flow_log` (c2tcp): stats ... --flows */
};

const struct module_desc *registry_find(const char *name);
const struct module_desc *registry_at(unsigned i);
unsigned registry_count(void);

#endif
