/* Native frames by name: the function a program address falls in, from the symbol table of the
 * object it was in. The trace names each object by path and (since 2.13) its GNU build id; the
 * symbols are read from a file only when its own build id is the same, so a library rebuilt or
 * replaced since the run, or a report on another machine, gives "module+0xoffset" as before,
 * never a wrong name. The files tried, in order: the separate debug file under .build-id/ of each
 * directory of DDPSPY_DEBUG_DIR (a colon list; default /usr/lib/debug, where Debian's -dbgsym
 * packages put theirs, with the full .symtab), then the object itself (its .symtab, else its
 * .dynsym, which has its exported functions only). Each build id's table is read once per process
 * of the collector and shared by the threads that read files (par.c). Every offset in a file is
 * checked against its size: a damaged or hostile file gives no names, never a fault. */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "elfsym.h"
#include "tracefile.h"

struct sym {
	uint64_t lo, hi;
	const char *name; /* (in the file's mapping, which is kept) */
};

struct symtab {
	uint8_t bid[ELFSYM_BID_MAX];
	int nbid;
	struct sym *v; /* by lo; NULL: no file of this build id had symbols */
	size_t n;
};

static struct {
	pthread_mutex_t mu;
	struct symtab *t;
	size_t n, cap;
} C = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

/* a file mapped read-only; NULL when it cannot be */
static const unsigned char *map_file(const char *path, size_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* (a FIFO named so must not block) */
	if (fd < 0)
		return NULL;
	struct stat st;
	void *m = MAP_FAILED;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_size >= (off_t)sizeof(Elf64_Ehdr))
		m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return NULL;
	*size = (size_t)st.st_size;
	return m;
}

/* [off, off + n) lies in a file of size bytes */
static int within(uint64_t off, uint64_t n, size_t size)
{
	return off <= size && n <= size - off;
}

/* the section headers of a 64-bit little-endian ELF file; NULL if it is not one */
static const Elf64_Shdr *sections(const unsigned char *m, size_t size, unsigned *nsh)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)m;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_shentsize != sizeof(Elf64_Shdr) || !eh->e_shnum ||
	    !within(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), size) || eh->e_shoff % 8)
		return NULL;
	*nsh = eh->e_shnum;
	return (const Elf64_Shdr *)(m + eh->e_shoff);
}

/* the build id in the file's SHT_NOTE sections (the layout preload/resolve.c reads in memory) */
static int file_bid(const unsigned char *m, size_t size, const Elf64_Shdr *sh, unsigned nsh, uint8_t *id)
{
	for (unsigned i = 0; i < nsh; i++) {
		if (sh[i].sh_type != SHT_NOTE || !within(sh[i].sh_offset, sh[i].sh_size, size))
			continue;
		uint64_t a = sh[i].sh_offset, end = a + sh[i].sh_size;
		while (a + 12 <= end && a % 4 == 0) {
			uint32_t h[3];
			memcpy(h, m + a, sizeof h);
			uint64_t desc = a + 12 + ((h[0] + 3ull) & ~3ull), next = desc + ((h[1] + 3ull) & ~3ull);
			if (next > end)
				break;
			if (h[2] == NT_GNU_BUILD_ID && h[0] == 4 && !memcmp(m + a + 12, "GNU", 4) && h[1] >= 1 &&
			    h[1] <= ELFSYM_BID_MAX) {
				memcpy(id, m + desc, h[1]);
				return (int)h[1];
			}
			a = next;
		}
	}
	return 0;
}

static int cmp_sym(const void *x, const void *y)
{
	const struct sym *a = x, *b = y;
	return AN_ORDER(a->lo, b->lo) ? AN_ORDER(a->lo, b->lo) : AN_ORDER(b->hi, a->hi);
}

/* The procedure linkage table's sections (.plt, .plt.sec, .plt.got: the stubs a call to another
 * object's function goes through, which no symbol covers) into v as ELFSYM_PLT, by their section
 * names; how many */
