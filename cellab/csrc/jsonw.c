#include "jsonw.h"

#include <math.h>

void jw_init(struct jsonw *w, FILE *out)
{
    w->out = out;
    w->depth = 0;
    w->first[0] = 1;
}

static void put_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        default:
            if (*p < 0x20)
                fprintf(out, "\\u%04x", *p);
            else
                fputc(*p, out);
        }
    }
    fputc('"', out);
}

static void item(struct jsonw *w, const char *key)
{
    if (!w->first[w->depth])
        fputc(',', w->out);
    w->first[w->depth] = 0;
    if (key) {
        put_string(w->out, key);
        fputc(':', w->out);
    }
}

static void push(struct jsonw *w)
{
    if (w->depth + 1 < JSONW_MAX_DEPTH)
        w->depth++;
    w->first[w->depth] = 1;
}

void jw_obj_open(struct jsonw *w, const char *key) { item(w, key); fputc('{', w->out); push(w); }
void jw_obj_close(struct jsonw *w) { w->depth--; fputc('}', w->out); if (w->depth == 0) fputc('\n', w->out); }
void jw_arr_open(struct jsonw *w, const char *key) { item(w, key); fputc('[', w->out); push(w); }
void jw_arr_close(struct jsonw *w) { w->depth--; fputc(']', w->out); }

void jw_str_rows(struct jsonw *w, const char *key, const char *rows, size_t row_len, int n_rows)
{
    jw_arr_open(w, key);
    for (int i = 0; i < n_rows; i++)
        jw_str(w, NULL, rows + (size_t)i * row_len);
    jw_arr_close(w);
}

void jw_str(struct jsonw *w, const char *key, const char *val)
{
    item(w, key);
    if (val)
        put_string(w->out, val);
    else
        fputs("null", w->out);
}

void jw_num(struct jsonw *w, const char *key, double val)
{
    item(w, key);
    if (isfinite(val))
        fprintf(w->out, "%.15g", val);  /* epoch seconds keep their microseconds */
    else
        fputs("null", w->out);
}

void jw_int(struct jsonw *w, const char *key, long long val) { item(w, key); fprintf(w->out, "%lld", val); }
void jw_bool(struct jsonw *w, const char *key, int val) { item(w, key); fputs(val ? "true" : "false", w->out); }
void jw_null(struct jsonw *w, const char *key) { item(w, key); fputs("null", w->out); }
