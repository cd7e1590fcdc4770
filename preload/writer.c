/* The writer: one background thread per process drains every thread's ring every
 * DDPSPY_FLUSH_MS into framed msgpack records appended to the process's file (format.h), and a
 * final drain at exit, exec, _exit or a fatal signal. Everything here runs off the hot path and
 * may allocate; all of it runs with the calling thread's guard set, so nothing is recorded.
 *
 * Locking: wlock serialises flushes (writer thread, exec, exit, fork); it is never taken by a
 * wrapper's fast path. The signal path never takes it: it wakes the writer through a futex and
 * waits, with a time limit, for the writer to say the file is complete. */
#include "internal.h"
#include "../common/evcodec.h"
#include "../common/hash.h"
#include "../cupti/gpu.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <linux/futex.h>
#include <msgpack.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EVENTS_PER_RECORD 4096
#define OUT_BUDGET (256u << 10)
#define DRAIN_BUDGET 2048 /* records of one ring per pass */
#define CALIB_EVERY_NS 1000000000LL

uint64_t dsp_stack_ticks = UINT64_MAX;
uint64_t dsp_poll_ticks = UINT64_MAX;

static pthread_mutex_t wlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t writer;
enum { WAKE_NONE, WAKE_TICK, WAKE_STOP, WAKE_SIGNAL };

struct modent;

/* Everything the writer knows of its thread and its file, which a fork child starts afresh in one
 * assignment (W = W_INIT). Kept apart: wlock, the buffers (cleared, their memory reused) and what
 * is the same in the child (host, executable, command line). */
struct writer_state {
	int writer_running;
	int wake_word;              /* futex: WAKE_* */
	int done_word;              /* futex: set once the file is complete after a signal */
	int stop_requested;
	int finished;               /* the end record is written; nothing more will be */
	int signal_no, signal_asked; /* the fatal signal whose final flush was asked for */
	int writing_fd;             /* the descriptor a write() of ours is using now, -1 */
	dev_t own_dev;              /* what the descriptor must still be before we write to it */
	ino_t own_ino;
	int file_failed;            /* the file is gone: nothing can be written */
	int write_err;              /* errno of a write the file did not take in full; 0: none */
	int no_reserve;             /* the file system does not reserve room past the end (fallocate) */
	int ending;                 /* the flush with the end record is being written */
	uint64_t file_size;         /* bytes of whole frames in the file */
	uint64_t events_on_disk, unwritten; /* events in the file; events it did not take */
	uint64_t unwritten_reported;
	char path[PATH_MAX];
	int identity_dirty;
	int64_t last_calib_mono;
	int64_t last_sched_mono;    /* when the threads' schedstat was last read (0: never) */
	uint64_t first_raw;
	int64_t first_mono;
	unsigned long long mod_adds, mod_subs; /* dl_iterate_phdr's counters at the last modules record */
	uint64_t total_written, total_dropped_reported;
	uint64_t gpu_written, gpu_unwritten; /* CUPTI's records in the file; those it did not take */
	uint64_t gpu_changes;       /* dsp_gpu_info's change count at the last "gpu" record */
	unsigned py_changes;        /* dsp_py_state's at the last "python" record */
	uint64_t py_dropped;        /* the Python sampler's dropped and torn samples at the last "pysamples" record */
	uint64_t cpu_lost;          /* the CPU sampler's lost samples at the last "cpusamples" record */
	int cpu_told;               /* a "cpusamples" record said why the CPU sampler was refused */
	size_t frame_start;         /* where the record being built starts in out */
	struct modent *msnap;       /* the loaded objects the file last described */
	size_t nmsnap;
	uint64_t start_raw;         /* the clocks when the library started in this process */
	int64_t start_mono, start_real;
	int64_t event_ps;           /* ddpspy's cost per event (selfcost.c), ps; 0 not measured */
	int cost_written;
};
#define WRITER_STATE_INIT { .writing_fd = -1, .mod_adds = ~0ull, .mod_subs = ~0ull }
static struct writer_state W = WRITER_STATE_INIT;
static const struct writer_state W_INIT = WRITER_STATE_INIT;

/* The trace file's descriptor. The writer sets it under wlock; a program thread that is about to
 * replace that number (dup2 onto it) moves it with dsp_own_fd_move, without the lock. close() in
 * io.c reads it too, so that a program closing every descriptor does not close ours. */
int dsp_own_fd = -1;

static void set_fd(int v)
{
	__atomic_store_n(&dsp_own_fd, v, __ATOMIC_SEQ_CST);
}

/* Gives the descriptor up (the close wrapper lets a number that is no longer ours be closed). */
static void close_fd(void)
{
	int fd = __atomic_exchange_n(&dsp_own_fd, -1, __ATOMIC_SEQ_CST);
	if (fd >= 0)
		close(fd);
}

/* The program is about to put another file at number fd, the trace file's: the trace file moves
 * to a new number first, and a write() still using the old one is waited out. Pairs with
 * pick_fd: each side stores, then loads the other's word (sequentially consistent), so either the
 * writer sees the new number or this sees the writer on the old one. Returns 1 when moved. Not in
 * a vfork child: its descriptor table is its own, our variables its parent's. */