#define PLTS 4
static size_t plts(const unsigned char *m, size_t size, const Elf64_Shdr *sh, unsigned nsh, struct sym *v)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)m;
	if (eh->e_shstrndx >= nsh)
		return 0;
	const Elf64_Shdr *names = &sh[eh->e_shstrndx];
	if (names->sh_type != SHT_STRTAB || !within(names->sh_offset, names->sh_size, size) || !names->sh_size ||
	    m[names->sh_offset + names->sh_size - 1] != 0)
		return 0;
	size_t n = 0;
	for (unsigned i = 0; i < nsh && n < PLTS; i++) {
		uint64_t at = sh[i].sh_name;
		if (at >= names->sh_size || !sh[i].sh_size || !sh[i].sh_addr)
			continue;
		const char *nm = (const char *)m + names->sh_offset + at; /* (ends within: its last byte is 0) */
		if (!strcmp(nm, ".plt") || !strcmp(nm, ".plt.sec") || !strcmp(nm, ".plt.got"))
			v[n++] = (struct sym){sh[i].sh_addr, sh[i].sh_addr + sh[i].sh_size, ELFSYM_PLT};
	}
	return n;
}

/* The functions of one symbol table section (SHT_SYMTAB or SHT_DYNSYM) with a size, by address;
 * 0 when the file has no such section or it does not check out. */
static size_t functions(const unsigned char *m, size_t size, const Elf64_Shdr *sh, unsigned nsh, uint32_t type,
			struct sym **out)
{
	for (unsigned i = 0; i < nsh; i++) {
		const Elf64_Shdr *s = &sh[i];
		if (s->sh_type != type || s->sh_entsize != sizeof(Elf64_Sym) || s->sh_link >= nsh ||
		    !within(s->sh_offset, s->sh_size, size) || s->sh_offset % 8)
			continue;
		const Elf64_Shdr *str = &sh[s->sh_link];
		if (str->sh_type != SHT_STRTAB || !within(str->sh_offset, str->sh_size, size) || !str->sh_size ||
		    m[str->sh_offset + str->sh_size - 1] != 0)
			continue;
		const Elf64_Sym *y = (const Elf64_Sym *)(m + s->sh_offset);
		size_t ny = s->sh_size / sizeof *y, n = 0;
		struct sym *v = malloc((ny + PLTS) * sizeof *v);
		if (!v)
			return 0;
		for (size_t k = 0; k < ny; k++) {
			int t = ELF64_ST_TYPE(y[k].st_info);
			if ((t != STT_FUNC && t != STT_GNU_IFUNC) || y[k].st_shndx == SHN_UNDEF || !y[k].st_size ||
			    y[k].st_name >= str->sh_size || !m[str->sh_offset + y[k].st_name])
				continue;
			v[n++] = (struct sym){y[k].st_value, y[k].st_value + y[k].st_size,
					      (const char *)m + str->sh_offset + y[k].st_name};
		}
		if (!n) {
			free(v);
			continue;
		}
		n += plts(m, size, sh, nsh, v + n);
		sort_n(v, n, sizeof *v, cmp_sym);
		*out = v;
		return n;
	}
	return 0;
}

/* the symbols of the file at path if its build id is bid: n, the table in *out (the file stays
 * mapped while it is used: for good, since the table is kept); 0 none */
static size_t from_file(const char *path, const uint8_t *bid, int nbid, struct sym **out)
{
	size_t size, n = 0;
	const unsigned char *m = map_file(path, &size);
	unsigned nsh;
	const Elf64_Shdr *sh = m ? sections(m, size, &nsh) : NULL;
	uint8_t id[ELFSYM_BID_MAX];
	if (sh && file_bid(m, size, sh, nsh, id) == nbid && !memcmp(id, bid, (size_t)nbid) &&
	    !(n = functions(m, size, sh, nsh, SHT_SYMTAB, out)))
		n = functions(m, size, sh, nsh, SHT_DYNSYM, out);
	if (!n && m)
		munmap((void *)m, size);
	return n;
}

