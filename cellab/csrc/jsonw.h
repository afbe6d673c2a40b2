/* A tiny streaming JSON writer for the C programs (cellab-flowstat, cellab-probe): the caller names keys
 * and values, the writer places commas and nesting; closing the top level ends the line. */
#ifndef CELLAB_JSONW_H
#define CELLAB_JSONW_H

#include <stdio.h>

#define JSONW_MAX_DEPTH 16

struct jsonw {
    FILE *out;
    int depth;
    int first[JSONW_MAX_DEPTH]; /* 1 when the next item at this depth is the first */
};

void jw_init(struct jsonw *w, FILE *out);
void jw_obj_open(struct jsonw *w, const char *key);   /* key NULL inside arrays / at top */
void jw_obj_close(struct jsonw *w);
void jw_arr_open(struct jsonw *w, const char *key);
void jw_arr_close(struct jsonw *w);
void jw_str(struct jsonw *w, const char *key, const char *val);   /* val NULL -> null */
void jw_num(struct jsonw *w, const char *key, double val);        /* non-finite -> null */
void jw_int(struct jsonw *w, const char *key, long long val);
void jw_bool(struct jsonw *w, const char *key, int val);
void jw_null(struct jsonw *w, const char *key);
/* an array of n_rows strings stored as fixed-width rows (char rows[N][row_len]) */
void jw_str_rows(struct jsonw *w, const char *key, const char *rows, size_t row_len, int n_rows);

#endif
