/* Per-thread ring: allocation and the consumer side. The producer side is inline in ring.h. */
#include "ring.h"

#include <string.h>
#include <sys/mman.h>

_Static_assert(sizeof(struct rec) == 24, "the minimal event is 24 bytes");
_Static_assert(sizeof(struct ring) == 128, "producer and consumer lines are separate");

struct ring *ring_create(size_t bytes)
{
	size_t size = 4096;
	size_t page = 4096;
	void *p;

	while (size < bytes && size < ((size_t)1 << 40))
		size <<= 1;
	/* header page + data; pages are touched only as the ring fills */
	p = mmap(NULL, page + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	struct ring *r = p;
	memset(r, 0, sizeof(*r));
	r->size = size;
	r->mask = size - 1;
	r->data = (unsigned char *)p + page;
	r->wake_at = size / 4; /* a new ring: its first drain is the slow one (cold pages) */
	return r;
}

void ring_release(struct ring *r)
{
	if (r)
		munmap(r, 4096 + r->size);
}

void ring_reset(struct ring *r)
{
	r->head = r->next = r->tail_cache = r->tail = 0;
	r->dropped = 0;
	r->wake_at = r->size / 4;
}

void (*ring_wake_hook)(void);

void ring_half_full(struct ring *r)
{
	uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	r->tail_cache = tail;
	if (r->next - tail >= r->size / 2) {
		void (*hook)(void) = __atomic_load_n(&ring_wake_hook, __ATOMIC_RELAXED);
		if (hook)
			hook();
		r->wake_at = r->next + r->size / 4; /* still not drained by then: ask again */
	} else {
		r->wake_at = tail + r->size / 2;
	}
}

size_t ring_drain(struct ring *r, void (*fn)(void *ctx, const struct rec *rec), void *ctx, size_t max)
{
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->tail;
	size_t n = 0;

	while (tail < head && n < max) {
		uint64_t off = tail & r->mask;
		const struct rec *rec = (const struct rec *)(r->data + off);
		if (rec->kind == REC_PAD) {
			tail += r->size - off;
			continue;
		}
		fn(ctx, rec);
		tail += rec->len;
		/* give space back as we go, so a busy producer can keep writing during a long drain */
		if ((++n & 63) == 0)
			__atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
	return n;
}
