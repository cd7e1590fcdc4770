/* The collector's small helpers, under every layer: one sort, one compare, one search, one
 * growable array. */
#ifndef DDPSPY_BASE_H
#define DDPSPY_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* qsort that takes an empty array at NULL (qsort(NULL, 0, ...) is undefined behaviour), and
 * leaves an array already in order as it is without sorting it (what a stable sort would leave:
 * the traces' records mostly come in order) */
static inline void sort_n(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	size_t i = 1;
	while (i < n && cmp((const char *)base + (i - 1) * size, (const char *)base + i * size) <= 0)
		i++;
	if (i < n)
		qsort(base, n, size, cmp);
}

/* the order of a and b, two numbers of one type: -1, 0 or 1, the one compare helper; comparators
 * chain their fields with GNU C's ?: (the first field that differs decides) */
#define AN_ORDER(a, b) (((a) > (b)) - ((a) < (b)))

/* In n items of size bytes from base, sorted by the int64_t at byte offset off: the first whose
 * value is t or more (n when none). */
static inline size_t an_first_at(const void *base, size_t n, size_t size, size_t off, int64_t t)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t m = (lo + hi) / 2;
		int64_t v;
		memcpy(&v, (const char *)base + m * size + off, sizeof v);
		if (v < t)
			lo = m + 1;
		else
			hi = m;
	}
	return lo;
}

/* an array v of n items of size bytes, with room for one more: v itself, or v grown (doubling
 * *cap from first); NULL when out of memory (v is left as it was) */
static inline void *room_for(void *v, size_t n, size_t *cap, size_t size, size_t first)
{
	if (n < *cap)
		return v;
	size_t c = *cap ? 2 * *cap : first;
	void *p = realloc(v, c * size);
	if (p)
		*cap = c;
	return p;
}

/* A table kept by time (the longest calls' sites, NVTX ranges): at most cap entries, *n in use,
 * each with its time, a double, at byte ms_at. Entry i was found for a new item (i == *n: none
 * was); returns the entry it goes in: i, the next one free, or in a full table the one of least
 * time unless that is more than ms (*taken 1: the caller counts and clears the one it replaces);
 * -1 when it is not kept */
static inline int an_keep(void *base, int *n, int cap, size_t size, size_t ms_at, int i, double ms, int *taken)
{
	const char *b = base;
	*taken = 0;
	if (i < *n)
		return i;
	if (*n < cap)
		return (*n)++;
	int least = 0;
	for (int k = 1; k < cap; k++)
		if (*(const double *)(b + (size_t)k * size + ms_at) < *(const double *)(b + (size_t)least * size + ms_at))
			least = k;
	if (*(const double *)(b + (size_t)least * size + ms_at) > ms)
		return -1;
	*taken = 1;
	return least;
}

#endif