/* the table of a build id, read from its files the first time it is asked for */
static const struct symtab *table(const char *path, const uint8_t *bid, int nbid)
{
	for (size_t i = 0; i < C.n; i++)
		if (C.t[i].nbid == nbid && !memcmp(C.t[i].bid, bid, (size_t)nbid))
			return &C.t[i];
	if (C.n == C.cap) {
		size_t cap = C.cap ? C.cap * 2 : 64;
		struct symtab *t = realloc(C.t, cap * sizeof *t);
		if (!t)
			return NULL;
		C.t = t;
		C.cap = cap;
	}
	struct symtab *t = &C.t[C.n++];
	memset(t, 0, sizeof *t);
	memcpy(t->bid, bid, (size_t)nbid);
	t->nbid = nbid;
	/* "xx/rest.debug" under each debug directory's .build-id, as gdb and elfutils look */
	char hex[2 * ELFSYM_BID_MAX + 8], dbg[4096];
	int k = snprintf(hex, sizeof hex, "%02x/", bid[0]);
	for (int i = 1; i < nbid; i++)
		k += snprintf(hex + k, sizeof hex - (size_t)k, "%02x", bid[i]);
	snprintf(hex + k, sizeof hex - (size_t)k, ".debug");
	const char *dirs = getenv("DDPSPY_DEBUG_DIR");
	for (const char *d = dirs && dirs[0] ? dirs : "/usr/lib/debug"; nbid >= 2 && !t->n && *d;) {
		size_t l = strcspn(d, ":");
		if (l && l < sizeof dbg - sizeof hex - 16) {
			snprintf(dbg, sizeof dbg, "%.*s/.build-id/%s", (int)l, d, hex);
			t->n = from_file(dbg, bid, nbid, &t->v);
		}
		d += l + (d[l] == ':');
	}
	if (!t->n && path && path[0] == '/')
		t->n = from_file(path, bid, nbid, &t->v);
	return t;
}

const char *elfsym_find(const char *path, const uint8_t *bid, int nbid, uint64_t off, uint64_t *start)
{
	if (nbid < 1 || nbid > ELFSYM_BID_MAX)
		return NULL;
	pthread_mutex_lock(&C.mu);
	const struct symtab *t = table(path, bid, nbid);
	const char *name = NULL;
	/* the last function starting at or before off, and the innermost of those holding it */
	size_t lo = 0, hi = t ? t->n : 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->v[mid].lo <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i-- > 0 && i + 8 >= lo;) /* (a few back: nested or aliased symbols) */
		if (off < t->v[i].hi) {
			name = t->v[i].name;
			*start = t->v[i].lo;
			break;
		}
	pthread_mutex_unlock(&C.mu);
	return name;
}

/* C++ names as people read them, through the C++ runtime's own demangler (the Itanium ABI's
 * __cxa_demangle, in libstdc++, which every PyTorch install has), loaded when first needed;
 * without it, names stay as the symbol table has them */
static char *(*demangle)(const char *, char *, size_t *, int *);
static pthread_once_t demangle_once = PTHREAD_ONCE_INIT;

static void demangle_load(void)
{
	void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
	if (h)
		*(void **)&demangle = dlsym(h, "__cxa_demangle");
}

/* the symbol of m holding offset off, a return address when ret: a return address may be the
 * first byte after a call at its function's very end, so the byte before it is looked up */
static const char *frame_symbol(const struct trace_module *m, uint64_t off, int ret, uint64_t *start)
{
	return elfsym_find(m->path, m->bid, m->nbid, ret && off ? off - 1 : off, start);
}

