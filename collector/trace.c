/* Reader for ddpspy trace files (common/format.h, docs/format.md). Two passes over a mapped
 * file: the first gathers the calibration points (small records, found by peeking at each
 * frame's kind without decoding the rest), the second decodes everything in order and converts
 * raw timestamps with the full calibration table in hand. The events are decoded here (with
 * mpread.h's primitives); the other records in tracemeta.c; a directory's files in tracedir.c. */
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <zlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/format.h"
#include "mpread.h"
#include "tracemeta.h"

/* ---- frames ---- */

/* A frame's CRC-32 (the preload's ddpspy_crc32): zlib's, which reads several words at a time,
 * twice as fast as the table-driven one the preload carries; checking every frame is a fifth of
 * the report's time otherwise. */
static uint32_t frame_crc(const void *p, uint32_t n)
{
	return (uint32_t)crc32(0L, p, n);
}

struct frame {
	size_t off;         /* of the frame header */
	const unsigned char *body;
	uint32_t len;
};

/* 0 when the frame's checksum is right (or it lies before f->verified), else -1 with f->error */
static int frame_check(struct trace_file *f, const struct frame *fr)
{
	if (fr->off + DDPSPY_FRAME_HEADER_LEN + fr->len > f->verified &&
	    frame_crc(fr->body, fr->len) != ddpspy_get_le32(fr->body - DDPSPY_FRAME_HEADER_LEN + 4)) {
		snprintf(f->error, sizeof f->error, "checksum mismatch");
		return -1;
	}
	return 0;
}

/* The frame at *off, or 0 at a clean end of file, or -1 when the file is damaged there. */
static int next_frame(struct trace_file *f, size_t *off, struct frame *fr, int check_crc)
{
	if (*off == f->size)
		return 0;
	if (f->size - *off < DDPSPY_FRAME_HEADER_LEN) {
		snprintf(f->error, sizeof f->error, "truncated frame header");
		return -1;
	}
	const unsigned char *h = f->map + *off;
	uint32_t len = ddpspy_get_le32(h);
	if (len == 0 || len > DDPSPY_FRAME_MAX) {
		snprintf(f->error, sizeof f->error, "corrupt frame length %u", len);
		return -1;
	}
	if (f->size - *off - DDPSPY_FRAME_HEADER_LEN < len) {
		snprintf(f->error, sizeof f->error, "truncated frame (%u bytes announced, %zu present)",
			 len, f->size - *off - DDPSPY_FRAME_HEADER_LEN);
		return -1;
	}
	fr->off = *off;
	fr->body = h + DDPSPY_FRAME_HEADER_LEN;
	fr->len = len;
	if (check_crc && frame_check(f, fr) < 0)
		return -1;
	*off += DDPSPY_FRAME_HEADER_LEN + len;
	return 1;
}

/* The record kind without decoding the record: writers put "k" first (docs/format.md). */
static int peek_kind(const struct frame *fr, const char **kind, uint32_t *klen)
{
	const unsigned char *p = fr->body, *end = fr->body + fr->len;
	if ((*p & 0xf0) == 0x80)
		p += 1;
	else if (*p == 0xde)
		p += 3;
	else if (*p == 0xdf)
		p += 5;
	else
		return 0;
	if (end - p < 3 || p[0] != 0xa1 || p[1] != 'k')
		return 0;
	p += 2;
	if ((*p & 0xe0) == 0xa0) {
		*klen = *p & 0x1f;
		p++;
	} else if (*p == 0xd9 && end - p >= 2) {
		*klen = p[1];
		p += 2;
	} else {
		return 0;
	}
	if ((size_t)(end - p) < *klen)
		return 0;
	*kind = (const char *)p;
	return 1;
}

static int kind_is(const char *k, uint32_t kl, const char *name)
{
	return kl == strlen(name) && !memcmp(k, name, kl);
}

