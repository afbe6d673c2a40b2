/* Module parameters: the host-wide `conf` entry, each namespace's entry in `ns_conf`, and c2tcp's
 * per-destination Targets (`targets`, host-wide or per namespace). */
#ifndef CELLAB_LOADER_PARAMS_H
#define CELLAB_LOADER_PARAMS_H

#include <stdint.h>

#include "common.h"

int cmd_set(const struct ctx *c, const struct module_desc *m, const char *pname, const char *vtext);
int cmd_clear(const struct ctx *c, const char *const *names, int n);
int params_effective(const struct ctx *c, const struct module_desc *m, uint32_t val[CONF_WORDS]);
void params_gc(const struct ctx *c, const struct module_desc *m);
int params_clear_netns(const struct ctx *c, const struct module_desc *m, const char *name);
void params_overrides_json(const struct ctx *c, const struct module_desc *m);

#endif
