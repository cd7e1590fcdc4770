/* Writes synthetic trace files for measuring the collector: N ranks with E events each, shaped
 * like the testbed's healthy steps (an input thread's 128 sample preads, the training thread's
 * pipe read, three bucket Iallreduces and their Waitall), in format 1.1 with a "monotonic" clock.
 *
 * With "sync", the training thread reads the samples itself (a synchronous loader, no input
 * thread): every event is then on the thread whose events the report streams a second time.
 *
 * With "gloo SEED", the steps are shaped like PyTorch DDP over gloo instead: two all-reduces of no
 * known size per step on a helper thread (ProcessGroupGloo's), the first starting after a pause
 * that varies from step to step (pseudo-random from SEED, the same on every rank), the second
 * right after it, and the main thread waiting on a condition variable from just after the first
 * starts until the second ends. Every step takes exactly 150 ms. Prints its ground truth as one
 * JSON line: steps, step_ms, and per step the main thread's comms (its wait while an all-reduce
 * runs) and host (its wait between the two) in ms.
 *
 * With "dense" and "dense4", as "sync" with 512 and 2048 preads a step instead of 128: the same
 * steps for four times the events (memory must not grow with events: tests/e2e/test_collector.py).
 *
 * With "warmup", as "sync", after 20,000 reads on the training thread before its first step (a
 * dataset scanned first): more calls before its first synchronizing one than the collector sums.
 *
 * With "irregular", the all-reduces' sizes vary from call to call (the same on every rank), so
 * that no pattern repeats: the report falls back to time windows.
 *
 * With "apart", each rank's all-reduces are on a communicator of its own (ranks that never talk):
 * nothing in the trace checks the ranks' clocks against each other.
 *
 * With "stall", every rank has a DataLoader worker process (a file of its own, role worker) and
 * waits 20 ms of each 40 ms step reading the worker's pipe; per step the worker reads 32 samples
 * of 4 KiB from /data/train (a pread of 500 us each: 16 ms per step) and imports 4 modules from
 * /usr/lib/python3/__pycache__ (a read of 64 KiB, 20 us each: four times the bytes of the
 * samples in a twentieth of their time). data_stall's evidence must name /data/train first.
 *
 * usage: gentrace DIR RANKS EVENTS_PER_RANK [sync | dense | dense4 | warmup | irregular | apart | stall | gloo SEED] */
#include <math.h>
#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/evcodec.h"
#include "../common/format.h"

static FILE *out;
static msgpack_sbuffer sb;
static msgpack_packer pk;

static void str(const char *s)
{
	msgpack_pack_str(&pk, strlen(s));
	msgpack_pack_str_body(&pk, s, strlen(s));
}

static void frame_end(void)
{
	unsigned char h[8];
	uint32_t len = (uint32_t)sb.size, crc = ddpspy_crc32(0, sb.data, sb.size);
	for (int i = 0; i < 4; i++) {
		h[i] = (unsigned char)(len >> (8 * i));
		h[4 + i] = (unsigned char)(crc >> (8 * i));
	}
	fwrite(h, 1, 8, out);
	fwrite(sb.data, 1, sb.size, out);
	msgpack_sbuffer_clear(&sb);
}

static void kv_int(const char *k, int64_t v)
{
	str(k);
	msgpack_pack_int64(&pk, v);
}

static void calib(int64_t t)
{
	msgpack_pack_map(&pk, 4);
	str("k");
	str(DDPSPY_REC_CALIB);
	kv_int("raw", t);
	kv_int("mono_ns", t);
	kv_int("real_ns", t + 1700000000000000000LL);
	frame_end();
}

struct evbuf {
	int tid;
	int64_t t0, prev;
	int n;
	int64_t ev[4096][4 + 12];
	int nargs[4096];
	const char *path[4096]; /* an open's path: its last argument, a string */
};