/* ---- open / close ---- */
int trace_open(struct trace_file *f, const char *path)
{
	struct stat st;
	memset(f, 0, sizeof *f);
	f->path = path;
	f->rank = f->local_rank = f->world_size = f->parent_rank = f->parent_pid = -1;
	/* O_NONBLOCK: a FIFO or a device named *.ddpspy must not hang the open; only a regular
	 * file is read */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(f->error, sizeof f->error, "cannot read: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(f->error, sizeof f->error, "not a regular file");
		close(fd);
		return -1;
	}
	f->size = (size_t)st.st_size;
	if (f->size > 0) {
		void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m == MAP_FAILED) {
			snprintf(f->error, sizeof f->error, "cannot map: %s", strerror(errno));
			close(fd);
			f->size = 0;
			return -1;
		}
		f->map = m;
		madvise(m, f->size, MADV_SEQUENTIAL);
	}
	close(fd);
	if (f->size < DDPSPY_FILE_HEADER_LEN || memcmp(f->map, DDPSPY_MAGIC, DDPSPY_MAGIC_LEN)) {
		snprintf(f->error, sizeof f->error, "not a ddpspy trace (%s)",
			 f->size < DDPSPY_FILE_HEADER_LEN ? "too short" : "bad magic");
		return -1;
	}
	f->major = f->map[8] | f->map[9] << 8;
	f->minor = f->map[10] | f->map[11] << 8;
	if (f->major < DDPSPY_FORMAT_MAJOR_OLDEST || f->major > DDPSPY_FORMAT_MAJOR) {
		snprintf(f->error, sizeof f->error, "format version %d.%d is not readable here (%d.x to %d.x)",
			 f->major, f->minor, DDPSPY_FORMAT_MAJOR_OLDEST, DDPSPY_FORMAT_MAJOR);
		return -1;
	}
	return 0;
}

void trace_close(struct trace_file *f)
{
	free(f->evrec);
	if (f->map)
		munmap((void *)f->map, f->size);
	for (int i = 0; i < f->cmdline_n; i++)
		free(f->cmdline[i]);
	free(f->cmdline);
	free(f->calib);
	free(f->threads);
	trace_free_stacks(f);
	for (size_t i = 0; i < f->nnames; i++)
		free(f->names[i].s);
	free(f->names);
	for (size_t i = 0; i < f->nmodules; i++)
		free(f->modules[i].path);
	free(f->modules);
	memset(f, 0, sizeof *f);
}

/* ---- clock ---- */
static int add_calib(struct trace_file *f, uint64_t raw, int64_t mono, int64_t real)
{
	if (f->ncalib && raw <= f->calib[f->ncalib - 1].raw)
		return 0; /* out of order or repeated: keep the table sorted */
	if ((f->ncalib & (f->ncalib + 1)) == 0 || f->ncalib == 0) {
		size_t cap = f->ncalib ? (f->ncalib + 1) * 2 : 8;
		struct trace_calib *n = realloc(f->calib, cap * sizeof *n);
		if (!n)
			return -1;
		f->calib = n;
	}
	f->calib[f->ncalib++] = (struct trace_calib){raw, mono, real};
	return 0;
}

/* Times are kept within +-2^58 ns (9 years) of the clock's zero whatever a file says, so sums and
 * differences of times and durations in the analysis cannot overflow. */
#define T_LIM ((int64_t)1 << 58)

static int64_t clamp_ns(double v)
{
	if (!(v == v))
		return 0;
	return v >= (double)T_LIM ? T_LIM : v <= -(double)T_LIM ? -T_LIM : (int64_t)v;
}

/* base + delta, exact while both are in range (the usual case: nanoseconds are not rounded to a
 * double's 53 bits), clamped otherwise */
static int64_t add_ns(int64_t base, double delta)
{
	if (base > -T_LIM && base < T_LIM && delta > -(double)T_LIM && delta < (double)T_LIM) {
		int64_t v = base + (int64_t)delta;
		return v > T_LIM ? T_LIM : v < -T_LIM ? -T_LIM : v;
	}
	return clamp_ns((double)base + delta);
}

static int64_t raw_to_ns(const struct trace_file *f, uint64_t raw, size_t *seg)
{
	const struct trace_calib *c = f->calib;
	size_t n = f->ncalib;

	if (f->raw_is_ns || n == 0)
		return clamp_ns((double)(int64_t)raw);
	if (n == 1) /* one point: no rate measured; assume 1 tick/ns rather than invent one */
		return add_ns(c[0].mono_ns, (double)(int64_t)(raw - c[0].raw));
	/* the bracketing pair, or the nearest end pair for extrapolation; events come in time
	 * order, so the last pair is tried first */
	size_t lo = *seg < n - 1 ? *seg : 0, hi = lo + 1;
	if (!((c[lo].raw <= raw || lo == 0) && (raw < c[hi].raw || hi == n - 1))) {
		lo = 0;
		hi = n - 1;
		while (hi - lo > 1) {
			size_t mid = (lo + hi) / 2;
			if (c[mid].raw <= raw)
				lo = mid;
			else
				hi = mid;
		}
		*seg = lo;
	}
	double span = (double)(c[hi].raw - c[lo].raw);
	double rate = span > 0 ? ((double)c[hi].mono_ns - (double)c[lo].mono_ns) / span : 1;
	return add_ns(c[lo].mono_ns, (double)((int64_t)(raw - c[lo].raw)) * rate);
}

