/* The slow forms of recording: events with a string argument or a call stack. The stack comes
 * from libunwind, loaded with dlopen(RTLD_LOCAL) by the writer thread at start: linked normally
 * it would put its own _Unwind_* symbols ahead of libgcc_s in the program's global scope and
 * change how the program's C++ exceptions unwind. */
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>

#define STACK_MAX 48
#define STR_MAX 4095

static int (*unw_backtrace_fn)(void **buf, int size);
static uintptr_t self_lo, self_hi; /* our own text, whose frames a stack leaves out */
static int loaded;

/* Unwinding walks the loaded objects with dl_iterate_phdr, which holds the dynamic loader's
 * write lock; glibc's fork does not reset that lock in the child. A fork while any thread
 * unwinds would leave the child's loader locked forever (seen: mpirun's forked child hung in
 * exec). So captures hold this lock for reading, taken with trylock (a capture never waits; it
 * goes without a stack instead), and fork takes it for writing (dsp_stack_atfork_*). */
static pthread_rwlock_t unwind_lock = PTHREAD_RWLOCK_INITIALIZER;

void dsp_stack_atfork_prepare(void)
{
	pthread_rwlock_wrlock(&unwind_lock);
}

void dsp_stack_atfork_parent(void)
{
	pthread_rwlock_unlock(&unwind_lock);
}

void dsp_stack_atfork_child(void)
{
	pthread_rwlock_init(&unwind_lock, NULL);
}

static int find_self(struct dl_phdr_info *info, size_t size, void *ctx)
{
	uintptr_t me = (uintptr_t)ctx, lo, hi;
	(void)size;
	dsp_object_range(info, &lo, &hi);
	if (me >= lo && me < hi) {
		self_lo = lo;
		self_hi = hi;
		return 1;
	}
	return 0;
}

void dsp_stack_load(void)
{
	if (dsp_cfg.stack_us < 0 || loaded) /* a fork child inherits what its parent loaded */
		return;
	loaded = 1;
	dl_iterate_phdr(find_self, (void *)(uintptr_t)dsp_stack_load);
	void *h = dlopen("libunwind.so.8", RTLD_LAZY | RTLD_LOCAL);
	if (!h) {
		dsp_log("libunwind not available (%s): no call stacks", dlerror());
		return;
	}
	__atomic_store_n(&unw_backtrace_fn, (int (*)(void **, int))dlsym(h, "unw_backtrace"),
			 __ATOMIC_RELEASE);
}

int dsp_unwind_fds[2] = {-1, -1};

/* No more stacks: libunwind is not called again (a capture under way finishes first). */
void dsp_stack_disable(void)
{
	pthread_rwlock_wrlock(&unwind_lock);
	__atomic_store_n(&unw_backtrace_fn, NULL, __ATOMIC_RELEASE);
	__atomic_store_n(&dsp_unwind_fds[0], -1, __ATOMIC_RELAXED);
	__atomic_store_n(&dsp_unwind_fds[1], -1, __ATOMIC_RELAXED);
	pthread_rwlock_unlock(&unwind_lock);
	dsp_log("the program took a descriptor of libunwind's: no more call stacks");
}

int dsp_stack_capture(void **ips, int max)
{
	int (*fn)(void **, int) = __atomic_load_n(&unw_backtrace_fn, __ATOMIC_ACQUIRE);
	if (!fn || pthread_rwlock_tryrdlock(&unwind_lock) != 0)
		return 0;
	fn = __atomic_load_n(&unw_backtrace_fn, __ATOMIC_ACQUIRE); /* (not disabled meanwhile) */
	dsp_tls.unwinding = 1;
	int n = fn ? fn(ips, max) : 0, skip = 0;
	dsp_tls.unwinding = 0;
	pthread_rwlock_unlock(&unwind_lock);
	while (skip < n && (uintptr_t)ips[skip] >= self_lo && (uintptr_t)ips[skip] < self_hi)
		skip++;
	memmove(ips, ips + skip, (size_t)(n - skip) * sizeof *ips);
	return n > skip ? n - skip : 0;
}

/* one event into ring r: its arguments, its string, nf native frames and npy bytes of Python frames */
static void emit(struct ring *r, int kind, uint64_t t0, uint64_t t1, int nargs, const int64_t *args, const char *str,
		 void *const *ips, int nf, const uint8_t *py, int npy)
{
	size_t slen = str ? strnlen(str, STR_MAX) : 0;
	uint32_t len = (uint32_t)(sizeof(struct rec) + 8 * (unsigned)nargs + ((slen + 7) & ~7u) +
				  (nf ? 8 + 8 * (unsigned)nf : 0) + (unsigned)npy);
	struct rec *e = ring_reserve(r, len);
	if (!e)
		return;
	e->kind = (uint16_t)kind;
	e->len = (uint16_t)len;
	e->nargs = (uint8_t)nargs;
	e->flags = (uint8_t)((str ? REC_STR : 0) | (nf ? REC_STACK : 0) | (npy ? REC_PY : 0));
	e->slen = (uint16_t)slen;
	e->t0 = t0;
	e->dur = t1 - t0;
	for (int i = 0; i < nargs; i++)
		e->args[i] = args[i];
	unsigned char *p = (unsigned char *)&e->args[nargs];
	if (str) {
		memcpy(p, str, slen);
		p += (slen + 7) & ~7u;
	}
	if (nf) {
		uint64_t n = (uint64_t)nf;
		memcpy(p, &n, 8);
		memcpy(p + 8, ips, 8 * (size_t)nf);
		p += 8 + 8 * (size_t)nf;
	}
	if (npy)
		memcpy(p, py, (size_t)npy);
	ring_commit(r);
}

/* the same with the calling thread's stacks, native and Python: their buffers (4.5 KiB) on the
 * stack of this call alone, not of every event's (a wrapper may run on a small signal stack) */
__attribute__((noinline)) static void emit_stacked(struct ring *r, int kind, uint64_t t0, uint64_t t1, int nargs,
						   const int64_t *args, const char *str)
{
	void *ips[STACK_MAX + 8];
	uint8_t py[DSP_PY_BYTES] __attribute__((aligned(8)));
	int saved = errno; /* libunwind may touch it; the wrapper does not restore it */
	int nf = dsp_stack_capture(ips, STACK_MAX + 8);
	nf = nf > STACK_MAX ? STACK_MAX : nf;
	int npy = dsp_py_capture(py, sizeof py);
	errno = saved;
	emit(r, kind, t0, t1, nargs, args, str, ips, nf, py, npy);
}

void dsp_emit_full(struct dsp_tls *t, int kind, uint64_t t0, uint64_t t1, int nargs,
		   const int64_t *args, const char *str, int want_stack)
{
	struct ring *r = dsp_thread_ring(t);
	if (!r)
		return;
	if (want_stack)
		emit_stacked(r, kind, t0, t1, nargs, args, str);
	else
		emit(r, kind, t0, t1, nargs, args, str, NULL, 0, NULL, 0);
}