/* The record in the current format's packed encoding (common/evcodec.h), as the preload writes it */
static void flush(struct evbuf *b)
{
	static unsigned char buf[4096 * (16 + 12 * 10 + 2) + 4096 * 256];
	int64_t prev_args[DDPSPY_EVC_KINDS][DDPSPY_EVC_DELTA_ARGS];
	uint8_t na[DDPSPY_EVC_KINDS];
	size_t nna = 0;
	unsigned char *p = buf;
	if (!b->n)
		return;
	memset(prev_args, 0, sizeof prev_args);
	memset(na, DDPSPY_EVC_NA_NONE, sizeof na);
	int64_t start = b->t0, prev_end = b->t0;
	for (int i = 0; i < b->n; i++) {
		const int64_t *e = b->ev[i];
		int kind = (int)e[0], nargs = b->nargs[i];
		start += e[1];
		if (na[kind] == DDPSPY_EVC_NA_NONE)
			na[kind] = (uint8_t)nargs;
		nna = (size_t)kind + 1 > nna ? (size_t)kind + 1 : nna;
		*p++ = (unsigned char)(kind | (b->path[i] ? DDPSPY_EVC_STR : 0));
		p = ddpspy_put_varint(p, ddpspy_zz(start - prev_end));
		p = ddpspy_put_varint(p, (uint64_t)e[2]);
		unsigned char *mask = p;
		memset(mask, 0, (size_t)(nargs + 7) / 8);
		p += (nargs + 7) / 8;
		for (int k = 0; k < nargs; k++)
			if (e[4 + k] != prev_args[kind][k]) {
				mask[k / 8] |= (unsigned char)(1u << (k % 8));
				p = ddpspy_put_varint(p, ddpspy_zz(e[4 + k] - prev_args[kind][k]));
				prev_args[kind][k] = e[4 + k];
			}
		if (b->path[i]) {
			size_t l = strlen(b->path[i]);
			p = ddpspy_put_varint(p, l);
			memcpy(p, b->path[i], l);
			p += l;
		}
		prev_end = start + e[2];
	}
	msgpack_pack_map(&pk, 6);
	str("k");
	str(DDPSPY_REC_EVENTS);
	kv_int("tid", b->tid);
	kv_int("t0", b->t0);
	kv_int("n", b->n);
	str("na");
	msgpack_pack_bin(&pk, nna);
	msgpack_pack_bin_body(&pk, na, nna);
	str("b");
	msgpack_pack_bin(&pk, (size_t)(p - buf));
	msgpack_pack_bin_body(&pk, buf, (size_t)(p - buf));
	frame_end();
	b->n = 0;
}

static void add(struct evbuf *b, int kind, int64_t t, int64_t dur, int nargs, const int64_t *args)
{
	if (b->n == 4096)
		flush(b);
	if (!b->n)
		b->t0 = b->prev = t;
	int64_t *e = b->ev[b->n];
	e[0] = kind;
	e[1] = t - b->prev;
	e[2] = dur;
	e[3] = 0;
	for (int i = 0; i < nargs; i++)
		e[4 + i] = args[i];
	b->path[b->n] = NULL;
	b->nargs[b->n++] = nargs;
	b->prev = t;
}

/* open(path) = fd, then its reads of bytes each taking dur, every gap apart; returns the events */
static int file_reads(struct evbuf *b, int64_t t, const char *path, int fd, int n, int64_t bytes, int64_t dur,
		      int64_t gap)
{
	int64_t o[3] = { fd, 0, DDPSPY_FD_FILE };
	add(b, DDPSPY_EV_OPEN, t, 5000, 3, o);
	b->path[b->n - 1] = path;
	for (int i = 0; i < n; i++) {
		int64_t a[5] = { fd, DDPSPY_FD_FILE, bytes, bytes, (int64_t)i * bytes };
		add(b, DDPSPY_EV_PREAD, t + 10000 + i * gap, dur, 5, a);
	}
	return n + 1;
}

static void header(int r, int ranks, int pid, int worker, const char *name, int64_t t)
{
	unsigned char fh[16] = "DDPSPY\r\n";
	fh[8] = DDPSPY_FORMAT_MAJOR;
	fh[10] = DDPSPY_FORMAT_MINOR;
	fwrite(fh, 1, 16, out);
	msgpack_pack_map(&pk, 21);
	str("k"), str(DDPSPY_REC_HEADER);
	str("format"), msgpack_pack_array(&pk, 2), msgpack_pack_int(&pk, DDPSPY_FORMAT_MAJOR),
		msgpack_pack_int(&pk, DDPSPY_FORMAT_MINOR);
	str("tool"), str("gentrace");
	str("host"), str("gen");
	kv_int("pid", pid);
	kv_int("ppid", worker ? 1000 + r : 1);
	str("role"), str(worker ? "worker" : "rank");
	kv_int("rank", worker ? -1 : r);
	kv_int("local_rank", worker ? -1 : r);
	kv_int("world_size", worker ? -1 : ranks);
	str("rank_source"), str(worker ? "parent" : "ompi");
	kv_int("parent_rank", worker ? r : -1);
	kv_int("parent_pid", worker ? 1000 + r : -1);
	str("exe"), str("/bin/gentrace");
	str("cmdline"), msgpack_pack_array(&pk, 1), str("gentrace");
	str("clock"), str("monotonic");
	kv_int("raw", t);
	kv_int("mono_ns", t);
	kv_int("real_ns", t + 1700000000000000000LL);
	str("config"), msgpack_pack_map(&pk, 3), kv_int("ring_kb", 4096), kv_int("flush_ms", 100),
		kv_int("stack_us", 1000);
	str("pad"), msgpack_pack_nil(&pk); /* 21st key: readers skip unknown keys */
	frame_end();
	calib(t);
	msgpack_pack_map(&pk, 3);
	str("k"), str(DDPSPY_REC_THREAD);
	kv_int("tid", pid);
	str("name"), str(name);
	frame_end();
}