int64_t trace_raw_to_ns(const struct trace_file *f, uint64_t raw)
{
	size_t seg = 0;
	return raw_to_ns(f, raw, &seg);
}

/* ---- clock of the device's records ---- */
static int64_t gpu_to_ns(const struct trace_file *f, uint64_t t)
{
	if (!f->gpu.realtime)
		return (int64_t)t;
	int64_t real = (int64_t)t, off = f->start_real_ns - f->start_mono_ns;
	size_t lo = 0, hi = f->ncalib;
	while (lo < hi) { /* the first point at or after real */
		size_t mid = lo + (hi - lo) / 2;
		if (f->calib[mid].real_ns < real)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < f->ncalib)
		off = f->calib[lo].real_ns - f->calib[lo].mono_ns;
	else if (f->ncalib)
		off = f->calib[f->ncalib - 1].real_ns - f->calib[f->ncalib - 1].mono_ns;
	return real - off;
}

/* ---- events records, decoded without building msgpack objects (mpread.h) ---- */

/* One event of an "ev" array at m: 0, or -1 when malformed. prev is the previous event's raw
 * start (the record's t0 for the first), seg the calibration segment of the last conversion.
 * Events of a kind that want (when not NULL) does not have are parsed past, not converted: 1. */
static inline __attribute__((always_inline)) int decode_event(struct trace_file *f, struct mp *m, uint64_t *prev,
							    size_t *seg, const uint8_t *want, struct trace_event *e)
{
	int64_t cnt = mp_container(m, 0), kind, dt, dur, stack;
	if (cnt < 4 || !mp_int(m, &kind) || !mp_int(m, &dt) || !mp_int(m, &dur) || !mp_int(m, &stack))
		return -1;
	e->raw = *prev + (uint64_t)dt;
	*prev = e->raw;
	if (want && (kind < 0 || kind >= DDPSPY_EV_COUNT || !want[kind])) {
		for (int64_t k = 4; k < cnt; k++)
			if (m->p < m->end && *m->p <= 0x7f) /* most arguments: one byte */
				m->p++;
			else if (!mp_skip(m, 0))
				return -1;
		return 1;
	}
	e->kind = (int)kind;
	e->t_ns = raw_to_ns(f, e->raw, seg);
	e->dur_ns = raw_to_ns(f, e->raw + (uint64_t)dur, seg) - e->t_ns;
	if (e->dur_ns < 0) /* (a damaged file's; the clock never runs back within an event) */
		e->dur_ns = 0;
	e->stack = (uint32_t)stack;
	e->nargs = 0;
	e->str = NULL;
	e->slen = 0;
	e->str_index = -1;
	int64_t k = 4;
	/* the usual case: arguments that are small non-negative integers, one byte each */
	while (k < cnt && e->nargs < TRACE_MAX_ARGS && m->p < m->end && *m->p <= 0x7f) {
		e->args[e->nargs++] = *m->p++;
		k++;
	}
	for (; k < cnt; k++) {
		if (e->nargs == TRACE_MAX_ARGS) {
			if (!mp_skip(m, 0))
				return -1;
			continue;
		}
		if (mp_int(m, &e->args[e->nargs])) {
			e->nargs++;
		} else if (mp_str(m, &e->str, &e->slen)) {
			e->str_index = e->nargs;
			e->args[e->nargs++] = 0;
		} else if (mp_skip(m, 0)) {
			e->args[e->nargs++] = -1;
		} else {
			return -1;
		}
	}
	return 0;
}

/* One event of a 2.x record (common/evcodec.h): 0, 1 when want skips its kind, -1 when
 * malformed. The same contract as decode_event. */
