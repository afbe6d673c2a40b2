/* A streaming JSON writer: the caller names keys and values, the writer places commas and nesting. */
#ifndef FLOWSTAT_JSON_H
#define FLOWSTAT_JSON_H

#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 12

struct json {
    FILE *out;
    int depth;
    int need_comma[JSON_MAX_DEPTH];
};

void json_begin(struct json *j, FILE *out);
void json_end(struct json *j);   /* closes the top level and adds a newline */
void json_object(struct json *j, const char *key);   /* key NULL inside arrays and at the top */
void json_array(struct json *j, const char *key);
void json_close_object(struct json *j);
void json_close_array(struct json *j);
void json_string(struct json *j, const char *key, const char *value);
void json_double(struct json *j, const char *key, double value);   /* NaN and inf become null */
void json_u64(struct json *j, const char *key, uint64_t value);
void json_i64(struct json *j, const char *key, int64_t value);
void json_bool(struct json *j, const char *key, int value);

#endif
