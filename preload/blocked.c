/* The stack of a call in flight, read by the writer while the thread stays blocked in it: no
 * signal, no ptrace, nothing the program can see. The wrapper publishes its own frame address
 * (DSP_CALL, internal.h); the wrappers keep frame pointers, so that frame holds the caller's
 * frame pointer and the return address, which give the caller's registers as they were at the
 * call (instruction, stack and frame pointers). From there libunwind's remote interface (loaded
 * with dlopen, as record.c loads the local one) steps through the callers by their DWARF call
 * frame information, every read of the program's memory made through process_vm_readv of this
 * very process: a bad address fails the read instead of faulting, so a frame that changed or a
 * stack that went away ends the stack and never the process. The caller checks afterwards that
 * the thread is still in that call; docs/design.md ("Calls in flight"). The CPU sampler's stacks
 * (cpusample.c) are walked the same way from a sample's registers and a copy of its stack's top. */
#include "internal.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include <libunwind.h> /* (the types only: its functions are looked up in libunwind-x86_64) */

static struct {
	int tried, ready;
	unw_addr_space_t as, as_sample; /* (the writer's; the CPU sampler's thread's) */
	int (*init_remote)(unw_cursor_t *, unw_addr_space_t, void *);
	int (*step)(unw_cursor_t *);
	int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);
	int (*search)(unw_addr_space_t, unw_word_t, unw_dyn_info_t *, unw_proc_info_t *, int, void *);
	void (*flush)(unw_addr_space_t, unw_word_t, unw_word_t);
} U;

/* The registers known, and for a sample a copy of its stack's top: [lo, hi) as it was, the rest
 * of the thread's stack, up to top, gone (not read live: those frames may have returned since). */
struct regs {
	unw_word_t ip, sp, bp;
	const struct dsp_sample_regs *more; /* (a sample's: bx, r12-r15 too) */
	const uint8_t *stk;
	uintptr_t lo, hi, top;
};

/* n bytes at address a of this process (dsp_peek): -1 where any of it cannot be read */
static int peek(uintptr_t a, void *buf, size_t n)
{
	return dsp_peek(a, buf, n) == (ssize_t)n ? 0 : -1;
}

static int ro_word(uintptr_t addr, unw_word_t *val);

static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg)
{
	const struct regs *r = arg;
	(void)as;
	if (write)
		return -UNW_EINVAL;
	if (r->stk && addr >= r->lo && addr <= r->hi - sizeof *val) {
		memcpy(val, r->stk + (addr - r->lo), sizeof *val);
		return 0;
	}
	if (r->stk && addr >= r->lo && addr < r->top)
		return -UNW_EINVAL;
	if (r->more) /* (the CPU sampler's: the objects' unwind tables, read once) */
		return ro_word(addr, val);
	return peek(addr, val, sizeof *val) == 0 ? 0 : -UNW_EINVAL;
}

/* the registers known at the call: the others are not, and a frame that needs them ends the stack */
static int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write, void *arg)
{
	const struct regs *r = arg;
	(void)as;
	if (write)
		return -UNW_EREADONLYREG;
	if (reg == UNW_X86_64_RIP)
		*val = r->ip;
	else if (reg == UNW_X86_64_RSP)
		*val = r->sp;
	else if (reg == UNW_X86_64_RBP)
		*val = r->bp;
	else if (r->more && reg == UNW_X86_64_RBX)
		*val = r->more->bx;
	else if (r->more && reg >= UNW_X86_64_R12 && reg <= UNW_X86_64_R15)
		*val = r->more->r12_15[reg - UNW_X86_64_R12];
	else
		return -UNW_EBADREG;
	return 0;
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write, void *arg)
{
	(void)as, (void)reg, (void)val, (void)write, (void)arg;
	return -UNW_EBADREG;
}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *addr, void *arg)
{
	(void)as, (void)addr, (void)arg;
	return -UNW_ENOINFO;
}

