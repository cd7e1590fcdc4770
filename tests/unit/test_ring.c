/* The ring alone: wrap-around with records of varying size, exact overflow accounting, and one
 * producer against one consumer thread at full speed with every record checked. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../preload/ring.h"
#include "tap.h"

struct seen {
	uint64_t next, bad, n;
};

static void check(void *ctx, const struct rec *r)
{
	struct seen *s = ctx;
	/* each record carries its sequence number in t0 and nargs copies of it */
	if (r->t0 != s->next)
		s->bad++;
	for (int i = 0; i < r->nargs; i++)
		if ((uint64_t)r->args[i] != r->t0)
			s->bad++;
	if (r->len != sizeof(struct rec) + 8u * r->nargs)
		s->bad++;
	s->next = r->t0 + 1;
	s->n++;
}

static int push(struct ring *r, uint64_t seq, int nargs)
{
	uint32_t len = (uint32_t)(sizeof(struct rec) + 8u * (unsigned)nargs);
	struct rec *e = ring_reserve(r, len);
	if (!e)
		return 0;
	e->kind = 1;
	e->len = (uint16_t)len;
	e->nargs = (uint8_t)nargs;
	e->flags = 0;
	e->t0 = seq;
	for (int i = 0; i < nargs; i++)
		e->args[i] = (int64_t)seq;
	ring_commit(r);
	return 1;
}

static struct ring *shared;
static uint64_t produced, written;
static volatile int producing;

static void *consumer(void *arg)
{
	struct seen *s = arg;
	while (__atomic_load_n(&producing, __ATOMIC_ACQUIRE))
		ring_drain(shared, check, s, SIZE_MAX);
	ring_drain(shared, check, s, SIZE_MAX);
	return NULL;
}

int main(void)
{
	struct ring *r = ring_create(4096);
	struct seen s = {0, 0, 0};

	ok(r && r->size == 4096, "a 4 KiB ring");
	/* wrap-around: 100 rounds of fill-and-drain with sizes 24..120 bytes */
	uint64_t seq = 0;
	for (int round = 0; round < 100; round++) {
		int k = 0;
		while (k < 20 && push(r, seq, (int)(seq % 13)))
			seq++, k++;
		ring_drain(r, check, &s, SIZE_MAX);
	}
	ok(s.bad == 0 && s.n == seq, "%llu records across wrap-arounds read back intact",
	   (unsigned long long)s.n);
	ok(ring_dropped(r) == 0, "nothing dropped while the consumer keeps up");

	/* overflow: fill without draining; every failed reservation is one drop */
	ring_reset(r);
	uint64_t ok_n = 0, tries = 1000;
	for (uint64_t i = 0; i < tries; i++)
		ok_n += push(r, i, 1);
	ok(ok_n == 4096 / 32, "a full ring holds exactly size/record records (%llu)",
	   (unsigned long long)ok_n);
	ok(ring_dropped(r) == tries - ok_n, "the rest are counted as dropped (%llu)",
	   (unsigned long long)ring_dropped(r));
	s = (struct seen){0, 0, 0};
	ring_drain(r, check, &s, SIZE_MAX);
	ok(s.n == ok_n && s.bad == 0, "the records that fit are intact");
	ok(ring_idle(r) == 0, "a ring with drops is not idle");
	ring_release(r);

	/* one producer, one consumer, running concurrently */
	shared = ring_create(64 * 1024);
	s = (struct seen){0, 0, 0};
	pthread_t th;
	producing = 1;
	pthread_create(&th, NULL, consumer, &s);
	for (uint64_t i = 0; i < 3000000; i++) {
		if (push(shared, written, (int)(i % 5)))
			written++;
		produced++;
	}
	__atomic_store_n(&producing, 0, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	ok(s.bad == 0, "concurrent: every record read intact and in order");
	ok(s.n == written, "concurrent: records read == records written (%llu)",
	   (unsigned long long)s.n);
	ok(written + ring_dropped(shared) == produced,
	   "concurrent: written %llu + dropped %llu == produced %llu exactly",
	   (unsigned long long)written, (unsigned long long)ring_dropped(shared),
	   (unsigned long long)produced);
	ring_release(shared);
	return done_testing();
}
