/* Finding the real function behind each wrapper.
 *
 * RTLD_NEXT finds symbols in objects loaded after us in the global scope. Libraries that Python
 * extension modules pull in (libtorch -> libgloo) are dlopen'ed RTLD_LOCAL: their symbols are in
 * no global scope, so RTLD_NEXT returns NULL for them even though calls from inside that local
 * scope still bind to our wrapper first (LD_PRELOAD objects are searched before any local scope).
 * For those we walk the loaded objects, take a handle on each with RTLD_NOLOAD (no load, just a
 * reference) and look the name up in it, refusing any answer that points back into ddpspy. */
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>

#define MAX_OBJECTS 512

struct walk {
	const char *names[MAX_OBJECTS];
	int n;
	unsigned long long adds;
};

static int collect(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct walk *w = ctx;
	(void)size;
	w->adds = info->dlpi_adds;
	/* dlopen cannot be called here (dl_iterate_phdr holds the loader's lock): just collect */
	if (info->dlpi_name && info->dlpi_name[0] && w->n < MAX_OBJECTS)
		w->names[w->n++] = info->dlpi_name;
	return 0;
}

static int ours(const void *p)
{
	Dl_info a, b;
	return dladdr(p, &a) && dladdr((const void *)dsp_resolve, &b) && a.dli_fbase == b.dli_fbase;
}

static void *lookup_in(const char *path, const char *name)
{
	void *h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return NULL;
	void *p = dlsym(h, name);
	dlclose(h); /* drops only the reference RTLD_NOLOAD took */
	return p && !ours(p) ? p : NULL;
}

void *dsp_resolve(const char *name, const char *hint)
{
	struct dsp_tls *t = &dsp_tls;
	int saved_guard = t->guard, saved_errno = errno;
	void *p;

	t->guard = 1; /* the loader may call wrapped functions (open, read, mutexes) */
	p = dlsym(RTLD_NEXT, name);
	if (!p) {
		struct walk *w = __builtin_alloca(sizeof(struct walk));
		w->n = 0;
		dl_iterate_phdr(collect, w);
		for (int pass = hint ? 0 : 1; pass < 2 && !p; pass++)
			for (int i = 0; i < w->n && !p; i++)
				if ((pass == 0) == (strstr(w->names[i], hint ? hint : "") != NULL))
					p = lookup_in(w->names[i], name);
		if (!p)
			dsp_log("cannot find the real %s in %d loaded objects", name, w->n);
		else
			dsp_log("found %s outside the global scope", name);
	}
	t->guard = saved_guard;
	errno = saved_errno;
	return p;
}

void *dsp_resolve_v(const char *name, const char *version)
{
	void *p = dsp_resolve_early(name, version);
	return p ? p : dsp_resolve(name, NULL);
}

void dsp_object_range(const struct dl_phdr_info *info, uintptr_t *lo, uintptr_t *hi)
{
	*lo = UINTPTR_MAX;
	*hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		*lo = a < *lo ? a : *lo;
		*hi = a + ph->p_memsz > *hi ? a + ph->p_memsz : *hi;
	}
	if (*lo == UINTPTR_MAX)
		*lo = 0;
}

static int counters(struct dl_phdr_info *info, size_t size, void *ctx)
{
	unsigned long long *c = ctx;
	(void)size;
	c[0] = info->dlpi_adds;
	c[1] = info->dlpi_subs;
	return 1;
}

void dsp_dl_counters(unsigned long long c[2])
{
	dl_iterate_phdr(counters, c); /* (the counters come with the first object) */
}

/* The object's GNU build id (its NT_GNU_BUILD_ID note, gABI "Note Section": a 4-byte name size,
 * a 4-byte descriptor size, a 4-byte type, then the name and the descriptor, each padded to 4
 * bytes), read through dsp_peek: a note that cannot be read is no build id, never a fault. The
 * collector names frames from the object's symbols only when the file it finds has the same id. */
int dsp_object_build_id(const struct dl_phdr_info *info, uint8_t *id, int cap)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr, end = a + ph->p_memsz;
		while (a + 12 <= end) {
			uint32_t h[3];
			char name[4];
			if (dsp_peek(a, h, sizeof h) != (ssize_t)sizeof h)
				break;
			uintptr_t desc = a + 12 + ((h[0] + 3u) & ~3u), next = desc + ((h[1] + 3u) & ~3u);
			if (next > end || next <= a)
				break;
			if (h[2] == NT_GNU_BUILD_ID && h[0] == 4 && h[1] >= 1 && (int)h[1] <= cap &&
			    dsp_peek(a + 12, name, 4) == 4 && !memcmp(name, "GNU", 4) &&
			    dsp_peek(desc, id, h[1]) == (ssize_t)h[1])
				return (int)h[1];
			a = next;
		}
	}
	return 0;
}

void *dsp_resolve_early(const char *name, const char *version)
{
	struct dsp_tls *t = &dsp_tls;
	int saved_guard = t->guard, saved_errno = errno;
	t->guard = 1;
	void *p = version ? dlvsym(RTLD_NEXT, name, version) : dlsym(RTLD_NEXT, name);
	t->guard = saved_guard;
	errno = saved_errno;
	return p;
}
