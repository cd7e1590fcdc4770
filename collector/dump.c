/* ddpspy dump DIR|FILE... [--json] [--summary]: every process, thread and event as text, or as
 * JSON lines; --summary leaves the events out (each file's process, threads and what it lost).
 * Damaged files print what is readable, then one line naming the file and the byte offset where
 * reading stopped. Exit 0 when anything was readable, 2 when nothing was. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "cli.h"
#include "elfsym.h"
#include "json.h"
#include "trace.h"

struct dumpctx {
	int json;
	int summary;      /* --summary: no events */
	int64_t t_base; /* text times are relative to the process start */
};

/* How an argument reads: its name, and the value rendered by name. */
static void arg_name(int kind, int i, char *buf, size_t n)
{
	const char *a = kind >= 0 && kind < DDPSPY_EV_COUNT ? ddpspy_event_args[kind] : "";
	for (int k = 0; k < i && a; k++) {
		a = strchr(a, ',');
		a = a ? a + 1 : NULL;
	}
	if (!a || !*a) {
		snprintf(buf, n, "arg%d", i);
		return;
	}
	size_t l = strcspn(a, ",");
	l = l < n - 1 ? l : n - 1;
	memcpy(buf, a, l);
	buf[l] = 0;
}

static const char *named_value(const char *name, int64_t v)
{
	if (!strcmp(name, "fdclass"))
		return ddpspy_name(ddpspy_fdclass_names, DDPSPY_FDCLASS_COUNT, v);
	if (!strcmp(name, "op"))
		return ddpspy_name(ddpspy_op_names, DDPSPY_OP_COUNT, v);
	if (!strcmp(name, "dir"))
		return ddpspy_name(ddpspy_cuda_dir_names, DDPSPY_DIR_COUNT, v);
	if (!strcmp(name, "what"))
		return ddpspy_name(ddpspy_cuda_sync_names, DDPSPY_SYNC_COUNT, v);
	if (!strcmp(name, "copy"))
		return ddpspy_name(ddpspy_gpu_copy_names, DDPSPY_GCOPY_COUNT, v);
	if (!strcmp(name, "src") || !strcmp(name, "dst") || !strcmp(name, "mem"))
		return ddpspy_name(ddpspy_gpu_mem_names, DDPSPY_GMEM_COUNT, v);
	if (!strcmp(name, "range"))
		return ddpspy_name(ddpspy_nvtx_names, DDPSPY_NVTX_COUNT, v);
	if (!strcmp(name, "sync"))
		return ddpspy_name(ddpspy_gpu_sync_names, DDPSPY_GSYNC_COUNT, v);
	return NULL;
}

/* arguments that are ids in the file's string table */
static int is_name_id(const char *name)
{
	return !strcmp(name, "kname") || !strcmp(name, "fn");
}

static int is_handle(const char *name)
{
	return !strcmp(name, "mutex") || !strcmp(name, "cond") || !strcmp(name, "barrier") ||
	       !strcmp(name, "sem") || !strcmp(name, "request") || !strcmp(name, "flags") || !strcmp(name, "stream") ||
	       !strcmp(name, "event");
}

#define T(s) text_safe((s), SIZE_MAX)

static const char *kind_name(int kind, char *buf, size_t n)
{
	const char *k = ddpspy_name(ddpspy_event_names, DDPSPY_EV_COUNT, kind);
	if (k)
		return k;
	snprintf(buf, n, "kind%d", kind);
	return buf;
}

