/* ddpbench's input pipeline, shaped like PyTorch's DataLoader: the training thread samples the
 * indices of each batch (DistributedSampler, length bucketing or token budget) and sends them to
 * K input threads over index pipes; each thread reads and decodes its batches and answers on its
 * result pipe, up to P batches ahead. With no threads (--workers 0 or --slow-data sync) the
 * training thread loads each batch itself when it needs it. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "ddpbench.h"

#define BUCKET_WINDOW 16 /* global batches sorted together when bucketing by length */

struct ctx { /* one loading context: an input thread, or the training thread itself */
	struct loader *l;
	int id;
	int fd;               /* samples.bin or tokens.bin */
	struct storage *st;   /* --slow-data delay on this rank */
	int req[2], res[2];   /* index pipe and result pipe */
	pthread_t thread;
	int started;
	uint64_t *off;        /* scratch for storage requests */
	uint32_t *len;
};

struct loader {
	const struct options *o;
	const struct dataset *ds;
	int rank, ws, batch;
	unsigned slow;        /* the --slow-data variants that apply to this rank */
	int64_t items;        /* samples, sequences, or uniform windows */
	int nctx, nslots;
	struct ctx *ctx;
	struct batch *slots;
	int64_t cur;          /* number of the batch handed out last, -1 before the first */
	/* the sampler: this rank's share of a per-epoch permutation */
	int64_t *perm;
	int64_t pos, share;
	int epoch;
	/* token budget: a pool of this rank's sequences sorted by length, cut into batches */
	int64_t *pool, *pool_batch; /* pool_batch[k]: start of batch k in pool, k = 0..npb */
	int64_t npool, npb, pb_pos;
	/* length bucketing: global batches of the epoch, in visiting order */
	int64_t *gb_start;
	int64_t ngb, gb_pos;
};

static int item_len(const struct loader *l, int64_t i)
{
	if (l->o->task == TASK_VARLEN)
		return (int)l->ds->seq_len[i];
	return l->o->uniform_len;
}

static uint64_t item_token_off(const struct loader *l, int64_t i)
{
	if (l->o->task == TASK_VARLEN)
		return l->ds->seq_off[i];
	return (uint64_t)i * (uint64_t)l->o->uniform_len;
}

static int cmp_len(const void *a, const void *b, void *arg)
{
	const struct loader *l = arg;
	int la = item_len(l, *(const int64_t *)a), lb = item_len(l, *(const int64_t *)b);
	return (la > lb) - (la < lb);
}

static void new_epoch(struct loader *l)
{
	for (int64_t i = 0; i < l->items; i++)
		l->perm[i] = i;
	shuffle(l->perm, l->items, l->o->seed * 1000003u + (uint64_t)l->epoch);
	l->pos = 0;
	if (l->o->batching != BATCH_BUCKET || l->o->task == TASK_MLP)
		return;
	/* sort windows of the global permutation by length and cut them into global batches, so
	 * every rank's share of a global batch has about the same length */
	int64_t gsize = (int64_t)l->ws * l->batch, win = gsize * BUCKET_WINDOW;
	l->ngb = 0;
	for (int64_t w = 0; w + gsize <= l->items; w += win) {
		int64_t n = l->items - w < win ? (l->items - w) / gsize * gsize : win;
		qsort_r(l->perm + w, (size_t)n, sizeof(int64_t), cmp_len, l);
		for (int64_t g = 0; g < n / gsize; g++)
			l->gb_start[l->ngb++] = w + g * gsize;
	}
	shuffle(l->gb_start, l->ngb, l->o->seed * 7919u + (uint64_t)l->epoch);
	l->gb_pos = 0;
}

/* the next index of this rank's DistributedSampler stream */
static int64_t stream_next(struct loader *l)
{
	if (l->pos >= l->share) {
		l->epoch++;
		new_epoch(l);
	}
	return l->perm[l->rank + (l->pos++) * l->ws];
}