int dsp_own_fd_move(int fd)
{
	if (dsp_vfork_child())
		return 0;
	struct dsp_tls *t = &dsp_tls;
	t->guard++;
	int moved = fcntl(fd, F_DUPFD_CLOEXEC, fd + 1);
	int expect = fd;
	if (moved >= 0 && !__atomic_compare_exchange_n(&dsp_own_fd, &expect, moved, 0,
						       __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
		close(moved); /* another thread moved it, or the writer gave it up */
		moved = -1;
	}
	while (moved >= 0 && __atomic_load_n(&W.writing_fd, __ATOMIC_SEQ_CST) == fd)
		sched_yield();
	t->guard--;
	/* when no number was free, the writer's check before each write finds the file gone */
	return moved >= 0;
}


static msgpack_sbuffer out;    /* frames waiting for write() */
static msgpack_packer pk;


/* ---- tables: call stacks (IP arrays) and strings (kernel and CUDA API names), each deduplicated
 * to small ids and written once per file, in a "stacks" or "names" record before the events
 * record that first uses them ---- */
struct tab_ent {
	uint64_t hash;
	uint32_t id, bytes;
	void *key;
};
struct table {
	struct tab_ent *v;
	size_t cap, len;
	msgpack_sbuffer pend;  /* packed entries of the pending record */
	msgpack_packer pk;
	uint32_t pending;      /* entries waiting in pend */
};
static struct table stacks, names;

static int tab_grow(struct table *t)
{
	size_t cap = t->cap ? t->cap * 2 : 1024;
	struct tab_ent *n = calloc(cap, sizeof *n);
	if (!n)
		return -1;
	for (size_t i = 0; i < t->cap; i++) {
		if (!t->v[i].hash)
			continue;
		size_t j = t->v[i].hash & (cap - 1);
		while (n[j].hash)
			j = (j + 1) & (cap - 1);
		n[j] = t->v[i];
	}
	free(t->v);
	t->v = n;
	t->cap = cap;
	return 0;
}

/* The entry's id, adding it (packed as [id, ...] into the pending record by pack) when new; 0
 * when out of memory. */
static uint32_t tab_id(struct table *t, const void *key, uint32_t bytes,
		       void (*pack)(msgpack_packer *pk, uint32_t id, const void *key, uint32_t bytes))
{
	uint64_t h = ddpspy_fnv_bytes(DDPSPY_FNV_SEED, key, bytes);
	h = h ? h : 1;
	if ((t->len + 1) * 2 > t->cap && tab_grow(t) < 0)
		return 0;
	size_t j = h & (t->cap - 1);
	for (; t->v[j].hash; j = (j + 1) & (t->cap - 1))
		if (t->v[j].hash == h && t->v[j].bytes == bytes && !memcmp(t->v[j].key, key, bytes))
			return t->v[j].id;
	void *copy = malloc(bytes ? bytes : 1);
	if (!copy)
		return 0;
	memcpy(copy, key, bytes);
	t->v[j] = (struct tab_ent){h, (uint32_t)++t->len, bytes, copy};
	pack(&t->pk, t->v[j].id, key, bytes);
	t->pending++;
	return t->v[j].id;
}

static void tab_clear(struct table *t)
{
	for (size_t i = 0; i < t->cap; i++)
		free(t->v[i].key);
	free(t->v);
	t->v = NULL;
	t->cap = t->len = 0;
	t->pending = 0;
	msgpack_sbuffer_clear(&t->pend);
}

/* A stack with Python frames has the key PY_KEY, the native frame count, the frames, then the
 * Python frames as the ring holds them (dsp_py_capture): its native frames go to the "stacks"
 * record and its Python frames, by the same id, to the "pyframes" record after it. */
#define PY_KEY UINT64_MAX
static struct {
	msgpack_sbuffer pend;
	msgpack_packer pk;
	uint32_t pending;
} pyst;

static void pack_pyframes(uint32_t id, const unsigned char *b, uint32_t bytes)
{
	uint32_t n, used;
	memcpy(&n, b, 4);
	memcpy(&used, b + 4, 4);
	msgpack_pack_array(&pyst.pk, n + 1);
	msgpack_pack_uint32(&pyst.pk, id);
	for (uint32_t i = 0, at = 8; i < n; i++) {
		int32_t line;
		uint16_t len[2] = {0, 0};
		if (at + 8 <= used && used <= bytes)
			memcpy(len, b + at + 4, 4);
		if (at + 8u + len[0] + len[1] > used || used > bytes) { /* (not as dsp_py_capture writes) */
			msgpack_pack_nil(&pyst.pk);
			continue;
		}
		memcpy(&line, b + at, 4);
		msgpack_pack_array(&pyst.pk, 3);
		msgpack_pack_str_with_body(&pyst.pk, b + at + 8, len[0]);
		msgpack_pack_int32(&pyst.pk, line);
		msgpack_pack_str_with_body(&pyst.pk, b + at + 8 + len[0], len[1]);
		at += 8u + len[0] + len[1];
	}
	pyst.pending++;
}

static void pack_stack(msgpack_packer *p, uint32_t id, const void *key, uint32_t bytes)
{
	const uintptr_t *ips = key;
	uint32_t n = bytes / sizeof *ips;
	if (bytes >= 16 && ips[0] == PY_KEY) {
		n = (uint32_t)ips[1];
		pack_pyframes(id, (const unsigned char *)(ips + 2 + n), bytes - 16 - 8 * n);
		ips += 2;
	}
	msgpack_pack_array(p, n + 1);
	msgpack_pack_uint32(p, id);
	for (uint32_t i = 0; i < n; i++)
		msgpack_pack_uint64(p, ips[i]);
}

static void pack_name(msgpack_packer *p, uint32_t id, const void *key, uint32_t bytes)
{
	msgpack_pack_array(p, 2);
	msgpack_pack_uint32(p, id);
	msgpack_pack_str_with_body(p, key, bytes);
}

static uint32_t stack_id(const uintptr_t *ips, uint32_t n)
{
	return tab_id(&stacks, ips, n * (uint32_t)sizeof *ips, pack_stack);
}

/* a stack with Python frames (py: as the ring holds them, its bytes in its header) */
static uint32_t pystack_id(const uintptr_t *ips, uint32_t n, const unsigned char *py)
{
	static uintptr_t key[2 + 64 + DSP_PY_BYTES / sizeof(uintptr_t)];
	uint32_t used;
	memcpy(&used, py + 4, 4);
	if (n > 64 || used < 8 || used > DSP_PY_BYTES)
		return n ? stack_id(ips, n) : 0;
	key[0] = PY_KEY;
	key[1] = n;
	if (n)
		memcpy(key + 2, ips, n * sizeof *ips);
	memcpy(key + 2 + n, py, used);
	return tab_id(&stacks, key, (uint32_t)((2 + n) * sizeof *key + used), pack_stack);
}

static uint32_t name_id(const char *name)
{
	size_t n = name ? strnlen(name, 4096) : 0;
	return n ? tab_id(&names, name, (uint32_t)n, pack_name) : 0;
}

/* ---- framing ---- */

static void frame_begin(const char *kind, size_t nfields)
{
	static const char zeros[DDPSPY_FRAME_HEADER_LEN];
	W.frame_start = out.size;
	msgpack_sbuffer_write(&out, zeros, sizeof zeros);
	msgpack_pack_map(&pk, nfields + 1);
	msgpack_pack_str_with_body(&pk, "k", 1);
	msgpack_pack_str_with_body(&pk, kind, strlen(kind));
}

static void frame_end(void)
{
	size_t body = W.frame_start + DDPSPY_FRAME_HEADER_LEN;
	if (!out.data) /* the buffer never got memory: nothing to frame */
		return;
	unsigned char *h = (unsigned char *)out.data + W.frame_start;
	ddpspy_put_le32(h, (uint32_t)(out.size - body));
	ddpspy_put_le32(h + 4, ddpspy_crc32(0, out.data + body, out.size - body));
}

static void key(const char *k)
{
	msgpack_pack_str_with_body(&pk, k, strlen(k));
}

static void kv_int(const char *k, int64_t v)
{
	key(k);
	msgpack_pack_int64(&pk, v);
}

static void kv_bool(const char *k, int v)
{
	key(k);
	if (v)
		msgpack_pack_true(&pk);
	else
		msgpack_pack_false(&pk);
}

static void kv_str(const char *k, const char *v)
{
	key(k);
	if (v)
		msgpack_pack_str_with_body(&pk, v, strlen(v));
	else
		msgpack_pack_nil(&pk);
}

/* ---- records ---- */
static char host[256];
static char exe[PATH_MAX];
static char *cmdline;
static size_t cmdline_len;

static void read_self(void)
{
	if (gethostname(host, sizeof host - 1) < 0)
		strcpy(host, "unknown");
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = 0;
	int f = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (f >= 0) {
		size_t cap = 4096;
		cmdline = malloc(cap);
		for (ssize_t r; cmdline && (r = read(f, cmdline + cmdline_len, cap - cmdline_len)) > 0;) {
			cmdline_len += (size_t)r;
			if (cmdline_len == cap) {
				char *m = cap < (1u << 20) ? realloc(cmdline, cap *= 2) : NULL;
				if (!m)
					break;
				cmdline = m;
			}
		}
		close(f);
	}
}

static void pack_identity_fields(void)
{
	kv_str("role", ddpspy_role_names[dsp_id.role]);
	kv_int("rank", dsp_id.rank);
	kv_int("local_rank", dsp_id.local_rank);
	kv_int("world_size", dsp_id.world_size);
	kv_str("rank_source", dsp_id.source);
	kv_int("parent_rank", dsp_id.parent_rank);
	kv_int("parent_pid", dsp_id.parent_pid);
}
#define IDENTITY_FIELDS 7

static void rec_header(void)
{
	int argc = 0;

	for (size_t i = 0; i < cmdline_len; i++)
		argc += cmdline[i] == 0;
	frame_begin(DDPSPY_REC_HEADER, 12 + IDENTITY_FIELDS);
	key("format");
	msgpack_pack_array(&pk, 2);
	msgpack_pack_int(&pk, DDPSPY_FORMAT_MAJOR);
	msgpack_pack_int(&pk, DDPSPY_FORMAT_MINOR);
	kv_str("tool", "ddpspy " DDPSPY_VERSION);
	kv_str("host", host);
	kv_int("pid", getpid());
	kv_int("ppid", getppid());
	pack_identity_fields();
	kv_str("exe", exe);
	key("cmdline");
	msgpack_pack_array(&pk, (size_t)argc);
	for (size_t i = 0, s = 0; i < cmdline_len; i++)
		if (cmdline[i] == 0) {
			msgpack_pack_str_with_body(&pk, cmdline + s, i - s);
			s = i + 1;
		}
	kv_str("clock", dsp_use_tsc ? "tsc" : "monotonic");
	/* the clocks when the library started in this process (or when the fork child began) */
	kv_int("raw", (int64_t)W.start_raw);
	kv_int("mono_ns", W.start_mono);
	kv_int("real_ns", W.start_real);
	key("config");
	msgpack_pack_map(&pk, 4);
	kv_int("ring_kb", dsp_cfg.ring_kb);
	kv_int("flush_ms", dsp_cfg.flush_ms);
	kv_int("stack_us", dsp_cfg.stack_us);
	kv_int("inflight_ms", dsp_cfg.inflight_ms);
	frame_end();
}

/* DDPSPY_INFLIGHT_MS in raw ticks: a call in flight this long is recorded (the writer's alone) */
static uint64_t inflight_ticks = UINT64_MAX;

/* The thresholds in raw ticks (stacks, polls) from the raw clock's rate between two samples. */
static void set_thresholds(uint64_t raw0, int64_t mono0, uint64_t raw, int64_t mono)
{
	double per_ns = (double)(raw - raw0) / (double)(mono - mono0);
	if (dsp_cfg.stack_us >= 0)
		__atomic_store_n(&dsp_stack_ticks, (uint64_t)(per_ns * 1000.0 * (double)dsp_cfg.stack_us),
				 __ATOMIC_RELAXED);
	__atomic_store_n(&dsp_poll_ticks, (uint64_t)(per_ns * 1000.0 * DSP_POLL_US), __ATOMIC_RELAXED);
	double in = per_ns * 1e6 * (double)dsp_cfg.inflight_ms; /* (clamped: up to 2^40 ms may be asked) */
	inflight_ticks = in <= 0 ? 0 : in >= 1.8e19 ? UINT64_MAX : (uint64_t)in;
}

/* Init assumed a 3 GHz raw clock; the writer measures the rate at once, over 2 ms or more since
 * init's sample, instead of at the first calibration a second later (a 2.1 GHz TSC made the
 * first second's 1 ms stack threshold 1.43 ms, and 1.2 ms waits went without stacks). */
static void measure_thresholds(void)
{
	uint64_t raw;
	int64_t mono, real;
	dsp_clock_sample(&raw, &mono, &real);
	if (mono - W.start_mono < 2000000) {
		struct timespec ts = {0, 2000000 - (mono - W.start_mono)};
		syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &ts, NULL); /* (not our nanosleep wrapper) */
		dsp_clock_sample(&raw, &mono, &real);
	}
	if (mono > W.start_mono && raw > W.start_raw)
		set_thresholds(W.start_raw, W.start_mono, raw, mono);
}

static void rec_calib(void)
{
	uint64_t raw;
	int64_t mono, real;

	dsp_clock_sample(&raw, &mono, &real);
	frame_begin(DDPSPY_REC_CALIB, 3);
	kv_int("raw", (int64_t)raw);
	kv_int("mono_ns", mono);
	kv_int("real_ns", real);
	frame_end();
	W.last_calib_mono = mono;
	if (!W.first_mono) {
		W.first_raw = raw;
		W.first_mono = mono;
	} else if (mono - W.first_mono > 1000000) {
		set_thresholds(W.first_raw, W.first_mono, raw, mono); /* over a longer span */
	}
}

