/* Network namespaces by name: enter one (setns, CLONE_NEWNET only, so the pins stay in the host's bpffs)
 * and identify one. The loader is single-threaded, so setns moves the whole process. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "netns.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71 /* include/uapi/asm-generic/socket.h, Linux 5.14 */
#endif
#define NETNS_RUN_DIR "/run/netns"

/* What `ip netns add` accepts that is also a file name of ours: [A-Za-z0-9_.-], 1..31 bytes, no dot first. */
int netns_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n >= 32 || name[0] == '.')
		return 0;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '_' || *p == '.' || *p == '-'))
			return 0;
	return 1;
}

static int enter_fd_of(const char *path, int *orig)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return -errno;
	*orig = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (*orig < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	err = setns(fd, CLONE_NEWNET) ? -errno : 0;
	close(fd);
	if (err) {
		close(*orig);
		*orig = -1;
	}
	return err;
}

/* Enter /run/netns/NAME; returns the fd of the namespace to go back to (>= 0), or -errno. */
int netns_enter(const char *name)
{
	char path[PATH_MAX];
	int orig = -1, err;

	if (!netns_name_ok(name))
		return -EINVAL;
	snprintf(path, sizeof(path), NETNS_RUN_DIR "/%s", name);
	err = enter_fd_of(path, &orig);
	return err ? err : orig;
}

int netns_return(int orig_fd)
{
	int err = setns(orig_fd, CLONE_NEWNET) ? -errno : 0;

	close(orig_fd);
	return err;
}

static int cookie_here(uint64_t *cookie)
{
	socklen_t len = sizeof(*cookie);
	int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0), err;

	if (s < 0)
		return -errno;
	err = getsockopt(s, SOL_SOCKET, SO_NETNS_COOKIE, cookie, &len) ? -errno : 0;
	close(s);
	return err;
}

static int identity_of_path(const char *path, uint64_t *cookie, uint32_t *inum)
{
	struct stat st;
	int orig = -1, err;

	if (stat(path, &st))
		return -errno;
	*inum = (uint32_t)st.st_ino;
	err = enter_fd_of(path, &orig);
	if (err)
		return err;
	err = cookie_here(cookie);
	if (netns_return(orig))
		return -EIO; /* cannot come back: nothing the loader does next would be right */
	return err;
}

int netns_identity(const char *name, uint64_t *cookie, uint32_t *inum)
{
	char path[PATH_MAX];

	if (!netns_name_ok(name))
		return -EINVAL;
	snprintf(path, sizeof(path), NETNS_RUN_DIR "/%s", name);
	return identity_of_path(path, cookie, inum);
}

/* The name under /run/netns of the namespace with this cookie ("host" for init's), matched on the inode
 * first so only candidates are entered. */
int netns_name_of(uint64_t cookie, uint32_t inum, char *out, size_t n)
{
	char path[PATH_MAX];
	struct dirent *e;
	struct stat st;
	uint64_t ck;
	uint32_t ino;
	DIR *d;
	int found = -ENOENT;

	if (stat("/proc/1/ns/net", &st) == 0 && (uint32_t)st.st_ino == inum &&
	    identity_of_path("/proc/1/ns/net", &ck, &ino) == 0 && ck == cookie) {
		snprintf(out, n, "host");
		return 0;
	}
	d = opendir(NETNS_RUN_DIR);
	while (d && found && (e = readdir(d))) {
		if (!netns_name_ok(e->d_name))
			continue;
		snprintf(path, sizeof(path), NETNS_RUN_DIR "/%s", e->d_name);
		if (stat(path, &st) || (uint32_t)st.st_ino != inum)
			continue;
		if (identity_of_path(path, &ck, &ino) == 0 && ck == cookie) {
			snprintf(out, n, "%s", e->d_name);
			found = 0;
		}
	}
	if (d)
		closedir(d);
	return found;
}