static void set_lengths(struct loader *l, struct batch *b)
{
	b->len_max = 0;
	b->real_tokens = 0;
	if (l->o->task == TASK_MLP)
		return;
	for (int i = 0; i < b->n; i++) {
		b->len[i] = item_len(l, b->idx[i]);
		b->real_tokens += b->len[i];
		if (b->len[i] > b->len_max)
			b->len_max = b->len[i];
	}
}

/* Token-budget batching as length-aware samplers do it: draw a pool of this rank's sequences,
 * sort it by length, cut it into batches of at most token_budget padded tokens (never more than
 * a batch's capacity), and visit those batches in random order. */
static void fill_pool(struct loader *l)
{
	for (int64_t i = 0; i < l->npool; i++)
		l->pool[i] = stream_next(l);
	qsort_r(l->pool, (size_t)l->npool, sizeof(int64_t), cmp_len, l);
	int64_t cap = (int64_t)l->slots[0].cap_samples;
	l->npb = 0;
	for (int64_t i = 0; i < l->npool;) {
		int64_t j = i + 1; /* sorted: the last sequence is the longest */
		while (j < l->npool && j - i < cap && (j + 1 - i) * item_len(l, l->pool[j]) <= l->o->token_budget)
			j++;
		l->pool_batch[2 * l->npb] = i;
		l->pool_batch[2 * l->npb + 1] = j;
		l->npb++;
		i = j;
	}
	/* shuffle the batch order (pairs move together) */
	uint64_t s = l->o->seed * 104729u + (uint64_t)l->pool[0];
	for (int64_t k = l->npb - 1; k > 0; k--) {
		int64_t r = (int64_t)(rng_next(&s) % (uint64_t)(k + 1));
		int64_t a = l->pool_batch[2 * k], e = l->pool_batch[2 * k + 1];
		l->pool_batch[2 * k] = l->pool_batch[2 * r];
		l->pool_batch[2 * k + 1] = l->pool_batch[2 * r + 1];
		l->pool_batch[2 * r] = a;
		l->pool_batch[2 * r + 1] = e;
	}
	l->pb_pos = 0;
}

static void sample(struct loader *l, struct batch *b)
{
	const struct options *o = l->o;
	if (o->task != TASK_MLP && o->batching == BATCH_BUCKET) {
		if (l->gb_pos >= l->ngb) {
			l->epoch++;
			new_epoch(l);
		}
		int64_t g = l->gb_start[l->gb_pos++];
		b->n = l->batch;
		for (int j = 0; j < b->n; j++)
			b->idx[j] = l->perm[g + l->rank + (int64_t)j * l->ws];
	} else if (o->task != TASK_MLP && o->batching == BATCH_BUDGET) {
		if (l->pb_pos >= l->npb)
			fill_pool(l);
		int64_t from = l->pool_batch[2 * l->pb_pos], to = l->pool_batch[2 * l->pb_pos + 1];
		l->pb_pos++;
		b->n = (int)(to - from);
		memcpy(b->idx, l->pool + from, (size_t)b->n * sizeof *b->idx);
	} else {
		b->n = l->batch;
		for (int j = 0; j < b->n; j++)
			b->idx[j] = stream_next(l);
	}
	set_lengths(l, b);
}