/* ddpspy's cost per event, once measured (format 2.8) */
static void rec_cost_once(void)
{
	int64_t ps = __atomic_load_n(&W.event_ps, __ATOMIC_RELAXED);
	if (W.cost_written || ps <= 0)
		return;
	frame_begin(DDPSPY_REC_COST, 1);
	kv_int("event_ps", ps);
	frame_end();
	W.cost_written = 1;
}

/* The loaded objects the file last described, to write only what changed (format 2.0). */
struct modent {
	uint64_t lo, hi, bias, hash;
	char *name;
	uint8_t bid[32]; /* its GNU build id, nbid bytes (0: none) */
	int nbid;
};

struct modwalk {
	struct modent *v;
	size_t n, cap;
	unsigned long long adds, subs;
	int nomem;
};

static uint64_t hash_str(const char *s)
{
	return ddpspy_fnv_bytes(DDPSPY_FNV_SEED, s, strlen(s));
}

/* e's entry in v (n), the same object at the same place; NULL when it is not there */
static const struct modent *mod_find(const struct modent *e, const struct modent *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].lo == e->lo && v[i].hash == e->hash)
			return &v[i];
	return NULL;
}

static int mod_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct modwalk *w = ctx;
	(void)size;
	w->adds = info->dlpi_adds;
	w->subs = info->dlpi_subs;
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 256;
		struct modent *n = realloc(w->v, cap * sizeof *n);
		if (!n) {
			w->nomem = 1;
			return 1;
		}
		w->v = n;
		w->cap = cap;
	}
	struct modent *e = &w->v[w->n];
	const char *name = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : exe;
	dsp_object_range(info, &e->lo, &e->hi);
	e->bias = info->dlpi_addr;
	e->name = strdup(name);
	if (!e->name) {
		w->nomem = 1;
		return 1;
	}
	e->hash = hash_str(name) ^ e->bias;
	/* its build id: read once, when it is new (a PyTorch import loads objects in many flushes) */
	const struct modent *had = mod_find(e, W.msnap, W.nmsnap);
	if (had) {
		memcpy(e->bid, had->bid, sizeof e->bid);
		e->nbid = had->nbid;
	} else {
		e->nbid = dsp_object_build_id(info, e->bid, (int)sizeof e->bid);
	}
	w->n++;
	return 0;
}

static void modents_free(struct modent *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
}

/* When objects were loaded or unloaded since the last look (the loader's counters moved): a
 * "modules" record of what came (all of them, the first time in a file) and what went. */
static void rec_modules_if_changed(void)
{
	struct modwalk w = {0};
	unsigned long long cnt[2] = {0, 0};
	dsp_dl_counters(cnt);
	if (cnt[0] == W.mod_adds && cnt[1] == W.mod_subs && W.msnap)
		return;
	dl_iterate_phdr(mod_cb, &w);
	unsigned long long adds = w.adds, subs = w.subs;
	if (w.nomem) {
		modents_free(w.v, w.n);
		return;
	}
	size_t nadd = 0, ngone = 0;
	for (size_t i = 0; i < w.n; i++)
		nadd += !mod_find(&w.v[i], W.msnap, W.nmsnap);
	for (size_t i = 0; i < W.nmsnap; i++)
		ngone += !mod_find(&W.msnap[i], w.v, w.n);
	if (nadd || ngone) {
		frame_begin(DDPSPY_REC_MODULES, 2);
		key("list");
		msgpack_pack_array(&pk, nadd);
		const char *prev = "";
		for (size_t i = 0; i < w.n; i++) {
			const struct modent *e = &w.v[i];
			if (mod_find(e, W.msnap, W.nmsnap))
				continue;
			/* [bytes shared with the name before, the rest, bias, lo - bias, hi - lo, and
			 * (2.13) the build id where it has one]: the names share long directories, the
			 * addresses their high bits */
			size_t same = 0;
			while (prev[same] && prev[same] == e->name[same])
				same++;
			msgpack_pack_array(&pk, e->nbid ? 6 : 5);
			msgpack_pack_uint64(&pk, same);
			msgpack_pack_str_with_body(&pk, e->name + same, strlen(e->name + same));
			msgpack_pack_uint64(&pk, e->bias);
			msgpack_pack_int64(&pk, (int64_t)(e->lo - e->bias));
			msgpack_pack_uint64(&pk, e->hi - e->lo);
			if (e->nbid)
				msgpack_pack_bin_with_body(&pk, e->bid, (size_t)e->nbid);
			prev = e->name;
		}
		key("gone");
		msgpack_pack_array(&pk, ngone);
		for (size_t i = 0; i < W.nmsnap; i++)
			if (!mod_find(&W.msnap[i], w.v, w.n))
				msgpack_pack_uint64(&pk, W.msnap[i].lo);
		frame_end();
	}
	dsp_gpu_modules_changed();
	dsp_py_modules_changed();
	modents_free(W.msnap, W.nmsnap);
	W.msnap = w.v;
	W.nmsnap = w.n;
	W.mod_adds = adds;
	W.mod_subs = subs;
}

/* What the file's Python frames come from, once CPython is found (and again if that changes) */
static void rec_python_if_changed(void)
{
	const char *version, *why;
	unsigned c = dsp_py_state(&version, &why);
	if (c == W.py_changes)
		return;
	frame_begin(DDPSPY_REC_PYTHON, 2 + !!why);
	kv_str("version", version);
	kv_bool("frames", !why);
	if (why)
		kv_str("why", why);
	frame_end();
	W.py_changes = c;
}

static void flush_stacks(void);

/* a samples record's times and stack ids, n each */
static void pack_samples(const uint64_t *t, const uint32_t *sid, int n)
{
	key("t");
	msgpack_pack_array(&pk, (size_t)n);
	for (int i = 0; i < n; i++)
		msgpack_pack_uint64(&pk, t[i]);
	key("stack");
	msgpack_pack_array(&pk, (size_t)n);
	for (int i = 0; i < n; i++)
		msgpack_pack_uint32(&pk, sid[i]);
}

/* The Python sampler's samples since the last flush (pyframes.c): their raw times and stack ids
 * (stacks of Python frames alone), and the samples dropped so far */
static void rec_pysamples(void)
{
	static uint8_t blob[DSP_PY_BYTES] __attribute__((aligned(8)));
	uint64_t t[64], dropped, torn;
	uint32_t sid[64];
	int n = 0, tid = 0, b;
	while (n < 64 && (b = dsp_py_sample_take(&t[n], &tid, blob, sizeof blob)) >= 0)
		if (b && (sid[n] = pystack_id(NULL, 0, blob)) != 0)
			n++;
	dsp_py_samples(&dropped, &torn);
	if (!n && dropped + torn == W.py_dropped)
		return;
	flush_stacks();
	frame_begin(DDPSPY_REC_PYSAMPLES, 6);
	kv_int("tid", tid);
	kv_int("hz", dsp_cfg.sample_hz);
	pack_samples(t, sid, n);
	kv_int("dropped", (int64_t)dropped);
	kv_int("torn", (int64_t)torn);
	frame_end();
	W.py_dropped = dropped + torn;
}

/* The CPU sampler's samples since the last flush (cpusample.c): their CLOCK_MONOTONIC times and
 * stack ids (native frames, the sampled instruction first), the samples kept and lost so far, and
 * once why none are taken where the sampler was refused */
static void rec_cpusamples(void)
{
	uint64_t t[64], kept, lost;
	uintptr_t pc[DSP_CPU_FRAMES];
	uint32_t sid[64];
	int n = 0, k;
	while (n < 64 && (k = dsp_cpu_sample_take(&t[n], pc, DSP_CPU_FRAMES)) >= 0)
		if (k && (sid[n] = stack_id(pc, (uint32_t)k)) != 0)
			n++;
	const char *why = dsp_cpu_samples(&kept, &lost);
	if (!why || (!n && lost == W.cpu_lost && (!why[0] || W.cpu_told)))
		return;
	flush_stacks();
	frame_begin(DDPSPY_REC_CPUSAMPLES, 8 + !!why[0]);
	kv_int("tid", dsp_pid);
	kv_int("hz", dsp_cfg.sample_hz);
	kv_str("clock", "monotonic");
	kv_str("source", "task-clock");
	pack_samples(t, sid, n);
	kv_int("kept", (int64_t)kept);
	kv_int("lost", (int64_t)lost);
	if (why[0])
		kv_str("why", why);
	frame_end();
	W.cpu_lost = lost;
	W.cpu_told = why[0] != 0;
}

static void rec_identity(void)
{
	frame_begin(DDPSPY_REC_IDENTITY, IDENTITY_FIELDS);
	pack_identity_fields();
	frame_end();
}

static void rec_end(const char *reason)
{
	frame_begin(DDPSPY_REC_END, 3 + (W.unwritten || W.write_err) + !!W.write_err);
	kv_str("reason", reason);
	kv_int("events", (int64_t)W.total_written);
	kv_int("dropped", (int64_t)W.total_dropped_reported);
	if (W.unwritten || W.write_err)
		kv_int("unwritten", (int64_t)W.unwritten);
	if (W.write_err)
		kv_str("write_error", strerror(W.write_err));
	frame_end();
}

static void write_out(void);