static void end(int64_t t, long n)
{
	calib(t);
	msgpack_pack_map(&pk, 4);
	str("k"), str(DDPSPY_REC_END);
	str("reason"), str("exit");
	kv_int("events", n);
	kv_int("dropped", 0);
	frame_end();
}

/* stall mode's worker file for rank r, steps steps from t */
static int worker_file(const char *dir, int r, int ranks, int64_t t, long steps)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/w%05d-gen-%d.ddpspy", dir, r, 5000 + r);
	out = fopen(path, "wb");
	if (!out) {
		perror(path);
		return -1;
	}
	static struct evbuf w;
	w.tid = 5000 + r;
	header(r, ranks, w.tid, 1, "pt_data_worker", t);
	static const char *mods[] = { "/usr/lib/python3/__pycache__/a.cpython-311.pyc",
				      "/usr/lib/python3/__pycache__/b.cpython-311.pyc",
				      "/usr/lib/python3/__pycache__/c.cpython-311.pyc",
				      "/usr/lib/python3/__pycache__/d.cpython-311.pyc" };
	long n = 0;
	for (long k = 0; k < steps; k++, t += 40000000) {
		n += file_reads(&w, t + 1000000, "/data/train/shard-000.bin", 7, 32, 4096, 500000, 500000);
		for (int m = 0; m < 4; m++)
			n += file_reads(&w, t + 20000000 + m * 100000, mods[m], 8, 1, 65536, 20000, 0);
	}
	flush(&w);
	end(t, n);
	fclose(out);
	return 0;
}

static uint64_t rng;