static void print_stack_json(struct json *j, const struct trace_file *f, uint32_t id)
{
	const struct trace_stack *s = trace_stack(f, id);
	char hex[32];
	if (s && s->npy) { /* (2.12: the thread's Python frames, innermost first) */
		json_arr(j, "python");
		for (uint32_t i = 0; i < s->npy; i++) {
			json_obj(j, NULL);
			json_str(j, "file", s->py[i].file);
			json_int(j, "line", s->py[i].line);
			json_str(j, "function", s->py[i].func);
			json_close(j);
		}
		json_close(j);
	}
	json_arr(j, "frames");
	for (uint32_t i = 0; s && i < s->n; i++) {
		const struct trace_module *m = trace_module_of(f, s->ips[i]);
		json_obj(j, NULL);
		snprintf(hex, sizeof hex, "0x%" PRIx64, s->ips[i]);
		json_str(j, "ip", hex);
		if (m) {
			uint64_t off = s->ips[i] - m->bias, foff;
			char fn[1024];
			json_str(j, "module", m->path);
			snprintf(hex, sizeof hex, "0x%" PRIx64, off);
			json_str(j, "offset", hex);
			/* (the function from the module's symbols, where a file of its build id has them) */
			if (elfsym_function(m, off, 1, fn, sizeof fn, &foff)) {
				json_str(j, "function", fn);
				snprintf(hex, sizeof hex, "0x%" PRIx64, foff);
				json_str(j, "function_offset", hex);
			}
		}
		json_close(j);
	}
	json_close(j);
}

/* a JSON line's start: its type, then the file and process it is of */
static void json_head(struct json *j, const char *type, const struct trace_file *f)
{
	json_begin(j, stdout);
	json_str(j, "type", type);
	json_str(j, "file", f->path);
	json_int(j, "pid", f->pid);
}

static int on_header(void *ctx, struct trace_file *f)
{
	struct dumpctx *d = ctx;
	d->t_base = f->start_mono_ns;
	if (d->json) {
		struct json j;
		json_begin(&j, stdout);
		json_str(&j, "type", "process");
		json_str(&j, "file", f->path);
		json_arr(&j, "format");
		json_int(&j, NULL, f->major);
		json_int(&j, NULL, f->minor);
		json_close(&j);
		json_str(&j, "tool", f->tool);
		json_str(&j, "host", f->host);
		json_int(&j, "pid", f->pid);
		json_int(&j, "ppid", f->ppid);
		json_str(&j, "role", f->role);
		json_int(&j, "rank", f->rank);
		json_int(&j, "local_rank", f->local_rank);
		json_int(&j, "world_size", f->world_size);
		json_str(&j, "rank_source", f->rank_source);
		json_int(&j, "parent_rank", f->parent_rank);
		json_int(&j, "parent_pid", f->parent_pid);
		json_str(&j, "exe", f->exe);
		json_arr(&j, "cmdline");
		for (int i = 0; i < f->cmdline_n; i++)
			json_str(&j, NULL, f->cmdline[i]);
		json_close(&j);
		json_str(&j, "clock", f->clock);
		json_int(&j, "start_mono_ns", f->start_mono_ns);
		json_int(&j, "start_real_ns", f->start_real_ns);
		json_int(&j, "ring_kb", f->ring_kb);
		json_int(&j, "flush_ms", f->flush_ms);
		json_int(&j, "stack_us", f->stack_us);
		json_int(&j, "inflight_ms", f->inflight_ms);
		json_end(&j);
		return 0;
	}
	printf("== %s\n", T(f->path));
	printf("process pid=%d ppid=%d host=%s role=%s", f->pid, f->ppid, T(f->host), T(f->role));
	if (f->rank >= 0)
		printf(" rank=%d/%d local_rank=%d", f->rank, f->world_size, f->local_rank);
	if (f->parent_rank >= 0 || f->parent_pid >= 0)
		printf(" parent_rank=%d parent_pid=%d", f->parent_rank, f->parent_pid);
	if (f->rank_source[0])
		printf(" source=%s", T(f->rank_source));
	printf("\n  exe %s\n  cmd", T(f->exe));
	for (int i = 0; i < f->cmdline_n; i++)
		printf(" %s", T(f->cmdline[i]));
	printf("\n  clock %s, %zu calibration points; ring %ld KiB, flush %ld ms, stacks over %ld us, calls in flight "
	       "over %ld ms\n", T(f->clock), f->ncalib, f->ring_kb, f->flush_ms, f->stack_us, f->inflight_ms);
	return 0;
}

static int on_identity(void *ctx, struct trace_file *f)
{
	struct dumpctx *d = ctx;
	if (d->json) {
		struct json j;
		json_head(&j, "identity", f);
		json_str(&j, "role", f->role);
		json_int(&j, "rank", f->rank);
		json_int(&j, "world_size", f->world_size);
		json_str(&j, "rank_source", f->rank_source);
		json_end(&j);
	} else {
		printf("identity role=%s rank=%d/%d source=%s\n", T(f->role), f->rank, f->world_size,
		       T(f->rank_source));
	}
	return 0;
}

