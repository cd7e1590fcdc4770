/* ddpbench's step loop: fetch a batch, forward, backward with gradient buckets all-reduced as
 * they become ready (MPI_Iallreduce, progressed while backward continues), optimizer step, and
 * the injected pathologies. Every phase is timed with the testbed's own clock; rank 0 gathers
 * the per-step figures and prints the JSON summary as the last line of its stdout. */
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ddpbench.h"
#include "../../include/ddpspy.h"

/* --nvtx: the step's phases as NVTX ranges, as a script annotates them with torch.cuda.nvtx
 * (header-only NVTX: nothing is recorded unless a tool is injected) */
#ifdef DDPBENCH_NVTX
#include <nvtx3/nvToolsExt.h>
#define RANGE_PUSH(o, name) ((o)->nvtx ? (void)nvtxRangePushA(name) : (void)0)
#define RANGE_POP(o) ((o)->nvtx ? (void)nvtxRangePop() : (void)0)
#else
#define RANGE_PUSH(o, name) ((void)0)
#define RANGE_POP(o) ((void)0)
#endif

enum { F_STEP, F_DATA, F_COMPUTE, F_COMM, F_HOST, F_SAMPLES, F_TOKENS, F_PADDED, F_GPUWAIT, F_DATACPU, F_PIPEWAIT,
	NF };

struct inflight {
	MPI_Request req[MAX_LAYERS];
	int n;
	double ms;     /* time spent progressing them from inside backward */
};

static void progress(void *arg)
{
	struct inflight *f = arg;
	double t = now_ms();
	int done;
	MPI_Testall(f->n, f->req, &done, MPI_STATUSES_IGNORE);
	f->ms += now_ms() - t;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double quantile(double *v, int n, double q)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	double pos = q * (n - 1);
	int i = (int)pos;
	return i + 1 < n ? v[i] + (pos - i) * (v[i + 1] - v[i]) : v[i];
}

static const char *task_name(enum task t)
{
	return t == TASK_MLP ? "mlp" : t == TASK_UNIFORM ? "uniform" : "varlen";
}

static const char *batching_name(enum batching b)
{
	return b == BATCH_FIXED ? "fixed" : b == BATCH_BUCKET ? "bucket" : "token-budget";
}