/* reads len bytes at off into dst, in --read-chunk pieces with small reads */
static int read_range(struct ctx *c, int fd, uint64_t off, size_t len, char *dst, int use_pread)
{
	size_t chunk = (c->l->slow & SLOW_SMALL_READS) ? (size_t)c->l->o->read_chunk : len;
	size_t at = 0;
	while (at < len) {
		size_t want = len - at < chunk ? len - at : chunk;
		ssize_t r = use_pread ? pread(fd, dst + at, want, (off_t)(off + at)) : read(fd, dst + at, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		at += (size_t)r;
	}
	return 0;
}

static int read_item_file(struct ctx *c, int64_t i, char *dst)
{
	/* one file per sample, as an image folder would have: stat, open, read, close */
	char path[3200];
	struct stat st;
	size_t bytes = (size_t)c->l->ds->sample_bytes;
	item_path(c->l->ds, i, path, sizeof path);
	if (stat(path, &st) != 0 || (size_t)st.st_size != bytes)
		return -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = read_range(c, fd, 0, bytes, dst, 0);
	close(fd);
	return rc;
}

static void decode_samples(const struct loader *l, struct batch *b)
{
	/* payload bytes averaged into features and normalized: the decode step of the pipeline */
	const struct dataset *ds = l->ds;
	int per = (ds->sample_bytes - 4) / ds->features;
	for (int k = 0; k < b->n; k++) {
		const unsigned char *p = (const unsigned char *)b->raw + (size_t)k * ds->sample_bytes;
		uint32_t label;
		memcpy(&label, p, 4);
		b->y[k] = (int)(label % (uint32_t)ds->classes);
		p += 4;
		for (int f = 0; f < ds->features; f++) {
			unsigned s = 0;
			for (int j = 0; j < per; j++)
				s += p[f * per + j];
			b->x[(size_t)k * ds->features + f] = (float)s / (255.0f * (float)per) - 0.5f;
		}
	}
	/* --decode-us: the rest of a real decode (decompression, augmentation) as CPU time of this
	 * thread, however long the host takes to give it: passes over the features until the
	 * thread's CPU clock has advanced that much */
	if (l->o->decode_us > 0 && b->n > 0) {
		struct timespec t0, t;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
		double want = l->o->decode_us * 1e3 * b->n, got = 0;
		volatile float sink = 0;
		while (got < want) {
			for (int i = 0; i < b->n * ds->features; i += 7)
				sink += b->x[i] * 1.0001f;
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
			got = (double)(t.tv_sec - t0.tv_sec) * 1e9 + (double)(t.tv_nsec - t0.tv_nsec);
		}
	}
}

static int load(struct ctx *c, struct batch *b)
{
	struct loader *l = c->l;
	const struct dataset *ds = l->ds;
	int mlp = l->o->task == TASK_MLP;
	size_t at = 0;
	for (int k = 0; k < b->n; k++) {
		int64_t i = b->idx[k];
		uint64_t off = mlp ? (uint64_t)i * (uint64_t)ds->sample_bytes : 2 * item_token_off(l, i);
		size_t len = mlp ? (size_t)ds->sample_bytes : 2 * (size_t)item_len(l, i);
		if (c->st) {
			c->off[k] = off;
			c->len[k] = (uint32_t)len;
		} else if (mlp && (l->slow & SLOW_STAT)) {
			if (read_item_file(c, i, b->raw + at) != 0)
				return -1;
		} else if (read_range(c, c->fd, off, len, b->raw + at, 1) != 0) {
			return -1;
		}
		at += len;
	}
	if (c->st && storage_read(c->st, b->n, c->off, c->len, b->raw) != 0)
		return -1;
	if (mlp) {
		decode_samples(l, b);
		return 0;
	}
	memset(b->tok, 0, (size_t)b->n * (size_t)b->len_max * 2);
	at = 0;
	for (int k = 0; k < b->n; k++) {
		memcpy(b->tok + (size_t)k * b->len_max, b->raw + at, 2 * (size_t)b->len[k]);
		at += 2 * (size_t)b->len[k];
	}
	return 0;
}

static int read_int(int fd, int *v)
{
	for (;;) {
		ssize_t r = read(fd, v, sizeof *v);
		if (r == (ssize_t)sizeof *v)
			return 0;
		if (r < 0 && errno == EINTR)
			continue;
		return -1;
	}
}

static int write_int(int fd, int v)
{
	for (;;) {
		ssize_t w = write(fd, &v, sizeof v);
		if (w == (ssize_t)sizeof v)
			return 0;
		if (w < 0 && errno == EINTR)
			continue;
		return -1;
	}
}

static void *input_thread(void *arg)
{
	struct ctx *c = arg;
	char name[16];
	snprintf(name, sizeof name, "ddpbench-in%d", c->id);
	pthread_setname_np(pthread_self(), name);
	int slot;
	while (read_int(c->req[0], &slot) == 0 && slot >= 0) {
		int rc = load(c, &c->l->slots[slot]);
		if (write_int(c->res[1], rc == 0 ? slot : -1 - slot) != 0)
			break;
	}
	return NULL;
}

static int ctx_open(struct loader *l, struct ctx *c, int id)
{
	char path[3200];
	c->l = l;
	c->id = id;
	snprintf(path, sizeof path, "%s/%s", l->ds->dir, l->o->task == TASK_MLP ? "samples.bin" : "tokens.bin");
	c->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (c->fd < 0)
		return -1;
	c->off = calloc(l->slots[0].cap_samples, sizeof *c->off);
	c->len = calloc(l->slots[0].cap_samples, sizeof *c->len);
	if (!c->off || !c->len)
		return -1;
	if (l->slow & SLOW_DELAY) {
		c->st = storage_start(path, l->o->read_delay_ms);
		if (!c->st)
			return -1;
	}
	return 0;
}

static int batch_alloc(struct loader *l, struct batch *b)
{
	const struct options *o = l->o;
	const struct dataset *ds = l->ds;
	size_t cap = (size_t)l->batch;
	if (o->task != TASK_MLP && o->batching == BATCH_BUDGET)
		cap = (size_t)o->token_budget / 8 + 1; /* 8 is gen-data's shortest sequence */
	int lmax = o->task == TASK_VARLEN ? ds->max_len : o->uniform_len;
	b->cap_samples = cap;
	b->idx = calloc(cap, sizeof *b->idx);
	if (o->task == TASK_MLP) {
		b->x = calloc(cap * (size_t)ds->features, sizeof *b->x);
		b->y = calloc(cap, sizeof *b->y);
		b->raw = malloc(cap * (size_t)ds->sample_bytes);
		return b->idx && b->x && b->y && b->raw ? 0 : -1;
	}
	b->cap_tokens = cap * (size_t)lmax;
	if (o->batching == BATCH_BUDGET && b->cap_tokens > (size_t)o->token_budget + (size_t)lmax)
		b->cap_tokens = (size_t)o->token_budget + (size_t)lmax;
	b->len = calloc(cap, sizeof *b->len);
	b->tok = calloc(b->cap_tokens, sizeof *b->tok);
	b->raw = malloc(b->cap_tokens * 2);
	return b->idx && b->len && b->tok && b->raw ? 0 : -1;
}

static void batch_free(struct batch *b)
{
	free(b->idx);
	free(b->x);
	free(b->y);
	free(b->len);
	free(b->tok);
	free(b->raw);
}

/* One pass over the files this rank will read, before the first step: the page cache then holds
 * them as it would after a first epoch (our VMs evict cold pages within minutes), so the input
 * path costs what the --slow-data variants make it cost, not what the disk happens to do. */
static void warm_cache(const struct loader *l)
{
	char path[3200], *buf = malloc(1 << 20);
	if (!buf)
		return;
	snprintf(path, sizeof path, "%s/%s", l->ds->dir, l->o->task == TASK_MLP ? "samples.bin" : "tokens.bin");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		while (read(fd, buf, 1 << 20) > 0)
			;
		close(fd);
	}
	if (l->o->task == TASK_MLP && (l->slow & SLOW_STAT))
		for (int64_t i = 0; i < l->ds->samples; i++) {
			item_path(l->ds, i, path, sizeof path);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd >= 0) {
				while (read(fd, buf, 1 << 20) > 0)
					;
				close(fd);
			}
		}
	free(buf);
}

