/* list: every module the loader knows, loaded or not, as one JSON object. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "holders.h"
#include "netns.h"
#include "params.h"
#include "report.h"

static const char *kind_name(const struct module_desc *m)
{
	return m->kind == KIND_CC ? "congestion_control" : (m->kind == KIND_TC_INGRESS ? "tc_ingress" : "tc_egress");
}

/* The values a flow in --netns sees (host-wide without --netns); the defaults when not loaded. */
static void print_params(const struct ctx *c, const struct module_desc *m)
{
	uint32_t val[CONF_WORDS];
	int have = is_loaded(c, m->name) && params_effective(c, m, val) == 0;

	printf("\"params\": {");
	for (unsigned i = 0; i < m->n_params; i++) {
		const struct param_desc *p = &m->params[i];
		double v = have ? val[p->field] / p->scale : p->dflt;

		printf("%s\"%s\": %.10g", i ? ", " : "", p->name, v);
	}
	printf("}");
}

int cmd_list(const struct ctx *c)
{
	uint64_t cookie;
	uint32_t inum;

	if (c->netns && netns_identity(c->netns, &cookie, &inum))
		return fail(EXIT_INPUT, "netns %s: no such namespace under /run/netns", c->netns);
	printf("{");
	if (c->netns)
		printf("\"netns\": \"%s\", ", c->netns);
	printf("\"modules\": [");
	for (unsigned i = 0; i < registry_count(); i++) {
		const struct module_desc *m = registry_at(i);
		int loaded = is_loaded(c, m->name);

		printf("%s\n  {\"name\": \"%s\", \"kind\": \"%s\", \"loaded\": %s, \"registered\": %s, ", i ? "," : "",
		       m->name, kind_name(m), loaded ? "true" : "false",
		       m->kind == KIND_CC && cc_available(m->name) ? "true" : "false");
		print_params(c, m);
		printf(", \"param_ranges\": {");
		for (unsigned j = 0; j < m->n_params; j++)
			printf("%s\"%s\": [%.10g, %.10g, \"%s\"]", j ? ", " : "", m->params[j].name, m->params[j].min,
			       m->params[j].max, m->params[j].unit);
		/* the value's resolution (1 / scale): a parameter of step 1 takes whole numbers only (set refuses 0.5) */
		printf("}, \"param_steps\": {");
		for (unsigned j = 0; j < m->n_params; j++)
			printf("%s\"%s\": %.10g", j ? ", " : "", m->params[j].name, 1.0 / m->params[j].scale);
		printf("}, \"param_scopes\": {");
		for (unsigned j = 0; j < m->n_params; j++)
			printf("%s\"%s\": \"%s\"", j ? ", " : "", m->params[j].name, param_scope(m, &m->params[j]));
		printf("}, \"holders\": ");
		if (m->kind == KIND_CC && loaded)
			holders_json(c, m);
		else
			printf("[]");
		printf(", ");
		params_overrides_json(c, m);
		printf("}");
	}
	printf("\n]}\n");
	return 0;
}
