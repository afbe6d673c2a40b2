/* cellab-cell: its long-lived logs (the TTI log, its own clock, its stdout) bounded on disk. With --log-max-bytes N a log
 * is written in segments of at most N/2 bytes: when the next write would pass that, the segment is renamed
 * PATH.1 (replacing the older one) and a new PATH begins with its own header. PATH and PATH.1 together stay
 * within N, and the latest N/2 bytes or more are always there (emulator/vlab.py joins the two). */
#include "cell.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

FILE *log_create(const char *path, size_t buffer_bytes)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644); /* never through a link */
    FILE *f = fd < 0 ? NULL : fdopen(fd, "wb");
    if (!f) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    setvbuf(f, NULL, _IOFBF, buffer_bytes);
    return f;
}

int log_full(uint64_t max_bytes, uint64_t written_bytes, size_t more_bytes)
{
    return max_bytes > 0 && written_bytes + more_bytes > max_bytes / 2;
}

FILE *log_rotate(FILE *f, const char *path, size_t buffer_bytes)
{
    char older[4096];
    fclose(f);
    if (snprintf(older, sizeof(older), "%s.1", path) >= (int)sizeof(older) || rename(path, older) < 0) {
        char extra[160];
        snprintf(extra, sizeof(extra), "\"error\": \"%s\"", strerror(errno));
        fprintf(stdout, "{\"event\": \"log_rotate_failed\", %s}\n", extra);
        fflush(stdout);
        return NULL; /* logging stops rather than grow past its bound */
    }
    return log_create(path, buffer_bytes);
}

/* The cell's stdout when it is the file --stdout-log names (its events; stderr too when it is the same file): before
 * a line that would pass half the bound, PATH becomes PATH.1 and both go on in a new PATH. When no new file can be
 * made the file is emptied in place instead: its events are lost, never the bound. */
void stdout_log_room(const struct cell *c, size_t more_bytes)
{
    struct stat out, err;
    if (!c->p.stdout_log_path || fflush(stdout) != 0 || fstat(STDOUT_FILENO, &out) < 0 || !S_ISREG(out.st_mode) ||
        !log_full(c->p.log_max_bytes, (uint64_t)out.st_size, more_bytes))
        return;
    int same_err = fstat(STDERR_FILENO, &err) == 0 && err.st_dev == out.st_dev && err.st_ino == out.st_ino;
    char older[4096];
    int fd = -1;
    if (snprintf(older, sizeof(older), "%s.1", c->p.stdout_log_path) < (int)sizeof(older) &&
        rename(c->p.stdout_log_path, older) == 0)
        fd = open(c->p.stdout_log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        if (ftruncate(STDOUT_FILENO, 0) == 0)
            lseek(STDOUT_FILENO, 0, SEEK_SET);
        return;
    }
    dup2(fd, STDOUT_FILENO);
    if (same_err)
        dup2(fd, STDERR_FILENO);
    close(fd);
}