int elfsym_function(const struct trace_module *m, uint64_t off, int ret, char *buf, size_t n, uint64_t *foff)
{
	uint64_t start;
	const char *name = n >= 4 ? frame_symbol(m, off, ret, &start) : NULL;
	if (!name)
		return 0;
	/* (without its symbol version, "pthread_mutex_lock@@GLIBC_2.2.5": the name as written) */
	char bare[1024];
	size_t bl = strcspn(name, "@");
	if (name[bl] && bl < sizeof bare) {
		memcpy(bare, name, bl);
		bare[bl] = 0;
		name = bare;
	}
	char *plain = NULL;
	int st = -1;
	if (name[0] == '_' && name[1] == 'Z') {
		pthread_once(&demangle_once, demangle_load);
		plain = demangle ? demangle(name, NULL, NULL, &st) : NULL;
	}
	const char *fn = plain && !st ? plain : name;
	size_t l = strlen(fn);
	if (l >= n) { /* (cut short with "...") */
		memcpy(buf, fn, n - 4);
		memcpy(buf + n - 4, "...", 4);
		l = n - 1;
	} else {
		memcpy(buf, fn, l + 1);
	}
	free(plain);
	*foff = off - start;
	return (int)l;
}

int trace_frame_text(const struct trace_file *f, uint64_t ip, int ret, char *buf, size_t n)
{
	const struct trace_module *m = trace_module_of(f, ip);
	if (!m)
		return snprintf(buf, n, "0x%" PRIx64, ip);
	const char *base = m->path ? strrchr(m->path, '/') : NULL;
	const char *mod = base ? base + 1 : m->path ? m->path : "?";
	uint64_t off = ip - m->bias, foff;
	/* the module and the offsets always whole, the name cut short to fit */
	int k = snprintf(buf, n, "%s+0x%" PRIx64, mod, off);
	const size_t t = 20; /* ("+0x" and 16 digits and ")") */
	if (k < 0 || (size_t)k + 2 + t + 4 > n)
		return k;
	int l = elfsym_function(m, off, ret, buf + k + 2, n - (size_t)k - 2 - t, &foff);
	if (!l)
		return k;
	memcpy(buf + k, " (", 2);
	return k + 2 + l + snprintf(buf + k + 2 + l, t + 1, "+0x%" PRIx64 ")", foff);
}

int trace_function_text(const struct trace_file *f, uint64_t ip, int ret, char *buf, size_t n)
{
	const struct trace_module *m = trace_module_of(f, ip);
	uint64_t foff;
	char name[512];
	if (!m || !elfsym_function(m, ip - m->bias, ret, name, sizeof name, &foff))
		return trace_frame_text(f, ip, ret, buf, n);
	const char *base = m->path ? strrchr(m->path, '/') : NULL;
	return snprintf(buf, n, "%s+0x%" PRIx64 " (%s)", base ? base + 1 : m->path ? m->path : "?",
			ip - m->bias - foff, name);
}

/* an object of the system's (the C library, the loader, libm, the vDSO, libunwind) or ddpspy's
 * own, not the program's */
static int not_program(const struct trace_module *m)
{
	const char *base = m && m->path ? strrchr(m->path, '/') : NULL;
	if (!m || !m->path)
		return 0;
	if (base && !strncmp(base + 1, "libddpspy", 9))
		return 1;
	return m->path[0] != '/' ? !strncmp(m->path, "linux-vdso", 10) :
	       (!strncmp(m->path, "/lib/", 5) || !strncmp(m->path, "/usr/lib/", 9) || !strncmp(m->path, "/lib64/", 7)) &&
	       !strstr(m->path, "-packages/");
}

/* ip (a return address when ret) is in a procedure linkage table's stub */
static int in_plt(const struct trace_module *m, uint64_t ip, int ret)
{
	uint64_t start;
	const char *name = frame_symbol(m, ip - m->bias, ret, &start);
	return name && !strcmp(name, ELFSYM_PLT);
}

uint32_t trace_sample_site(const struct trace_file *f, const struct trace_stack *s)
{
	uint32_t at = 0;
	for (const struct trace_module *m; at + 1 < s->n; at++)
		if (!(m = trace_module_of(f, s->ips[at])) || !(not_program(m) || in_plt(m, s->ips[at], at > 0)))
			break;
	return at;
}
