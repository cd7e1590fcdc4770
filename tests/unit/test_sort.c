/* The collector's sort for what is nearly in order (collector/stats.c, an_sort_near): against
 * qsort on arrays in order, nearly in order (a few elements moved far either way, runs of streams
 * interleaved, as device work and its edges come), reversed, random, with duplicates, and of
 * every small size; the result must be qsort's, element for element. And its quantiles by
 * selection (an_quantile_select) against those by sorting (an_quantile), and an_merge. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../collector/analysis_int.h"
#include "tap.h"

struct el {
	int64_t key;
	int32_t id; /* (elements that differ differ in key or id: a total order, as an_sort_near needs) */
	char pad[20];
};

static int cmp_el(const void *x, const void *y)
{
	const struct el *a = x, *b = y;
	return a->key != b->key ? (a->key > b->key) - (a->key < b->key) : (a->id > b->id) - (a->id < b->id);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return rng;
}

/* shape: 0 in order, 1 a few moved far, 2 streams interleaved, 3 reversed, 4 random, 5 duplicates */
static int check(int shape, size_t n)
{
	struct el *a = calloc(n + 1, sizeof *a), *b = calloc(n + 1, sizeof *b);
	for (size_t i = 0; i < n; i++) {
		a[i].id = (int32_t)i;
		switch (shape) {
		case 0: a[i].key = (int64_t)i; break;
		case 1: a[i].key = next() % 100 ? (int64_t)i * 10 : (int64_t)(next() % (10 * n + 1)); break;
		case 2: a[i].key = (int64_t)(i / 3) * 100 + (int64_t)(i % 3) * 250; break; /* 3 streams, overlapping */
		case 3: a[i].key = (int64_t)(n - i); break;
		case 4: a[i].key = (int64_t)(next() % 1000000); break;
		default: a[i].key = (int64_t)(next() % 4); break;
		}
		a[i].pad[0] = (char)a[i].key;
	}
	memcpy(b, a, n * sizeof *a);
	if (n)
		qsort(b, n, sizeof *b, cmp_el);
	an_sort_near(a, n, sizeof *a, cmp_el);
	int same = !n || !memcmp(a, b, n * sizeof *a);
	free(a);
	free(b);
	return same;
}

/* an_quantile_select against an_quantile (which sorts) on the same values */
static int quantiles(int shape, size_t n)
{
	double *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b);
	int same = 1;
	for (double q = 0; q <= 1.0001 && same; q += 0.125) {
		for (size_t i = 0; i < n; i++)
			a[i] = shape == 0 ? (double)i : shape == 1 ? (double)(next() % 7) : shape == 2 ? (double)(n - i) :
			       (double)(next() % 100000) / 7;
		memcpy(b, a, n * sizeof *a);
		same = an_quantile_select(a, n, q) == an_quantile(b, n, q);
	}
	free(a);
	free(b);
	return same;
}

int main(void)
{
	static const char *const qshapes[] = { "in order", "7 values", "reversed", "random" };
	for (int s = 0; s < 4; s++) {
		int all = 1;
		for (size_t n = 0; n < 70; n++)
			all &= quantiles(s, n);
		ok(all && quantiles(s, 100001), "quantiles by selection, %s: the same as by sorting, every size below 70 "
		   "and 100001, every eighth", qshapes[s]);
	}
	static const char *const shapes[] = { "in order", "a few moved far", "3 streams interleaved", "reversed",
					      "random", "duplicate keys" };
	for (int s = 0; s < 6; s++) {
		int small = 1;
		for (size_t n = 0; n < 70; n++)
			small &= check(s, n);
		ok(small, "%s: every size below 70 sorted as qsort sorts it", shapes[s]);
		ok(check(s, 200000), "%s: 200000 elements sorted as qsort sorts them", shapes[s]);
	}
	/* an_merge: two parts in order, of every pair of small sizes and one large, interleaved or not */
	int merged = 1;
	for (size_t n = 0; n < 40 && merged; n++)
		for (size_t n1 = 0; n1 <= n && merged; n1++)
			for (int s = 0; s < 3 && merged; s++) {
				struct el a[40], b[40];
				for (size_t i = 0; i < n; i++) {
					size_t j = i < n1 ? i : i - n1;
					a[i] = (struct el){ .key = s == 0 ? (int64_t)j * 2 + (i >= n1) : s == 1 ? (int64_t)(i < n1 ? j : j + n1) :
							   (int64_t)(next() % 5), .id = (int32_t)i };
				}
				if (s == 2) {
					qsort(a, n1, sizeof *a, cmp_el);
					qsort(a + n1, n - n1, sizeof *a, cmp_el);
				}
				memcpy(b, a, sizeof a);
				qsort(b, n, sizeof *b, cmp_el);
				an_merge(a, n1, n, sizeof *a, cmp_el);
				merged = !memcmp(a, b, n * sizeof *a);
			}
	ok(merged, "two parts in order merged as qsort sorts them: every pair of sizes below 40, interleaved, one "
	   "after the other, duplicate keys");
	return done_testing();
}