/* ---- draining one thread ---- */
#define GPU_TID INT32_MIN /* the drain of CUPTI's records: a "gpu_events" record, no thread */
struct drain {
	int tid;
	uint64_t base, prev_end;
	size_t n;
	size_t n_at, b_at, b0;             /* in out: the count's and the bin length's 4 bytes, the events */
	uint64_t seen;                     /* kinds with delta state in this record */
	uint8_t na[DDPSPY_EVC_KINDS];      /* their argument counts, DDPSPY_EVC_NA_NONE: not seen */
	int64_t prev[DDPSPY_EVC_KINDS][DDPSPY_EVC_DELTA_ARGS];
};

/* Room for need more bytes in out. */
static int out_reserve(size_t need)
{
	if (out.data && out.alloc - out.size >= need)
		return 0;
	size_t cap = out.alloc ? out.alloc : 65536;
	while (cap - out.size < need)
		cap *= 2;
	char *m = realloc(out.data, cap);
	if (!m)
		return -1;
	out.data = m;
	out.alloc = cap;
	return 0;
}

static void put_be32(size_t at, size_t v)
{
	unsigned char *p = (unsigned char *)out.data + at;
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* the table's pending entries as one record */
static void flush_table(struct table *t, const char *rec)
{
	if (!t->pending)
		return;
	frame_begin(rec, 1);
	key("list");
	msgpack_pack_array(&pk, t->pending);
	msgpack_sbuffer_write(&out, t->pend.data, t->pend.size);
	frame_end();
	msgpack_sbuffer_clear(&t->pend);
	t->pending = 0;
}

static void flush_stacks(void)
{
	flush_table(&stacks, DDPSPY_REC_STACKS);
	if (!pyst.pending)
		return;
	frame_begin(DDPSPY_REC_PYFRAMES, 1);
	key("list");
	msgpack_pack_array(&pk, pyst.pending);
	msgpack_sbuffer_write(&out, pyst.pend.data, pyst.pend.size);
	frame_end();
	msgpack_sbuffer_clear(&pyst.pend);
	pyst.pending = 0;
}

/* An "events" record is packed straight into out: its map up to the bin of events, whose count
 * and length end_events fills in (fixed-width fields), then the events, then "na". */
static int begin_events(struct drain *d, uint64_t t0)
{
	if (d->tid == GPU_TID) {
		frame_begin(DDPSPY_REC_GPU_EVENTS, 4);
	} else {
		frame_begin(DDPSPY_REC_EVENTS, 5);
		kv_int("tid", d->tid);
	}
	kv_int("t0", (int64_t)t0);
	key("n");
	if (out_reserve(32) < 0 || !out.data) {
		if (out.data)
			out.size = W.frame_start; /* (the half-made record is taken back) */
		return -1;
	}
	out.data[out.size] = (char)0xce; /* uint32 */
	d->n_at = out.size + 1;
	out.size += 5;
	key("b");
	out.data[out.size] = (char)0xc6; /* bin32 */
	d->b_at = out.size + 1;
	out.size += 5;
	d->b0 = out.size;
	d->base = d->prev_end = t0;
	d->seen = 0;
	memset(d->na, DDPSPY_EVC_NA_NONE, sizeof d->na);
	return 0;
}

static void end_events(struct drain *d)
{
	uint64_t *unwritten = d->tid == GPU_TID ? &W.gpu_unwritten : &W.unwritten;
	if (W.write_err) { /* the file failed during this record: it takes no more events */
		out.size = W.frame_start;
		*unwritten += d->n;
		d->n = 0;
		return;
	}
	size_t nna = 0;
	for (size_t k = 0; k < DDPSPY_EVC_KINDS; k++)
		if (d->na[k] != DDPSPY_EVC_NA_NONE)
			nna = k + 1;
	put_be32(d->n_at, d->n);
	put_be32(d->b_at, out.size - d->b0);
	key("na");
	msgpack_pack_bin(&pk, nna);
	msgpack_pack_bin_body(&pk, d->na, nna);
	frame_end();
	*(d->tid == GPU_TID ? &W.gpu_written : &W.total_written) += d->n;
	d->n = 0;
	if (out.size >= OUT_BUDGET)
		write_out(); /* a long drain goes out in parts, not as one buffer of every ring */
}

#define EV_MAX (16 + 10 * 6 + 32 + 10 * 256 + 4096 + 16) /* the longest packed event */

/* One ring record in the packed encoding (common/evcodec.h). */
static void pack_event(void *ctx, const struct rec *e)
{
	static const int64_t zeros[DDPSPY_EVC_DELTA_ARGS];
	struct drain *d = ctx;
	const unsigned char *tailp = (const unsigned char *)&e->args[e->nargs];
	uint32_t sid = 0;
	const char *str = NULL;
	unsigned kind = e->kind, nargs = e->nargs;

	if (e->flags & REC_STR) {
		str = (const char *)tailp;
		tailp += (e->slen + 7u) & ~7u;
	}
	if (e->flags & (REC_STACK | REC_PY)) {
		uint64_t nf = 0;
		const uintptr_t *ips = NULL;
		if (e->flags & REC_STACK) {
			memcpy(&nf, tailp, sizeof nf);
			ips = (const uintptr_t *)(tailp + 8);
			tailp += 8 + 8 * nf;
		}
		sid = e->flags & REC_PY ? pystack_id(ips, (uint32_t)nf, tailp) : stack_id(ips, (uint32_t)nf);
		if (stacks.pending) { /* a new stack: its entry goes before the record that uses it */
			if (d->n)
				end_events(d);
			flush_stacks();
		}
	}
	if ((!d->n && begin_events(d, e->t0) < 0) || out_reserve(EV_MAX) < 0) {
		(*(d->tid == GPU_TID ? &W.gpu_unwritten : &W.unwritten))++; /* out of memory */
		return;
	}
	int delta = kind < DDPSPY_EVC_KINDS;
	int esc = !delta || (d->na[kind] != DDPSPY_EVC_NA_NONE && d->na[kind] != nargs);
	if (delta && !(d->seen >> kind & 1)) {
		memset(d->prev[kind], 0, sizeof d->prev[kind]);
		d->seen |= 1ull << kind;
		d->na[kind] = (uint8_t)nargs;
	}
	unsigned char *p = (unsigned char *)out.data + out.size;
	*p++ = (unsigned char)((esc ? DDPSPY_EVC_ESCAPE : kind) | (sid ? DDPSPY_EVC_STACK : 0) |
			       (str ? DDPSPY_EVC_STR : 0));
	if (esc) {
		p = ddpspy_put_varint(p, kind);
		p = ddpspy_put_varint(p, nargs);
	}
	p = ddpspy_put_varint(p, ddpspy_zz((int64_t)(e->t0 - d->prev_end)));
	p = ddpspy_put_varint(p, e->dur);
	if (sid)
		p = ddpspy_put_varint(p, sid);
	int64_t *prev = delta ? d->prev[kind] : (int64_t *)zeros;
	unsigned char *mask = p;
	memset(mask, 0, (nargs + 7) / 8);
	p += (nargs + 7) / 8;
	for (unsigned i = 0; i < nargs; i++) {
		int64_t was = i < DDPSPY_EVC_DELTA_ARGS ? prev[i] : 0;
		if (e->args[i] == was)
			continue;
		mask[i / 8] |= (unsigned char)(1u << (i % 8));
		p = ddpspy_put_varint(p, ddpspy_zz((int64_t)((uint64_t)e->args[i] - (uint64_t)was)));
		if (delta && i < DDPSPY_EVC_DELTA_ARGS)
			prev[i] = e->args[i];
	}
	if (str) {
		p = ddpspy_put_varint(p, e->slen);
		memcpy(p, str, e->slen);
		p += e->slen;
	}
	out.size = (size_t)(p - (unsigned char *)out.data);
	d->prev_end = e->t0 + e->dur;
	if (++d->n == EVENTS_PER_RECORD)
		end_events(d);
}

struct flushctx {
	size_t loss_n;
	int final;
	int ending;   /* the file's last flush (end_reason given): calls in flight all recorded */
	int more;     /* a ring had more than one pass's budget */
};

static void count_event(void *ctx, const struct rec *e)
{
	(void)ctx;
	(void)e;
}

/* One pass over one thread's ring: at most DRAIN_BUDGET records, so that with many busy threads
 * each ring is visited often instead of waiting for every other ring to be emptied. */
static void drain_thread(struct dsp_thread *th, void *ctx)
{
	struct flushctx *f = ctx;
	uint64_t *ws = dsp_thread_writer_state(th);
	struct drain d;
	d.tid = dsp_thread_tid(th);
	d.n = 0;
	int dead = dsp_thread_dead(th); /* read before draining: nothing is added after */
	size_t got;

	if (ws[DSP_WS_FINAL])
		return;
	if (!ws[DSP_WS_ANNOUNCED]) {
		frame_begin(DDPSPY_REC_THREAD, 3);
		kv_int("tid", d.tid);
		kv_str("name", dsp_thread_name(th));
		key("pthread");
		msgpack_pack_uint64(&pk, dsp_thread_pthread(th));
		frame_end();
		ws[DSP_WS_ANNOUNCED] = 1;
	}
	if (W.write_err) {
		/* the file takes nothing more: the events are counted as not written */
		got = ring_drain(dsp_thread_ring_of(th), count_event, NULL, DRAIN_BUDGET);
		W.unwritten += got;
	} else {
		got = ring_drain(dsp_thread_ring_of(th), pack_event, &d, DRAIN_BUDGET);
		if (d.n)
			end_events(&d);
		flush_stacks();
	}
	if (got == DRAIN_BUDGET)
		f->more = 1;
	else if (dead)
		ws[DSP_WS_FINAL] = 1; /* emptied after its last event */
}

/* After the drain: each thread's drop count, read once; the loss record's count and its
 * entries both come from this. */
static void snap_loss(struct dsp_thread *th, void *ctx)
{
	struct flushctx *f = ctx;
	uint64_t *ws = dsp_thread_writer_state(th);
	ws[DSP_WS_SEEN] = ring_dropped(dsp_thread_ring_of(th));
	if (ws[DSP_WS_SEEN] != ws[DSP_WS_DROPPED])
		f->loss_n++;
}

static void pack_loss(struct dsp_thread *th, void *ctx)
{
	(void)ctx;
	uint64_t *ws = dsp_thread_writer_state(th);
	uint64_t dr = ws[DSP_WS_SEEN];
	if (dr == ws[DSP_WS_DROPPED])
		return;
	msgpack_pack_array(&pk, 2);
	msgpack_pack_int(&pk, dsp_thread_tid(th));
	msgpack_pack_uint64(&pk, dr);
	W.total_dropped_reported += dr - ws[DSP_WS_DROPPED];
	ws[DSP_WS_DROPPED] = dr;
}

/* A call in flight (format 2.9): once when it has been in flight DDPSPY_INFLIGHT_MS, and every
 * call still in flight when the file ends, whatever its age. Its call site is a stack of one
 * frame. What it does when it returns is its event, as any call's. */
static void rec_call(struct dsp_thread *th, void *ctx)
{
	struct flushctx *f = ctx;
	uint64_t *ws = dsp_thread_writer_state(th);
	struct dsp_call c;
	if (W.write_err || dsp_thread_dead(th) || !dsp_call_read(th, &c))
		return;
	uint64_t now = dsp_now();
	int end = f->final || f->ending;
	/* (a call begun on another CPU a moment ago may read a later raw time than ours: the VMs'
	 * clocks differ by nanoseconds, and such a call, in flight "2^64 ticks", was recorded and its
	 * stack read some 1 run in 10 of forker fdlowest, 1.1 million opens in 1.5 s) */
	if (!end && (ws[DSP_WS_CALL] == c.t0 || now <= c.t0 || now - c.t0 < inflight_ticks))
		return;
	now = now > c.t0 ? now : c.t0;
	ws[DSP_WS_CALL] = c.t0;
	/* the program's stack at the call where it can be read (blocked.c), kept if the thread was
	 * still in that call afterwards; else the call site alone */
	uintptr_t pc[48];
	struct dsp_call again;
	int n = dsp_call_stack(&c, pc, 48);
	if (n > 0 && !(dsp_call_read(th, &again) && again.t0 == c.t0))
		n = 0;
	if (!n && c.site)
		pc[n++] = c.site;
	uint32_t sid = n ? stack_id(pc, (uint32_t)n) : 0;
	flush_stacks();
	char path[512];
	if (c.fd >= 0)
		dsp_fd_path(c.fd, path, sizeof path);
	else
		dsp_call_path(th, &c, path, sizeof path); /* (an open's path) */
	/* the descriptor's class now, from the writer (a FIFO opened by path reads as a file in its
	 * calls, which classify without a syscall); an open's, what its path names */
	int cls = c.fd >= 0 ? dsp_fdclass_probe((int)c.fd) : path[0] ? dsp_pathclass_probe(path) : -1;
	frame_begin(DDPSPY_REC_INFLIGHT, 10);
	kv_int("tid", dsp_thread_tid(th));
	kv_int("kind", c.kind);
	key("t0");
	msgpack_pack_uint64(&pk, c.t0);
	key("at");
	msgpack_pack_uint64(&pk, now);
	key("args");
	msgpack_pack_array(&pk, c.nargs);
	for (uint32_t i = 0; i < c.nargs; i++)
		msgpack_pack_int64(&pk, c.args[i]);
	kv_int("fd", c.fd);
	kv_int("fdclass", cls);
	kv_str("path", path[0] ? path : NULL);
	kv_int("stack", sid);
	kv_bool("end", end);
	frame_end();
}

/* ---- CPU time and run-queue delay ----
 * At most every SCHED_EVERY_NS, and at the end, the kernel's per-task schedstat of every thread
 * of the process, traced or not (/proc/self/task/TID/schedstat: ns on a CPU, ns runnable but
 * waiting for one, timeslices) in a "sched" record, with the raw time it was read at, the CPUs the
 * process may run on, the host's online CPUs and its CPU time in use (/proc/stat: what the job's
 * threads do not hold is held outside the job). None where the kernel keeps no schedstat.
 *
 * Reading a file takes a descriptor, and a descriptor the program can see changes the program:
 * it takes the lowest free number (which a program that closes 1 and opens a log expects to get),
 * it makes a dup2 onto that number fail with EBUSY while the open is under way, and a dup2 or
 * close of that number would make us read and close the program's file. So the files are read
 * by a thread of ours with a descriptor table of its own (unshare(CLONE_FILES)), which closes the
 * copies of the program's descriptors it started with: closing a copy ends no lock of the
 * program's (POSIX locks belong to the table that set them). The writer asks it for a sample and
 * waits, at most SCHED_WAIT_MS. Where unshare is refused (a seccomp profile such as Docker's
 * default), nothing is sampled, and one "sched" record with no threads says why. */
#define SCHED_EVERY_NS 100000000
#define SCHED_WAIT_MS 100
#define SCHED_MAX 1024
enum { SAMPLER_NONE, SAMPLER_READY, SAMPLER_REFUSED };
static struct sampler {
	int state;      /* SAMPLER_*, set by the sampler */
	int err;        /* errno of the refused unshare */
	int ask, done;  /* futex words: the writer's request number; the last one answered */
	int told;       /* the refusal is in the file */
	uint64_t t;     /* raw time the sample was taken */
	int64_t host_busy;
	long host_cpus;
	int n;
	struct sched_sample {
		int tid;
		uint64_t v[3];
	} s[SCHED_MAX];
} S;

static int futex(int *w, int op, int val, const struct timespec *to)
{
	return (int)syscall(SYS_futex, w, op, val, to, NULL, 0);
}

static int read_schedstat(int tid, uint64_t v[3])
{
	char path[48] = "/proc/self/task/", digits[16], buf[96];
	size_t n = strlen(path), k = 0;
	unsigned t = (unsigned)tid;
	do
		digits[k++] = (char)('0' + t % 10);
	while ((t /= 10) && k < sizeof digits);
	while (k)
		path[n++] = digits[--k];
	memcpy(path + n, "/schedstat", sizeof "/schedstat");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t got = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (got <= 0)
		return -1;
	buf[got] = 0;
	const char *q = buf;
	for (int i = 0; i < 3; i++) {
		while (*q == ' ')
			q++;
		if (*q < '0' || *q > '9')
			return -1;
		v[i] = 0;
		while (*q >= '0' && *q <= '9')
			v[i] = v[i] * 10 + (uint64_t)(*q++ - '0');
	}
	return 0;
}

/* the numbers in a directory's entries, read with getdents64 into a buffer of ours (opendir
 * allocates); each(n, ctx) for every entry named by a number */
static void each_number(const char *dir, void (*each)(int, void *), void *ctx)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	char buf[4096];
	long n;
	while ((n = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
		for (long off = 0; off < n;) {
			/* struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name */
			unsigned short reclen;
			memcpy(&reclen, buf + off + 16, sizeof reclen);
			const char *name = buf + off + 19;
			int v = *name ? 0 : -1;
			for (const char *c = name; *c && v >= 0; c++)
				v = *c >= '0' && *c <= '9' ? v * 10 + (*c - '0') : -1;
			/* (the directory's own descriptor is not handed out: closing it would end a walk
			 * of descriptors; no thread's id is it, 0 in the sampler's empty table) */
			if (v >= 0 && v != dfd)
				each(v, ctx);
			if (!reclen)
				break;
			off += reclen;
		}
	}
	close(dfd);
}

static void sample_thread(int tid, void *ctx)
{
	(void)ctx;
	if (tid > 0 && S.n < SCHED_MAX && read_schedstat(tid, S.s[S.n].v) == 0)
		S.s[S.n++].tid = tid;
}

static void close_one(int fd, void *ctx)
{
	(void)ctx;
	syscall(SYS_close, fd);
}

/* the host's CPU time in use, all CPUs, since boot (ns): /proc/stat's first line, user + nice +
 * system + irq + softirq + steal, in clock ticks; -1 when unreadable */
static int64_t host_busy_ns(void)
{
	char buf[256];
	int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t got = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (got < 5 || memcmp(buf, "cpu ", 4))
		return -1;
	buf[got] = 0;
	const char *q = buf + 4;
	uint64_t v[8] = {0};
	for (int i = 0; i < 8; i++) {
		while (*q == ' ')
			q++;
		if (*q < '0' || *q > '9')
			return -1;
		while (*q >= '0' && *q <= '9')
			v[i] = v[i] * 10 + (uint64_t)(*q++ - '0');
	}
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]; /* not idle (3), iowait (4) */
	return hz > 0 ? (int64_t)(busy * (1000000000ull / (uint64_t)hz)) : -1;
}