static inline __attribute__((always_inline)) int decode_packed(struct trace_file *f, struct trace_evrec *r,
							     size_t *seg, const uint8_t *want, struct trace_event *e)
{
	const unsigned char *p = r->p, *end = r->end;
	uint64_t kind, nargs, gap, dur, sid = 0, v;
	if (p >= end)
		return -1;
	unsigned h = *p++;
	kind = h & DDPSPY_EVC_ESCAPE;
	if (kind == DDPSPY_EVC_ESCAPE) {
		if (!(p = ddpspy_get_varint(p, end, &kind)) || !(p = ddpspy_get_varint(p, end, &nargs)) ||
		    nargs > DDPSPY_EVC_MAX_ARGS)
			return -1;
	} else {
		if (kind >= r->nna || r->na[kind] == DDPSPY_EVC_NA_NONE || r->na[kind] > DDPSPY_EVC_MAX_ARGS)
			return -1;
		nargs = r->na[kind];
	}
	if (!(p = ddpspy_get_varint(p, end, &gap)) || !(p = ddpspy_get_varint(p, end, &dur)) ||
	    ((h & DDPSPY_EVC_STACK) && !(p = ddpspy_get_varint(p, end, &sid))))
		return -1;
	size_t mb = (size_t)(nargs + 7) / 8;
	if ((size_t)(end - p) < mb)
		return -1;
	const unsigned char *mask = p;
	p += mb;
	int delta = kind < DDPSPY_EVC_KINDS;
	if (delta && !(r->seen >> kind & 1)) {
		memset(r->prev_args[kind], 0, sizeof r->prev_args[kind]);
		r->seen |= 1ull << kind;
	}
	e->raw = r->prev + (uint64_t)ddpspy_unzz(gap);
	r->prev = e->raw + dur;
	int skip = want && (kind >= DDPSPY_EV_COUNT || !want[kind]);
	e->str = NULL;
	e->slen = 0;
	e->str_index = -1;
	/* the arguments with delta state (their previous values), then any beyond, relative to 0; a
	 * local count and pointers, not e's fields, in the loops (a store and a load of e->nargs per
	 * argument was most of the decoding's time) */
	int64_t *args = e->args, *pv = delta ? r->prev_args[kind] : NULL;
	unsigned nd = delta ? (nargs < DDPSPY_EVC_DELTA_ARGS ? (unsigned)nargs : DDPSPY_EVC_DELTA_ARGS) : 0;
	unsigned i = 0;
	for (; i < nd; i++) {
		int64_t val = pv[i];
		if (mask[i / 8] >> (i % 8) & 1) {
			if (!(p = ddpspy_get_varint(p, end, &v)))
				return -1;
			val = (int64_t)((uint64_t)val + (uint64_t)ddpspy_unzz(v));
			pv[i] = val;
		}
		if (i < TRACE_MAX_ARGS)
			args[i] = val;
	}
	for (; i < nargs; i++) {
		int64_t val = 0;
		if (mask[i / 8] >> (i % 8) & 1) {
			if (!(p = ddpspy_get_varint(p, end, &v)))
				return -1;
			val = ddpspy_unzz(v);
		}
		if (i < TRACE_MAX_ARGS)
			args[i] = val;
	}
	e->nargs = nargs < TRACE_MAX_ARGS ? (int)nargs : TRACE_MAX_ARGS;
	if (h & DDPSPY_EVC_STR) {
		if (!(p = ddpspy_get_varint(p, end, &v)) || v > (uint64_t)(end - p))
			return -1;
		e->str = (const char *)p;
		e->slen = (uint32_t)v;
		p += v;
		if (e->nargs < TRACE_MAX_ARGS) {
			e->str_index = e->nargs;
			e->args[e->nargs++] = 0;
		}
	}
	r->p = p;
	if (skip)
		return 1;
	e->kind = (int)kind;
	if (r->gpu) {
		/* a time of 0 is CUPTI's "not collected" (files before 2.6 kept such records): no time at all */
		if (!e->raw && kind != DDPSPY_EV_GPU_EXTCORR) {
			f->gpu.untimed_read++;
			return 1;
		}
		e->t_ns = gpu_to_ns(f, e->raw);
		e->dur_ns = dur > INT64_MAX ? INT64_MAX : (int64_t)dur;
		e->stack = 0;
		return 0;
	}
	e->t_ns = raw_to_ns(f, e->raw, seg);
	e->dur_ns = raw_to_ns(f, e->raw + dur, seg) - e->t_ns;
	if (e->dur_ns < 0)
		e->dur_ns = 0;
	e->stack = (uint32_t)sid;
	return 0;
}

/* The record's next event, either encoding: as decode_event. */
static inline int evrec_next(struct trace_file *f, struct trace_evrec *r, size_t *seg, const uint8_t *want,
			     struct trace_event *e)
{
	r->left--;
	if (r->packed)
		return decode_packed(f, r, seg, want, e);
	struct mp m = { r->p, r->end };
	int rc = decode_event(f, &m, &r->prev, seg, want, e);
	r->p = m.p;
	return rc;
}