static int on_sched(void *ctx, struct trace_file *f, const struct trace_sched *s)
{
	struct dumpctx *d = ctx;
	if (d->json) {
		struct json j;
		json_head(&j, "sched", f);
		json_int(&j, "tid", s->tid);
		json_int(&j, "t_ns", s->t_ns);
		json_int(&j, "cpus", s->cpus);
		json_int(&j, "host_cpus", s->host_cpus);
		json_int(&j, "host_busy_ns", s->host_busy_ns);
		json_int(&j, "run_ns", (int64_t)s->run_ns);
		json_int(&j, "wait_ns", (int64_t)s->wait_ns);
		json_int(&j, "slices", (int64_t)s->slices);
		json_end(&j);
	} else {
		printf("  %12.6f %6d %-13s on cpu %.3f s, waiting for a cpu %.3f s, %" PRIu64 " slices (%d cpus of %d)\n",
		       (double)(s->t_ns - d->t_base) / 1e9, s->tid, "sched", (double)s->run_ns / 1e9, (double)s->wait_ns / 1e9,
		       s->slices, s->cpus, s->host_cpus);
	}
	return 0;
}

static int on_thread(void *ctx, struct trace_file *f, const struct trace_thread *th)
{
	struct dumpctx *d = ctx;
	if (d->json) {
		struct json j;
		json_head(&j, "thread", f);
		json_int(&j, "tid", th->tid);
		json_str(&j, "name", th->name);
		if (th->pthread) { /* (CUPTI's thread ids may be these, cut to 32 bits) */
			char hex[24];
			snprintf(hex, sizeof hex, "0x%" PRIx64, th->pthread);
			json_str(&j, "pthread", hex);
		}
		json_end(&j);
	} else {
		printf("thread %d \"%s\"\n", th->tid, T(th->name));
	}
	return 0;
}

/* argument i of e: its name, and its value: a string (quoted: the call's string or a name from the
 * file's table, sv NULL when the table lacks it; else a named value such as an operation) or, sv
 * NULL and not quoted, the number v */
struct argval {
	char name[32];
	const char *sv;
	size_t sl;
	int quoted;
	int64_t v;
};

static void arg_at(const struct trace_file *f, const struct trace_event *e, int i, struct argval *a)
{
	arg_name(e->kind, i, a->name, sizeof a->name);
	const struct trace_name *tn = is_name_id(a->name) ? trace_name(f, (uint32_t)e->args[i]) : NULL;
	a->v = e->args[i];
	a->quoted = i == e->str_index || is_name_id(a->name);
	a->sv = i == e->str_index ? e->str : tn ? tn->s : a->quoted ? NULL : named_value(a->name, a->v);
	a->sl = i == e->str_index ? e->slen : tn ? tn->len : a->sv ? strlen(a->sv) : 0;
}

/* an event's arguments by name, into an open JSON object */
static void args_json(struct json *j, const struct trace_file *f, const struct trace_event *e)
{
	struct argval a;
	for (int i = 0; i < e->nargs; i++) {
		arg_at(f, e, i, &a);
		if (a.sv || a.quoted)
			json_strn(j, a.name, a.sv, a.sl);
		else
			json_int(j, a.name, a.v);
	}
	if (e->stack) {
		json_int(j, "stack", e->stack);
		print_stack_json(j, f, e->stack);
	}
}

/* an event's arguments as text, name=value each */
static void args_text(const struct trace_file *f, const struct trace_event *e)
{
	struct argval a;
	for (int i = 0; i < e->nargs; i++) {
		arg_at(f, e, i, &a);
		if (a.quoted)
			printf(" %s=\"%s\"", a.name, a.sv ? text_safe(a.sv, a.sl) : "?");
		else if (a.sv)
			printf(" %s=%s", a.name, a.sv);
		else if (is_handle(a.name) && e->tid != -1) /* (CUPTI's streams and events are numbers) */
			printf(" %s=0x%" PRIx64, a.name, (uint64_t)a.v);
		else
			printf(" %s=%" PRId64, a.name, a.v);
	}
}

