/* Registering and unregistering: load (register a CC or attach a tc program, pin the link and maps) and
 * unload (a CC: when its last holder lets go; a tc program: at once). */
#ifndef CELLAB_LOADER_LIFECYCLE_H
#define CELLAB_LOADER_LIFECYCLE_H

#include "common.h"

int cmd_load(const struct ctx *c, const char *const *names, int n);
int cmd_unload(const struct ctx *c, const char *const *names, int n);
int unload_module(const struct ctx *c, const struct module_desc *m, int force);
void remove_module(const struct ctx *c, const struct module_desc *m); /* at once, whoever holds it */
void cleanup_shared(const struct ctx *c);

#endif