/* libunwind, and libunwind-x86_64 for the stacks of calls in flight (blocked.c), under wlock,
 * which fork's prepare handler takes: dlopen holds the loader's locks, and a fork must not copy
 * them held. The loader opens each library, and libunwind opens a pipe as it starts: in the
 * program's table (as the writer's first stack of a call in flight once loaded it, in a program
 * that dup2s onto the next free number: forker fdlowest found libunwind-x86_64.so.8 where its
 * /dev/null should have been, 1 run in 10) those numbers are the program's to take. */
static void load_stacks(void)
{
	pthread_mutex_lock(&wlock);
	dsp_stack_load();
	dsp_call_stack_load();
	pthread_mutex_unlock(&wlock);
}

static void *sampler_main(void *arg)
{
	(void)arg;
	struct dsp_tls *t = &dsp_tls;
	t->state = TS_OFF;
	t->guard = 1;
	if (unshare(CLONE_FILES) != 0) {
		S.err = errno;
		__atomic_store_n(&S.state, SAMPLER_REFUSED, __ATOMIC_RELEASE);
		load_stacks(); /* (in the program's table: there is no other) */
		return NULL;
	}
	/* the copies of the program's descriptors (kernels before 5.9: one by one) */
	if (syscall(SYS_close_range, 0u, ~0u, 0) != 0)
		each_number("/proc/thread-self/fd", close_one, NULL);
	/* libunwind is loaded here, in a table of our own: the loader's descriptors (it opens, maps
	 * and closes each library) in the program's table were the program's to dup2 onto, and the
	 * loader then closed the program's file (a shell's `exec 3>/dev/null; cmd 1>&3` failed 1 run
	 * in 3 under the preload, "3: Bad file descriptor") */
	load_stacks();
	pthread_setname_np(pthread_self(), "ddpspy-sched");
	S.host_cpus = sysconf(_SC_NPROCESSORS_ONLN); /* (glibc reads a file for it) */
	__atomic_store_n(&S.state, SAMPLER_READY, __ATOMIC_RELEASE);
	int seen = 0;
	for (;;) {
		futex(&S.ask, FUTEX_WAIT_PRIVATE, seen, NULL);
		int a = __atomic_load_n(&S.ask, __ATOMIC_ACQUIRE);
		if (a == seen)
			continue;
		seen = a;
		S.t = dsp_now();
		S.n = 0;
		each_number("/proc/self/task", sample_thread, NULL);
		S.host_busy = host_busy_ns();
		__atomic_store_n(&S.done, a, __ATOMIC_RELEASE);
		futex(&S.done, FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
	}
	return NULL;
}

/* from the writer thread, which blocks every signal: so does the sampler */
static int spawn_sampler(void)
{
	pthread_attr_t a;
	pthread_t th;
	int rc = 0;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 256 * 1024); /* (it runs dlopen and libunwind's constructors) */
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &a, sampler_main, NULL) != 0) {
		S.err = EAGAIN;
		S.state = SAMPLER_REFUSED;
		rc = -1;
	}
	pthread_attr_destroy(&a);
	return rc;
}

