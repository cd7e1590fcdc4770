/* tracemeta.c, for trace.c: msgpack-c object helpers and the readers of the records other than
 * events, which trace_read dispatches to. */
#ifndef DDPSPY_TRACEMETA_H
#define DDPSPY_TRACEMETA_H

#include <msgpack.h>
#include <stdint.h>

#include "tracefile.h"

/* a map's value at key (NULL: none); an integer's value (0: not an integer); an integer at key or
 * def; a string at key copied into buf (n bytes, terminated; "" when none); a string's copy */
const msgpack_object *trace_mp_get(const msgpack_object *map, const char *key);
int trace_mp_int(const msgpack_object *o, int64_t *v);
int64_t trace_mp_int_or(const msgpack_object *map, const char *key, int64_t def);
void trace_mp_str_into(const msgpack_object *map, const char *key, char *buf, size_t n);
char *trace_mp_dup_str(const msgpack_object *o);

/* the records (docs/format.md), each into f; -1: malformed (the file is damaged there) */
int trace_rd_header(struct trace_file *f, const msgpack_object *m);
void trace_rd_identity(struct trace_file *f, const msgpack_object *m);
int trace_rd_modules(struct trace_file *f, const msgpack_object *m);
int trace_rd_stacks(struct trace_file *f, const msgpack_object *m);
int trace_rd_names(struct trace_file *f, const msgpack_object *m);
int trace_rd_pyframes(struct trace_file *f, const msgpack_object *m);
void trace_free_stacks(struct trace_file *f); /* the stack table and its Python frames */
void trace_rd_gpu(struct trace_file *f, const msgpack_object *m);
struct trace_inflight;
int trace_rd_inflight(const msgpack_object *m, struct trace_inflight *c);
/* a loss or end record's count of events the file did not take (cumulative), and its write error */
void trace_rd_unwritten(struct trace_file *f, const msgpack_object *m);
/* a record of any kind but those trace.c reads itself (header, calibration, events, CPU samples,
 * calls in flight) into f and to v (*stop: the visitor stopped); unknown kinds (a newer writer's)
 * skipped; -1: malformed */
struct trace_visitor;
int trace_rd_record(struct trace_file *f, const char *kind, const msgpack_object *m, const struct trace_visitor *v,
		    int *stop);

/* the file's span begins: the losses so far are its baseline (f->dropped counts from here on) */
void trace_span_enter(struct trace_file *f);

#endif