/* all[r][s][f]: rank r, steady step s, field f */
static void summarize(const struct options *o, int ws, int batch, const double *all,
	const double *elapsed, size_t grad_bytes, int buckets, double loss0, double loss1, const long *client)
{
	int S = o->steps;
#define AT(r, s, f) all[((size_t)(r) * S + (s)) * NF + (f)]
	double span = 0, samples = 0, tokens = 0, padded = 0;
	for (int r = 0; r < ws; r++)
		span = elapsed[r] > span ? elapsed[r] : span;
	double *stepmax = calloc((size_t)S, sizeof(double));
	double imb = 0, pimb = 0, slowest = 0;
	for (int s = 0; s < S; s++) {
		double tmax = 0, tsum = 0, pmax = 0, psum = 0;
		for (int r = 0; r < ws; r++) {
			stepmax[s] = AT(r, s, F_STEP) > stepmax[s] ? AT(r, s, F_STEP) : stepmax[s];
			samples += AT(r, s, F_SAMPLES);
			tokens += AT(r, s, F_TOKENS);
			padded += AT(r, s, F_PADDED);
			tmax = fmax(tmax, AT(r, s, F_TOKENS));
			tsum += AT(r, s, F_TOKENS);
			pmax = fmax(pmax, AT(r, s, F_PADDED));
			psum += AT(r, s, F_PADDED);
		}
		if (tsum > 0) {
			imb += tmax / (tsum / ws) - 1;
			pimb += pmax / (psum / ws) - 1;
		}
	}
	double p50 = quantile(stepmax, S, 0.5), p95 = quantile(stepmax, S, 0.95), p0 = quantile(stepmax, S, 0);
	free(stepmax);
	double sps = samples / (span / 1e3), tps = tokens / (span / 1e3);
	for (int r = 0; r < ws; r++) {
		double m = 0;
		for (int s = 0; s < S; s++)
			m += AT(r, s, F_STEP) / S;
		slowest = fmax(slowest, m);
	}
	int mlp = o->task == TASK_MLP;
	printf("ddpbench: %d rank%s, %d steps after %d warm-up: %.0f samples/s", ws, ws > 1 ? "s" : "",
		S, o->warmup, sps);
	if (!mlp)
		printf(", %.0f tokens/s", tps);
	printf(", step p50 %.1f ms, slowest rank %.1f ms/step\n", p50, slowest);
	printf("{\"steps\": %d, \"warmup\": %d, \"world_size\": %d, \"task\": \"%s\", \"batching\": \"%s\", "
		"\"batch\": %d, \"step_ms_max\": %.3f, \"step_ms_min\": %.3f, \"step_ms_p50\": %.3f, \"step_ms_p95\": %.3f, "
		"\"samples_per_s\": %.1f, ", S, o->warmup, ws, task_name(o->task),
		mlp ? "fixed" : batching_name(o->batching), batch, slowest, p0, p50, p95, sps);
	if (mlp)
		printf("\"tokens_per_s\": null, \"token_imbalance\": null, \"padded_imbalance\": null, "
			"\"padding_ratio\": null, ");
	else
		printf("\"tokens_per_s\": %.1f, \"token_imbalance\": %.4f, \"padded_imbalance\": %.4f, "
			"\"padding_ratio\": %.4f, ", tps, imb / S, pimb / S, padded > 0 ? 1 - tokens / padded : 0);
	printf("\"grad_bytes\": %zu, \"buckets\": %d, \"overlap\": %s, \"workers\": %d, \"decode_us\": %g, ", grad_bytes,
		buckets, o->overlap ? "true" : "false", o->workers, o->decode_us);
	/* the parallelism: data parallel (DDP's all-reduces) or sharded (--fsdp; its prefetch) */
	printf("\"parallel\": \"%s\", \"fsdp_prefetch\": %s, ", o->fsdp ? "fsdp" : o->pipeline ? "pipeline" : "ddp",
		o->fsdp ? (o->fsdp_prefetch ? "true" : "false") : "null");
	/* --pipeline: its shape, and the share of a stage's step GPipe's and 1F1B's schedule leaves
	 * idle with S stages and M micro-batches of equal work, (S - 1) / (M + S - 1) */
	if (o->pipeline)
		printf("\"pipeline\": {\"stages\": %d, \"microbatches\": %d, \"schedule\": \"%s\", \"replicas\": %d, "
			"\"bubble_predicted\": %.4f, \"slow_stage\": %d, \"slow_stage_ms\": %g}, ", o->pipeline,
			o->microbatches, o->schedule == SCHEDULE_GPIPE ? "gpipe" : "1f1b", ws / o->pipeline,
			(double)(o->pipeline - 1) / (o->microbatches + o->pipeline - 1), o->slow_stage, o->slow_stage_ms);
	else
		printf("\"pipeline\": null, ");
	/* on the GPU the kernels are a cost model: nothing is learnt */
	if (o->gpu)
		printf("\"device\": \"gpu\", \"loss_first\": null, \"loss_last\": null, \"ranks\": [");
	else
		printf("\"device\": \"cpu\", \"loss_first\": %.5f, \"loss_last\": %.5f, \"ranks\": [", loss0, loss1);
	for (int r = 0; r < ws; r++) {
		double m[NF] = { 0 };
		for (int s = 0; s < S; s++)
			for (int f = 0; f < NF; f++)
				m[f] += AT(r, s, f) / S;
		printf("%s{\"rank\": %d, \"step_ms\": %.3f, \"data_ms\": %.3f, \"data_cpu_ms\": %.3f, "
			"\"compute_ms\": %.3f, \"comm_ms\": %.3f, \"host_ms\": %.3f, \"samples_per_step\": %.2f, ",
			r ? ", " : "", r, m[F_STEP], m[F_DATA], m[F_DATACPU], m[F_COMPUTE], m[F_COMM], m[F_HOST],
			m[F_SAMPLES]);
		/* --gpu: compute_ms is the device's kernel time; the host's waits for the device apart */
		if (o->gpu)
			printf("\"gpu_wait_ms\": %.3f, ", m[F_GPUWAIT]);
		/* --cupti-client: what the second client got (gpu.cu) */
		const long *c = client + (size_t)r * CLIENT_N;
		if (o->cupti_from >= 0)
			printf("\"cupti_client\": {\"kernels\": %ld, \"copies\": %ld, \"records\": %ld}, ", c[CLIENT_KERNELS],
				c[CLIENT_COPIES], c[CLIENT_RECORDS]);
		/* --pipeline: the rank's stage, and its time blocked in receives (comm_ms's part) */
		if (o->pipeline)
			printf("\"stage\": %d, \"recv_wait_ms\": %.3f, ", r / (ws / o->pipeline), m[F_PIPEWAIT]);
		if (mlp)
			printf("\"tokens_per_step\": null, \"padded_tokens_per_step\": null, ");
		else
			printf("\"tokens_per_step\": %.1f, \"padded_tokens_per_step\": %.1f, ", m[F_TOKENS],
				m[F_PADDED]);
		/* each step's work (data, compute, host: all but communication), for per-step comparisons */
		printf("\"work_ms_steps\": [");
		for (int st = 0; st < S; st++)
			printf("%s%.3f", st ? ", " : "", AT(r, st, F_DATA) + AT(r, st, F_COMPUTE) + AT(r, st, F_HOST));
		printf("]}");
	}
	printf("]}\n");
#undef AT
}

