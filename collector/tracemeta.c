/* A trace file's records other than events (docs/format.md), read with msgpack-c's objects: the
 * header, the identity, the modules, the stacks' and names' tables, the device's record, the
 * losses, the calls in flight; the threads', stacks', names' and modules' lookups; the losses
 * before a span. trace.c's reading calls these (trace_rd_record: the kinds it does not read
 * itself). */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "base.h"
#include "trace.h"
#include "tracemeta.h"

/* ---- msgpack helpers (tracemeta.h) ---- */
const msgpack_object *trace_mp_get(const msgpack_object *map, const char *key)
{
	if (map->type != MSGPACK_OBJECT_MAP)
		return NULL;
	size_t kl = strlen(key);
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object *k = &map->via.map.ptr[i].key;
		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == kl &&
		    !memcmp(k->via.str.ptr, key, kl))
			return &map->via.map.ptr[i].val;
	}
	return NULL;
}

int trace_mp_int(const msgpack_object *o, int64_t *v)
{
	if (!o)
		return 0;
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		*v = (int64_t)o->via.u64;
		return 1;
	}
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		*v = o->via.i64;
		return 1;
	}
	return 0;
}

int64_t trace_mp_int_or(const msgpack_object *map, const char *key, int64_t def)
{
	int64_t v;
	return trace_mp_int(trace_mp_get(map, key), &v) ? v : def;
}

void trace_mp_str_into(const msgpack_object *map, const char *key, char *buf, size_t n)
{
	const msgpack_object *o = trace_mp_get(map, key);
	buf[0] = 0;
	if (o && o->type == MSGPACK_OBJECT_STR) {
		size_t l = o->via.str.size < n - 1 ? o->via.str.size : n - 1;
		memcpy(buf, o->via.str.ptr, l);
		buf[l] = 0;
	}
}

char *trace_mp_dup_str(const msgpack_object *o)
{
	if (!o || o->type != MSGPACK_OBJECT_STR)
		return strdup("");
	char *s = malloc(o->via.str.size + 1);
	if (s) {
		memcpy(s, o->via.str.ptr, o->via.str.size);
		s[o->via.str.size] = 0;
	}
	return s;
}

/* ---- metadata ---- */
struct trace_thread *trace_thread(struct trace_file *f, int tid)
{
	for (size_t i = 0; i < f->nthreads; i++)
		if (f->threads[i].tid == tid)
			return &f->threads[i];
	if ((f->nthreads & (f->nthreads - 1)) == 0) {
		size_t cap = f->nthreads ? f->nthreads * 2 : 8;
		struct trace_thread *n = realloc(f->threads, cap * sizeof *n);
		if (!n)
			return NULL;
		f->threads = n;
	}
	struct trace_thread *t = &f->threads[f->nthreads++];
	memset(t, 0, sizeof *t);
	t->tid = tid;
	return t;
}

/* The entry of a table (stacks, names) whose elements of size bytes begin with their uint32_t id.
 * Ids are assigned 1, 2, 3... in the order entries appear: entry id - 1, unless the file says
 * otherwise. */
static const void *by_id(const void *v, size_t n, size_t size, uint32_t id)
{
	const char *p = v;
	if (id >= 1 && id <= n && *(const uint32_t *)(p + (id - 1) * size) == id)
		return p + (id - 1) * size;
	for (size_t i = 0; i < n; i++)
		if (*(const uint32_t *)(p + i * size) == id)
			return p + i * size;
	return NULL;
}

_Static_assert(offsetof(struct trace_stack, id) == 0 && offsetof(struct trace_name, id) == 0,
	       "by_id reads the id first");

const struct trace_stack *trace_stack(const struct trace_file *f, uint32_t id)
{
	return by_id(f->stacks, f->nstacks, sizeof *f->stacks, id);
}

const struct trace_name *trace_name(const struct trace_file *f, uint32_t id)
{
	return by_id(f->names, f->nnames, sizeof *f->names, id);
}

/* A CUPTI time in CLOCK_MONOTONIC ns: as it is, or from CLOCK_REALTIME through the calibration
 * point nearest in real time */