static double uniform(void) /* xorshift64*: the same sequence on every machine */
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return (double)((rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static double gauss(double mean, double sd)
{
	return mean + sd * sqrt(-2 * log(1 - uniform())) * cos(2 * M_PI * uniform());
}

/* steps of gloo mode, one rank; returns the number of events written. Times in ns. The main
 * thread's comms and host per step go to truth[2 * step], truth[2 * step + 1] (ms). */
static long gloo_steps(struct evbuf *main_thr, struct evbuf *helper, int64_t t, long per, uint64_t seed,
		       double *truth)
{
	long n = 0, k = 0;
	int seq = 0;
	rng = seed * 0x9E3779B97F4A7C15ULL + 1;
	for (; n + 3 <= per; n += 3, k++) {
		/* the pause before the first all-reduce (data, forward, early backward): 95 ms, sd 30,
		 * kept within 20..120 so that the step holds both calls */
		double x = fmin(120, fmax(20, gauss(95, 30))), y = fmin(15, fabs(gauss(0, 8)));
		int64_t a0 = t + (int64_t)(x * 1e6), b0 = a0 + 10000000 + (int64_t)(y * 1e6);
		int64_t end = t + 150000000, w0 = a0 + 5000000;
		int64_t ga[4] = { DDPSPY_OP_ALLREDUCE, seq++, -1, 0 }, gb[4] = { DDPSPY_OP_ALLREDUCE, seq++, -1, 0 };
		add(helper, DDPSPY_EV_GLOO_COLL, a0, 10000000, 4, ga);
		add(helper, DDPSPY_EV_GLOO_COLL, b0, end - b0, 4, gb);
		int64_t cw[4] = { 0x2000, 0x2040, 0, 0 };
		add(main_thr, DDPSPY_EV_COND_WAIT, w0, end - w0, 4, cw);
		/* waiting while an all-reduce runs is comms; between the two, host */
		truth[2 * k] = (double)(end - w0 - (b0 - (a0 + 10000000))) / 1e6;
		truth[2 * k + 1] = (double)(b0 - (a0 + 10000000)) / 1e6;
		t = end;
	}
	return n;
}

int main(int argc, char **argv)
{
	int gloo = argc == 6 && !strcmp(argv[4], "gloo");
	const char *mode = argc == 5 ? argv[4] : "";
	int irregular = !strcmp(mode, "irregular"), sync = !strcmp(mode, "sync"), stall = !strcmp(mode, "stall");
	int apart = !strcmp(mode, "apart"), warmup = !strcmp(mode, "warmup"), dense = !strcmp(mode, "dense"),
	    dense4 = !strcmp(mode, "dense4");
	sync |= warmup | dense | dense4;
	int reads = dense4 ? 2048 : dense ? 512 : 128; /* a step's sample preads */
	if (argc < 4 || argc > 6 || (argc == 5 && !sync && !irregular && !stall && !apart) || (argc == 6 && !gloo)) {
		fprintf(stderr, "usage: gentrace DIR RANKS EVENTS_PER_RANK [sync | dense | dense4 | warmup | irregular | apart | "
				"stall | gloo SEED]\n");
		return 2;
	}
	uint64_t seed = gloo ? strtoull(argv[5], NULL, 10) : 0;
	long steps = gloo ? atol(argv[3]) / 3 : 0;
	double *truth = gloo ? calloc((size_t)steps * 2 + 1, sizeof *truth) : NULL;
	if (gloo && !truth)
		return 1;
	int ranks = atoi(argv[2]);
	long per = atol(argv[3]);
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	static struct evbuf train, input;
	for (int r = 0; r < ranks; r++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/r%05d-gen-%d.ddpspy", argv[1], r, 1000 + r);
		out = fopen(path, "wb");
		if (!out) {
			perror(path);
			return 1;
		}
		int64_t t = 1000000000, t_start = t;
		header(r, ranks, 1000 + r, 0, gloo ? "python3" : "ddpbench", t);
		if (!stall) {
			msgpack_pack_map(&pk, 3);
			str("k"), str(DDPSPY_REC_THREAD);
			kv_int("tid", 1000 + r + 100000);
			str("name"), str(gloo ? "pt_gloo" : "ddpbench-in0");
			frame_end();
		}
		train.tid = 1000 + r;
		input.tid = 1000 + r + 100000;
		long n = 0;
		int seq = 0;
		if (gloo) {
			n = gloo_steps(&train, &input, t, per, seed, truth);
			t += 150000000LL * steps;
		}
		/* stall: a 40 ms step whose first 20 ms the training thread waits on its worker's pipe,
		 * then computes and all-reduces 1 MiB (2 ms) */
		while (stall && n < per) {
			int64_t a1[4] = { 9, DDPSPY_FD_PIPE, 4, 4 };
			add(&train, DDPSPY_EV_READ, t, 20000000, 4, a1);
			int64_t a2[6] = { DDPSPY_OP_ALLREDUCE, 0, seq++, 1048576, -1, 0 };
			add(&train, DDPSPY_EV_MPI_COLL, t + 37000000 + r * 1000, 2000000 - r * 1000, 6, a2);
			n += 2;
			t += 40000000;
		}
		for (int i = 0; warmup && i < 20000; i++, n++) {
			int64_t a[5] = { 5, DDPSPY_FD_FILE, 4096, 4096, (int64_t)i * 4096 };
			add(&train, DDPSPY_EV_PREAD, t + i * 2000, 1500, 5, a);
		}
		t += warmup ? 40000000 : 0;
		/* a 40 ms step: 128 preads on the input thread, then the training thread's pipe read,
		 * compute, three Iallreduces during backward, the Waitall; rank r is a little late */
		while (!gloo && !stall && n < per) {
			int64_t s0 = t;
			for (int i = 0; i < reads; i++) {
				int64_t a[5] = { 5, DDPSPY_FD_FILE, 4096, 4096, (int64_t)i * 4096 };
				add(sync ? &train : &input, DDPSPY_EV_PREAD, s0 + i * 2000, 1500, 5, a);
			}
			int64_t a1[4] = { 9, DDPSPY_FD_PIPE, 4, 4 };
			if (!sync)
				add(&train, DDPSPY_EV_READ, s0 + 1000, 20000, 4, a1);
			for (int b = 0; b < 3; b++) {
				int64_t bytes = irregular ? 4096 * (1 + (int64_t)((uint32_t)seq * 2654435761u >> 20)) : 1048576;
				int64_t a2[7] = { DDPSPY_OP_ALLREDUCE, apart ? r + 1 : 0, seq++, bytes, -1, 0x1000 + b, 0 };
				add(&train, DDPSPY_EV_MPI_ICOLL, s0 + 20000000 + b * 5000000 + r * 1000, 50000, 7, a2);
			}
			int64_t a3[4] = { DDPSPY_OP_WAITALL, 3, 0x1000, 0 };
			add(&train, DDPSPY_EV_MPI_WAIT, s0 + 36000000 + r * 1000, 2000000 - r * 1000, 4, a3);
			n += reads + (sync ? 4 : 5);
			t += 40000000;
		}
		flush(&train);
		flush(&input);
		end(t, n);
		fclose(out);
		if (stall && worker_file(argv[1], r, ranks, t_start, (t - t_start) / 40000000) < 0)
			return 1;
	}
	msgpack_sbuffer_destroy(&sb);
	if (gloo) {
		printf("{\"steps\": %ld, \"step_ms\": 150", steps);
		for (int c = 0; c < 2; c++) {
			printf(", \"%s\": [", c ? "host_ms" : "comms_ms");
			for (long k = 0; k < steps; k++)
				printf("%s%.6f", k ? ", " : "", truth[2 * k + c]);
			printf("]");
		}
		printf("}\n");
		free(truth);
	}
	return 0;
}
