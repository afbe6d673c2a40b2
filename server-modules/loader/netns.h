/* Network namespaces by name (/run/netns/NAME, as `ip netns` makes them): enter one, and tell one apart
 * by its cookie (SO_NETNS_COOKIE, the key of the modules' ns_conf maps; never reused while the host runs)
 * and its inode (what `ip netns identify` and /proc/PID/ns/net show). */
#ifndef CELLAB_LOADER_NETNS_H
#define CELLAB_LOADER_NETNS_H

#include <stddef.h>
#include <stdint.h>

int netns_name_ok(const char *name);
int netns_enter(const char *name);  /* 0 or -errno; the caller returns with netns_return() */
int netns_return(int orig_fd);
int netns_identity(const char *name, uint64_t *cookie, uint32_t *inum);          /* 0 or -errno */
int netns_name_of(uint64_t cookie, uint32_t inum, char *out, size_t n);          /* 0: found */

#endif