/* a stack's first frames as text */
static void stack_text(const struct trace_file *f, uint32_t id)
{
	const struct trace_stack *s = trace_stack(f, id);
	printf("  stack#%u", id);
	for (uint32_t i = 0; s && i < s->npy && i < 8; i++)
		printf("%s%s (%s:%d)", i ? " <-" : " py ", T(s->py[i].func), T(s->py[i].file), s->py[i].line);
	if (s && s->npy && s->n)
		printf(" |");
	for (uint32_t i = 0; s && i < s->n && i < 8; i++) {
		char fr[512];
		trace_frame_text(f, s->ips[i], 1, fr, sizeof fr);
		printf(" %s", T(fr));
	}
}

static void dur_text(const char *what, int64_t ns)
{
	if (ns >= 1000000)
		printf("  %s=%.3fms", what, (double)ns / 1e6);
	else
		printf("  %s=%.1fus", what, (double)ns / 1e3);
}

static int on_event(void *ctx, struct trace_file *f, const struct trace_event *e)
{
	struct dumpctx *d = ctx;
	char kb[16];

	if (d->json) {
		struct json j;
		json_head(&j, e->tid == -1 ? "gpu_event" : "event", f);
		json_int(&j, "rank", f->rank);
		if (e->tid != -1)
			json_int(&j, "tid", e->tid);
		json_str(&j, "kind", kind_name(e->kind, kb, sizeof kb));
		json_int(&j, "t_ns", e->t_ns);
		json_int(&j, "dur_ns", e->dur_ns);
		args_json(&j, f, e);
		json_end(&j);
		return 0;
	}
	if (e->tid == -1)
		printf("  %12.6f %6s %-13s", (double)(e->t_ns - d->t_base) / 1e9, "gpu", kind_name(e->kind, kb, sizeof kb));
	else
		printf("  %12.6f %6d %-13s", (double)(e->t_ns - d->t_base) / 1e9, e->tid,
		       kind_name(e->kind, kb, sizeof kb));
	args_text(f, e);
	dur_text("dur", e->dur_ns);
	if (e->stack)
		stack_text(f, e->stack);
	putchar('\n');
	return 0;
}

/* a sample's JSON line, up to its frames */
static void sample_head(struct json *j, const char *type, const struct trace_file *f, int tid, int64_t t, uint32_t stack)
{
	json_head(j, type, f);
	json_int(j, "rank", f->rank);
	json_int(j, "tid", tid);
	json_int(j, "t_ns", t);
	json_int(j, "stack", stack);
}

/* A sample of the main thread's native stack on a CPU (2.13): its first frame is the sampled
 * instruction, the others return addresses */
static int on_cpusample(void *ctx, struct trace_file *f, int tid, int64_t t, uint32_t stack)
{
	struct dumpctx *d = ctx;
	const struct trace_stack *s = trace_stack(f, stack);
	char fr[512];
	if (d->json) {
		struct json j;
		sample_head(&j, "cpu_sample", f, tid, t, stack);
		json_arr(&j, "frames");
		for (uint32_t i = 0; s && i < s->n; i++) {
			trace_frame_text(f, s->ips[i], i > 0, fr, sizeof fr);
			json_str(&j, NULL, fr);
		}
		json_close(&j);
		json_end(&j);
		return 0;
	}
	printf("  %12.6f %6d %-13s  stack#%u", (double)(t - d->t_base) / 1e9, tid, "cpu_sample", stack);
	for (uint32_t i = 0; s && i < s->n && i < 8; i++) {
		trace_frame_text(f, s->ips[i], i > 0, fr, sizeof fr);
		printf(" %s", T(fr));
	}
	putchar('\n');
	return 0;
}

