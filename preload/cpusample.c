/* The training thread's native stacks where its CPU time goes: DDPSPY_SAMPLE_HZ samples a second
 * of the main thread's own CPU time (the kernel's task clock, perf_event_open's
 * PERF_COUNT_SW_TASK_CLOCK: a thread waiting is not sampled), each with the thread's user
 * registers and the top of its stack as they were (PERF_SAMPLE_REGS_USER, PERF_SAMPLE_STACK_USER),
 * which the kernel writes into a ring buffer of ours. No signal reaches the program: a thread of
 * ddpspy's, `ddpspy-cpusamp`, reads the ring every READ_MS, walks each stack from its copy
 * (blocked.c's remote walk: CFI, never the live stack, which has moved on) and queues the frames
 * for the writer, which writes them as "cpusamples" records (stack ids; format 2.13). The event's
 * descriptor lives in a descriptor table of the thread's own (unshare(CLONE_FILES), as the
 * ddpspy-sched thread's), never in the program's. Where the kernel refuses (perf_event_paranoid
 * 3) or a seccomp filter is in force (Docker's default profile, which refuses it anyway; a filter
 * that kills for a system call it does not allow must not be tried), nothing is sampled and the
 * file says why. */
#include "internal.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <asm/perf_regs.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define READ_MS 10
#define RING_PAGES 128 /* data pages at most (a power of two): 512 KiB, about 30 samples of
			* STACK_COPY (a second at 100 Hz is 10 reads) */
#define STACK_COPY 16384 /* bytes of the stack's top copied with each sample */
#define QUEUE 256        /* samples waiting for the writer (it takes them every flush, 100 ms) */
#define REG_MASK ((1ull << PERF_REG_X86_BX) | (1ull << PERF_REG_X86_BP) | (1ull << PERF_REG_X86_SP) | \
		  (1ull << PERF_REG_X86_IP) | (1ull << PERF_REG_X86_R12) | (1ull << PERF_REG_X86_R13) | \
		  (1ull << PERF_REG_X86_R14) | (1ull << PERF_REG_X86_R15))

static struct {
	int started;
	char why[96];        /* why nothing is sampled, "" while sampling; set before state */
	int state;           /* 0 starting, 1 sampling, 2 refused */
	uint64_t lost, kept; /* (lost: the kernel's, a full ring; and the queue's, a writer too late) */
	unsigned head, tail; /* (head: the sampler's, tail: the writer's) */
	struct csample {
		uint64_t t; /* CLOCK_MONOTONIC ns (the event's clock) */
		int n;
		uintptr_t pc[DSP_CPU_FRAMES];
	} q[QUEUE];
} C;

/* held while the sampler reads the ring and walks stacks, and by a fork from its prepare to its
 * end: the child must not inherit the loader's or libunwind's locks held by a thread it has not */
static pthread_mutex_t walking = PTHREAD_MUTEX_INITIALIZER;

static void refuse(const char *what, int err)
{
	snprintf(C.why, sizeof C.why, "%s: %s", what, strerror(err));
	__atomic_store_n(&C.state, 2, __ATOMIC_RELEASE);
}

/* the top of the main thread's stack (its [stack] mapping's end), 0 unknown */
static uintptr_t stack_top(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	uintptr_t lo, hi, top = 0;
	while (f && fgets(line, sizeof line, f))
		if (strstr(line, "[stack]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			top = hi;
	if (f)
		fclose(f);
	return top;
}

/* a seccomp filter applies to this thread ("Seccomp: 2"): a system call it does not allow may be
 * refused, or may kill the process (systemd's SystemCallFilter=, some sandboxes); Docker's
 * default profile refuses perf_event_open anyway without CAP_PERFMON */
static int seccomp_filtered(void)
{
	FILE *f = fopen("/proc/thread-self/status", "re");
	char line[128];
	int mode = 0;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "Seccomp: %d", &mode) == 1)
			break;
	if (f)
		fclose(f);
	return mode == 2;
}

