/* A minimal streaming JSON writer for the collector's output: one object at a time, keys and
 * values appended in order, strings escaped per RFC 8259. */
#ifndef DDPSPY_JSON_H
#define DDPSPY_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct json {
	FILE *out;
	int first; /* no comma before the next member */
};

void json_begin(struct json *j, FILE *out);          /* { */
void json_end(struct json *j);                       /* }\n */
void json_key(struct json *j, const char *k);
void json_str(struct json *j, const char *k, const char *v);         /* v NULL: null */
void json_strn(struct json *j, const char *k, const char *v, size_t n);
void json_int(struct json *j, const char *k, int64_t v);
void json_num(struct json *j, const char *k, double v);
void json_raw_escaped(FILE *out, const char *s, size_t n);          /* "..." */
/* s[0..n) escaped into buf (cap bytes with the terminator): the one escaper, valid UTF-8 out */
size_t json_escape(char *buf, size_t cap, const char *s, size_t n);
void json_fragment(FILE *out, const char *frag); /* members made elsewhere; nan/inf -> null */
/* text output: s[0..n) (SIZE_MAX: whole) with control characters as \\xNN, in a rotating buffer */
const char *text_safe(const char *s, size_t n);

#endif