const struct trace_module *trace_module_of(const struct trace_file *f, uint64_t ip)
{
	for (size_t i = 0; i < f->nmodules; i++)
		if (ip >= f->modules[i].lo && ip < f->modules[i].hi)
			return &f->modules[i];
	return NULL;
}

int trace_rd_header(struct trace_file *f, const msgpack_object *m)
{
	const msgpack_object *fmt = trace_mp_get(m, "format"), *cmd = trace_mp_get(m, "cmdline");
	trace_mp_str_into(m, "host", f->host, sizeof f->host);
	trace_mp_str_into(m, "exe", f->exe, sizeof f->exe);
	trace_mp_str_into(m, "clock", f->clock, sizeof f->clock);
	trace_mp_str_into(m, "role", f->role, sizeof f->role);
	trace_mp_str_into(m, "rank_source", f->rank_source, sizeof f->rank_source);
	trace_mp_str_into(m, "tool", f->tool, sizeof f->tool);
	f->pid = (int)trace_mp_int_or(m, "pid", -1);
	f->ppid = (int)trace_mp_int_or(m, "ppid", -1);
	f->rank = (int)trace_mp_int_or(m, "rank", -1);
	f->local_rank = (int)trace_mp_int_or(m, "local_rank", -1);
	f->world_size = (int)trace_mp_int_or(m, "world_size", -1);
	f->parent_rank = (int)trace_mp_int_or(m, "parent_rank", -1);
	f->parent_pid = (int)trace_mp_int_or(m, "parent_pid", -1);
	f->start_mono_ns = trace_mp_int_or(m, "mono_ns", 0);
	f->start_real_ns = trace_mp_int_or(m, "real_ns", 0);
	const msgpack_object *cfg = trace_mp_get(m, "config");
	f->inflight_ms = -1;
	if (cfg) {
		f->ring_kb = (long)trace_mp_int_or(cfg, "ring_kb", -1);
		f->flush_ms = (long)trace_mp_int_or(cfg, "flush_ms", -1);
		f->stack_us = (long)trace_mp_int_or(cfg, "stack_us", -1);
		f->inflight_ms = (long)trace_mp_int_or(cfg, "inflight_ms", -1);
	}
	int64_t major;
	if (fmt && fmt->type == MSGPACK_OBJECT_ARRAY && fmt->via.array.size >= 1 &&
	    trace_mp_int(&fmt->via.array.ptr[0], &major) && major != f->major)
		return -1; /* the record disagrees with the file header */
	if (cmd && cmd->type == MSGPACK_OBJECT_ARRAY) {
		f->cmdline = calloc(cmd->via.array.size + 1, sizeof(char *));
		for (uint32_t i = 0; f->cmdline && i < cmd->via.array.size; i++)
			f->cmdline[f->cmdline_n++] = trace_mp_dup_str(&cmd->via.array.ptr[i]);
	}
	f->have_header = 1;
	return 0;
}

void trace_rd_identity(struct trace_file *f, const msgpack_object *m)
{
	trace_mp_str_into(m, "role", f->role, sizeof f->role);
	trace_mp_str_into(m, "rank_source", f->rank_source, sizeof f->rank_source);
	f->rank = (int)trace_mp_int_or(m, "rank", f->rank);
	f->local_rank = (int)trace_mp_int_or(m, "local_rank", f->local_rank);
	f->world_size = (int)trace_mp_int_or(m, "world_size", f->world_size);
	f->parent_rank = (int)trace_mp_int_or(m, "parent_rank", f->parent_rank);
	f->parent_pid = (int)trace_mp_int_or(m, "parent_pid", f->parent_pid);
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return AN_ORDER(a, b);
}

/* 1.x: each record lists every loaded object. 2.x: the objects loaded since the record before
 * ("list") and the start addresses of those unloaded ("gone"). */
