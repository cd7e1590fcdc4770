/* Statistics helpers the analysis's phases share: quantiles, orderings, and the hash table of
 * collective instances, (communicator, sequence number) -> arrivals over all ranks. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_int.h"
#include "trace.h"

/* ---- sorting what is nearly in order ----
 * One pass keeps the elements in order where they are and sets aside each that breaks it: of a
 * descent, the element before it when that one alone was too large (the rest is then in order),
 * else this one. What was set aside (few, when the array was nearly in order; the rest, when it
 * was sorted runs one after the other) is sorted the same way, up to 4 times deep, then by qsort,
 * and merged back from the end. Out of memory: what was set aside goes back and qsort sorts the
 * whole. */
static void sort_near(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *), int depth)
{
	char *a = base, *side = NULL;
	size_t i = 1, k, ns = 0, cs = 0;
	while (i < n && cmp(a + (i - 1) * size, a + i * size) <= 0)
		i++;
	if (i >= n)
		return;
	for (k = i; i < n; i++) {
		char *x = a + i * size;
		if (cmp(a + (k - 1) * size, x) <= 0) {
			if (k != i)
				memcpy(a + k * size, x, size);
			k++;
			continue;
		}
		if (ns == cs) {
			size_t c = cs ? 2 * cs : 1024;
			char *p = realloc(side, c * size);
			if (!p) { /* (the slots from k to i are free) */
				memcpy(a + k * size, side, ns * size);
				free(side);
				qsort(a, n, size, cmp);
				return;
			}
			side = p, cs = c;
		}
		if (k < 2 || cmp(a + (k - 2) * size, x) <= 0) { /* the one before was too large */
			memcpy(side + ns++ * size, a + (k - 1) * size, size);
			memcpy(a + (k - 1) * size, x, size);
		} else {
			memcpy(side + ns++ * size, x, size);
		}
	}
	if (depth < 4)
		sort_near(side, ns, size, cmp, depth + 1);
	else
		sort_n(side, ns, size, cmp);
	for (size_t w = n; ns;) { /* (k + ns == n: from the end, nothing unread is overwritten) */
		if (k && cmp(a + (k - 1) * size, side + (ns - 1) * size) > 0)
			memmove(a + --w * size, a + --k * size, size);
		else
			memcpy(a + --w * size, side + --ns * size, size);
	}
	free(side);
}

void an_sort_near(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	sort_near(base, n, size, cmp, 0);
}

void an_merge(void *base, size_t n1, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	char *a = base, *first;
	if (!n1 || n1 >= n || cmp(a + (n1 - 1) * size, a + n1 * size) <= 0)
		return; /* (already in order) */
	if (!(first = malloc(n1 * size))) {
		qsort(a, n, size, cmp);
		return;
	}
	memcpy(first, a, n1 * size);
	/* (w == i + (j - n1) <= j: nothing unread of the second part is overwritten) */
	for (size_t w = 0, i = 0, j = n1; i < n1; w++) {
		if (j < n && cmp(a + j * size, first + i * size) < 0)
			memcpy(a + w * size, a + j++ * size, size);
		else
			memcpy(a + w * size, first + i++ * size, size);
	}
	free(first);
}

static int cmp_dbl(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return AN_ORDER(a, b);
}

double an_quantile(double *v, size_t n, double q)
{
	if (!n)
		return 0;
	sort_n(v, n, sizeof *v, cmp_dbl);
	double pos = q * (double)(n - 1);
	size_t i = (size_t)pos;
	return i + 1 < n ? v[i] + (pos - (double)i) * (v[i + 1] - v[i]) : v[i];
}

/* the i-th smallest of v's n values, v reordered around it: every value before i at most it, every
 * value after at least it (Hoare's selection) */
static double select_nth(double *v, size_t n, size_t i)
{
	ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, k = (ptrdiff_t)i;
	while (lo < hi) {
		double a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi];
		double piv = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
		ptrdiff_t l = lo, h = hi;
		while (l <= h) {
			while (v[l] < piv)
				l++;
			while (v[h] > piv)
				h--;
			if (l <= h) {
				double x = v[l];
				v[l++] = v[h];
				v[h--] = x;
			}
		}
		/* v[lo..h] <= piv <= v[l..hi], and what lies between equals piv */
		if (k <= h)
			hi = h;
		else if (k >= l)
			lo = l;
		else
			break;
	}
	return v[k];
}

double an_quantile_select(double *v, size_t n, double q)
{
	if (!n)
		return 0;
	double pos = q * (double)(n - 1);
	size_t i = (size_t)pos;
	double x = select_nth(v, n, i);
	if (i + 1 >= n)
		return x;
	double y = v[i + 1]; /* the next: the smallest of those after i */
	for (size_t k = i + 2; k < n; k++)
		y = v[k] < y ? v[k] : y;
	return x + (pos - (double)i) * (y - x);
}

int an_cmp_evp(const void *x, const void *y)
{
	const struct ev *a = *(const struct ev *const *)x, *b = *(const struct ev *const *)y;
	return AN_ORDER(a->t, b->t);
}

int an_cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return AN_ORDER(a, b);
}

/* ---- collective instances ---- */

static int64_t inst_key(int comm, int seq)
{
	int64_t k = an_inst_key(comm, seq);
	return k ? k : -1;
}

static size_t slot(int64_t key, size_t cap)
{
	return (uint64_t)key * 0x9e3779b97f4a7c15ull >> 20 & (cap - 1); /* Fibonacci hashing */
}

struct inst *an_inst_get(struct itab *t, int comm, int seq, int create)
{
	if (create && (t->n + 1) * 2 > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4096;
		struct inst *v = calloc(cap, sizeof *v);
		if (!v)
			return NULL;
		for (size_t i = 0; i < t->cap; i++) {
			if (!t->v[i].key)
				continue;
			size_t k = slot(t->v[i].key, cap);
			while (v[k].key)
				k = (k + 1) & (cap - 1);
			v[k] = t->v[i];
		}
		free(t->v);
		t->v = v;
		t->cap = cap;
	}
	if (!t->cap)
		return NULL;
	int64_t key = inst_key(comm, seq);
	size_t k = slot(key, t->cap);
	while (t->v[k].key) {
		if (t->v[k].key == key)
			return &t->v[k];
		k = (k + 1) & (t->cap - 1);
	}
	if (!create)
		return NULL;
	struct inst *i = &t->v[k];
	i->key = key;
	i->min_arr = INT64_MAX;
	i->max_arr = INT64_MIN;
	i->late = -1;
	i->prev_cat = -1;
	t->n++;
	return i;
}