/* A sample of the main thread's Python frames (2.12) */
static int on_sample(void *ctx, struct trace_file *f, int tid, uint64_t raw, uint32_t stack)
{
	struct dumpctx *d = ctx;
	int64_t t = trace_raw_to_ns(f, raw);
	if (d->json) {
		struct json j;
		sample_head(&j, "sample", f, tid, t, stack);
		print_stack_json(&j, f, stack);
		json_end(&j);
		return 0;
	}
	printf("  %12.6f %6d %-13s", (double)(t - d->t_base) / 1e9, tid, "py_sample");
	stack_text(f, stack);
	putchar('\n');
	return 0;
}

/* A call in flight (2.9): its start, how long it had been in flight when seen, the descriptor's
 * path then, and its call site. Its arguments past those known on entry read -1. */
static int on_inflight(void *ctx, struct trace_file *f, const struct trace_inflight *c)
{
	struct dumpctx *d = ctx;
	const struct trace_event *e = &c->ev;
	char kb[16];

	if (d->json) {
		struct json j;
		json_head(&j, "inflight", f);
		json_int(&j, "rank", f->rank);
		json_int(&j, "tid", e->tid);
		json_str(&j, "kind", kind_name(e->kind, kb, sizeof kb));
		json_int(&j, "t_ns", e->t_ns);
		json_int(&j, "at_ns", c->at_ns);
		json_int(&j, "in_flight_ns", e->dur_ns);
		json_bool(&j, "end", c->end);
		if (c->fd >= 0) {
			json_int(&j, "wait_fd", c->fd);
			json_str(&j, "wait_fdclass", ddpspy_name(ddpspy_fdclass_names, DDPSPY_FDCLASS_COUNT, c->fdclass));
			json_str(&j, "wait_path", c->path[0] ? c->path : NULL);
		}
		args_json(&j, f, e);
		json_end(&j);
		return 0;
	}
	printf("  %12.6f %6d %-13s", (double)(e->t_ns - d->t_base) / 1e9, e->tid, kind_name(e->kind, kb, sizeof kb));
	args_text(f, e);
	printf("  in flight %.3fs%s", (double)e->dur_ns / 1e9, c->end ? " when the file ended" : "");
	if (c->path[0])
		printf("  path=\"%s\"", T(c->path));
	if (c->fdclass >= 0)
		printf(" (%s)", ddpspy_name(ddpspy_fdclass_names, DDPSPY_FDCLASS_COUNT, c->fdclass) ?: "?");
	if (e->stack)
		stack_text(f, e->stack);
	putchar('\n');
	return 0;
}

/* what the file says of GPU capture (its last "gpu" record) */
static void print_gpu(struct dumpctx *d, const struct trace_file *f)
{
	const struct trace_gpu *g = &f->gpu;
	if (!g->have)
		return;
	if (d->json) {
		struct json j;
		json_head(&j, "gpu", f);
		json_str(&j, "state", g->state);
		json_str(&j, "why", g->why);
		json_str(&j, "lib", g->lib);
		json_int(&j, "version", g->version);
		json_str(&j, "clock", g->clock);
		json_int(&j, "events", g->events);
		json_int(&j, "read", (int64_t)g->read);
		json_int(&j, "dropped", g->dropped);
		json_int(&j, "refused", g->refused);
		json_int(&j, "unwritten", g->unwritten);
		json_int(&j, "untimed", (int64_t)trace_gpu_untimed(g));
		if (g->api[0])
			json_str(&j, "api", g->api);
		if (g->holder[0])
			json_str(&j, "holder", g->holder);
		json_int(&j, "foreign", g->foreign);
		if (g->client[0]) {
			json_str(&j, "client", g->client);
			json_int(&j, "client_records", g->client_records);
			json_int(&j, "client_dropped", g->client_dropped);
			json_int(&j, "client_refused", g->client_refused);
			json_str(&j, "client_api_limited", g->client_api_limited);
			json_int(&j, "client_tid_unknown", g->client_tid_unknown);
		}
		json_int(&j, "lead_ns", g->lead_ns);
		json_int(&j, "checked", g->checked);
		json_int(&j, "stopped_ns", g->stopped_ns);
		json_end(&j);
		return;
	}
	printf("gpu %s: %s\n", T(g->state), T(g->why));
	if (!strcmp(g->state, "on"))
		printf("gpu %s (CUPTI %" PRId64 "), clock %s: %" PRId64 " records, %" PRId64 " dropped by CUPTI, %" PRId64
		       " buffers refused, %" PRId64 " not written, %" PRId64 " with no times; device work checked against "
		       "its launch: %" PRId64 ", none earlier than %" PRId64 " ns before it\n",
		       T(g->lib), g->version, T(g->clock), g->events, g->dropped, g->refused, g->unwritten,
		       (int64_t)trace_gpu_untimed(g), g->checked, g->lead_ns > 0 ? g->lead_ns : 0);
	char unnamed[128] = ""; /* (2.15: a client that asked for system thread ids) */
	if (g->client_tid_unknown)
		snprintf(unnamed, sizeof unnamed, "; %" PRId64 " name their thread by CUPTI's default id, not the "
			 "system id it asked for", g->client_tid_unknown);
	if (g->client[0])
		printf("gpu CUPTI shared with another client (%s): %" PRId64 " records copied to it, %" PRId64
		       " it asked for found no buffer of its, %" PRId64 " activity kinds refused to it%s%s%s%s\n",
		       T(g->client), g->client_records, g->client_dropped, g->client_refused,
		       g->client_api_limited[0] ? "; its CUDA calls (" : "", g->client_api_limited,
		       g->client_api_limited[0] ? ") only those ddpspy records" : "", unnamed);
}