int trace_rd_modules(struct trace_file *f, const msgpack_object *m)
{
	const msgpack_object *l = trace_mp_get(m, "list"), *g = trace_mp_get(m, "gone");
	if (!l || l->type != MSGPACK_OBJECT_ARRAY)
		return -1;
	size_t keep = 0, ng = 0;
	uint64_t *gl = NULL;
	if (f->major >= 2 && g && g->type == MSGPACK_OBJECT_ARRAY && g->via.array.size) {
		if (!(gl = malloc(g->via.array.size * sizeof *gl)))
			return -1;
		for (uint32_t j = 0; j < g->via.array.size; j++) {
			int64_t lo;
			if (trace_mp_int(&g->via.array.ptr[j], &lo))
				gl[ng++] = (uint64_t)lo;
		}
		sort_n(gl, ng, sizeof *gl, cmp_u64);
	}
	for (size_t i = 0; i < f->nmodules; i++) {
		int gone = f->major < 2 || (ng && bsearch(&f->modules[i].lo, gl, ng, sizeof *gl, cmp_u64));
		if (gone)
			free(f->modules[i].path);
		else
			f->modules[keep++] = f->modules[i];
	}
	free(gl);
	f->nmodules = keep;
	struct trace_module *n = realloc(f->modules, (keep + l->via.array.size + 1) * sizeof *n);
	if (!n)
		return -1;
	f->modules = n;
	const char *prev = "";
	for (uint32_t i = 0; i < l->via.array.size; i++) {
		const msgpack_object *e = &l->via.array.ptr[i];
		const msgpack_object *a = e->via.array.ptr;
		int64_t b, lo, hi, same;
		if (f->major < 2) {
			if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size < 4 || !trace_mp_int(&a[1], &b) ||
			    !trace_mp_int(&a[2], &lo) || !trace_mp_int(&a[3], &hi))
				continue;
			f->modules[f->nmodules++] = (struct trace_module){.path = trace_mp_dup_str(&a[0]), .bias = (uint64_t)b,
									  .lo = (uint64_t)lo, .hi = (uint64_t)hi};
			continue;
		}
		/* 2.x: [bytes shared with the name before, the rest, bias, lo - bias, hi - lo, (2.13) build id] */
		if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size < 5 || !trace_mp_int(&a[0], &same) ||
		    a[1].type != MSGPACK_OBJECT_STR || !trace_mp_int(&a[2], &b) || !trace_mp_int(&a[3], &lo) || !trace_mp_int(&a[4], &hi) ||
		    same < 0 || (size_t)same > strlen(prev))
			continue;
		char *name = malloc((size_t)same + a[1].via.str.size + 1);
		if (!name)
			return -1;
		memcpy(name, prev, (size_t)same);
		memcpy(name + same, a[1].via.str.ptr, a[1].via.str.size);
		name[same + a[1].via.str.size] = 0;
		uint64_t mlo = (uint64_t)b + (uint64_t)lo;
		struct trace_module *tm = &f->modules[f->nmodules++];
		*tm = (struct trace_module){.path = name, .bias = (uint64_t)b, .lo = mlo, .hi = mlo + (uint64_t)hi};
		/* (2.13: its build id, where it has one) */
		if (e->via.array.size >= 6 && a[5].type == MSGPACK_OBJECT_BIN && a[5].via.bin.size >= 1 &&
		    a[5].via.bin.size <= sizeof tm->bid) {
			memcpy(tm->bid, a[5].via.bin.ptr, a[5].via.bin.size);
			tm->nbid = (int)a[5].via.bin.size;
		}
		prev = name;
	}
	return 0;
}

/* A table record ("stacks", "names"): its "list" of [id, ...] entries, each handed to add with at
 * least min elements and an integer id (others are skipped). -1 when malformed or add fails. */
static int rd_table(struct trace_file *f, const msgpack_object *m, uint32_t min,
		    int (*add)(struct trace_file *f, uint32_t id, const msgpack_object *e))
{
	const msgpack_object *l = trace_mp_get(m, "list");
	if (!l || l->type != MSGPACK_OBJECT_ARRAY)
		return -1;
	for (uint32_t i = 0; i < l->via.array.size; i++) {
		const msgpack_object *e = &l->via.array.ptr[i];
		int64_t id;
		if (e->type == MSGPACK_OBJECT_ARRAY && e->via.array.size >= min && trace_mp_int(&e->via.array.ptr[0], &id) &&
		    add(f, (uint32_t)id, e) < 0)
			return -1;
	}
	return 0;
}