/* asks the sampler for a sample; 0 once it answered, within SCHED_WAIT_MS */
static int sample_now(void)
{
	if (__atomic_load_n(&S.state, __ATOMIC_ACQUIRE) != SAMPLER_READY)
		return -1;
	int a = __atomic_add_fetch(&S.ask, 1, __ATOMIC_ACQ_REL);
	futex(&S.ask, FUTEX_WAKE_PRIVATE, 1, NULL);
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int d = __atomic_load_n(&S.done, __ATOMIC_ACQUIRE);
		if (d == a)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		int64_t left = SCHED_WAIT_MS * 1000000LL - ((now.tv_sec - t0.tv_sec) * 1000000000LL + now.tv_nsec - t0.tv_nsec);
		if (left <= 0)
			return -1;
		struct timespec to = {left / 1000000000, left % 1000000000};
		futex(&S.done, FUTEX_WAIT_PRIVATE, d, &to);
	}
}

static void rec_sched(void)
{
	cpu_set_t set;
	int state = __atomic_load_n(&S.state, __ATOMIC_ACQUIRE);
	if (state == SAMPLER_REFUSED && !S.told) {
		char why[96];
		snprintf(why, sizeof why, "unshare(CLONE_FILES): %s", strerror(S.err));
		frame_begin(DDPSPY_REC_SCHED, 2);
		kv_str("error", why);
		key("threads");
		msgpack_pack_array(&pk, 0);
		frame_end();
		S.told = 1;
		return;
	}
	if (sample_now() < 0 || !S.n)
		return;
	frame_begin(DDPSPY_REC_SCHED, 5);
	key("t");
	msgpack_pack_uint64(&pk, S.t);
	kv_int("cpus", sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1);
	kv_int("host_cpus", S.host_cpus);
	kv_int("host_busy_ns", S.host_busy);
	key("threads");
	msgpack_pack_array(&pk, (size_t)S.n);
	for (int i = 0; i < S.n; i++) {
		msgpack_pack_array(&pk, 4);
		msgpack_pack_int(&pk, S.s[i].tid);
		for (int j = 0; j < 3; j++)
			msgpack_pack_uint64(&pk, S.s[i].v[j]);
	}
	frame_end();
}

/* ---- the file ---- */
static const char *role_tag(char *buf, size_t n)
{
	switch (dsp_id.role) {
	case DDPSPY_ROLE_RANK:
		snprintf(buf, n, "r%05d", dsp_id.rank);
		break;
	case DDPSPY_ROLE_WORKER:
		snprintf(buf, n, "w%05d", dsp_id.parent_rank);
		break;
	default:
		snprintf(buf, n, "%s", ddpspy_role_names[dsp_id.role]);
	}
	return buf;
}

