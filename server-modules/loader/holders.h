/* Who holds a registered congestion control (several lab instances on one host register the same module):
 * one file per holder under STATE/<module>/, the module stays registered while a live holder remains.
 * A holder is a network namespace (`--netns NAME`: alive while /run/netns/NAME is that same namespace),
 * a process (`--holder-pid PID`: alive while that process runs), or `host` (a person's load; only an
 * unload releases it). Every command that changes something holds the loader's host-wide lock. */
#ifndef CELLAB_LOADER_HOLDERS_H
#define CELLAB_LOADER_HOLDERS_H

#include <stddef.h>

#include "common.h"

int loader_lock(const struct ctx *c);                                 /* 0, or an exit code */
int holder_add(const struct ctx *c, const struct module_desc *m);     /* 0, or an exit code */
int holder_release(const struct ctx *c, const struct module_desc *m); /* 1 if this caller held it */
int holders_live(const struct ctx *c, const struct module_desc *m, int gc, char *names, size_t n);
void holders_drop(const struct ctx *c, const struct module_desc *m);
void holders_json(const struct ctx *c, const struct module_desc *m);

#endif