/* one PERF_RECORD_SAMPLE's body (after its header), in sample_type's order: ip, pid and tid,
 * time, the registers' ABI and REG_MASK's registers by bit, the stack copy's size, its bytes and
 * their dynamic size (what was really copied); into the queue */
static void take(const uint8_t *p, const uint8_t *end, uintptr_t top)
{
	uint64_t v[3 + 1 + 8];
	if (end - p < (ptrdiff_t)sizeof v)
		return;
	memcpy(v, p, sizeof v);
	p += sizeof v;
	if (!v[3]) /* (PERF_SAMPLE_REGS_ABI_NONE: no user registers) */
		return;
	/* (REG_MASK by bit: bx 1, bp 6, sp 7, ip 8, r12-r15 20-23) */
	struct dsp_sample_regs r = { v[7], v[6], v[5], v[4], { v[8], v[9], v[10], v[11] } };
	uint64_t size = 0, dyn = 0;
	if (end - p >= 8)
		memcpy(&size, p, 8);
	p += 8;
	if (size > STACK_COPY || end - p < (ptrdiff_t)(size + 8))
		return;
	memcpy(&dyn, p + size, 8);
	unsigned h = C.head;
	if (h - __atomic_load_n(&C.tail, __ATOMIC_ACQUIRE) >= QUEUE) {
		__atomic_fetch_add(&C.lost, 1, __ATOMIC_RELAXED);
		return;
	}
	struct csample *s = &C.q[h % QUEUE];
	s->t = v[2];
	s->n = dsp_sample_stack(&r, p, dyn <= size ? dyn : size, top, s->pc, DSP_CPU_FRAMES);
	if (s->n <= 0)
		return;
	__atomic_fetch_add(&C.kept, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&C.head, h + 1, __ATOMIC_RELEASE);
}

/* n bytes at offset off of the ring (dsz bytes, a power of two), in two pieces where it wraps */
static void ring_copy(void *to, const uint8_t *data, uint64_t dsz, uint64_t off, size_t n)
{
	size_t at = (size_t)(off & (dsz - 1)), first = n < dsz - at ? n : (size_t)(dsz - at);
	memcpy(to, data + at, first);
	memcpy((uint8_t *)to + first, data, n - first);
}

