/* cellab-cell: its long-lived logs (the TTI log, its own clock) bounded on disk. With --log-max-bytes N a log
 * is written in segments of at most N/2 bytes: when the next write would pass that, the segment is renamed
 * PATH.1 (replacing the older one) and a new PATH begins with its own header. PATH and PATH.1 together stay
 * within N, and the latest N/2 bytes or more are always there (emulator/vlab.py joins the two). */
#include "cell.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
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
