/* ddpbench's dataset: `gen-data` writes it, dataset_open reads its manifest, and the storage
 * thread serves reads with a latency for the --slow-data delay variant. Also the small helpers
 * (random numbers, clocks) the other files share. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "ddpbench.h"

uint64_t rng_next(uint64_t *s)
{
	/* splitmix64: good enough for synthetic data and shuffles, and seedable with anything */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

double rng_uniform(uint64_t *s)
{
	return (rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

void shuffle(int64_t *v, int64_t n, uint64_t seed)
{
	uint64_t s = seed;
	for (int64_t i = n - 1; i > 0; i--) {
		int64_t j = (int64_t)(rng_next(&s) % (uint64_t)(i + 1));
		int64_t t = v[i];
		v[i] = v[j];
		v[j] = t;
	}
}

double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* this thread's CPU time: what a step's own work cost, however long the host took to give it */
double cpu_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

void sleep_ms(double ms)
{
	if (ms <= 0)
		return;
	struct timespec t = { (time_t)(ms / 1e3), (long)(fmod(ms, 1e3) * 1e6) };
	while (nanosleep(&t, &t) != 0 && errno == EINTR)
		;
}

void item_path(const struct dataset *ds, int64_t i, char *buf, size_t len)
{
	snprintf(buf, len, "%s/items/%03" PRId64 "/%07" PRId64 ".bin", ds->dir, i / 1000, i);
}

/* ---- gen-data ---- */

static const char gen_usage[] =
	"usage: ddpbench gen-data DIR [--samples N] [--sample-bytes B] [--features D] [--classes C]\n"
	"                             [--sequences M] [--max-len L] [--seed S]\n"
	"Writes a synthetic dataset of real files into DIR (created if needed):\n"
	"  samples.bin       N fixed-size samples of B bytes (default 8192 x 4096)\n"
	"  items/            the same samples one file each, for --slow-data stat\n"
	"  tokens.bin        M token sequences (default 16384) with long-tailed lengths, mean ~128,\n"
	"  lengths.bin       capped at L (default 512)\n"
	"  manifest          what ddpbench train reads first\n";

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t n)
{
	char *c = p;
	while (n > 0) {
		ssize_t r = read(fd, c, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

static int write_file(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	int rc = write_all(fd, p, n);
	if (close(fd) != 0)
		rc = -1;
	return rc;
}

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static void fill_sample(char *p, int bytes, int features, int classes, uint64_t *s)
{
	/* a class-dependent pattern plus noise, so the MLP has something to learn */
	uint32_t label = (uint32_t)(rng_next(s) % (uint64_t)classes);
	memcpy(p, &label, 4);
	unsigned char *u = (unsigned char *)p + 4;
	int payload = bytes - 4, per = payload / features;
	for (int j = 0; j < payload; j++) {
		int f = per ? j / per : 0;
		u[j] = (unsigned char)(((label * 37u + (unsigned)f * (label + 1) * 13u) & 0xbf) +
			(rng_next(s) & 0x3f));
	}
}

static int make_dirs(const char *dir, int64_t samples)
{
	char p[3200];
	snprintf(p, sizeof p, "%s", dir);
	for (char *c = p + 1; *c; c++) /* parents first, like mkdir -p */
		if (*c == '/') {
			*c = 0;
			if (mkdir(p, 0755) != 0 && errno != EEXIST)
				return -1;
			*c = '/';
		}
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return -1;
	snprintf(p, sizeof p, "%s/items", dir);
	if (mkdir(p, 0755) != 0 && errno != EEXIST)
		return -1;
	for (int64_t d = 0; d * 1000 < samples; d++) {
		snprintf(p, sizeof p, "%s/items/%03" PRId64, dir, d);
		if (mkdir(p, 0755) != 0 && errno != EEXIST)
			return -1;
	}
	return 0;
}

int gen_data(int argc, char **argv)
{
	int64_t samples = 8192, bytes = 4096, features = 256, classes = 10, seqs = 16384;
	int64_t max_len = 512, seed = 1;
	static const struct option opts[] = {
		{ "samples", 1, 0, 'n' }, { "sample-bytes", 1, 0, 'b' }, { "features", 1, 0, 'f' },
		{ "classes", 1, 0, 'c' }, { "sequences", 1, 0, 'm' }, { "max-len", 1, 0, 'L' },
		{ "seed", 1, 0, 's' }, { "help", 0, 0, 'h' }, { 0, 0, 0, 0 }
	};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		int bad = 0;
		switch (c) {
		case 'n': bad = parse_i64(optarg, 1, 1 << 24, &samples); break;
		case 'b': bad = parse_i64(optarg, 64, 1 << 24, &bytes); break;
		case 'f': bad = parse_i64(optarg, 1, 1 << 16, &features); break;
		case 'c': bad = parse_i64(optarg, 2, 1 << 16, &classes); break;
		case 'm': bad = parse_i64(optarg, 1, 1 << 24, &seqs); break;
		case 'L': bad = parse_i64(optarg, 16, 1 << 16, &max_len); break;
		case 's': bad = parse_i64(optarg, 0, INT64_MAX, &seed); break;
		case 'h': fputs(gen_usage, stdout); return 0;
		default: bad = 1;
		}
		if (bad) {
			for (const struct option *o = opts; c != '?' && o->name; o++)
				if (o->val == c)
					fprintf(stderr, "ddpbench gen-data: bad value for --%s: '%s'\n", o->name, optarg);
			fputs(gen_usage, stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fputs(gen_usage, stderr);
		return 2;
	}
	if (features > bytes - 4) {
		fprintf(stderr, "ddpbench gen-data: --features %" PRId64 " needs --sample-bytes of at least %" PRId64 "\n",
			features, features + 4);
		return 2;
	}
	const char *dir = argv[optind];
	if (strlen(dir) > 3000) {
		fprintf(stderr, "ddpbench gen-data: directory name too long\n");
		return 2;
	}
	char manifest[512];
	snprintf(manifest, sizeof manifest,
		"ddpbench-data 1\nsamples %" PRId64 "\nsample_bytes %" PRId64 "\nfeatures %" PRId64
		"\nclasses %" PRId64 "\nsequences %" PRId64 "\nvocab 4096\nmax_len %" PRId64 "\nseed %" PRId64
		"\nlengths lognormal mean 128 sigma 0.6\n",
		samples, bytes, features, classes, seqs, max_len, seed);
	char p[3200], old[512] = "";
	snprintf(p, sizeof p, "%s/manifest", dir);
	int fd = open(p, O_RDONLY);
	if (fd >= 0) {
		ssize_t r = read(fd, old, sizeof old - 1);
		old[r > 0 ? r : 0] = 0;
		close(fd);
		if (strcmp(old, manifest) == 0) {
			printf("ddpbench: %s already holds this dataset\n", dir);
			return 0;
		}
	}
	double t0 = now_ms();
	unlink(p); /* the manifest goes last: a half-written dataset has none */
	if (make_dirs(dir, samples) != 0)
		goto err;
	uint64_t s = (uint64_t)seed;
	char *buf = malloc((size_t)bytes);
	snprintf(p, sizeof p, "%s/samples.bin", dir);
	int all = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (!buf || all < 0) {
		free(buf);
		goto err;
	}
	for (int64_t i = 0; i < samples; i++) {
		fill_sample(buf, (int)bytes, (int)features, (int)classes, &s);
		struct dataset tmp;
		snprintf(tmp.dir, sizeof tmp.dir, "%s", dir);
		item_path(&tmp, i, p, sizeof p);
		if (write_all(all, buf, (size_t)bytes) != 0 || write_file(p, buf, (size_t)bytes) != 0) {
			free(buf);
			close(all);
			goto err;
		}
	}
	free(buf);
	if (close(all) != 0)
		goto err;

	/* lengths: log-normal with mean ~128 (sigma 0.6), capped, like tokenized documents */
	uint32_t *len = malloc((size_t)seqs * 4);
	if (!len)
		goto err;
	double sigma = 0.6, mu = log(128.0) - sigma * sigma / 2;
	int64_t total = 0;
	for (int64_t i = 0; i < seqs; i++) {
		double u1 = rng_uniform(&s), u2 = rng_uniform(&s);
		double z = sqrt(-2 * log(u1 + 1e-300)) * cos(2 * M_PI * u2);
		double l = exp(mu + sigma * z);
		len[i] = (uint32_t)(l < 8 ? 8 : l > (double)max_len ? (double)max_len : l);
		total += len[i];
	}
	uint16_t *tok = malloc((size_t)total * 2);
	if (!tok) {
		free(len);
		goto err;
	}
	for (int64_t i = 0; i < total; i++)
		tok[i] = (uint16_t)(1 + rng_next(&s) % 4095);
	snprintf(p, sizeof p, "%s/lengths.bin", dir);
	int rc = write_file(p, len, (size_t)seqs * 4);
	snprintf(p, sizeof p, "%s/tokens.bin", dir);
	rc |= write_file(p, tok, (size_t)total * 2);
	free(len);
	free(tok);
	snprintf(p, sizeof p, "%s/manifest", dir);
	if (rc || write_file(p, manifest, strlen(manifest)) != 0)
		goto err;
	printf("ddpbench: wrote %" PRId64 " samples of %" PRId64 " bytes and %" PRId64
		" sequences (%" PRId64 " tokens) to %s in %.1f s\n", samples, bytes, seqs, total, dir,
		(now_ms() - t0) / 1e3);
	return 0;
err:
	fprintf(stderr, "ddpbench gen-data: cannot write %s: %s\n", p, strerror(errno));
	return 1;
}

/* ---- reading ---- */

static void *read_whole(const char *path, size_t want)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	char *p = malloc(want ? want : 1);
	if (p && read_all(fd, p, want) != 0) {
		free(p);
		p = NULL;
	}
	close(fd);
	return p;
}

int dataset_open(struct dataset *ds, const char *dir, char *err, size_t errlen)
{
	memset(ds, 0, sizeof *ds);
	if (strlen(dir) > 3000) {
		snprintf(err, errlen, "dataset directory name too long");
		return -1;
	}
	snprintf(ds->dir, sizeof ds->dir, "%s", dir);
	char p[3200], text[512];
	snprintf(p, sizeof p, "%s/manifest", dir);
	int fd = open(p, O_RDONLY);
	if (fd < 0) {
		snprintf(err, errlen, "no dataset in %s (%s: %s); make one with: ddpbench gen-data %s",
			dir, p, strerror(errno), dir);
		return -1;
	}
	ssize_t r = read(fd, text, sizeof text - 1);
	close(fd);
	text[r > 0 ? r : 0] = 0;
	int version = 0;
	int64_t seed;
	if (sscanf(text, "ddpbench-data %d\nsamples %" SCNd64 "\nsample_bytes %d\nfeatures %d\nclasses %d"
			"\nsequences %" SCNd64 "\nvocab %d\nmax_len %d\nseed %" SCNd64,
			&version, &ds->samples, &ds->sample_bytes, &ds->features, &ds->classes,
			&ds->sequences, &ds->vocab, &ds->max_len, &seed) != 9 || version != 1) {
		snprintf(err, errlen, "%s is not a ddpbench dataset manifest (version 1); "
			"regenerate it with: ddpbench gen-data %s", p, dir);
		return -1;
	}
	snprintf(p, sizeof p, "%s/lengths.bin", dir);
	ds->seq_len = read_whole(p, (size_t)ds->sequences * 4);
	ds->seq_off = malloc((size_t)(ds->sequences + 1) * 8);
	if (!ds->seq_len || !ds->seq_off) {
		snprintf(err, errlen, "cannot read %s: %s", p, strerror(errno ? errno : EIO));
		return -1;
	}
	ds->seq_off[0] = 0;
	for (int64_t i = 0; i < ds->sequences; i++)
		ds->seq_off[i + 1] = ds->seq_off[i] + ds->seq_len[i];
	ds->total_tokens = (int64_t)ds->seq_off[ds->sequences];
	struct stat st;
	snprintf(p, sizeof p, "%s/samples.bin", dir);
	if (stat(p, &st) != 0 || st.st_size != ds->samples * ds->sample_bytes) {
		snprintf(err, errlen, "%s is missing or has the wrong size; regenerate with: "
			"ddpbench gen-data %s", p, dir);
		return -1;
	}
	snprintf(p, sizeof p, "%s/tokens.bin", dir);
	if (stat(p, &st) != 0 || st.st_size != ds->total_tokens * 2) {
		snprintf(err, errlen, "%s is missing or has the wrong size; regenerate with: "
			"ddpbench gen-data %s", p, dir);
		return -1;
	}
	return 0;
}

/* ---- storage with latency ---- */

struct storage {
	int fd;         /* the server's file */
	int sock[2];    /* [0] client, [1] server */
	double latency_ms;
	pthread_t thread;
};

static void *storage_serve(void *arg)
{
	struct storage *st = arg;
	char *out = NULL;
	size_t cap = 0;
	uint32_t n;
	/* a request: u32 n, n u64 offsets, n u32 lengths; the reply is the bytes, packed */
	while (read_all(st->sock[1], &n, 4) == 0 && n > 0 && n <= 1u << 16) {
		uint64_t off[n];
		uint32_t len[n];
		size_t total = 0;
		if (read_all(st->sock[1], off, 8ul * n) != 0 || read_all(st->sock[1], len, 4ul * n) != 0)
			goto out;
		for (uint32_t i = 0; i < n; i++)
			total += len[i];
		if (total > cap) {
			char *p = realloc(out, total);
			if (!p)
				goto out;
			out = p;
			cap = total;
		}
		sleep_ms(st->latency_ms);
		size_t at = 0;
		for (uint32_t i = 0; i < n; i++) {
			if (pread(st->fd, out + at, len[i], (off_t)off[i]) != (ssize_t)len[i])
				goto out;
			at += len[i];
		}
		if (write_all(st->sock[1], out, total) != 0)
			goto out;
	}
out:
	free(out);
	close(st->sock[1]);
	return NULL;
}

struct storage *storage_start(const char *path, double latency_ms)
{
	struct storage *st = calloc(1, sizeof *st);
	if (!st)
		return NULL;
	st->latency_ms = latency_ms;
	st->fd = open(path, O_RDONLY);
	if (st->fd < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, st->sock) != 0) {
		if (st->fd >= 0)
			close(st->fd);
		free(st);
		return NULL;
	}
	if (pthread_create(&st->thread, NULL, storage_serve, st) != 0) {
		close(st->fd);
		close(st->sock[0]);
		close(st->sock[1]);
		free(st);
		return NULL;
	}
	return st;
}

int storage_read(struct storage *st, int n, const uint64_t *off, const uint32_t *len, char *dst)
{
	uint32_t un = (uint32_t)n;
	size_t total = 0, bytes = 4 + 12 * (size_t)n;
	char *req = malloc(bytes);
	if (!req || n < 1 || n > 1 << 16) {
		free(req);
		return -1;
	}
	memcpy(req, &un, 4);
	memcpy(req + 4, off, 8 * (size_t)n);
	memcpy(req + 4 + 8 * (size_t)n, len, 4 * (size_t)n);
	int rc = write_all(st->sock[0], req, bytes);
	free(req);
	if (rc != 0)
		return -1;
	for (int i = 0; i < n; i++)
		total += len[i];
	return read_all(st->sock[0], dst, total);
}

void storage_stop(struct storage *st)
{
	if (!st)
		return;
	uint32_t zero = 0;
	write_all(st->sock[0], &zero, 4);
	pthread_join(st->thread, NULL);
	close(st->sock[0]);
	close(st->fd);
	free(st);
}
