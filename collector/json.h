/* The collector's one JSON writer: nested objects and arrays written as they are built, keys and
 * strings escaped per RFC 8259 into valid UTF-8 whatever the input bytes, numbers never NaN or
 * infinite (null instead). Used by report, compare and dump. */
#ifndef DDPSPY_JSON_H
#define DDPSPY_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_DEPTH 16

/* Layout: members of an array are separated by ", "; members of an object by "," with "key":
 * (compact), or by ", " with "key": (spaced, for evidence objects, and everything inside them). */
struct json {
	FILE *out;
	int depth;                           /* open containers, the top-level object included */
	unsigned char first[JSON_DEPTH];     /* nothing written in it yet */
	unsigned char array[JSON_DEPTH];
	unsigned char spaced[JSON_DEPTH];
};

/* Starts a document: its top-level object. json_end closes whatever is open and ends the line. */
void json_begin(struct json *j, FILE *out);
void json_end(struct json *j);

/* Members. key is the member's name in an object and must be NULL in an array. */
void json_obj(struct json *j, const char *key);        /* { ... json_close */
void json_obj_spaced(struct json *j, const char *key); /* the same, spaced (see above) */
void json_arr(struct json *j, const char *key);        /* [ ... json_close */
void json_close(struct json *j);                       /* } or ] of the innermost open one */
void json_str(struct json *j, const char *key, const char *v);          /* v NULL: null */
void json_strn(struct json *j, const char *key, const char *v, size_t n);
void json_int(struct json *j, const char *key, int64_t v);
void json_num(struct json *j, const char *key, double v);               /* %.6g */
void json_fixed(struct json *j, const char *key, double v, int decimals); /* %.Nf */
void json_bool(struct json *j, const char *key, int v);
void json_null(struct json *j, const char *key);

/* s[0..n) as the inside of a JSON string into buf (cap bytes with the terminator): the one
 * escaper, valid UTF-8 out; returns the length written */
size_t json_escape(char *buf, size_t cap, const char *s, size_t n);
/* s[0..n) (SIZE_MAX: up to its NUL; NULL: empty) as a quoted JSON string to out, escaped as above */
void json_put_string(FILE *out, const char *s, size_t n);
/* HTML text and attribute values: s[0..n) (SIZE_MAX: up to its NUL; NULL: nothing) to out with
 * & < > " ' as entities, valid UTF-8 passed, other bytes U+FFFD, control characters \\xNN */
void html_put(FILE *out, const char *s, size_t n);
/* text output: s[0..n) (SIZE_MAX: whole) with control characters as \\xNN, in a rotating buffer */
const char *text_safe(const char *s, size_t n);

#endif