static void *sampler(void *arg)
{
	(void)arg;
	dsp_tls.state = TS_OFF; /* (nothing of it recorded: a thread of ddpspy's) */
	dsp_tls.guard = 1;
	pthread_setname_np(pthread_self(), "ddpspy-cpusamp");
	if (unshare(CLONE_FILES) != 0) {
		refuse("unshare(CLONE_FILES) (for a descriptor table of its own)", errno);
		return NULL;
	}
	if (syscall(SYS_close_range, 0u, ~0u, 0) != 0) { /* (the copies of the program's descriptors) */
		refuse("close_range", errno);
		return NULL;
	}
	if (seccomp_filtered()) {
		snprintf(C.why, sizeof C.why, "a seccomp filter is in force: perf_event_open not tried (a filter may kill for it)");
		__atomic_store_n(&C.state, 2, __ATOMIC_RELEASE);
		return NULL;
	}
	struct perf_event_attr a;
	memset(&a, 0, sizeof a);
	a.type = PERF_TYPE_SOFTWARE;
	a.size = sizeof a;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.sample_period = 1000000000ull / (uint64_t)dsp_cfg.sample_hz; /* (ns of the thread's CPU time) */
	a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER |
			PERF_SAMPLE_STACK_USER;
	a.sample_regs_user = REG_MASK;
	a.sample_stack_user = STACK_COPY;
	a.exclude_kernel = 1; /* (user code only: what perf_event_paranoid 2 allows anyone) */
	a.exclude_hv = 1;
	a.use_clockid = 1;
	a.clockid = CLOCK_MONOTONIC;
	int fd = (int)syscall(SYS_perf_event_open, &a, dsp_pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		refuse("perf_event_open (the main thread's task clock)", errno);
		return NULL;
	}
	/* (a user's perf rings beyond perf_event_mlock_kb, 516 KiB, count against the process's
	 * RLIMIT_MEMLOCK: where that is small, a smaller ring, which holds fewer samples between
	 * reads) */
	long pg = sysconf(_SC_PAGESIZE);
	uint8_t *m = MAP_FAILED;
	size_t pages = RING_PAGES;
	for (; m == MAP_FAILED && pages >= 8; pages /= 4)
		m = mmap(NULL, (size_t)pg * (pages + 1), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		refuse("mmap of perf's ring", errno);
		close(fd);
		return NULL;
	}
	pages *= 4; /* (the size mapped) */
	struct perf_event_mmap_page *mp = (struct perf_event_mmap_page *)m;
	const uint8_t *data = m + pg;
	const uint64_t dsz = (uint64_t)pg * pages;
	static uint8_t rec[STACK_COPY + 4096];
	uintptr_t top = stack_top();
	__atomic_store_n(&C.state, 1, __ATOMIC_RELEASE);
	for (;;) {
		struct timespec ts = { 0, READ_MS * 1000000L };
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&walking);
		uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE), tail = mp->data_tail;
		while (head - tail >= sizeof(struct perf_event_header)) {
			struct perf_event_header eh;
			ring_copy(&eh, data, dsz, tail, sizeof eh);
			if (eh.size < sizeof eh || eh.size > head - tail)
				break;
			if (eh.size <= sizeof rec) /* (the record out of the ring, which may wrap within it) */
				ring_copy(rec, data, dsz, tail, eh.size);
			tail += eh.size;
			if (eh.size > sizeof rec || !__atomic_load_n(&dsp_on, __ATOMIC_RELAXED))
				continue;
			if (eh.type == PERF_RECORD_SAMPLE)
				take(rec + sizeof eh, rec + eh.size, top);
			else if (eh.type == PERF_RECORD_LOST && eh.size >= sizeof eh + 16)
				__atomic_fetch_add(&C.lost, *(const uint64_t *)(rec + sizeof eh + 8), __ATOMIC_RELAXED);
		}
		__atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&walking);
	}
	return NULL;
}

void dsp_cpu_sampler_start(void)
{
	if (C.started || dsp_cfg.sample_hz <= 0 || dsp_id.role == DDPSPY_ROLE_LAUNCHER ||
	    dsp_id.role == DDPSPY_ROLE_WORKER)
		return;
	C.started = 1;
	pthread_attr_t at;
	pthread_t th;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 256 * 1024); /* (libunwind's cursor and its DWARF state) */
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &at, sampler, NULL) != 0)
		refuse("pthread_create", EAGAIN);
	pthread_attr_destroy(&at);
}

int dsp_cpu_sample_take(uint64_t *t, uintptr_t *pc, int max)
{
	unsigned tl = C.tail;
	if (tl == __atomic_load_n(&C.head, __ATOMIC_ACQUIRE))
		return -1;
	const struct csample *s = &C.q[tl % QUEUE];
	int n = s->n < max ? s->n : max;
	memcpy(pc, s->pc, (size_t)n * sizeof *pc);
	*t = s->t;
	__atomic_store_n(&C.tail, tl + 1, __ATOMIC_RELEASE);
	return n;
}

const char *dsp_cpu_samples(uint64_t *kept, uint64_t *lost)
{
	*kept = __atomic_load_n(&C.kept, __ATOMIC_RELAXED);
	*lost = __atomic_load_n(&C.lost, __ATOMIC_RELAXED);
	int st = __atomic_load_n(&C.state, __ATOMIC_ACQUIRE);
	return !C.started ? NULL : st == 2 ? C.why : st == 1 ? "" : NULL;
}

void dsp_cpu_atfork_prepare(void)
{
	pthread_mutex_lock(&walking);
}

void dsp_cpu_atfork_parent(void)
{
	pthread_mutex_unlock(&walking);
}

void dsp_cpu_atfork_child(void)
{
	memset(&C, 0, sizeof C); /* (the sampler is not in the child: the child's writer starts its own) */
	pthread_mutex_init(&walking, NULL);
}