struct loader *loader_start(const struct options *o, const struct dataset *ds, int rank, int ws,
	int batch)
{
	struct loader *l = calloc(1, sizeof *l);
	if (!l)
		return NULL;
	l->o = o;
	l->ds = ds;
	l->rank = rank;
	l->ws = ws;
	l->batch = batch;
	l->cur = -1;
	l->slow = (o->slow_rank < 0 || o->slow_rank == rank) ? o->slow_data : 0;
	l->items = o->task == TASK_MLP ? ds->samples : o->task == TASK_VARLEN ? ds->sequences :
		ds->total_tokens / o->uniform_len;
	l->share = l->items / ws;
	int workers = (l->slow & SLOW_SYNC) ? 0 : o->workers;
	l->nctx = workers > 0 ? workers : 1;
	l->nslots = workers > 0 ? workers * o->prefetch : 1;
	l->perm = calloc((size_t)l->items, sizeof *l->perm);
	l->gb_start = calloc((size_t)(l->items / ((int64_t)ws * batch) + 1), sizeof *l->gb_start);
	l->ctx = calloc((size_t)l->nctx, sizeof *l->ctx);
	l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
	if (o->task != TASK_MLP && o->batching == BATCH_BUDGET) {
		l->npool = (int64_t)batch * 64 < l->share ? (int64_t)batch * 64 : l->share;
		l->pool = calloc((size_t)l->npool, sizeof *l->pool);
		l->pool_batch = calloc(2 * (size_t)l->npool, sizeof *l->pool_batch);
		if (!l->pool || !l->pool_batch)
			goto err;
	}
	if (!l->perm || !l->gb_start || !l->ctx || !l->slots)
		goto err;
	for (int i = 0; i < l->nctx; i++)
		l->ctx[i].fd = l->ctx[i].req[0] = l->ctx[i].req[1] = l->ctx[i].res[0] = l->ctx[i].res[1] = -1;
	for (int s = 0; s < l->nslots; s++)
		if (batch_alloc(l, &l->slots[s]) != 0)
			goto err;
	new_epoch(l);
	warm_cache(l);
	for (int i = 0; i < l->nctx; i++)
		if (ctx_open(l, &l->ctx[i], i) != 0)
			goto err;
	if (workers == 0)
		return l;
	for (int i = 0; i < l->nctx; i++) {
		struct ctx *c = &l->ctx[i];
		if (pipe2(c->req, O_CLOEXEC) != 0 || pipe2(c->res, O_CLOEXEC) != 0 ||
				pthread_create(&c->thread, NULL, input_thread, c) != 0)
			goto err;
		c->started = 1;
	}
	/* fill the pipeline: batch j goes to slot j and input thread j mod K */
	for (int s = 0; s < l->nslots; s++) {
		sample(l, &l->slots[s]);
		if (write_int(l->ctx[s % l->nctx].req[1], s) != 0)
			goto err;
	}
	return l;
err:
	loader_stop(l);
	return NULL;
}