static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
	(void)as, (void)pi, (void)arg; /* (table entries' info is libunwind's own to free) */
}

static int resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
	(void)as, (void)c, (void)arg;
	return -UNW_EINVAL;
}

static int get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t n, unw_word_t *off, void *arg)
{
	(void)as, (void)addr, (void)buf, (void)n, (void)off, (void)arg;
	return -UNW_ENOINFO; /* (the collector names frames by module and offset) */
}

/* the loaded object whose segment holds ip: that segment and the object's .eh_frame_hdr */
struct obj {
	uintptr_t ip, lo, hi, hdr;
};

static int find_obj(struct dl_phdr_info *info, size_t size, void *data)
{
	struct obj *o = data;
	(void)size;
	const ElfW(Phdr) *text = NULL, *eh = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;
		if (p->p_type == PT_LOAD && o->ip >= lo && o->ip < lo + p->p_memsz)
			text = p;
		else if (p->p_type == PT_GNU_EH_FRAME)
			eh = p;
	}
	if (!text)
		return 0;
	o->lo = info->dlpi_addr + text->p_vaddr;
	o->hi = o->lo + text->p_memsz;
	o->hdr = eh ? info->dlpi_addr + eh->p_vaddr : 0;
	return 1;
}

/* The procedure holding ip, from its object's .eh_frame_hdr binary search table (LSB: version 1,
 * a 4-byte eh_frame pointer, a 4-byte count, entries of two datarel sdata4 words), the form every
 * linker on this platform writes; another form: no information, and the stack ends there. */
/* The CPU sampler's copy of the loaded objects' segments (by lo), so that a sample's frames are
 * not each a walk of the loader's list (300 objects in a PyTorch process); made again when the
 * loader's counters move (and libunwind's cache of what it read of them flushed). Its thread's
 * alone. */
#define SEGS 2048
#define WORDS 4096 /* words of the objects' read-only segments kept */
static struct {
	unsigned long long adds, subs;
	int n, full, nro;
	struct obj s[SEGS];
	struct obj ro[SEGS]; /* (the segments the program cannot write: text, unwind tables, constants) */
	struct {
		uintptr_t at;
		unw_word_t v;
	} w[WORDS]; /* (direct-mapped by address; at 0: empty) */
} G;

static int seg_add(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size, (void)data;
	uintptr_t hdr = 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME)
			hdr = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type == PT_LOAD && !(p->p_flags & PF_W) && G.nro < SEGS) {
			uintptr_t lo = info->dlpi_addr + p->p_vaddr;
			G.ro[G.nro++] = (struct obj){0, lo, lo + p->p_memsz, hdr};
		}
		if (p->p_type != PT_LOAD || !(p->p_flags & PF_X))
			continue;
		if (G.n == SEGS) {
			G.full = 1;
			return 1;
		}
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;
		G.s[G.n++] = (struct obj){0, lo, lo + p->p_memsz, hdr};
	}
	return 0;
}

static int cmp_seg(const void *x, const void *y)
{
	const struct obj *a = x, *b = y;
	return a->lo < b->lo ? -1 : a->lo > b->lo;
}

static void segs_refresh(void)
{
	unsigned long long c[2] = {0, 0};
	dsp_dl_counters(c);
	if (G.n && !G.full && c[0] == G.adds && c[1] == G.subs)
		return;
	G.n = G.full = G.nro = 0;
	memset(G.w, 0, sizeof G.w);
	dl_iterate_phdr(seg_add, NULL);
	qsort(G.s, (size_t)G.n, sizeof G.s[0], cmp_seg);
	qsort(G.ro, (size_t)G.nro, sizeof G.ro[0], cmp_seg);
	G.adds = c[0];
	G.subs = c[1];
	if (U.flush)
		U.flush(U.as_sample, 0, 0);
}

/* of n segments sorted by lo, the one that may hold a: the last that starts at or below it; NULL
 * none */