/* --gpu: the GPU half, next to the program (or where DDPBENCH_GPU_LIB says); NULL with why in err */
static const struct gpu_ops *gpu_load(char *err, size_t len)
{
	char path[PATH_MAX];
	const char *env = getenv("DDPBENCH_GPU_LIB");
	ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
	if (env && *env)
		snprintf(path, sizeof path, "%s", env);
	else if (n > 0) {
		path[n] = 0;
		char *slash = strrchr(path, '/');
		strcpy(slash ? slash + 1 : path, "libddpbench_gpu.so");
	} else
		strcpy(path, "libddpbench_gpu.so");
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	const struct gpu_ops *g = h ? dlsym(h, "ddpbench_gpu") : NULL;
	if (!g || g->version != GPU_OPS_VERSION) {
		snprintf(err, len, "--gpu needs %s (make sim builds it where CUDA and nvcc are): %s", path,
			h ? "not ddpbench's GPU library of this version" : dlerror());
		return NULL;
	}
	return g;
}

/* The ns of GPU work of each phase: forward 30%, backward 60% of gpu_ms over the layers by their
 * share of the parameters, the optimizer 10%; slowdown stretches them all. */
struct gpu_plan {
	double fwd[MAX_LAYERS], bwd[MAX_LAYERS], opt, ms;
};

static void gpu_plan(const struct options *o, struct model *m, double slowdown, struct gpu_plan *gp)
{
	int nl = model_layers(m);
	double ns = o->gpu_ms * 1e6 * slowdown, total = (double)model_params(m);
	for (int l = 0; l < nl; l++) {
		size_t first, count;
		model_layer_range(m, l, &first, &count);
		gp->fwd[l] = 0.3 * ns * (double)count / total;
		gp->bwd[l] = 0.6 * ns * (double)count / total;
	}
	gp->opt = 0.1 * ns;
	gp->ms = ns / 1e6;
}

/* --fsdp --gpu: the sharded step's work on the device. Each layer's parameters are gathered before
 * its forward and again before its backward, and its gradients reduce-scattered after its backward;
 * with prefetch the next layer's gather is issued before this layer's kernel (it runs beside it),
 * without where the layer needs it (the compute stream waits for all of it). The first layer of
 * each pass is gathered where it is needed either way. */
