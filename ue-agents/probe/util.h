/* Small helpers shared by the subcommands: argument parsing, clocks, atomic summary files. */
#ifndef CELLAB_UTIL_H
#define CELLAB_UTIL_H

#include <stdint.h>
#include <stdio.h>

uint64_t now_realtime_ns(void);
/* "1500", "64K", "10M", "1G" (binary multiples). 0 on success. */
int parse_size(const char *s, uint64_t *out);
int parse_double(const char *s, double *out);

/* Summary output: a temporary file renamed into place on close, so a reader never sees half of it.
 * path "-" or NULL = stdout. */
struct outfile { FILE *f; char path[4096]; char tmp[4200]; int is_stdout; };
int outfile_open(struct outfile *o, const char *path);
int outfile_close(struct outfile *o);

#endif