/* decodes the record's events for the visitor */
static int fast_event_list(struct trace_file *f, struct trace_evrec *r, const struct trace_visitor *v)
{
	struct trace_thread *th = trace_thread(f, r->tid);
	struct trace_event e;
	size_t seg = f->seg;
	e.tid = r->tid;
	while (r->left > 0) {
		if (evrec_next(f, r, &seg, NULL, &e) < 0)
			return -1;
		if (th)
			th->events++;
		f->events++;
		if (v->on_event && v->on_event(v->ctx, f, &e)) {
			f->seg = seg;
			return 1;
		}
	}
	f->seg = seg;
	return 0;
}


/* An "events" record into r (its thread, and where its events are): 1, 0 when it is another
 * thread's than f->only_tid, -1 when malformed. 1.x: "tid", "t0", "ev" (an array of arrays, last);
 * 2.x: "tid", "t0", "n", "na", "b". */
static int events_record(struct trace_file *f, const unsigned char *body, uint32_t len, struct trace_evrec *r,
			 int gpu)
{
	struct mp m = { body, body + len };
	int64_t pairs = mp_container(&m, 1), tid = gpu ? -1 : INT64_MIN, t0 = INT64_MIN, n = -1;
	r->p = r->na = NULL;
	r->nna = 0;
	r->gpu = gpu;
	r->packed = f->major >= 2;
	if (gpu && !r->packed)
		return -1;
	if (pairs < 0)
		return -1;
	for (int64_t i = 0; i < pairs; i++) {
		const char *k;
		uint32_t kl;
		if (!mp_str(&m, &k, &kl))
			return -1;
		if (!gpu && mp_key_is(k, kl, "tid")) {
			if (!mp_int(&m, &tid))
				return -1;
			if (f->only_tid > 0 && tid != f->only_tid) /* "tid" comes second: the rest is skipped */
				return 0;
		} else if (mp_key_is(k, kl, "t0")) {
			if (!mp_int(&m, &t0))
				return -1;
		} else if (!r->packed && mp_key_is(k, kl, "ev")) {
			struct mp ev = m;
			if ((n = mp_container(&ev, 0)) < 0)
				return -1;
			r->p = ev.p;
			r->end = m.end;
			if (tid != INT64_MIN && t0 != INT64_MIN) /* the writer's order: the array is last */
				break;
			if (!mp_skip(&m, 0))
				return -1;
		} else if (r->packed && mp_key_is(k, kl, "n")) {
			if (!mp_int(&m, &n) || n < 0)
				return -1;
		} else if (r->packed && mp_key_is(k, kl, "na")) {
			if (!mp_bin(&m, &r->na, &r->nna))
				return -1;
		} else if (r->packed && mp_key_is(k, kl, "b")) {
			uint32_t bl;
			if (!mp_bin(&m, &r->p, &bl))
				return -1;
			r->end = r->p + bl;
		} else if (!mp_skip(&m, 0)) {
			return -1;
		}
	}
	if (!r->p || tid == INT64_MIN || t0 == INT64_MIN || n < 0 || (r->packed && n > (int64_t)(r->end - r->p)))
		return -1;
	r->tid = (int)tid;
	r->left = n;
	r->prev = (uint64_t)t0;
	r->seen = 0;
	return !gpu && f->only_tid > 0 && tid != f->only_tid ? 0 : 1;
}

/* An "events" record: 0, 1 when a callback stopped reading, -1 when malformed. */
static int fast_events(struct trace_file *f, const unsigned char *body, uint32_t len,
		       const struct trace_visitor *v)
{
	struct trace_evrec *r = f->evrec;
	if (!r && !(r = f->evrec = malloc(sizeof *r)))
		return -1;
	int rc = events_record(f, body, len, r, 0);
	return rc <= 0 ? rc : fast_event_list(f, r, v);
}

/* A "gpu_events" record (2.2): as fast_events, for v->on_gpu */
static int gpu_events(struct trace_file *f, const unsigned char *body, uint32_t len, const struct trace_visitor *v)
{
	struct trace_evrec *r = f->evrec;
	struct trace_event e;
	size_t seg = 0;
	if (!r && !(r = f->evrec = malloc(sizeof *r)))
		return -1;
	int rc = events_record(f, body, len, r, 1);
	if (rc <= 0)
		return rc;
	e.tid = -1;
	while (r->left > 0) {
		if (evrec_next(f, r, &seg, NULL, &e) < 0)
			return -1;
		f->gpu.read++;
		if (v->on_gpu(v->ctx, f, &e))
			return 1;
	}
	return 0;
}

/* The file is read front to back in windows of WINDOW bytes: each window's pages are mapped in
 * one call before it is read (instead of a fault per page), and given back once it is behind
 * (they stay in the page cache), so memory does not grow with the file. *done is where the
 * current window starts. */
