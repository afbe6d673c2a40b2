/* JSON output: `list` (every module, its parameters, ranges, scopes, holders and overrides) and `stats`
 * (a module's counters, or c2tcp's per-flow records with --flows). */
#ifndef CELLAB_LOADER_REPORT_H
#define CELLAB_LOADER_REPORT_H

#include "common.h"

int cmd_list(const struct ctx *c);
int cmd_stats(const struct ctx *c, const struct module_desc *m);

#endif
