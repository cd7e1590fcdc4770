/* The per-thread event ring: one producer (the thread that owns it), one consumer (the writer
 * thread, or whoever drains at exit/exec/fork with the writer stopped). Bounded, lock-free,
 * never blocks: a record that does not fit is dropped and counted.
 *
 * Threads and barriers: ring_reserve/ring_commit only from the owning thread; ring_drain only
 * from the single consumer. ring_commit publishes with a release store of head that pairs with
 * the acquire load in ring_drain; ring_drain gives space back with a release store of tail that
 * pairs with the acquire load in ring_reserve. dropped is written by the producer alone and read
 * (relaxed) by the consumer. */
#ifndef DDPSPY_RING_H
#define DDPSPY_RING_H

#include <stdint.h>
#include <stddef.h>

/* A record in the ring: this header, nargs 8-byte arguments, then the string (slen bytes, no
 * terminator), then with REC_STACK a u64 frame count and the frames, padded to 8 bytes, then with
 * REC_PY the thread's Python frames as dsp_py_capture wrote them (internal.h). */
struct rec {
	uint16_t kind;  /* enum ddpspy_event_kind, or REC_PAD */
	uint16_t len;   /* whole record in bytes, a multiple of 8 */
	uint8_t nargs;
	uint8_t flags;  /* REC_STR, REC_STACK, REC_PY */
	uint16_t slen;
	uint64_t t0;    /* raw timestamp at entry */
	uint64_t dur;   /* raw ticks */
	int64_t args[];
};

#define REC_PAD 0xffff
#define REC_STR 1
#define REC_STACK 2
#define REC_PY 4
#define REC_MAX 0xfff8 /* longest record */

struct ring {
	/* producer's line */
	uint64_t head;       /* bytes published; release-stored by the producer */
	uint64_t next;       /* head after the pending reservation (producer only) */
	uint64_t tail_cache; /* producer's last view of tail */
	uint64_t dropped;    /* records that did not fit */
	uint64_t size, mask;
	unsigned char *data;
	uint64_t wake_at;    /* head at which the producer next checks for half full */
	/* consumer's line */
	uint64_t tail __attribute__((aligned(64))); /* bytes consumed; release-stored by the consumer */
};

/* Called (by the producer) when its ring passes half full, at most once per quarter of the ring
 * filled: the consumer should drain now. NULL: nobody to tell. */
extern void (*ring_wake_hook)(void);
void ring_half_full(struct ring *r);

/* Maps a ring with a power-of-two data area of at least `bytes` (min 4 KiB). Returns NULL with
 * errno set when mmap fails. Release with ring_release. */
struct ring *ring_create(size_t bytes);
void ring_release(struct ring *r);

/* Discards everything in the ring and the drop count (fork child: the parent's events are
 * the parent's to write). Only with no producer or consumer running. */
void ring_reset(struct ring *r);

/* Consumer: calls fn for each record in order, at most max of them, returns the number handed
 * over. The record's memory is valid only during the call. */
size_t ring_drain(struct ring *r, void (*fn)(void *ctx, const struct rec *rec), void *ctx, size_t max);

static inline uint64_t ring_dropped(const struct ring *r)
{
	return __atomic_load_n(&r->dropped, __ATOMIC_RELAXED);
}

/* Consumer: nothing to drain and nothing dropped. */
static inline int ring_idle(const struct ring *r)
{
	return __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) == r->tail && !ring_dropped(r);
}

/* Producer: space for a record of len bytes (multiple of 8, at most REC_MAX), or NULL when the
 * ring is full (the drop is counted). Follow a non-NULL reservation with ring_commit. */
static inline struct rec *ring_reserve(struct ring *r, uint32_t len)
{
	uint64_t head = r->head;
	uint64_t off = head & r->mask;
	uint64_t to_end = r->size - off;
	uint64_t need = to_end < len ? to_end + len : len;

	if (head + need - r->tail_cache > r->size) {
		r->tail_cache = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		if (head + need - r->tail_cache > r->size) {
			__atomic_store_n(&r->dropped, r->dropped + 1, __ATOMIC_RELAXED);
			return NULL;
		}
	}
	if (to_end < len) { /* the record would straddle the end: pad to it and wrap */
		struct rec *pad = (struct rec *)(r->data + off);
		pad->kind = REC_PAD;
		pad->len = 0;          /* a pad covers to the end of the data area */
		off = 0;
	}
	r->next = head + need;
	return (struct rec *)(r->data + off);
}

/* Publishes the reservation. Past the wake mark (one compare: the ring may be half full), asks
 * for a drain; only then can it cost a syscall. */
static inline void ring_commit(struct ring *r)
{
	__atomic_store_n(&r->head, r->next, __ATOMIC_RELEASE);
	if (__builtin_expect(r->next >= r->wake_at, 0))
		ring_half_full(r);
}

#endif