/* [id, ip0, ip1, ...] */
static int add_stack(struct trace_file *f, uint32_t id, const msgpack_object *e)
{
	struct trace_stack *n = realloc(f->stacks, (f->nstacks + 1) * sizeof *n);
	if (!n)
		return -1;
	f->stacks = n;
	struct trace_stack *s = &f->stacks[f->nstacks++];
	*s = (struct trace_stack){0};
	s->id = id;
	s->n = e->via.array.size - 1;
	s->ips = malloc((s->n + 1) * sizeof *s->ips);
	for (uint32_t k = 0; s->ips && k < s->n; k++) {
		int64_t ip = 0;
		trace_mp_int(&e->via.array.ptr[k + 1], &ip);
		s->ips[k] = (uint64_t)ip;
	}
	if (!s->ips)
		s->n = 0;
	return 0;
}

/* [id, string] */
static int add_name(struct trace_file *f, uint32_t id, const msgpack_object *e)
{
	const msgpack_object *str = &e->via.array.ptr[1];
	if (str->type != MSGPACK_OBJECT_STR)
		return 0;
	struct trace_name *n = realloc(f->names, (f->nnames + 1) * sizeof *n);
	if (!n)
		return -1;
	f->names = n;
	struct trace_name *t = &f->names[f->nnames];
	t->id = id;
	t->len = str->via.str.size;
	if (!(t->s = malloc(t->len + 1)))
		return -1;
	memcpy(t->s, str->via.str.ptr, t->len);
	t->s[t->len] = 0;
	f->nnames++;
	return 0;
}

void trace_rd_gpu(struct trace_file *f, const msgpack_object *m)
{
	struct trace_gpu *g = &f->gpu;
	g->have = 1;
	trace_mp_str_into(m, "state", g->state, sizeof g->state);
	trace_mp_str_into(m, "why", g->why, sizeof g->why);
	trace_mp_str_into(m, "lib", g->lib, sizeof g->lib);
	trace_mp_str_into(m, "clock", g->clock, sizeof g->clock);
	trace_mp_str_into(m, "api", g->api, sizeof g->api);
	trace_mp_str_into(m, "holder", g->holder, sizeof g->holder);
	g->foreign = trace_mp_int_or(m, "foreign", 0);
	trace_mp_str_into(m, "client", g->client, sizeof g->client);
	g->client_records = trace_mp_int_or(m, "client_records", 0);
	g->client_dropped = trace_mp_int_or(m, "client_dropped", 0);
	g->client_refused = trace_mp_int_or(m, "client_refused", 0);
	trace_mp_str_into(m, "client_api_limited", g->client_api_limited, sizeof g->client_api_limited);
	g->client_tid_unknown = trace_mp_int_or(m, "client_tid_unknown", 0);
	g->realtime = !strcmp(g->clock, "realtime");
	g->version = trace_mp_int_or(m, "version", -1);
	g->events = trace_mp_int_or(m, "events", -1);
	g->dropped = trace_mp_int_or(m, "dropped", 0);
	g->refused = trace_mp_int_or(m, "refused", 0);
	g->unwritten = trace_mp_int_or(m, "unwritten", 0);
	g->untimed = trace_mp_int_or(m, "untimed", 0);
	g->lead_ns = trace_mp_int_or(m, "lead_ns", 0);
	g->checked = trace_mp_int_or(m, "checked", 0);
	g->stopped_ns = trace_mp_int_or(m, "stopped_ns", 0);
}

/* A write error's count of events the file did not take: cumulative, in loss and end records. */
void trace_rd_unwritten(struct trace_file *f, const msgpack_object *m)
{
	int64_t n = trace_mp_int_or(m, "unwritten", -1);
	if (n >= 0 && (uint64_t)n > f->unwritten)
		f->unwritten = (uint64_t)n;
	if (trace_mp_get(m, "write_error"))
		trace_mp_str_into(m, "write_error", f->write_error, sizeof f->write_error);
}