#define WINDOW (4u << 20)
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
static void populate(struct trace_file *f, size_t from)
{
	/* errors (kernels before 5.14) are harmless: the pages fault in one by one instead */
	if (from < f->size)
		madvise((void *)(f->map + from), f->size - from < WINDOW ? f->size - from : WINDOW, MADV_POPULATE_READ);
}

static void window(struct trace_file *f, size_t *done, size_t off)
{
	if (off - *done < WINDOW)
		return;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), to = off & ~(pg - 1);
	madvise((void *)(f->map + *done), to - *done, MADV_DONTNEED);
	*done = to;
	populate(f, to);
}

/* Pass 1: calibration points and the header's clock, up to the first damaged frame. */
static void scan_calib(struct trace_file *f)
{
	size_t off = DDPSPY_FILE_HEADER_LEN;
	struct frame fr;
	msgpack_unpacked u;
	char saved[sizeof f->error];

	memcpy(saved, f->error, sizeof saved);
	size_t done = 0;
	populate(f, 0);
	msgpack_unpacked_init(&u);
	while (next_frame(f, &off, &fr, 0) > 0) {
		window(f, &done, fr.off);
		const char *k;
		uint32_t kl;
		if (!peek_kind(&fr, &k, &kl))
			break;
		int is_calib = kind_is(k, kl, DDPSPY_REC_CALIB), is_hdr = kind_is(k, kl, DDPSPY_REC_HEADER);
		if (!is_calib && !is_hdr)
			continue;
		if (frame_crc(fr.body, fr.len) != ddpspy_get_le32(f->map + fr.off + 4))
			break;
		size_t p = 0;
		if (!mp_bounded(fr.body, fr.len) ||
		    msgpack_unpack_next(&u, (const char *)fr.body, fr.len, &p) != MSGPACK_UNPACK_SUCCESS)
			break;
		int64_t raw, mono, real;
		if (trace_mp_int(trace_mp_get(&u.data, "raw"), &raw) && trace_mp_int(trace_mp_get(&u.data, "mono_ns"), &mono) &&
		    trace_mp_int(trace_mp_get(&u.data, "real_ns"), &real))
			add_calib(f, (uint64_t)raw, mono, real);
		if (is_hdr)
			trace_mp_str_into(&u.data, "clock", f->clock, sizeof f->clock);
	}
	msgpack_unpacked_destroy(&u);
	f->raw_is_ns = !strcmp(f->clock, "monotonic");
	memcpy(f->error, saved, sizeof saved); /* pass 2 reports damage itself */
}

/* an "inflight" record (2.9) to v, its times converted; -1 when malformed */
static int rd_inflight(struct trace_file *f, const msgpack_object *m, const struct trace_visitor *v, int *stop)
{
	struct trace_inflight c;
	if (trace_rd_inflight(m, &c) < 0)
		return -1;
	c.ev.t_ns = raw_to_ns(f, c.ev.raw, &f->seg);
	c.at_ns = raw_to_ns(f, c.at_raw, &f->seg);
	c.ev.dur_ns = c.at_ns > c.ev.t_ns ? c.at_ns - c.ev.t_ns : 0;
	*stop = v->on_inflight(v->ctx, f, &c);
	return 0;
}

/* a sched record: each thread's CPU time, wait and slices at its time, to the visitor; 1 when
 * it stops */
