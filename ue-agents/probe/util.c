#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t now_realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    double mult = 1;
    if (*end == 'K' || *end == 'k') mult = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') mult = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g') mult = 1024.0 * 1024 * 1024, end++;
    if (*end != '\0')
        return -1;
    *out = (uint64_t)(v * mult);
    return 0;
}

int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return (errno || end == s || *end != '\0') ? -1 : 0;
}

int outfile_open(struct outfile *o, const char *path)
{
    memset(o, 0, sizeof(*o));
    if (!path || !strcmp(path, "-")) {
        o->f = stdout;
        o->is_stdout = 1;
        return 0;
    }
    snprintf(o->path, sizeof(o->path), "%s", path);
    snprintf(o->tmp, sizeof(o->tmp), "%s.tmp.%d", path, (int)getpid());
    o->f = fopen(o->tmp, "w");
    return o->f ? 0 : -1;
}

int outfile_close(struct outfile *o)
{
    if (o->is_stdout) {
        fflush(stdout);
        return 0;
    }
    if (!o->f)
        return -1;
    int bad = ferror(o->f);
    if (fclose(o->f) != 0 || bad) {
        unlink(o->tmp);
        return -1;
    }
    return rename(o->tmp, o->path);
}
