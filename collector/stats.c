/* Statistics helpers the analysis's phases share: quantiles, orderings, and the hash table of
 * collective instances, (communicator, sequence number) -> arrivals over all ranks. */
#include <stdlib.h>

#include "analysis_int.h"
#include "trace.h"

static int cmp_dbl(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
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

int an_cmp_evp(const void *x, const void *y)
{
	const struct ev *a = *(const struct ev *const *)x, *b = *(const struct ev *const *)y;
	return (a->t > b->t) - (a->t < b->t);
}

int an_cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return (a > b) - (a < b);
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
