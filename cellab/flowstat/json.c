#include "json.h"

#include <inttypes.h>
#include <math.h>

static void put_escaped(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

/* Comma and key for the next item at the current depth. */
static void item(struct json *j, const char *key)
{
    if (j->need_comma[j->depth])
        fputc(',', j->out);
    j->need_comma[j->depth] = 1;
    if (key) {
        put_escaped(j->out, key);
        fputc(':', j->out);
    }
}

static void open_(struct json *j, const char *key, char bracket)
{
    item(j, key);
    fputc(bracket, j->out);
    if (j->depth + 1 < JSON_MAX_DEPTH)
        j->depth++;
    j->need_comma[j->depth] = 0;
}

static void close_(struct json *j, char bracket)
{
    fputc(bracket, j->out);
    if (j->depth > 0)
        j->depth--;
}

void json_begin(struct json *j, FILE *out)
{
    j->out = out;
    j->depth = 0;
    j->need_comma[0] = 0;
}

void json_end(struct json *j)
{
    fputc('\n', j->out);
}

void json_object(struct json *j, const char *key) { open_(j, key, '{'); }
void json_array(struct json *j, const char *key) { open_(j, key, '['); }
void json_close_object(struct json *j) { close_(j, '}'); }
void json_close_array(struct json *j) { close_(j, ']'); }

void json_string(struct json *j, const char *key, const char *value)
{
    item(j, key);
    put_escaped(j->out, value);
}

void json_double(struct json *j, const char *key, double value)
{
    item(j, key);
    if (isfinite(value))
        fprintf(j->out, "%.9g", value);
    else
        fputs("null", j->out);
}

void json_u64(struct json *j, const char *key, uint64_t value)
{
    item(j, key);
    fprintf(j->out, "%" PRIu64, value);
}

void json_i64(struct json *j, const char *key, int64_t value)
{
    item(j, key);
    fprintf(j->out, "%" PRId64, value);
}

void json_bool(struct json *j, const char *key, int value)
{
    item(j, key);
    fputs(value ? "true" : "false", j->out);
}