static const struct obj *seg_below(const struct obj *s, int n, uintptr_t a)
{
	int lo = 0, hi = n;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (s[mid].lo <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &s[lo - 1] : NULL;
}

/* the sampler's segment holding ip: 0 with o filled, -1 none (a full copy: the loader's list) */
static int seg_find(uintptr_t ip, struct obj *o)
{
	if (G.full)
		return dl_iterate_phdr(find_obj, o) ? 0 : -1;
	const struct obj *s = seg_below(G.s, G.n, ip);
	if (!s || ip >= s->hi)
		return -1;
	*o = *s;
	return 0;
}

/* A word at addr for the CPU sampler: where it lies in a segment the program cannot write, as it
 * was read before, else read (and kept). What the sampler's walks read outside a sample's stack
 * is almost all the objects' unwind tables (the binary search of .eh_frame_hdr, then the frame's
 * entry): 60 to 80 reads a Python sample, each a system call. Kept until objects come or go
 * (segs_refresh), as libunwind's own cache of them is. */
static int ro_word(uintptr_t addr, unw_word_t *val)
{
	const struct obj *s = seg_below(G.ro, G.nro, addr);
	int ro = s && addr + sizeof *val <= s->hi && !G.full;
	unsigned slot = (unsigned)(addr >> 3 ^ addr >> 15) % WORDS;
	if (ro && G.w[slot].at == addr) {
		*val = G.w[slot].v;
		return 0;
	}
	if (peek(addr, val, sizeof *val) < 0)
		return -UNW_EINVAL;
	if (ro) {
		G.w[slot].at = addr;
		G.w[slot].v = *val;
	}
	return 0;
}

/* an object's .eh_frame_hdr's first 12 bytes: for the CPU sampler as two kept words (ro_word;
 * none kept while the segments are the loader's list, G.full: one read then) */
static int hdr_read(const struct regs *r, uintptr_t hdr, unsigned char h[16])
{
	if (!r->more || G.full)
		return peek(hdr, h, 12);
	unw_word_t w[2];
	if (ro_word(hdr, &w[0]) < 0 || ro_word(hdr + sizeof w[0], &w[1]) < 0)
		return peek(hdr, h, 12); /* (a header that ends its mapping: its 12 bytes alone) */
	memcpy(h, w, sizeof w);
	return 0;
}

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need, void *arg)
{
	const struct regs *r = arg;
	struct obj o = { .ip = ip };
	unsigned char h[16];
	if ((r->more ? seg_find(ip, &o) < 0 : !dl_iterate_phdr(find_obj, &o)) || !o.hdr || hdr_read(r, o.hdr, h) < 0)
		return -UNW_ENOINFO;
	/* version 1; eh_frame_ptr udata4 or sdata4 (any application); count udata4; table datarel sdata4 */
	if (h[0] != 1 || ((h[1] & 0x0f) != 0x03 && (h[1] & 0x0f) != 0x0b) || h[2] != 0x03 || h[3] != 0x3b)
		return -UNW_ENOINFO;
	uint32_t count;
	memcpy(&count, h + 8, sizeof count);
	unw_dyn_info_t di;
	memset(&di, 0, sizeof di);
	di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di.start_ip = o.lo;
	di.end_ip = o.hi;
	di.u.rti.segbase = o.hdr;
	di.u.rti.table_data = o.hdr + 12;
	di.u.rti.table_len = (unw_word_t)count * 2 * sizeof(int32_t) / sizeof(unw_word_t);
	return U.search(as, ip, &di, pi, need, arg);
}

