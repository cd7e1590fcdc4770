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
 * With "irregular", the all-reduces' sizes vary from call to call (the same on every rank), so
 * that no pattern repeats: the report falls back to time windows.
 *
 * usage: gentrace DIR RANKS EVENTS_PER_RANK [sync | irregular | gloo SEED] */
#include <math.h>
#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
};

static void flush(struct evbuf *b)
{
	if (!b->n)
		return;
	msgpack_pack_map(&pk, 4);
	str("k");
	str(DDPSPY_REC_EVENTS);
	kv_int("tid", b->tid);
	kv_int("t0", b->t0);
	str("ev");
	msgpack_pack_array(&pk, (size_t)b->n);
	for (int i = 0; i < b->n; i++) {
		msgpack_pack_array(&pk, (size_t)(4 + b->nargs[i]));
		for (int k = 0; k < 4 + b->nargs[i]; k++)
			msgpack_pack_int64(&pk, b->ev[i][k]);
	}
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
	b->nargs[b->n++] = nargs;
	b->prev = t;
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
	int irregular = argc == 5 && !strcmp(argv[4], "irregular");
	if (argc < 4 || argc > 6 || (argc == 5 && strcmp(argv[4], "sync") && !irregular) || (argc == 6 && !gloo)) {
		fprintf(stderr, "usage: gentrace DIR RANKS EVENTS_PER_RANK [sync | irregular | gloo SEED]\n");
		return 2;
	}
	int sync = argc == 5 && !irregular;
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
		unsigned char fh[16] = "DDPSPY\r\n";
		fh[8] = DDPSPY_FORMAT_MAJOR;
		fh[10] = DDPSPY_FORMAT_MINOR;
		fwrite(fh, 1, 16, out);
		int64_t t = 1000000000;
		msgpack_pack_map(&pk, 21);
		str("k"), str(DDPSPY_REC_HEADER);
		str("format"), msgpack_pack_array(&pk, 2), msgpack_pack_int(&pk, 1), msgpack_pack_int(&pk, 1);
		str("tool"), str("gentrace");
		str("host"), str("gen");
		kv_int("pid", 1000 + r);
		kv_int("ppid", 1);
		str("role"), str("rank");
		kv_int("rank", r);
		kv_int("local_rank", r);
		kv_int("world_size", ranks);
		str("rank_source"), str("ompi");
		kv_int("parent_rank", -1);
		kv_int("parent_pid", -1);
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
		for (int th = 0; th < 2; th++) {
			msgpack_pack_map(&pk, 3);
			str("k"), str(DDPSPY_REC_THREAD);
			kv_int("tid", 1000 + r + th * 100000);
			str("name"), str(gloo ? (th ? "pt_gloo" : "python3") : th ? "ddpbench-in0" : "ddpbench");
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
		/* a 40 ms step: 128 preads on the input thread, then the training thread's pipe read,
		 * compute, three Iallreduces during backward, the Waitall; rank r is a little late */
		while (!gloo && n < per) {
			int64_t s0 = t;
			for (int i = 0; i < 128; i++) {
				int64_t a[5] = { 5, DDPSPY_FD_FILE, 4096, 4096, (int64_t)i * 4096 };
				add(sync ? &train : &input, DDPSPY_EV_PREAD, s0 + i * 2000, 1500, 5, a);
			}
			int64_t a1[4] = { 9, DDPSPY_FD_PIPE, 4, 4 };
			if (!sync)
				add(&train, DDPSPY_EV_READ, s0 + 1000, 20000, 4, a1);
			for (int b = 0; b < 3; b++) {
				int64_t bytes = irregular ? 4096 * (1 + (int64_t)((uint32_t)seq * 2654435761u >> 20)) : 1048576;
				int64_t a2[7] = { DDPSPY_OP_ALLREDUCE, 0, seq++, bytes, -1, 0x1000 + b, 0 };
				add(&train, DDPSPY_EV_MPI_ICOLL, s0 + 20000000 + b * 5000000 + r * 1000, 50000, 7, a2);
			}
			int64_t a3[4] = { DDPSPY_OP_WAITALL, 3, 0x1000, 0 };
			add(&train, DDPSPY_EV_MPI_WAIT, s0 + 36000000 + r * 1000, 2000000 - r * 1000, 4, a3);
			n += sync ? 132 : 133;
			t += 40000000;
		}
		flush(&train);
		flush(&input);
		calib(t);
		msgpack_pack_map(&pk, 4);
		str("k"), str(DDPSPY_REC_END);
		str("reason"), str("exit");
		kv_int("events", n);
		kv_int("dropped", 0);
		frame_end();
		fclose(out);
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