struct batch *loader_next(struct loader *l)
{
	if (l->nslots == 1 && !l->ctx[0].started) {
		struct batch *b = &l->slots[0];
		l->cur++;
		sample(l, b);
		return load(&l->ctx[0], b) == 0 ? b : NULL;
	}
	if (l->cur >= 0) {
		/* the previous batch's slot is free again: ask for the batch nslots ahead */
		int s = (int)(l->cur % l->nslots);
		sample(l, &l->slots[s]);
		if (write_int(l->ctx[s % l->nctx].req[1], s) != 0)
			return NULL;
	}
	l->cur++;
	int want = (int)(l->cur % l->nslots), got;
	if (read_int(l->ctx[want % l->nctx].res[0], &got) != 0 || got != want)
		return NULL;
	return &l->slots[want];
}

void loader_stop(struct loader *l)
{
	if (!l)
		return;
	for (int i = 0; l->ctx && i < l->nctx; i++) {
		struct ctx *c = &l->ctx[i];
		if (c->started) {
			write_int(c->req[1], -1);
			pthread_join(c->thread, NULL);
		}
		for (int k = 0; k < 2; k++) {
			if (c->req[k] >= 0)
				close(c->req[k]);
			if (c->res[k] >= 0)
				close(c->res[k]);
		}
		if (c->fd >= 0)
			close(c->fd);
		storage_stop(c->st);
		free(c->off);
		free(c->len);
	}
	for (int s = 0; l->slots && s < l->nslots; s++)
		batch_free(&l->slots[s]);
	free(l->slots);
	free(l->ctx);
	free(l->perm);
	free(l->gb_start);
	free(l->pool);
	free(l->pool_batch);
	free(l);
}