static void gpu_sharded(const struct gpu_ops *G, struct model *m, const struct gpu_plan *gp, double sc, int prefetch)
{
	int nl = model_layers(m), next = -1;
	size_t first, count[MAX_LAYERS];
	for (int l = 0; l < nl; l++)
		model_layer_range(m, l, &first, &count[l]);
	for (int pass = 0; pass < 2; pass++) /* forward, then backward (layers in reverse) */
		for (int i = 0; i < nl; i++) {
			int l = pass ? nl - 1 - i : i, after = pass ? l - 1 : l + 1;
			int slot = i && prefetch ? next : G->gather(count[l]);
			if (prefetch && after >= 0 && after < nl)
				next = G->gather(count[after]);
			G->gathered(slot);
			G->kernel(pass ? GPU_BACKWARD : GPU_FORWARD, (pass ? gp->bwd[l] : gp->fwd[l]) * sc);
			if (pass)
				G->scatter(count[l]);
		}
}

/* --pipeline --gpu: the ns of a micro-batch's forward and backward on the stage, and of its
 * optimizer (ns[0..2]): the plan's phases shared equally by the stages, as a pipeline's users cut
 * its layers by their cost (Megatron-LM's), so that a stage is slow only by --slow-stage-ms and its
 * ground truth is what balancing it wins. (Cut by this model's layers, as pipe.c cuts the CPU
 * stages, stage 0 of 2 ran its forwards 0.82 ms and its backwards 1.38 ms a micro-batch, stage 1
 * 0.68 and 1.62: a slow last stage cost 0.21 of the step, balancing it would have won 0.25.) */
static void gpu_stage_plan(const struct options *o, double slowdown, double ns[3])
{
	double step = o->gpu_ms * 1e6 * slowdown;
	ns[0] = 0.3 * step / o->pipeline / o->microbatches;
	ns[1] = 0.6 * step / o->pipeline / o->microbatches;
	ns[2] = 0.1 * step / o->pipeline;
}

#define GPU_REF_LEN 128.0 /* token tasks: gpu_ms is the work of a batch of this padded length */

/* A batch's forward and backward work against the plan's (1 for the MLP): for tokens, as the token
 * model's cost, attention over the padded length and an MLP per token, n Lp (Lp + 128), against a
 * batch of the same count at 128 tokens */
static double gpu_scale(const struct options *o, const struct batch *b, int batch)
{
	if (o->task == TASK_MLP)
		return 1;
	double lp = b->len_max;
	return (double)b->n * lp * (lp + GPU_REF_LEN) / ((double)batch * GPU_REF_LEN * 2 * GPU_REF_LEN);
}