static void print_end(struct dumpctx *d, struct trace_file *f)
{
	print_gpu(d, f);
	if (d->json) {
		for (size_t i = 0; i < f->nthreads; i++) {
			struct json j;
			json_head(&j, "loss", f);
			json_int(&j, "tid", f->threads[i].tid);
			json_int(&j, "events", (int64_t)f->threads[i].events);
			json_int(&j, "dropped", (int64_t)f->threads[i].dropped);
			json_end(&j);
		}
		struct json j;
		json_head(&j, "end", f);
		json_int(&j, "complete", f->ended);
		json_str(&j, "reason", f->ended ? f->end_reason : NULL);
		json_int(&j, "events", (int64_t)f->events);
		json_int(&j, "dropped", (int64_t)f->dropped);
		json_int(&j, "unwritten", (int64_t)f->unwritten);
		json_str(&j, "write_error", f->write_error[0] ? f->write_error : NULL);
		json_str(&j, "sched_error", f->sched_error[0] ? f->sched_error : NULL);
		if (f->event_ns > 0)
			json_num(&j, "event_ns", f->event_ns);
		else
			json_str(&j, "event_ns", NULL);
		json_str(&j, "python", f->py_version[0] ? f->py_version : NULL);
		json_str(&j, "python_why", f->py_why[0] ? f->py_why : NULL);
		json_int(&j, "py_samples", (int64_t)f->py_samples);
		json_int(&j, "py_samples_dropped", (int64_t)f->py_samples_dropped);
		json_int(&j, "py_samples_torn", (int64_t)f->py_samples_torn);
		json_int(&j, "cpu_samples", (int64_t)f->cpu_samples);
		json_int(&j, "cpu_samples_lost", (int64_t)f->cpu_samples_lost);
		json_int(&j, "cpu_sample_hz", f->cpu_sample_hz);
		json_str(&j, "cpu_samples_why", f->cpu_why[0] ? f->cpu_why : NULL);
		json_end(&j);
		return;
	}
	for (size_t i = 0; i < f->nthreads; i++)
		printf("loss thread %d: %" PRIu64 " events recorded, %" PRIu64 " dropped\n",
		       f->threads[i].tid, f->threads[i].events, f->threads[i].dropped);
	char unwritten[128] = "";
	if (f->unwritten || f->write_error[0])
		snprintf(unwritten, sizeof unwritten, ", %" PRIu64 " not written (%s)", f->unwritten,
			 T(f->write_error[0] ? f->write_error : "write error"));
	if (f->sched_error[0])
		printf("sched: no thread's CPU time read (%s)\n", T(f->sched_error));
	if (f->event_ns > 0)
		printf("cost: %.1f ns per recorded event (ddpspy's own, measured at its start)\n", f->event_ns);
	if (f->py_version[0])
		printf("python: CPython %s, %s; %" PRIu64 " samples of the main thread's frames, %" PRIu64 " dropped, %" PRIu64
		       " torn\n", T(f->py_version), f->py_why[0] ? T(f->py_why) : "its frames read", f->py_samples,
		       f->py_samples_dropped, f->py_samples_torn);
	if (f->cpu_samples || f->cpu_samples_lost || f->cpu_why[0])
		printf("cpu samples: %" PRIu64 " of the main thread's native stacks on a CPU at %ld Hz, %" PRIu64 " lost%s%s\n",
		       f->cpu_samples, f->cpu_sample_hz, f->cpu_samples_lost, f->cpu_why[0] ? "; none taken: " : "",
		       f->cpu_why[0] ? T(f->cpu_why) : "");
	if (f->ended)
		printf("end %s: %" PRIu64 " events, %" PRIu64 " dropped%s\n", T(f->end_reason), f->events,
		       f->dropped, unwritten);
	else
		printf("end missing: the process did not finish its file (killed, or still running): %" PRIu64 " events, "
		       "%" PRIu64 " dropped%s, and an unknown number lost after the last flush\n",
		       f->events, f->dropped, unwritten);
}