int trace_rd_stacks(struct trace_file *f, const msgpack_object *m)
{
	return rd_table(f, m, 1, add_stack);
}

/* [id, [file, line, function], ...]: the Python frames of a stack of the table (2.12); an
 * entry that does not read as that is left out */
static int add_pyframes(struct trace_file *f, uint32_t id, const msgpack_object *e)
{
	struct trace_stack *s = (struct trace_stack *)trace_stack(f, id);
	if (!s || s->py)
		return 0;
	uint32_t n = e->via.array.size - 1;
	if (!(s->py = calloc(n ? n : 1, sizeof *s->py)))
		return -1;
	for (uint32_t k = 0; k < n; k++) {
		const msgpack_object *fr = &e->via.array.ptr[k + 1];
		int64_t line;
		if (fr->type != MSGPACK_OBJECT_ARRAY || fr->via.array.size < 3 ||
		    !trace_mp_int(&fr->via.array.ptr[1], &line))
			continue;
		struct trace_pyframe *p = &s->py[s->npy];
		p->file = trace_mp_dup_str(&fr->via.array.ptr[0]);
		p->func = trace_mp_dup_str(&fr->via.array.ptr[2]);
		p->line = line < -1 || line > INT32_MAX ? -1 : (int)line;
		if (!p->file || !p->func) {
			free(p->file);
			free(p->func);
			continue;
		}
		s->npy++;
	}
	return 0;
}

/* a samples record's "t" and "stack" arrays, one entry each per sample; -1 when they are not */
static int sample_arrays(const msgpack_object *m, const msgpack_object **t, const msgpack_object **st)
{
	*t = trace_mp_get(m, "t");
	*st = trace_mp_get(m, "stack");
	return *t && *st && (*t)->type == MSGPACK_OBJECT_ARRAY && (*st)->type == MSGPACK_OBJECT_ARRAY &&
	       (*t)->via.array.size == (*st)->via.array.size ? 0 : -1;
}

/* a "pysamples" record (2.12): each sample to v; -1 when malformed */
static int rd_pysamples(struct trace_file *f, const msgpack_object *m, const struct trace_visitor *v, int *stop)
{
	const msgpack_object *t, *st;
	int tid = (int)trace_mp_int_or(m, "tid", -1);
	if (sample_arrays(m, &t, &st) < 0)
		return -1;
	f->py_samples += t->via.array.size;
	f->py_sample_hz = (long)trace_mp_int_or(m, "hz", f->py_sample_hz);
	for (uint32_t i = 0; v->on_sample && !*stop && i < t->via.array.size; i++) {
		int64_t raw, id;
		if (!trace_mp_int(&t->via.array.ptr[i], &raw) || !trace_mp_int(&st->via.array.ptr[i], &id) || id < 0)
			return -1;
		*stop = v->on_sample(v->ctx, f, tid, (uint64_t)raw, (uint32_t)id);
	}
	return 0;
}

/* a "cpusamples" record (2.13): each sample to v (its time CLOCK_MONOTONIC ns already); -1 when
 * malformed */
static int rd_cpusamples(struct trace_file *f, const msgpack_object *m, const struct trace_visitor *v, int *stop)
{
	const msgpack_object *t, *st;
	int tid = (int)trace_mp_int_or(m, "tid", -1);
	if (sample_arrays(m, &t, &st) < 0)
		return -1;
	f->cpu_samples += t->via.array.size;
	f->cpu_sample_hz = (long)trace_mp_int_or(m, "hz", f->cpu_sample_hz);
	f->cpu_samples_lost = (uint64_t)trace_mp_int_or(m, "lost", (int64_t)f->cpu_samples_lost);
	if (trace_mp_get(m, "why"))
		trace_mp_str_into(m, "why", f->cpu_why, sizeof f->cpu_why);
	for (uint32_t i = 0; v->on_cpusample && !*stop && i < t->via.array.size; i++) {
		int64_t ns, id;
		if (!trace_mp_int(&t->via.array.ptr[i], &ns) || !trace_mp_int(&st->via.array.ptr[i], &id) || id < 0)
			return -1;
		*stop = v->on_cpusample(v->ctx, f, tid, ns, (uint32_t)id);
	}
	return 0;
}