static void make_path(char *buf, size_t n, int seq)
{
	char tag[32], h[64];
	/* the host as a file name: sethostname takes any bytes, '/' included (the header keeps it whole) */
	size_t i = 0;
	for (; host[i] && i < sizeof h - 1; i++) {
		unsigned char c = (unsigned char)host[i];
		h[i] = (char)((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
			      c == '_' || c == '-' ? c : '_');
	}
	h[i] = 0;
	if (seq)
		snprintf(buf, n, "%s/%s-%s-%d.%d.ddpspy", dsp_cfg.out, role_tag(tag, sizeof tag), h, (int)getpid(), seq);
	else
		snprintf(buf, n, "%s/%s-%s-%d.ddpspy", dsp_cfg.out, role_tag(tag, sizeof tag), h, (int)getpid());
}

/* The descriptor just opened on W.path made ours (set_fd), and 0; or -1 when the program put a file of
 * its own at that number (a dup2 onto it) in the instant before it was ours to move out of the way:
 * the number is the program's then. */
static int own_opened(int fd)
{
	struct stat a, b;
	set_fd(fd);
	int cur = __atomic_load_n(&dsp_own_fd, __ATOMIC_SEQ_CST); /* (a dup2 since moves it) */
	if (cur >= 0 && fstat(cur, &a) == 0 && lstat(W.path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
		W.own_dev = a.st_dev;
		W.own_ino = a.st_ino;
		return 0;
	}
	__atomic_compare_exchange_n(&dsp_own_fd, &cur, -1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	return -1;
}

static int open_file(void)
{
	unsigned char hdr[DDPSPY_FILE_HEADER_LEN] = {0};
	int fd = -1;

	/* exec keeps the pid: a second image of the same process takes the next free number */
	for (int seq = 0; seq < 1000; seq++) {
		make_path(W.path, sizeof W.path, seq);
		fd = open(W.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_APPEND, (mode_t)dsp_cfg.file_mode);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	for (int again = 0; fd >= 0 && own_opened(fd) < 0 && again < 8; again++)
		fd = open(W.path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
	if (dsp_own_fd < 0) {
		dsp_warn("cannot create a trace file in %s (%s): this process runs untraced",
			 dsp_cfg.out, fd < 0 ? strerror(errno) : "its descriptor was taken");
		return -1;
	}
	W.file_size = 0;
	memcpy(hdr, DDPSPY_MAGIC, DDPSPY_MAGIC_LEN);
	hdr[8] = DDPSPY_FORMAT_MAJOR;
	hdr[10] = DDPSPY_FORMAT_MINOR;
	/* the header goes out in the first write, together with the first records */
	msgpack_sbuffer_write(&out, (const char *)hdr, sizeof hdr);
	rec_header();
	dsp_log("writing %s", W.path);
	return 0;
}

/* The descriptor to write to, checked to still be the file we created (a program's raw
 * close_range or dup2 syscall bypasses the wrappers in io.c): if the number now holds something
 * else, the file is opened again by its path and the number left alone. writing_fd is set before
 * the final check (see dsp_own_fd_move). -1: the file is gone. */
static int pick_fd(void)
{
	struct stat st;
	for (;;) {
		int fd = __atomic_load_n(&dsp_own_fd, __ATOMIC_SEQ_CST);
		if (fd < 0)
			return -1;
		__atomic_store_n(&W.writing_fd, fd, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&dsp_own_fd, __ATOMIC_SEQ_CST) != fd)
			continue; /* moved meanwhile */
		if (fstat(fd, &st) == 0 && st.st_dev == W.own_dev && st.st_ino == W.own_ino)
			return fd;
		__atomic_store_n(&W.writing_fd, -1, __ATOMIC_SEQ_CST);
		int nfd = open(W.path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
		struct stat at;
		if (nfd >= 0 && (fstat(nfd, &st) < 0 || st.st_dev != W.own_dev || st.st_ino != W.own_ino)) {
			/* another file at the path is ours to close; another file at the number is not */
			if (lstat(W.path, &at) == 0 && at.st_dev == st.st_dev && at.st_ino == st.st_ino)
				close(nfd);
			nfd = -1;
		}
		dsp_warn("the program took the trace file's descriptor %d; %s", fd,
			 nfd >= 0 ? "reopened the file" : "the file is gone: tracing stops");
		int expect = fd;
		if (!__atomic_compare_exchange_n(&dsp_own_fd, &expect, nfd, 0, __ATOMIC_SEQ_CST,
						 __ATOMIC_SEQ_CST) && nfd >= 0)
			close(nfd);
	}
}

/* Room kept allocated past the file's end (fallocate, the size unchanged) for its last records:
 * a full disk then still takes the loss and end records that say what it did not take */
#define END_RESERVE 65536

static void reserve_end(int fd)
{
	if (W.no_reserve || fd < 0)
		return;
	/* (ENOSPC: a page at least, where the disk has that; none, and the next write may free some) */
	for (off_t len = END_RESERVE; len >= 4096; len /= 16) {
		if (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)W.file_size, len) == 0)
			return;
		if (errno != ENOSPC) {
			W.no_reserve = errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL;
			return;
		}
	}
}

/* Writes the frames in out. When the file takes them only in part (a full disk, a write error),
 * the cut frame is removed again and the file takes no more events: later flushes count what the
 * threads record as not written, and the last one's loss and end records say so, in the room
 * reserved for them (reserve_end); the flushes between write nothing, so as to leave it to them. */
static void write_out(void)
{
	const char *p = out.data;
	size_t n = out.size;
	int err = 0;

	if (n == 0)
		return;
	if (W.write_err && !W.ending) {
		msgpack_sbuffer_clear(&out);
		return;
	}
	int fd = pick_fd();
	while (n > 0 && fd >= 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			err = w < 0 ? errno : ENOSPC;
			break;
		}
		p += w;
		n -= (size_t)w;
	}
	/* (fd is used below while writing_fd still names it: the program cannot take its number) */
	if (n == 0) {
		W.file_size += out.size;
		W.events_on_disk = W.total_written;
		if (W.ending) /* (the last records are in: the reserve past them is given back) */
			(void)!ftruncate(fd, (off_t)W.file_size);
		else
			reserve_end(fd);
	} else if (fd >= 0) {
		/* (the cut frame taken back frees what it took, the reserve among it: taken again) */
		if (ftruncate(fd, (off_t)W.file_size) < 0)
			err = err ? err : errno;
		if (!W.ending)
			reserve_end(fd);
	}
	__atomic_store_n(&W.writing_fd, -1, __ATOMIC_SEQ_CST);
	if (fd < 0) {
		err = EBADF;
		W.file_failed = 1; /* nothing more can reach the file */
		__atomic_store_n(&dsp_on, 0, __ATOMIC_RELAXED);
	}
	if (n != 0) {
		W.unwritten += W.total_written - W.events_on_disk;
		W.total_written = W.events_on_disk;
		if (!W.write_err)
			dsp_warn("writing %s failed (%s): events are counted as lost from here", W.path,
				 strerror(err));
		W.write_err = err;
	}
	msgpack_sbuffer_clear(&out);
}

static void rename_for_identity(void)
{
	char np[PATH_MAX];
	for (int seq = 0; seq < 1000; seq++) {
		make_path(np, sizeof np, seq);
		if (!strcmp(np, W.path))
			return; /* the name did not change */
		/* link + unlink: a rename that never replaces another process's file */
		if (link(W.path, np) == 0) {
			unlink(W.path);
			memcpy(W.path, np, sizeof W.path);
			return;
		}
		if (errno != EEXIST)
			return;
	}
}

static void any_pending(struct dsp_thread *th, void *ctx)
{
	if (!ring_idle(dsp_thread_ring_of(th)))
		*(int *)ctx = 1;
}

static int mkdir_p(const char *dir)
{
	char buf[PATH_MAX];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof buf) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, dir, n + 1);
	for (char *p = buf + 1; ; p++) {
		if (*p != '/' && *p != 0)
			continue;
		char c = *p;
		*p = 0;
		/* a directory's mode is the files' with search where they are readable: 0600 makes 0700 */
		mode_t mode = (mode_t)(dsp_cfg.file_mode | (dsp_cfg.file_mode & 0444) >> 2);
		if (mkdir(buf, mode | S_IRWXU) < 0 && errno != EEXIST)
			return -1;
		*p = c;
		if (!c)
			return 0;
	}
}

/* ---- CUPTI's records (cupti/gpu.c) ---- */

/* one record into a "gpu_events" record; a name new to the file goes into a "names" record
 * before the events record that first uses it */
static void pack_gpu(void *ctx, const struct dsp_gpu_ev *ev)
{
	struct drain *d = ctx;
	union {
		struct rec r;
		unsigned char b[sizeof(struct rec) + DSP_GPU_MAX_ARGS * sizeof(int64_t)];
	} u;
	memset(&u.r, 0, sizeof u.r);
	u.r.kind = (uint16_t)ev->kind;
	u.r.nargs = (uint8_t)ev->nargs;
	u.r.t0 = ev->t0;
	u.r.dur = ev->dur;
	memcpy(u.r.args, ev->args, (size_t)ev->nargs * sizeof(int64_t));
	if (ev->name_arg >= 0) {
		u.r.args[ev->name_arg] = name_id(ev->name);
		if (names.pending) {
			if (d->n)
				end_events(d);
			flush_table(&names, DDPSPY_REC_NAMES);
		}
	}
	if (W.write_err) {
		W.gpu_unwritten++;
		return;
	}
	pack_event(d, &u.r);
}

/* GPU capture's state, when it moved: how it started or why not, its clock, what it lost */
static void rec_gpu_if_changed(int final)
{
	struct dsp_gpu_info g;
	static const char *const states[] = {"none", "on", "taken", "unavailable", "failed"};
	dsp_gpu_get_info(&g);
	if (g.state == DSP_GPU_NONE || (g.changes == W.gpu_changes && !final))
		return;
	frame_begin(DDPSPY_REC_GPU, g.client ? 23 : 17);
	kv_str("state", states[g.state]);
	kv_str("why", g.why);
	kv_str("lib", g.lib);
	kv_str("holder", g.holder ? g.holder : "");
	kv_int("version", g.version);
	kv_str("clock", g.clock ? g.clock : "");
	key("kinds");
	msgpack_pack_array(&pk, (size_t)__builtin_popcountll(g.kinds));
	for (int k = 0; k < DDPSPY_EV_COUNT; k++)
		if (g.kinds >> k & 1)
			msgpack_pack_str_with_body(&pk, ddpspy_event_names[k], strlen(ddpspy_event_names[k]));
	kv_str("api", g.api_calls < 0 ? "all" : g.api_calls > 0 ? "selected" : "none");
	kv_int("events", (int64_t)W.gpu_written);
	kv_int("dropped", (int64_t)g.dropped);
	kv_int("refused", (int64_t)g.refused);
	kv_int("unwritten", (int64_t)W.gpu_unwritten);
	kv_int("untimed", (int64_t)g.untimed);
	kv_int("foreign", (int64_t)g.foreign);
	kv_int("lead_ns", g.lead_ns);
	kv_int("checked", (int64_t)g.checked);
	kv_int("stopped_ns", (int64_t)g.stopped_ns); /* (2.15) */
	if (g.client) { /* (2.7: another CUPTI client shares ddpspy's subscription) */
		kv_str("client", g.client);
		kv_int("client_records", (int64_t)g.client_records);
		kv_int("client_dropped", (int64_t)g.client_dropped);
		kv_int("client_refused", (int64_t)g.client_refused);
		static const char *const api[] = {"", "runtime", "driver", "runtime,driver"};
		kv_str("client_api_limited", api[g.client_api_limited & 3]); /* (2.11) */
		kv_int("client_tid_unknown", (int64_t)g.client_tid_unknown); /* (2.15) */
	}
	frame_end();
	W.gpu_changes = g.changes;
}

static void drain_gpu(int mode)
{
	struct drain d;
	d.tid = GPU_TID;
	d.n = 0;
	dsp_gpu_collect(mode, pack_gpu, &d);
	if (d.n)
		end_events(&d);
}