static int rd_sched(struct trace_file *f, const msgpack_object *m, const struct trace_visitor *v)
{
	int stop = 0;
	const msgpack_object *t = trace_mp_get(m, "t"), *l = trace_mp_get(m, "threads");
	struct trace_sched sc = { .cpus = (int)trace_mp_int_or(m, "cpus", -1), .host_cpus = (int)trace_mp_int_or(m, "host_cpus", -1),
				  .host_busy_ns = trace_mp_int_or(m, "host_busy_ns", -1) };
	if (t && t->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		sc.t_ns = trace_raw_to_ns(f, t->via.u64);
	for (uint32_t i = 0; t && l && l->type == MSGPACK_OBJECT_ARRAY && i < l->via.array.size && !stop; i++) {
		const msgpack_object *e = &l->via.array.ptr[i];
		int64_t x[4];
		int okv = e->type == MSGPACK_OBJECT_ARRAY && e->via.array.size >= 4;
		for (int q = 0; okv && q < 4; q++)
			okv = trace_mp_int(&e->via.array.ptr[q], &x[q]) && x[q] >= 0;
		if (!okv)
			continue;
		sc.tid = (int)x[0];
		sc.run_ns = (uint64_t)x[1];
		sc.wait_ns = (uint64_t)x[2];
		sc.slices = (uint64_t)x[3];
		stop = v->on_sched(v->ctx, f, &sc);
	}
	return stop;
}

/* the frame at off (one that did not read) runs past the span's end, or its header does: it was
 * being written when the span was taken */
static int span_cut(const struct trace_file *f, size_t off)
{
	if (!f->span.hi || off >= f->span.hi)
		return 0;
	if (f->size - off < DDPSPY_FRAME_HEADER_LEN)
		return 1;
	return off + DDPSPY_FRAME_HEADER_LEN + ddpspy_get_le32(f->map + off) > f->span.hi;
}

/* the records a span skips before its start: the events and what is measured over time */
static int span_skips(const char *k, uint32_t kl)
{
	return kind_is(k, kl, DDPSPY_REC_EVENTS) || kind_is(k, kl, DDPSPY_REC_GPU_EVENTS) ||
	       kind_is(k, kl, DDPSPY_REC_SCHED) || kind_is(k, kl, DDPSPY_REC_INFLIGHT) || kind_is(k, kl, DDPSPY_REC_PYSAMPLES) ||
	       kind_is(k, kl, DDPSPY_REC_CPUSAMPLES);
}

int trace_read(struct trace_file *f, const struct trace_visitor *v)
{
	size_t off = f->resume > DDPSPY_FILE_HEADER_LEN ? f->resume : DDPSPY_FILE_HEADER_LEN;
	struct frame fr;
	msgpack_unpacked u;
	int rc = 0, r;

	size_t done = off & ~((size_t)sysconf(_SC_PAGESIZE) - 1);
	if (!f->ncalib) /* (a second reading may bring the first one's) */
		scan_calib(f);
	populate(f, done);
	msgpack_unpacked_init(&u);
	while ((r = next_frame(f, &off, &fr, off >= f->span.lo)) > 0) {
		if (f->span.hi && fr.off >= f->span.hi) {
			off = fr.off;
			break;
		}
		window(f, &done, fr.off);
		const char *pk = "";
		uint32_t pkl = 0;
		int peeked = f->have_header && peek_kind(&fr, &pk, &pkl);
		if (fr.off < f->span.lo) {
			if (peeked && span_skips(pk, pkl))
				continue;
			if (frame_check(f, &fr) < 0) {
				r = -1;
				off = fr.off;
				break;
			}
		} else {
			trace_span_enter(f);
		}
		int gpu = peeked && kind_is(pk, pkl, DDPSPY_REC_GPU_EVENTS);
		if (gpu || (peeked && kind_is(pk, pkl, DDPSPY_REC_EVENTS))) {
			f->frames++;
			f->ended = 0;
			int e = !gpu ? fast_events(f, fr.body, fr.len, v) : v->on_gpu ? gpu_events(f, fr.body, fr.len, v) : 0;
			if (e < 0) {
				snprintf(f->error, sizeof f->error, "malformed \"%s\" record",
					 gpu ? DDPSPY_REC_GPU_EVENTS : DDPSPY_REC_EVENTS);
				off = fr.off;
				rc = 2;
				break;
			}
			if (e > 0) {
				rc = 1;
				break;
			}
			continue;
		}
		size_t p = 0;
		if (!mp_bounded(fr.body, fr.len) ||
		    msgpack_unpack_next(&u, (const char *)fr.body, fr.len, &p) != MSGPACK_UNPACK_SUCCESS ||
		    u.data.type != MSGPACK_OBJECT_MAP || p != fr.len) {
			snprintf(f->error, sizeof f->error, "undecodable record");
			off = fr.off;
			rc = 2;
			break;
		}
		const msgpack_object *m = &u.data, *k = trace_mp_get(m, "k");
		char kind[16] = "";
		if (k && k->type == MSGPACK_OBJECT_STR && k->via.str.size < sizeof kind)
			memcpy(kind, k->via.str.ptr, k->via.str.size);
		int bad = 0, stop = 0;
		f->frames++;
		f->ended = 0;
		if (!strcmp(kind, DDPSPY_REC_HEADER)) {
			bad = trace_rd_header(f, m) < 0;
			stop = !bad && v->on_header && v->on_header(v->ctx, f);
		} else if (!f->have_header) {
			snprintf(f->error, sizeof f->error, "first record is \"%s\", not a header", kind);
			off = fr.off;
			rc = 2;
			break;
		} else if (!strcmp(kind, DDPSPY_REC_CALIB)) {
			int64_t raw, mono, real; /* (pass 1 read them, unless the file is followed from later on) */
			if (f->resume && trace_mp_int(trace_mp_get(m, "raw"), &raw) &&
			    trace_mp_int(trace_mp_get(m, "mono_ns"), &mono) && trace_mp_int(trace_mp_get(m, "real_ns"), &real))
				add_calib(f, (uint64_t)raw, mono, real);
		} else if (!strcmp(kind, DDPSPY_REC_SCHED) && v->on_sched && !trace_mp_get(m, "error")) {
			stop = rd_sched(f, m, v);
		} else if (!strcmp(kind, DDPSPY_REC_INFLIGHT) && v->on_inflight) {
			bad = rd_inflight(f, m, v, &stop) < 0;
		} else {
			bad = trace_rd_record(f, kind, m, v, &stop) < 0;
		}
		/* events were read by fast_events; unknown kinds come from newer writers: skipped */
		if (bad) {
			snprintf(f->error, sizeof f->error, "malformed \"%s\" record", kind);
			off = fr.off;
			rc = 2;
			break;
		}
		if (stop) {
			rc = 1;
			break;
		}
	}
	if (r < 0 && span_cut(f, off)) {
		r = 0; /* (the span's end: its last frame was being written when the span was taken) */
		f->error[0] = 0;
	}
	if (r < 0)
		rc = 2;
	trace_span_enter(f); /* (nothing read in the span: nothing lost in it) */
	f->stop_offset = off;
	msgpack_unpacked_destroy(&u);
	return rc;
}

static int copy_clock(struct trace_calib **dst, size_t *dn, const struct trace_calib *src, size_t n)
{
	struct trace_calib *c = malloc((n ? n : 1) * sizeof *c);
	if (!c)
		return -1;
	if (n)
		memcpy(c, src, n * sizeof *c);
	free(*dst);
	*dst = c;
	*dn = n;
	return 0;
}

int trace_get_clock(const struct trace_file *f, struct trace_clock *c)
{
	c->raw_is_ns = f->raw_is_ns;
	return copy_clock(&c->calib, &c->n, f->calib, f->ncalib);
}

int trace_set_clock(struct trace_file *f, const struct trace_clock *c)
{
	f->raw_is_ns = c->raw_is_ns;
	return copy_clock(&f->calib, &f->ncalib, c->calib, c->n);
}

/* ---- cursors ---- */

int trace_cursor_open(struct trace_cursor *c, const char *path, int tid, const struct trace_clock *clock,
		      size_t verified, const struct trace_span *span, const uint8_t *want)
{
	memset(c, 0, sizeof *c);
	c->want = want;
	if (trace_open(&c->f, path) < 0 || (clock && trace_set_clock(&c->f, clock) < 0)) {
		c->state = -1;
		return -1;
	}
	c->f.only_tid = tid;
	c->f.verified = verified;
	if (span)
		c->f.span = *span;
	if (!c->f.ncalib)
		scan_calib(&c->f);
	c->off = DDPSPY_FILE_HEADER_LEN;
	populate(&c->f, 0);
	return 0;
}

int trace_cursor_next(struct trace_cursor *c, struct trace_event *e)
{
	struct trace_file *f = &c->f;
	for (;;) {
		while (c->r.left > 0) {
			int r = evrec_next(f, &c->r, &c->seg, c->want, e);
			if (r < 0) {
				snprintf(f->error, sizeof f->error, "malformed \"events\" record");
				return c->state = -1;
			}
			if (r == 0) {
				e->tid = c->r.tid;
				return 1;
			}
		}
		if (c->state)
			return c->state > 0 ? 0 : -1;
		struct frame fr;
		int r = next_frame(f, &c->off, &fr, 1);
		if (r <= 0) {
			c->state = r < 0 ? -1 : 1;
			continue;
		}
		if (f->span.hi && fr.off >= f->span.hi) {
			c->state = 1;
			continue;
		}
		window(f, &c->done, fr.off);
		const char *k;
		uint32_t kl;
		if (fr.off < f->span.lo || !peek_kind(&fr, &k, &kl) || !kind_is(k, kl, DDPSPY_REC_EVENTS))
			continue;
		r = events_record(f, fr.body, fr.len, &c->r, 0);
		if (r < 0) {
			snprintf(f->error, sizeof f->error, "malformed \"events\" record");
			c->state = -1;
			c->r.left = 0;
			continue;
		}
		if (r == 0)
			c->r.left = 0;
	}
}

void trace_cursor_close(struct trace_cursor *c)
{
	trace_close(&c->f);
}