void trace_free_stacks(struct trace_file *f)
{
	for (size_t i = 0; i < f->nstacks; i++) {
		free(f->stacks[i].ips);
		for (uint32_t k = 0; k < f->stacks[i].npy; k++) {
			free(f->stacks[i].py[k].file);
			free(f->stacks[i].py[k].func);
		}
		free(f->stacks[i].py);
	}
	free(f->stacks);
	f->stacks = NULL;
	f->nstacks = 0;
}

int trace_rd_pyframes(struct trace_file *f, const msgpack_object *m)
{
	return rd_table(f, m, 1, add_pyframes);
}

int trace_rd_names(struct trace_file *f, const msgpack_object *m)
{
	return rd_table(f, m, 2, add_name);
}

/* An "inflight" record (2.9): the call's event with the arguments known on entry, the rest -1 up to
 * the kind's argument count, times raw (the reader converts them). 0, or -1 when malformed. */
int trace_rd_inflight(const msgpack_object *m, struct trace_inflight *c)
{
	const msgpack_object *t0 = trace_mp_get(m, "t0"), *at = trace_mp_get(m, "at"), *a = trace_mp_get(m, "args");
	int64_t kind = trace_mp_int_or(m, "kind", -1);
	if (!t0 || t0->type != MSGPACK_OBJECT_POSITIVE_INTEGER || !at || at->type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
	    !a || a->type != MSGPACK_OBJECT_ARRAY || kind < 0 || kind >= DDPSPY_EV_COUNT)
		return -1;
	memset(c, 0, sizeof *c);
	struct trace_event *e = &c->ev;
	e->kind = (int)kind;
	e->tid = (int)trace_mp_int_or(m, "tid", -1);
	e->raw = t0->via.u64;
	c->at_raw = at->via.u64;
	e->stack = (uint32_t)trace_mp_int_or(m, "stack", 0);
	e->str_index = -1;
	int n = ddpspy_event_args[kind][0] != 0;
	for (const char *p = ddpspy_event_args[kind]; *p; p++)
		n += *p == ',';
	e->nargs = n < TRACE_MAX_ARGS ? n : TRACE_MAX_ARGS;
	for (int i = 0; i < e->nargs; i++)
		if (i >= (int)a->via.array.size || !trace_mp_int(&a->via.array.ptr[i], &e->args[i]))
			e->args[i] = -1;
	c->fd = trace_mp_int_or(m, "fd", -1);
	c->fdclass = (int)trace_mp_int_or(m, "fdclass", -1);
	trace_mp_str_into(m, "path", c->path, sizeof c->path);
	const msgpack_object *end = trace_mp_get(m, "end");
	c->end = end && end->type == MSGPACK_OBJECT_BOOLEAN && end->via.boolean;
	return 0;
}

/* ---- losses, to the visitor ---- */

/* a loss record: each thread's count of events its ring dropped (cumulative), and the file's
 * events it could not take; 1 when the visitor stops */
static int rd_loss(struct trace_file *f, const msgpack_object *m, const struct trace_visitor *v)
{
	int stop = 0;
	const msgpack_object *l = trace_mp_get(m, "threads");
	for (uint32_t i = 0; l && l->type == MSGPACK_OBJECT_ARRAY && i < l->via.array.size; i++) {
		const msgpack_object *e = &l->via.array.ptr[i];
		int64_t tid, d;
		if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size < 2 ||
		    !trace_mp_int(&e->via.array.ptr[0], &tid) || !trace_mp_int(&e->via.array.ptr[1], &d))
			continue;
		struct trace_thread *th = trace_thread(f, (int)tid);
		if (th) {
			f->dropped += (uint64_t)d - th->dropped;
			th->dropped = (uint64_t)d;
		}
		if (v->on_loss && v->on_loss(v->ctx, f, (int)tid, (uint64_t)d)) {
			stop = 1;
			break;
		}
	}
	trace_rd_unwritten(f, m);
	return stop;
}