int train(const struct options *o, const struct dataset *ds)
{
	int rank, ws, provided;
	MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &ws);
	int batch = o->global_batch > 0 ? o->global_batch / ws : o->batch;
	int64_t items = o->task == TASK_MLP ? ds->samples : o->task == TASK_VARLEN ? ds->sequences :
		ds->total_tokens / o->uniform_len;
	const char *bad = NULL;
	char why[256];
	if (o->global_batch > 0 && o->global_batch % ws != 0) {
		snprintf(why, sizeof why, "--global-batch %d is not a multiple of the %d ranks", o->global_batch, ws);
		bad = why;
	} else if (o->straggler_rank >= ws || o->slow_rank >= ws) {
		snprintf(why, sizeof why, "--%s %d but there are only %d ranks",
			o->straggler_rank >= ws ? "straggler-rank" : "slow-rank",
			o->straggler_rank >= ws ? o->straggler_rank : o->slow_rank, ws);
		bad = why;
	} else if (o->pipeline && (ws % o->pipeline || o->pipeline > o->layers + 1 || batch % o->microbatches)) {
		snprintf(why, sizeof why, "--pipeline %d needs ranks (%d), a multiple of it, and layers (%d) as many at "
			"least, and a batch (%d) that is a multiple of --microbatches %d", o->pipeline, ws, o->layers + 1,
			batch, o->microbatches);
		bad = why;
	} else if (batch < 1 || (int64_t)batch * ws * (o->batching == BATCH_BUCKET ? 16 : 1) > items) {
		snprintf(why, sizeof why, "the dataset has %lld items, too few for %d ranks x batch %d%s",
			(long long)items, ws, batch, o->batching == BATCH_BUCKET ? " x 16 (bucketing window)" : "");
		bad = why;
	}
	if (bad) {
		if (rank == 0)
			fprintf(stderr, "ddpbench: %s\n", bad);
		MPI_Finalize();
		return 2;
	}

	const struct gpu_ops *G = NULL;
	if (o->gpu) {
		int found = (G = gpu_load(why, sizeof why)) != NULL, all;
		MPI_Allreduce(&found, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
		if (!all) {
			if (rank == 0)
				fprintf(stderr, "ddpbench: %s\n", G ? "another rank has no GPU library" : why);
			MPI_Finalize();
			return 2;
		}
	}
	struct model *m = model_new(o, ds);
	/* a pipeline's first and last stages take the batch of their replica; the stages between none */
	int D = o->pipeline ? ws / o->pipeline : ws, stage = o->pipeline ? rank / D : 0;
	int feeds = !o->pipeline || stage == 0 || stage == o->pipeline - 1;
	struct loader *ld = m && feeds ? loader_start(o, ds, o->pipeline ? rank % D : rank, D, batch) : NULL;
	int ok = ld != NULL || (m && !feeds), all_ok;
	MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
	if (!all_ok) {
		if (!ok)
			fprintf(stderr, "ddpbench: rank %d cannot start its input pipeline on %s\n", rank, ds->dir);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	struct pipe *P = o->pipeline ? pipe_new(m, o, rank, ws, batch) : NULL;
	if (o->pipeline && !P)
		MPI_Abort(MPI_COMM_WORLD, 1);
	size_t input_bytes = o->input_mb > 0 ? (size_t)(o->input_mb * 1048576) :
		o->task == TASK_MLP ? (size_t)batch * ds->features * sizeof(float) :
		(size_t)(o->batching == BATCH_BUDGET ? o->token_budget :
			 batch * (o->task == TASK_UNIFORM ? o->uniform_len : ds->max_len)) * sizeof(uint16_t);
	if (G) {
		char id[256] = { 0 };
		int idlen = rank == 0 ? G->unique_id(id, sizeof id) : 0;
		MPI_Bcast(&idlen, 1, MPI_INT, 0, MPI_COMM_WORLD);
		if (idlen < 0) {
			if (rank == 0)
				fprintf(stderr, "ddpbench: ncclGetUniqueId failed\n");
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		MPI_Bcast(id, idlen, MPI_BYTE, 0, MPI_COMM_WORLD);
		const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
		struct gpu_conf gc = { .rank = rank, .ws = ws, .local_rank = lr ? atoi(lr) : rank,
			.grad_floats = model_params(m), .extra_floats = (size_t)(o->extra_allreduce_mb * 1048576) / sizeof(float),
			.input_bytes = input_bytes, .d2d_bytes = (size_t)(o->d2d_mb * 1048576), .pageable = o->pageable, .kernels = o->gpu_kernels, .overlap = o->overlap,
			.sync_by = o->sync_by, .side_gpu_ms = o->side_gpu_ms, .dp_color = P && D > 1 ? stage : -1,
			.cupti_from = o->cupti_from, .cupti_to = o->cupti_to, .cupti_sync = !o->cupti_no_sync };
		if (P) {
			int l0, l1;
			pipe_layers(P, &l0, &l1, &gc.pipe_floats);
		}
		for (int l = 0; o->fsdp && l < model_layers(m); l++) { /* (--fsdp: room for the largest layer) */
			size_t first, count;
			model_layer_range(m, l, &first, &count);
			gc.layer_floats = count > gc.layer_floats ? count : gc.layer_floats;
		}
		ok = G->init(&gc, id, why, sizeof why) == 0;
		MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
		if (!all_ok) {
			if (!ok)
				fprintf(stderr, "ddpbench: rank %d: %s\n", rank, why);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}

	/* buckets in backward order: a bucket closes once it holds bucket_mb, at a layer boundary */
	int nl = model_layers(m), bucket_at[MAX_LAYERS], nb = 0;
	size_t bfirst[MAX_LAYERS], bcount[MAX_LAYERS], acc = 0, limit = (size_t)(o->bucket_mb * 1048576);
	for (int l = nl - 1; l >= 0; l--) {
		size_t first, count;
		model_layer_range(m, l, &first, &count);
		if (acc == 0)
			bfirst[nb] = first;
		acc += count;
		bucket_at[l] = -1;
		if (acc * sizeof(float) >= limit || l == 0) {
			bcount[nb] = acc;
			bucket_at[l] = nb++;
			acc = 0;
		}
	}
	float *grad = model_grad(m), *acc_grad = NULL;
	if (o->accum > 1 && !(acc_grad = malloc(model_params(m) * sizeof(float))))
		MPI_Abort(MPI_COMM_WORLD, 1);
	float *extra = NULL;
	size_t extra_n = (size_t)(o->extra_allreduce_mb * 1048576) / sizeof(float);
	if (extra_n && !G && !(extra = calloc(extra_n, sizeof(float))))
		MPI_Abort(MPI_COMM_WORLD, 1);

	int total = o->warmup + o->steps;
	double *rec = calloc((size_t)o->steps * NF, sizeof(double)), start = 0, loss0 = 0, loss1 = 0;
	double slowdown = rank == o->straggler_rank ? o->straggler_slowdown : 1;
	struct gpu_plan gp = { { 0 }, { 0 }, 0, 0 };
	double stage_ns[3] = { 0 };
	if (G)
		gpu_plan(o, m, slowdown, &gp);
	if (G && P)
		gpu_stage_plan(o, slowdown, stage_ns);
	struct fsdp *F = o->fsdp && !G ? fsdp_new(m, rank, ws, o->fsdp_prefetch) : NULL;
	if (o->fsdp && !F && !G)
		MPI_Abort(MPI_COMM_WORLD, 1);
	struct inflight fl;
	for (int step = 0; step < total; step++) {
		if (o->markers)
			ddpspy_step_begin();
		RANGE_PUSH(o, "step");
		double t0 = now_ms(), t, v[NF] = { 0 };
		if (step == o->warmup)
			start = t0;
		RANGE_PUSH(o, "prepare");
		if (rank == o->straggler_rank && o->straggler_ms > 0 && step >= o->straggler_from)
			sleep_ms(o->straggler_ms); /* host delay before fetching the batch, as in seed 001 */
		RANGE_POP(o);
		t = now_ms();
		v[F_HOST] += t - t0;
		double samples = 0, tokens = 0, padded = 0;
		for (int mb = 0; mb < o->accum; mb++) {
			/* micro-batches before the last only accumulate their gradients */
			int last = mb == o->accum - 1;
			/* (the range holds all of data_ms: cpu_ms is a system call, where a loaded host may
			 * take the CPU away for milliseconds) */
			RANGE_PUSH(o, "data");
			if (mb)
				t = now_ms();
			double c = cpu_ms();
			struct batch *b = ld ? loader_next(ld) : NULL;
			if (!b && ld) {
				fprintf(stderr, "ddpbench: rank %d: reading the batch of step %d from %s failed\n",
					rank, step, ds->dir);
				MPI_Abort(MPI_COMM_WORLD, 1);
			}
			v[F_DATA] += now_ms() - t;
			RANGE_POP(o);
			v[F_DATACPU] += cpu_ms() - c;
			fl.n = 0;
			fl.ms = 0;
			if (P && G) { /* (on the device: the first stage's batch copied there first) */
				if (b && stage == 0)
					G->upload(b->x, (size_t)b->n * ds->features * sizeof(float));
				pipe_gpu_step(P, G, stage_ns, &v[F_COMPUTE]);
				samples += stage == 0 ? batch : 0;
				continue;
			}
			if (P) { /* (the micro-batches through the stage, and its optimizer) */
				pipe_step(P, b, slowdown, &v[F_COMPUTE], &v[F_COMM], &v[F_PIPEWAIT]);
				samples += stage == 0 ? batch : 0;
				continue;
			}
			samples += b->n;
			tokens += (double)b->real_tokens;
			padded += (double)b->n * b->len_max;

			if (G) {
				/* the host's own work on the batch (collation, Python), then the device's work,
				 * whose time is the plan's: the host only enqueues it */
				if (o->host_ms > 0) {
					t = now_ms();
					sleep_ms(o->host_ms);
					v[F_HOST] += now_ms() - t;
				}
				double sc = gpu_scale(o, b, batch);
				if (o->task == TASK_MLP)
					G->upload(b->x, (size_t)b->n * ds->features * sizeof(float));
				else
					G->upload(b->tok, (size_t)b->n * b->len_max * sizeof(uint16_t));
				if (o->fsdp)
					gpu_sharded(G, m, &gp, sc, o->fsdp_prefetch);
				else {
					for (int l = 0; l < nl; l++)
						G->kernel(GPU_FORWARD, gp.fwd[l] * sc);
					for (int l = nl - 1; l >= 0; l--) {
						G->kernel(GPU_BACKWARD, gp.bwd[l] * sc);
						if (last && bucket_at[l] >= 0)
							G->bucket(bfirst[bucket_at[l]], bcount[bucket_at[l]]);
					}
				}
				v[F_COMPUTE] += (gp.ms - gp.opt / 1e6) * sc / o->accum;
				continue;
			}
			if (F) { /* (forward, backward and the optimizer, each layer's collectives in them) */
				fsdp_step(F, b, slowdown, &v[F_COMPUTE], &v[F_COMM]);
				continue;
			}
			t = now_ms();
			RANGE_PUSH(o, "forward");
			model_forward(m, b, slowdown);
			RANGE_POP(o);
			RANGE_PUSH(o, "backward");
			for (int l = nl - 1; l >= 0; l--) {
				model_backward_layer(m, l, slowdown, last && o->overlap ? progress : NULL, &fl);
				if (o->accum > 1) {
					size_t first, count;
					model_layer_range(m, l, &first, &count);
					float *g = grad + first, *a = acc_grad + first;
					for (size_t i = 0; i < count; i++)
						if (mb == 0)
							a[i] = g[i];
						else if (!last)
							a[i] += g[i];
						else
							g[i] += a[i];
				}
				int k = bucket_at[l];
				if (last && k >= 0 && o->overlap) {
					double tc = now_ms();
					MPI_Iallreduce(MPI_IN_PLACE, grad + bfirst[k], (int)bcount[k], MPI_FLOAT, MPI_SUM,
						MPI_COMM_WORLD, &fl.req[fl.n++]);
					fl.ms += now_ms() - tc;
				}
			}
			RANGE_POP(o);
			v[F_COMPUTE] += now_ms() - t - fl.ms;
		}
		v[F_COMM] += fl.ms;
		t = now_ms();
		if (G) {
			if (!P) { /* (--pipeline: pipe_gpu_step enqueued the stage's all-reduce and optimizer) */
				G->grads_done();
				G->kernel(GPU_OPTIMIZER, gp.opt);
				v[F_COMPUTE] += gp.opt / 1e6;
				if (extra_n)
					G->extra();
			}
		} else if (o->overlap) {
			if (fl.n) /* (--fsdp's and --pipeline's: none in flight here) */
				MPI_Waitall(fl.n, fl.req, MPI_STATUSES_IGNORE);
		} else
			for (int k = 0; k < nb; k++)
				MPI_Allreduce(MPI_IN_PLACE, grad + bfirst[k], (int)bcount[k], MPI_FLOAT, MPI_SUM,
					MPI_COMM_WORLD);
		v[F_COMM] += now_ms() - t;
		t = now_ms();
		if (!G && !F && !P) {
			RANGE_PUSH(o, "optimizer");
			model_step(m, 1.0f / (float)(ws * o->accum));
			RANGE_POP(o);
			v[F_COMPUTE] += now_ms() - t;
		}

		if (extra) {
			t = now_ms();
			MPI_Allreduce(MPI_IN_PLACE, extra, (int)extra_n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
			v[F_COMM] += now_ms() - t;
		}
		if (o->rank0_work_ms > 0) {
			t = now_ms();
			RANGE_PUSH(o, "log");
			if (rank == 0)
				sleep_ms(o->rank0_work_ms); /* stands in for logging, checkpoint bookkeeping */
			RANGE_POP(o);
			double tb = now_ms();
			v[F_HOST] += tb - t;
			if (G)
				G->barrier();
			else
				MPI_Barrier(MPI_COMM_WORLD);
			v[F_COMM] += now_ms() - tb;
		}
		if (G) {
			/* the host's own waits for the device: the loss read back, the bound on running ahead */
			t = now_ms();
			if (o->host_sync) {
				RANGE_PUSH(o, "loss");
				G->read_loss();
				RANGE_POP(o);
			}
			if (G->end_step(why, sizeof why) != 0) {
				fprintf(stderr, "ddpbench: rank %d, step %d: %s\n", rank, step, why);
				MPI_Abort(MPI_COMM_WORLD, 1);
			}
			v[F_GPUWAIT] += now_ms() - t;
		}
		v[F_STEP] = now_ms() - t0;
		RANGE_POP(o);
		if (o->markers)
			ddpspy_step_end();
		v[F_SAMPLES] = samples;
		v[F_TOKENS] = tokens;
		v[F_PADDED] = padded;
		if (step == o->warmup)
			loss0 = P ? pipe_loss(P) : model_loss(m);
		loss1 = P ? pipe_loss(P) : model_loss(m);
		if (step >= o->warmup)
			memcpy(rec + (size_t)(step - o->warmup) * NF, v, sizeof v);
	}
	long client[CLIENT_N] = { 0 };
	if (G)
		G->finish();
	if (G && G->client(client) < 0)
		memset(client, 0, sizeof client);
	fsdp_free(F);
	double elapsed = now_ms() - start;
	if (ld)
		loader_stop(ld);
	if (P) { /* (the losses are the last stage's: its first replica's go to rank 0, which prints them) */
		double l[2] = { loss0, loss1 };
		int last = (o->pipeline - 1) * D;
		if (rank == last) /* (a tag of its own: the stages' are 2 j and 2 j + 1) */
			MPI_Send(l, 2, MPI_DOUBLE, 0, 1 << 20, MPI_COMM_WORLD);
		if (rank == 0)
			MPI_Recv(l, 2, MPI_DOUBLE, last, 1 << 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		loss0 = l[0];
		loss1 = l[1];
		pipe_free(P);
	}

	double *all = rank == 0 ? calloc((size_t)ws * o->steps * NF, sizeof(double)) : NULL;
	double *el = rank == 0 ? calloc((size_t)ws, sizeof(double)) : NULL;
	long *clients = rank == 0 ? calloc((size_t)ws * CLIENT_N, sizeof(long)) : NULL;
	MPI_Gather(rec, o->steps * NF, MPI_DOUBLE, all, o->steps * NF, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	MPI_Gather(&elapsed, 1, MPI_DOUBLE, el, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	MPI_Gather(client, CLIENT_N, MPI_LONG, clients, CLIENT_N, MPI_LONG, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		summarize(o, ws, batch, all, el, model_params(m) * sizeof(float), nb, loss0, loss1, clients);
		fflush(stdout);
	}
	free(all);
	free(el);
	free(clients);
	free(rec);
	free(extra);
	free(acc_grad);
	MPI_Finalize();
	return 0;
}