static int load(void)
{
	static unw_accessors_t acc = { find_proc_info, put_unwind_info, get_dyn_info_list_addr, access_mem,
				       access_reg, access_fpreg, resume, get_proc_name };
	void *h = dlopen("libunwind-x86_64.so.8", RTLD_LAZY | RTLD_LOCAL);
	if (!h) {
		dsp_log("libunwind-x86_64 not available (%s): calls in flight get their call site only", dlerror());
		return -1;
	}
	unw_addr_space_t (*create)(unw_accessors_t *, int) = (unw_addr_space_t (*)(unw_accessors_t *, int))
		dlsym(h, "_Ux86_64_create_addr_space");
	int (*policy)(unw_addr_space_t, unw_caching_policy_t) = (int (*)(unw_addr_space_t, unw_caching_policy_t))
		dlsym(h, "_Ux86_64_set_caching_policy");
	U.init_remote = (int (*)(unw_cursor_t *, unw_addr_space_t, void *))dlsym(h, "_Ux86_64_init_remote");
	U.step = (int (*)(unw_cursor_t *))dlsym(h, "_Ux86_64_step");
	U.get_reg = (int (*)(unw_cursor_t *, unw_regnum_t, unw_word_t *))dlsym(h, "_Ux86_64_get_reg");
	U.search = (int (*)(unw_addr_space_t, unw_word_t, unw_dyn_info_t *, unw_proc_info_t *, int, void *))
		dlsym(h, "_Ux86_64_dwarf_search_unwind_table");
	if (!create || !U.init_remote || !U.step || !U.get_reg || !U.search || !(U.as = create(&acc, 0)))
		return -1;
	U.as_sample = create(&acc, 0);
	U.flush = (void (*)(unw_addr_space_t, unw_word_t, unw_word_t))dlsym(h, "_Ux86_64_flush_cache");
	if (policy) { /* (objects come and go with dlopen: nothing remembered by address) */
		policy(U.as, UNW_CACHE_NONE);
		/* (the sampler's: remembered, and forgotten when objects come or go, segs_refresh) */
		if (U.as_sample)
			policy(U.as_sample, U.flush ? UNW_CACHE_GLOBAL : UNW_CACHE_NONE);
	}
	return 0;
}

void dsp_call_stack_load(void)
{
	if (U.tried)
		return;
	U.tried = 1;
	if (load() < 0)
		U.as = NULL;
	__atomic_store_n(&U.ready, 1, __ATOMIC_RELEASE);
}

/* the frames from r's registers into pc (max), innermost first: its instruction, then each caller's
 * return address */
static int walk(unw_addr_space_t as, struct regs *r, uintptr_t *pc, int max)
{
	unw_cursor_t cur;
	if (U.init_remote(&cur, as, r) < 0)
		return 0;
	int n = 0;
	do {
		unw_word_t ip;
		if (U.get_reg(&cur, UNW_REG_IP, &ip) < 0 || !ip)
			break;
		pc[n++] = ip;
	} while (n < max && U.step(&cur) > 0);
	return n;
}

int dsp_call_stack(const struct dsp_call *c, uintptr_t *pc, int max)
{
	if (!c->fp || max < 1 || !__atomic_load_n(&U.ready, __ATOMIC_ACQUIRE))
		return 0;
	/* the wrapper's frame: the caller's frame pointer, then the return address, which must be the
	 * call site the wrapper published (else its frame is not what we think: the site alone) */
	uintptr_t fr[2];
	if (!U.as || peek(c->fp, fr, sizeof fr) < 0 || fr[1] != c->site)
		return 0;
	struct regs r = { c->site, c->fp + 16, fr[0], NULL, NULL, 0, 0, 0 };
	return walk(U.as, &r, pc, max);
}

int dsp_sample_stack(const struct dsp_sample_regs *s, const uint8_t *stk, size_t n, uintptr_t top, uintptr_t *pc,
		     int max)
{
	if (max < 1)
		return 0;
	if (!__atomic_load_n(&U.ready, __ATOMIC_ACQUIRE) || !U.as_sample) {
		pc[0] = s->ip; /* (libunwind not loaded (yet): the sampled instruction alone) */
		return 1;
	}
	segs_refresh();
	struct regs r = { s->ip, s->sp, s->bp, s, stk, s->sp, s->sp + n, top > s->sp + n ? top : s->sp + n };
	return walk(U.as_sample, &r, pc, max);
}