/* ---- a span's start (trace_file's span) ---- */

void trace_span_enter(struct trace_file *f)
{
	if (!f->span.lo || f->span_at.in)
		return;
	f->span_at.in = 1;
	f->span_at.unwritten = f->unwritten;
	f->span_at.gpu_lost = trace_gpu_lost(&f->gpu);
	f->dropped = 0;
	for (size_t i = 0; i < f->nthreads; i++)
		f->threads[i].dropped_lo = f->threads[i].dropped;
}

/* ---- the records other than the header, calibration, events, CPU samples and calls in flight,
 * for trace_read ---- */

int trace_rd_record(struct trace_file *f, const char *kind, const msgpack_object *m, const struct trace_visitor *v,
		    int *stop)
{
	int bad = 0;
	if (!strcmp(kind, DDPSPY_REC_IDENTITY)) {
		trace_rd_identity(f, m);
		*stop = v->on_identity && v->on_identity(v->ctx, f);
	} else if (!strcmp(kind, DDPSPY_REC_THREAD)) {
		struct trace_thread *th = trace_thread(f, (int)trace_mp_int_or(m, "tid", -1));
		if (th) {
			trace_mp_str_into(m, "name", th->name, sizeof th->name);
			const msgpack_object *pt = trace_mp_get(m, "pthread");
			th->pthread = pt && pt->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? pt->via.u64 : 0;
			*stop = v->on_thread && v->on_thread(v->ctx, f, th);
		}
	} else if (!strcmp(kind, DDPSPY_REC_STACKS)) {
		bad = trace_rd_stacks(f, m) < 0;
	} else if (!strcmp(kind, DDPSPY_REC_PYFRAMES)) {
		bad = trace_rd_pyframes(f, m) < 0;
	} else if (!strcmp(kind, DDPSPY_REC_PYSAMPLES)) {
		bad = rd_pysamples(f, m, v, stop) < 0;
		f->py_samples_dropped = (uint64_t)trace_mp_int_or(m, "dropped", (int64_t)f->py_samples_dropped);
		f->py_samples_torn = (uint64_t)trace_mp_int_or(m, "torn", (int64_t)f->py_samples_torn);
	} else if (!strcmp(kind, DDPSPY_REC_CPUSAMPLES)) {
		bad = rd_cpusamples(f, m, v, stop) < 0;
	} else if (!strcmp(kind, DDPSPY_REC_PYTHON)) {
		trace_mp_str_into(m, "version", f->py_version, sizeof f->py_version);
		f->py_why[0] = 0;
		if (trace_mp_get(m, "why"))
			trace_mp_str_into(m, "why", f->py_why, sizeof f->py_why);
	} else if (!strcmp(kind, DDPSPY_REC_MODULES)) {
		bad = trace_rd_modules(f, m) < 0;
	} else if (!strcmp(kind, DDPSPY_REC_NAMES)) {
		bad = trace_rd_names(f, m) < 0;
	} else if (!strcmp(kind, DDPSPY_REC_GPU)) {
		trace_rd_gpu(f, m);
	} else if (!strcmp(kind, DDPSPY_REC_LOSS)) {
		*stop = rd_loss(f, m, v);
	} else if (!strcmp(kind, DDPSPY_REC_SCHED) && trace_mp_get(m, "error")) {
		trace_mp_str_into(m, "error", f->sched_error, sizeof f->sched_error);
	} else if (!strcmp(kind, DDPSPY_REC_COST)) {
		int64_t ps = trace_mp_int_or(m, "event_ps", 0);
		f->event_ns = ps > 0 && ps < 1000000000 ? (double)ps / 1000 : 0;
	} else if (!strcmp(kind, DDPSPY_REC_END)) {
		trace_rd_unwritten(f, m);
		trace_mp_str_into(m, "reason", f->end_reason, sizeof f->end_reason);
		f->ended = 1;
		*stop = v->on_end && v->on_end(v->ctx, f);
	}
	return bad ? -1 : 0;
}