static void print_error(struct dumpctx *d, const char *path, size_t off, const char *msg)
{
	/* the one line naming the file and where reading stopped goes to stdout with the data,
	 * and to stderr so a reader of either sees it */
	if (d->json) {
		struct json j;
		json_begin(&j, stdout);
		json_str(&j, "type", "error");
		json_str(&j, "file", path);
		json_int(&j, "offset", (int64_t)off);
		json_str(&j, "message", msg);
		json_end(&j);
	}
	fflush(stdout);
	fprintf(stderr, "ddpspy: %s: stopped at byte %zu: %s\n", T(path), off, T(msg));
}

static void usage(FILE *out)
{
	fprintf(out, "usage: ddpspy dump DIR|FILE... [--json] [--summary]\n");
}

int cmd_dump(int argc, char **argv)
{
	struct dumpctx d = {0, 0, 0};
	int readable = 0, inputs = 0;
	char **in = calloc((size_t)argc + 1, sizeof *in);
	if (!in)
		return 2;
	const struct cli_opt opts[] = {
		{ "--json", NULL, CLI_FLAG, &d.json, 0, 0, NULL, 1 },
		{ "--summary", NULL, CLI_FLAG, &d.summary, 0, 0, NULL, 1 },
		{ NULL, NULL, CLI_FLAG, NULL, 0, 0, NULL, 0 },
	};
	const struct cli c = { "dump", opts, usage, 0 };
	int got = cli_parse(&c, argc, argv, in, &inputs);
	if (got) {
		free(in);
		return got > 0 ? 0 : 2;
	}
	for (int i = 0; i < inputs; i++) {
		char **files;
		int n = trace_list(in[i], &files);
		if (n < 0) {
			fprintf(stderr, "ddpspy: cannot read %s\n", in[i]);
			continue;
		}
		if (n == 0)
			fprintf(stderr, "ddpspy: no trace files (*.ddpspy) in %s\n", in[i]);
		for (int k = 0; k < n; k++) {
			struct trace_file f;
			struct trace_visitor v = {&d, on_header, on_identity, on_thread,
						  d.summary ? NULL : on_event, NULL, NULL, d.summary ? NULL : on_event,
						  d.summary ? NULL : on_sched, d.summary ? NULL : on_inflight,
						  d.summary ? NULL : on_sample, d.summary ? NULL : on_cpusample};
			if (trace_open(&f, files[k]) < 0) {
				print_error(&d, files[k], 0, f.error);
				trace_close(&f);
				continue;
			}
			int rc = trace_read(&f, &v);
			if (f.have_header) {
				readable++;
				print_end(&d, &f);
			}
			if (rc == 2)
				print_error(&d, files[k], f.stop_offset, f.error);
			trace_close(&f);
		}
		trace_free_list(files, n);
	}
	free(in);
	if (!inputs) {
		usage(stderr);
		return 2;
	}
	if (!readable) {
		fprintf(stderr, "ddpspy: nothing readable\n");
		return 2;
	}
	return 0;
}