/* One flush: all rings, the metadata that changed, one write(). wlock held. */
static void flush_locked(int final, const char *end_reason)
{
	struct flushctx f = {0, final, end_reason != NULL, 0};
	struct timespec ts;

	if (W.finished || W.file_failed)
		return;
	if (dsp_own_fd < 0) {
		/* the first flush with something to say creates the file: a process that never
		 * records anything (a shell between fork and exec) leaves none */
		int any = 0;
		dsp_registry_walk(any_pending, &any);
		if (!any) { /* or GPU capture has something to say */
			struct dsp_gpu_info g;
			dsp_gpu_get_info(&g);
			any = g.state != DSP_GPU_NONE;
		}
		if (!any)
			return;
		if (open_file() < 0) {
			W.file_failed = 1;
			__atomic_store_n(&dsp_on, 0, __ATOMIC_RELAXED);
			return;
		}
	} else if (W.identity_dirty) {
		rec_identity();
		rename_for_identity();
	}
	W.identity_dirty = 0;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (final || (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - W.last_calib_mono >= CALIB_EVERY_NS)
		rec_calib();
	rec_modules_if_changed();
	rec_python_if_changed();
	dsp_py_sampler_start(); /* (once CPython is found; a no-op after) */
	rec_cost_once();
	/* passes over every ring until all are empty, a bounded number: a program recording faster than
	 * this drains is served by the next flush, which its half-full rings ask for at once */
	for (int pass = 0; pass == 0 || (f.more && pass < (final ? 1024 : 64)); pass++) {
		f.more = 0;
		dsp_registry_walk(drain_thread, &f);
	}
	int64_t mono = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	if (final || end_reason || !W.last_sched_mono || mono - W.last_sched_mono >= SCHED_EVERY_NS) {
		rec_sched();
		W.last_sched_mono = mono;
	}
	rec_gpu_if_changed(0); /* (its clock before the records that use it) */
	drain_gpu(!end_reason ? DSP_GPU_COLLECT : !strcmp(end_reason, "exec") ? DSP_GPU_COLLECT_FORCED
									      : DSP_GPU_COLLECT_DELIVERED);
	rec_gpu_if_changed(final || end_reason);
	rec_pysamples();
	rec_cpusamples();
	if (dsp_cfg.inflight_ms >= 0)
		dsp_registry_walk(rec_call, &f);
	dsp_registry_walk(snap_loss, &f);
	if (f.loss_n || W.unwritten != W.unwritten_reported) {
		frame_begin(DDPSPY_REC_LOSS, 2 + !!W.write_err);
		key("threads");
		msgpack_pack_array(&pk, f.loss_n);
		dsp_registry_walk(pack_loss, NULL);
		kv_int("unwritten", (int64_t)W.unwritten);
		if (W.write_err)
			kv_str("write_error", strerror(W.write_err));
		frame_end();
		W.unwritten_reported = W.unwritten;
	}
	if (end_reason) {
		rec_end(end_reason);
		W.finished = final;
	}
	W.ending = end_reason != NULL;
	write_out();
	W.ending = 0;
}

/* ring.c's hook: a thread's ring passed half full. Wakes the writer unless it was woken already;
 * from a wrapper, so errno is kept. */
void dsp_writer_wake(void)
{
	int expect = WAKE_NONE;
	if (__atomic_compare_exchange_n(&W.wake_word, &expect, WAKE_TICK, 0, __ATOMIC_RELEASE,
					__ATOMIC_RELAXED)) {
		int saved = errno;
		futex(&W.wake_word, FUTEX_WAKE_PRIVATE, 1, NULL);
		errno = saved;
	}
}

static void *writer_main(void *arg)
{
	(void)arg;
	struct dsp_tls *t = &dsp_tls;
	t->state = TS_OFF; /* the writer records nothing of itself */
	t->guard = 1;
	measure_thresholds();
	double cost = W.event_ps ? 0 : dsp_event_cost_ns(); /* (a fork child has its parent's) */
	if (cost > 0)
		__atomic_store_n(&W.event_ps, (int64_t)(cost * 1000), __ATOMIC_RELAXED);
	pthread_setname_np(pthread_self(), "ddpspy-writer");
	if (spawn_sampler() < 0)
		load_stacks(); /* (no thread with a table of its own: from here, in the program's) */
	dsp_cpu_sampler_start(); /* (from the start: the program's first steps are sampled too) */
	for (;;) {
		struct timespec to = {dsp_cfg.flush_ms / 1000, (dsp_cfg.flush_ms % 1000) * 1000000};
		futex(&W.wake_word, FUTEX_WAIT_PRIVATE, WAKE_NONE, &to);
		int why = __atomic_exchange_n(&W.wake_word, WAKE_NONE, __ATOMIC_ACQ_REL);
		if (why == WAKE_SIGNAL) {
			char reason[32];
			snprintf(reason, sizeof reason, "signal %d", W.signal_no);
			pthread_mutex_lock(&wlock);
			flush_locked(1, reason);
			pthread_mutex_unlock(&wlock);
			__atomic_store_n(&W.done_word, 1, __ATOMIC_RELEASE);
			futex(&W.done_word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
			return NULL;
		}
		if (__atomic_load_n(&W.stop_requested, __ATOMIC_ACQUIRE))
			return NULL;
		pthread_mutex_lock(&wlock);
		flush_locked(0, NULL);
		pthread_mutex_unlock(&wlock);
		dsp_registry_reap();
	}
}

static void buffers_init(void)
{
	msgpack_sbuffer_init(&out);
	msgpack_packer_init(&pk, &out, msgpack_sbuffer_write);
	msgpack_sbuffer_init(&stacks.pend);
	msgpack_packer_init(&stacks.pk, &stacks.pend, msgpack_sbuffer_write);
	msgpack_sbuffer_init(&names.pend);
	msgpack_packer_init(&names.pk, &names.pend, msgpack_sbuffer_write);
	msgpack_sbuffer_init(&pyst.pend);
	msgpack_packer_init(&pyst.pk, &pyst.pend, msgpack_sbuffer_write);
}

static int spawn_writer(void)
{
	sigset_t all, old;
	pthread_attr_t a;

	/* the writer blocks every signal, so process-directed ones reach the program's threads */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	__atomic_store_n(&ring_wake_hook, dsp_writer_wake, __ATOMIC_RELAXED);
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 256 * 1024);
	int rc = pthread_create(&writer, &a, writer_main, NULL);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		dsp_warn("cannot start the writer thread (%s): this process runs untraced", strerror(rc));
		return -1;
	}
	W.writer_running = 1;
	return 0;
}

int dsp_writer_start(void)
{
	dsp_clock_sample(&W.start_raw, &W.start_mono, &W.start_real);
	read_self();
	buffers_init();
	if (mkdir_p(dsp_cfg.out) < 0 || access(dsp_cfg.out, W_OK | X_OK) < 0) {
		dsp_warn("cannot write to %s (%s): this process runs untraced", dsp_cfg.out,
			 strerror(errno));
		return -1;
	}
	return spawn_writer();
}

/* Stops the writer thread (it finishes its current flush), then drains from here. */
void dsp_writer_stop_and_drain(const char *reason)
{
	if (W.writer_running && !pthread_equal(pthread_self(), writer)) {
		__atomic_store_n(&W.stop_requested, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&W.wake_word, WAKE_STOP, __ATOMIC_RELEASE);
		futex(&W.wake_word, FUTEX_WAKE_PRIVATE, 1, NULL);
		pthread_join(writer, NULL);
		W.writer_running = 0;
	}
	__atomic_store_n(&dsp_on, 0, __ATOMIC_RELAXED); /* later destructors are not recorded */
	pthread_mutex_lock(&wlock);
	flush_locked(1, reason);
	close_fd();
	pthread_mutex_unlock(&wlock);
}

void dsp_writer_flush_now(void)
{
	pthread_mutex_lock(&wlock);
	flush_locked(0, NULL);
	pthread_mutex_unlock(&wlock);
}

/* exec: the old image's file is complete before the new image starts. wlock stays held across
 * the exec so the writer cannot start a write that exec would cut; a failed exec unlocks. */
void dsp_writer_exec_begin(void)
{
	pthread_mutex_lock(&wlock);
	flush_locked(0, "exec");
}

void dsp_writer_exec_failed(void)
{
	pthread_mutex_unlock(&wlock);
}

/* Async-signal-safe: asks the writer for a final flush and waits for it, at most timeout_ms.
 * Threads that fault at the same time all wait for the one flush the first one asked for. */
void dsp_writer_signal_flush(int sig, int timeout_ms)
{
	if (!W.writer_running || pthread_equal(pthread_self(), writer))
		return;
	if (!__atomic_exchange_n(&W.signal_asked, 1, __ATOMIC_ACQ_REL)) {
		W.signal_no = sig;
		__atomic_store_n(&W.wake_word, WAKE_SIGNAL, __ATOMIC_RELEASE);
		futex(&W.wake_word, FUTEX_WAKE_PRIVATE, 1, NULL);
	}
	struct timespec to = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
	while (!__atomic_load_n(&W.done_word, __ATOMIC_ACQUIRE)) {
		if (futex(&W.done_word, FUTEX_WAIT_PRIVATE, 0, &to) < 0 && errno == ETIMEDOUT)
			break;
	}
}

void dsp_writer_identity_changed(void)
{
	pthread_mutex_lock(&wlock);
	W.identity_dirty = dsp_own_fd >= 0;
	pthread_mutex_unlock(&wlock);
}

void dsp_writer_atfork_prepare(void)
{
	pthread_mutex_lock(&wlock);
}

void dsp_writer_atfork_parent(void)
{
	pthread_mutex_unlock(&wlock);
}

/* The child starts its own file and writer; the parent's file and buffers are the parent's. */
void dsp_writer_atfork_child(void)
{
	pthread_mutex_init(&wlock, NULL);
	close_fd();
	modents_free(W.msnap, W.nmsnap); /* the child's file lists every object again */
	int64_t ps = W.event_ps;
	W = W_INIT;
	W.event_ps = ps; /* (the same machine's cost: a DataLoader worker need not spend 5 ms again) */
	S = (struct sampler){0}; /* the parent's sampler is not in the child: the child's writer starts one */
	msgpack_sbuffer_clear(&out);
	tab_clear(&stacks);
	tab_clear(&names);
	msgpack_sbuffer_clear(&pyst.pend);
	pyst.pending = 0;
	dsp_py_atfork_child();
	dsp_cpu_atfork_child();
	dsp_gpu_atfork_child();
	dsp_clock_sample(&W.start_raw, &W.start_mono, &W.start_real);
	if (spawn_writer() < 0)
		__atomic_store_n(&dsp_on, 0, __ATOMIC_RELAXED);
}
