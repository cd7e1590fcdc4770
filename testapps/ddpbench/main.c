/* ddpbench's command line: `gen-data DIR` and `train --data DIR [options]`. Bad arguments get
 * the usage and exit status 2, before MPI starts. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ddpbench.h"

#define USAGE_HEAD \
	"usage: ddpbench gen-data DIR [--help for its options]\n" \
	"       mpirun -np N ddpbench train --data DIR [options]\n"
static const char usage[] = USAGE_HEAD
	"A data-parallel trainer on MPI that reproduces DDP pathologies on demand and measures its\n"
	"own phases; the last line of rank 0's stdout is a JSON summary.\n"
	"\n"
	"training:\n"
	"  --steps N               steady-state steps measured (default 20), after\n"
	"  --warmup W              warm-up steps not measured (default 2)\n"
	"  --batch B               samples per rank per step: weak scaling (default 128; 16 for tokens)\n"
	"  --global-batch G        samples per step over all ranks: strong scaling, B = G / ranks\n"
	"  --accum K               K micro-batches of B per step, gradients all-reduced once (default 1)\n"
	"  --hidden H, --layers L  MLP width and hidden layers (default 512, 3); tokens: layers (1)\n"
	"  --bucket-mb M           gradient bucket size in MiB (default 1)\n"
	"  --no-overlap            all-reduce the gradients after backward, not during it\n"
	"  --workers K             input threads (default 2; 0 loads in the training thread)\n"
	"  --prefetch P            batches each input thread reads ahead (default 2)\n"
	"  --seed S                sampler and initialization seed (default 1)\n"
	"  --markers               mark each step with ddpspy_step_begin/end (include/ddpspy.h)\n"
	"  --nvtx                  NVTX ranges as torch.cuda.nvtx would make them: step, and in it\n"
	"                          prepare (the straggler's delay), data, forward, backward, optimizer,\n"
	"                          log (rank 0's work), loss (--host-sync's read)\n"
	"sharded data parallel (MLP task; with --gpu, its gathers and reduce-scatters NCCL's):\n"
	"  --fsdp                  parameters and gradients sharded over the ranks (FSDP, ZeRO-3): each\n"
	"                          layer all-gathered before its forward and again before its backward,\n"
	"                          its gradients reduce-scattered after; the next layer's all-gather\n"
	"                          started before this layer's compute and waited for after it\n"
	"  --no-prefetch           --fsdp: each all-gather issued and waited for where its layer needs it\n"
	"pipeline parallel (MLP task; with --gpu, micro-batches passed by NCCL's send and receive):\n"
	"  --pipeline S            the layers in S stages (balanced by parameters), rank r stage r / (N / S):\n"
	"                          activations forward and gradients backward by point-to-point calls\n"
	"                          per micro-batch; the stage's replicas all-reduce its gradients (N > S)\n"
	"  --microbatches M        micro-batches per step (default 4; B must be a multiple)\n"
	"  --schedule KIND         gpipe (every forward, then every backward; the default) or 1f1b\n"
	"  --slow-stage K          stage K slower by\n"
	"  --slow-stage-ms X         X ms of extra work per micro-batch (half forward, half backward)\n"
	"token mode (seed 000):\n"
	"  --varlen                variable-length sequences through a transformer-shaped kernel\n"
	"  --uniform-len L         every sequence L tokens instead (the uniform baseline, e.g. 128)\n"
	"  --batching KIND         fixed (default), bucket (by length) or token-budget\n"
	"  --token-budget T        padded tokens per rank per step for token-budget (default B x 128)\n"
	"pathologies (combinable):\n"
	"  --straggler-rank R      the straggler (default 0), slowed by\n"
	"  --straggler-ms M          a host delay of M ms before each batch fetch, and/or\n"
	"  --straggler-slowdown F    compute F times slower (a throttled device)\n"
	"  --straggler-from S        ... from step S on (warm-up steps count; default 0: from the start)\n"
	"  --extra-allreduce-mb M  an extra all-reduce of M MiB every step\n"
	"  --rank0-work-ms M       rank-0-only host work of M ms, then a barrier, every step\n"
	"  --slow-data LIST        comma list: small-reads (read in --read-chunk pieces), stat (one\n"
	"                          file per sample: stat, open, read, close), sync (no read-ahead:\n"
	"                          load in the training thread), delay (storage latency per batch)\n"
	"  --slow-rank R           apply --slow-data on rank R only (default: every rank)\n"
	"  --read-chunk B          bytes per read for small-reads (default 64)\n"
	"  --read-delay-ms M       storage latency per batch for delay (default 20)\n"
	"  --decode-us U           CPU-heavy decode: each sample costs its input thread U us more of\n"
	"                          CPU time (an image decode and augmentation), competing with the\n"
	"                          training threads for the host's CPUs (MLP task)\n"
	"GPU (needs build/libddpbench_gpu.so, built by make sim where CUDA and nvcc are):\n"
	"  --gpu                   the step's work as CUDA kernels, batches copied to the device,\n"
	"                          buckets all-reduced with NCCL on a second stream (one GPU per rank)\n"
	"  --gpu-ms M              forward + backward + optimizer kernel time per step (default 20)\n"
	"  --input-mb M            the batch as the GPU takes it, copied every step (default: its bytes)\n"
	"  --pageable              copy batches from pageable host memory instead of pinned\n"
	"  --d2d-mb M              also copy M MiB device to device each step (as torch.cat, clone)\n"
	"  --sync-by HOW           how --host-sync waits: copy (a copy and a stream synchronize, the\n"
	"                          default), poll (an event, polled), free (a cudaFree), 2d (cudaMemcpy2DAsync\n"
	"                          into pageable memory)\n"
	"  --side-gpu-ms M         also run an M ms kernel on the next device as each step ends (its\n"
	"                          own context: an evaluation or a second model beside the training)\n"
	"  --cupti-client FROM:TO  a second CUPTI client in torch.profiler's shape profiles steps FROM\n"
	"                          to TO (counting warm-up steps from 0), as its schedule's active steps;\n"
	"                          the summary says what it got (cupti_client)\n"
	"  --cupti-client-no-sync  it stops without synchronizing the device first, as an on-demand\n"
	"                          trace (dynolog) does; torch.profiler synchronizes\n"
	"  --host-sync             read the loss back every step with a blocking copy (.item())\n"
	"  --gpu-kernels K         split each layer's work into K kernels (launch-bound when large)\n"
	"  --host-ms M             host work per step before enqueueing it (collation, Python): it\n"
	"                          overlaps the device's work unless the host waits for the device\n"
	"  (--straggler-slowdown stretches the straggler's kernels; --no-overlap all-reduces after\n"
	"  backward on the compute stream; the other pathologies apply as on the CPU)\n";

static int is_rank0(void)
{
	const char *r = getenv("OMPI_COMM_WORLD_RANK");
	if (!r)
		r = getenv("PMI_RANK");
	return !r || strcmp(r, "0") == 0;
}

static int bad_arg(const char *what, const char *val)
{
	if (is_rank0()) {
		if (what)
			fprintf(stderr, "ddpbench: bad value for %s: '%s'\n", what, val ? val : "");
		fputs(USAGE_HEAD "run 'ddpbench --help' for the options\n", stderr);
	}
	return 2;
}

static int num(const char *s, double lo, double hi, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int integer(const char *s, int lo, int hi, int *out)
{
	double v;
	if (num(s, lo, hi, &v) != 0 || v != floor(v))
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_slow(const char *s, unsigned *out)
{
	static const struct { const char *name; unsigned bit; } kinds[] = {
		{ "small-reads", SLOW_SMALL_READS }, { "stat", SLOW_STAT }, { "sync", SLOW_SYNC },
		{ "delay", SLOW_DELAY },
	};
	*out = 0;
	const char *p = s;
	while (*p) {
		size_t n = strcspn(p, ",");
		unsigned bit = 0;
		for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
			if (strlen(kinds[k].name) == n && strncmp(p, kinds[k].name, n) == 0)
				bit = kinds[k].bit;
		if (!bit)
			return -1;
		*out |= bit;
		p += n + (p[n] == ',');
	}
	return *out ? 0 : -1;
}

static int parse_train(int argc, char **argv, struct options *o)
{
	enum { O_DATA = 256, O_STEPS, O_WARMUP, O_BATCH, O_GBATCH, O_HIDDEN, O_LAYERS, O_BUCKET,
		O_NOOVERLAP, O_WORKERS, O_PREFETCH, O_SEED, O_VARLEN, O_ULEN, O_BATCHING, O_BUDGET,
		O_SRANK, O_SMS, O_SFROM, O_SLOW, O_EXTRA, O_R0, O_SLOWDATA, O_SLOWRANK, O_CHUNK, O_DELAY, O_DECODE, O_MARKERS, O_NVTX, O_ACCUM,
		O_GPU, O_GPUMS, O_INPUT, O_PAGEABLE, O_HOSTSYNC, O_KERNELS, O_HOSTMS, O_D2D, O_SYNCBY, O_SIDE,
		O_CLIENT, O_CLIENTNOSYNC, O_FSDP, O_NOPREFETCH, O_PIPE, O_MICRO, O_SCHED, O_SLOWSTAGE, O_SLOWSTAGEMS };
	static const struct option opts[] = {
		{ "data", 1, 0, O_DATA }, { "steps", 1, 0, O_STEPS }, { "warmup", 1, 0, O_WARMUP },
		{ "batch", 1, 0, O_BATCH }, { "global-batch", 1, 0, O_GBATCH },
		{ "hidden", 1, 0, O_HIDDEN }, { "layers", 1, 0, O_LAYERS }, { "bucket-mb", 1, 0, O_BUCKET },
		{ "no-overlap", 0, 0, O_NOOVERLAP }, { "workers", 1, 0, O_WORKERS },
		{ "prefetch", 1, 0, O_PREFETCH }, { "seed", 1, 0, O_SEED }, { "varlen", 0, 0, O_VARLEN },
		{ "uniform-len", 1, 0, O_ULEN }, { "batching", 1, 0, O_BATCHING },
		{ "token-budget", 1, 0, O_BUDGET }, { "straggler-rank", 1, 0, O_SRANK },
		{ "straggler-ms", 1, 0, O_SMS }, { "straggler-slowdown", 1, 0, O_SLOW },
		{ "straggler-from", 1, 0, O_SFROM },
		{ "extra-allreduce-mb", 1, 0, O_EXTRA }, { "rank0-work-ms", 1, 0, O_R0 },
		{ "slow-data", 1, 0, O_SLOWDATA }, { "slow-rank", 1, 0, O_SLOWRANK },
		{ "read-chunk", 1, 0, O_CHUNK }, { "read-delay-ms", 1, 0, O_DELAY },
		{ "decode-us", 1, 0, O_DECODE },
		{ "markers", 0, 0, O_MARKERS }, { "nvtx", 0, 0, O_NVTX }, { "accum", 1, 0, O_ACCUM }, { "gpu", 0, 0, O_GPU },
		{ "gpu-ms", 1, 0, O_GPUMS }, { "input-mb", 1, 0, O_INPUT }, { "pageable", 0, 0, O_PAGEABLE },
		{ "host-sync", 0, 0, O_HOSTSYNC }, { "gpu-kernels", 1, 0, O_KERNELS }, { "host-ms", 1, 0, O_HOSTMS },
		{ "d2d-mb", 1, 0, O_D2D }, { "sync-by", 1, 0, O_SYNCBY }, { "side-gpu-ms", 1, 0, O_SIDE },
		{ "cupti-client", 1, 0, O_CLIENT }, { "cupti-client-no-sync", 0, 0, O_CLIENTNOSYNC },
		{ "fsdp", 0, 0, O_FSDP }, { "no-prefetch", 0, 0, O_NOPREFETCH },
		{ "pipeline", 1, 0, O_PIPE }, { "microbatches", 1, 0, O_MICRO }, { "schedule", 1, 0, O_SCHED },
		{ "slow-stage", 1, 0, O_SLOWSTAGE }, { "slow-stage-ms", 1, 0, O_SLOWSTAGEMS },
		{ "help", 0, 0, 'h' }, { 0, 0, 0, 0 }
	};
	*o = (struct options){ .steps = 20, .warmup = 2, .batch = -1, .workers = 2, .prefetch = 2,
		.bucket_mb = 1, .overlap = 1, .hidden = 512, .layers = -1, .straggler_rank = -1,
		.straggler_slowdown = 1, .slow_rank = -1, .read_chunk = 64, .read_delay_ms = 20,
		.seed = 1, .accum = 1, .gpu_ms = 20, .gpu_kernels = 1, .fsdp_prefetch = 1, .microbatches = -1,
		.slow_stage = -1, .cupti_from = -1, .cupti_to = -1 };
	int gpu_opts = 0, sched_set = 0;
	int c, batching_set = 0;
	double v;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		int bad = 0;
		switch (c) {
		case O_DATA: o->data = optarg; break;
		case O_STEPS: bad = integer(optarg, 1, 1000000, &o->steps); break;
		case O_WARMUP: bad = integer(optarg, 0, 1000000, &o->warmup); break;
		case O_BATCH: bad = integer(optarg, 1, 1 << 20, &o->batch); break;
		case O_GBATCH: bad = integer(optarg, 1, 1 << 24, &o->global_batch); break;
		case O_HIDDEN: bad = integer(optarg, 1, 1 << 14, &o->hidden); break;
		case O_LAYERS: bad = integer(optarg, 1, MAX_LAYERS - 1, &o->layers); break;
		case O_BUCKET: bad = num(optarg, 0.001, 1 << 20, &o->bucket_mb); break;
		case O_NOOVERLAP: o->overlap = 0; break;
		case O_WORKERS: bad = integer(optarg, 0, 64, &o->workers); break;
		case O_PREFETCH: bad = integer(optarg, 1, 64, &o->prefetch); break;
		case O_SEED: bad = num(optarg, 0, 1e18, &v); o->seed = (uint64_t)v; break;
		case O_VARLEN: o->task = TASK_VARLEN; break;
		case O_ULEN: bad = integer(optarg, 1, 1 << 16, &o->uniform_len); o->task = TASK_UNIFORM; break;
		case O_BATCHING:
			batching_set = 1;
			if (strcmp(optarg, "fixed") == 0)
				o->batching = BATCH_FIXED;
			else if (strcmp(optarg, "bucket") == 0)
				o->batching = BATCH_BUCKET;
			else if (strcmp(optarg, "token-budget") == 0)
				o->batching = BATCH_BUDGET;
			else
				bad = 1;
			break;
		case O_BUDGET: bad = integer(optarg, 1, 1 << 24, &o->token_budget); break;
		case O_SRANK: bad = integer(optarg, 0, 1 << 20, &o->straggler_rank); break;
		case O_SMS: bad = num(optarg, 0, 1e6, &o->straggler_ms); break;
		case O_SFROM: bad = integer(optarg, 0, 1 << 30, &o->straggler_from); break;
		case O_SLOW: bad = num(optarg, 1, 1000, &o->straggler_slowdown); break;
		case O_EXTRA: bad = num(optarg, 0, 4096, &o->extra_allreduce_mb); break;
		case O_R0: bad = num(optarg, 0, 1e6, &o->rank0_work_ms); break;
		case O_SLOWDATA: bad = parse_slow(optarg, &o->slow_data); break;
		case O_SLOWRANK: bad = integer(optarg, 0, 1 << 20, &o->slow_rank); break;
		case O_CHUNK: bad = integer(optarg, 1, 1 << 20, &o->read_chunk); break;
		case O_DELAY: bad = num(optarg, 0, 1e6, &o->read_delay_ms); break;
		case O_DECODE: bad = num(optarg, 0, 1e6, &o->decode_us); break;
		case O_MARKERS: o->markers = 1; break;
		case O_NVTX:
#ifdef DDPBENCH_NVTX
			o->nvtx = 1;
			break;
#else
			fprintf(stderr, "ddpbench: --nvtx: built without CUDA's NVTX headers (CUDA_HOME/include/nvtx3)\n");
			return -1;
#endif
		case O_ACCUM: bad = integer(optarg, 1, 1 << 16, &o->accum); break;
		case O_GPU: o->gpu = 1; break;
		case O_FSDP: o->fsdp = 1; break;
		case O_NOPREFETCH: o->fsdp_prefetch = 0; break;
		case O_PIPE: bad = integer(optarg, 2, MAX_LAYERS, &o->pipeline); break;
		case O_MICRO: bad = integer(optarg, 1, 4096, &o->microbatches); break;
		case O_SCHED:
			sched_set = 1;
			o->schedule = !strcmp(optarg, "gpipe") ? SCHEDULE_GPIPE : SCHEDULE_1F1B;
			bad = strcmp(optarg, "gpipe") && strcmp(optarg, "1f1b");
			break;
		case O_SLOWSTAGE: bad = integer(optarg, 0, MAX_LAYERS - 1, &o->slow_stage); break;
		case O_SLOWSTAGEMS: bad = num(optarg, 0, 1e6, &o->slow_stage_ms); break;
		case O_GPUMS: bad = num(optarg, 0.001, 1e6, &o->gpu_ms); gpu_opts = 1; break;
		case O_INPUT: bad = num(optarg, 0.000001, 4096, &o->input_mb); gpu_opts = 1; break;
		case O_PAGEABLE: o->pageable = gpu_opts = 1; break;
		case O_HOSTSYNC: o->host_sync = gpu_opts = 1; break;
		case O_KERNELS: bad = integer(optarg, 1, 1 << 20, &o->gpu_kernels); gpu_opts = 1; break;
		case O_HOSTMS: bad = num(optarg, 0, 1e6, &o->host_ms); gpu_opts = 1; break;
		case O_D2D: bad = num(optarg, 0.000001, 4096, &o->d2d_mb); gpu_opts = 1; break;
		case O_SIDE: bad = num(optarg, 0.001, 1e6, &o->side_gpu_ms); gpu_opts = 1; break;
		case O_CLIENTNOSYNC: o->cupti_no_sync = gpu_opts = 1; break;
		case O_CLIENT: {
			char *to = strchr(optarg, ':');
			bad = !to;
			if (to) {
				*to++ = 0;
				bad = integer(optarg, 1, 1 << 20, &o->cupti_from) || integer(to, 1, 1 << 20, &o->cupti_to) ||
				      o->cupti_to < o->cupti_from;
				to[-1] = ':';
			}
			gpu_opts = 1;
			break;
		}
		case O_SYNCBY:
			o->sync_by = !strcmp(optarg, "copy") ? SYNC_BY_COPY : !strcmp(optarg, "poll") ? SYNC_BY_POLL :
				     !strcmp(optarg, "free") ? SYNC_BY_FREE : !strcmp(optarg, "2d") ? SYNC_BY_2D : -1;
			bad = o->sync_by < 0;
			gpu_opts = 1;
			break;
		case 'h': fputs(usage, stdout); return 1;
		default:
			if (is_rank0())
				fprintf(stderr, "ddpbench: unknown option or missing value: '%s'\n", argv[optind - 1]);
			return bad_arg(NULL, NULL);
		}
		if (bad) {
			const char *name = "?";
			for (const struct option *p = opts; p->name; p++)
				if (p->val == c)
					name = p->name;
			char what[64];
			snprintf(what, sizeof what, "--%s", name);
			return bad_arg(what, optarg);
		}
	}
	if (optind != argc) {
		if (is_rank0())
			fprintf(stderr, "ddpbench: unexpected argument '%s'\n", argv[optind]);
		return bad_arg(NULL, NULL);
	}
	const char *conflict = NULL;
	if (!o->data)
		conflict = "train needs --data DIR (make one with: ddpbench gen-data DIR)";
	else if (o->batch > 0 && o->global_batch > 0)
		conflict = "--batch and --global-batch are exclusive";
	else if (o->task == TASK_MLP && (batching_set || o->token_budget))
		conflict = "--batching and --token-budget need --varlen or --uniform-len";
	else if (o->task != TASK_MLP && (o->slow_data & SLOW_STAT))
		conflict = "--slow-data stat reads one file per sample: it needs the MLP task";
	else if (o->decode_us > 0 && o->task != TASK_MLP)
		conflict = "--decode-us decodes samples: it needs the MLP task";
	else if ((o->straggler_ms > 0 || o->straggler_slowdown > 1) == 0 && o->straggler_rank >= 0)
		conflict = "--straggler-rank needs --straggler-ms or --straggler-slowdown";
	else if (o->slow_rank >= 0 && !o->slow_data)
		conflict = "--slow-rank needs --slow-data";
	else if (gpu_opts && !o->gpu)
		conflict = "--gpu-ms, --input-mb, --pageable, --host-sync, --gpu-kernels, --host-ms, --d2d-mb, --sync-by, "
			   "--side-gpu-ms and --cupti-client[-no-sync] need --gpu";
	else if (o->cupti_to >= o->warmup + o->steps)
		conflict = "--cupti-client FROM:TO needs TO below the warm-up and measured steps";
	else if (o->cupti_no_sync && o->cupti_from < 0)
		conflict = "--cupti-client-no-sync needs --cupti-client";
	else if (!o->fsdp_prefetch && !o->fsdp)
		conflict = "--no-prefetch is --fsdp's (the input threads' read-ahead is --prefetch P)";
	else if (o->fsdp && (o->task != TASK_MLP || o->accum > 1 || !o->overlap || o->extra_allreduce_mb > 0))
		conflict = "--fsdp runs the MLP task, one micro-batch a step, without --no-overlap or "
			   "--extra-allreduce-mb (its collectives are per layer)";
	else if (!o->pipeline && (o->microbatches > 0 || sched_set || o->slow_stage >= 0 || o->slow_stage_ms > 0))
		conflict = "--microbatches, --schedule, --slow-stage and --slow-stage-ms need --pipeline";
	else if ((o->slow_stage >= 0) != (o->slow_stage_ms > 0))
		conflict = "--slow-stage and --slow-stage-ms go together";
	else if (o->pipeline && (o->task != TASK_MLP || o->fsdp || o->accum > 1 || !o->overlap ||
				  o->extra_allreduce_mb > 0 || o->host_ms > 0 || o->d2d_mb > 0))
		conflict = "--pipeline runs the MLP task, without --fsdp, --accum (its micro-batches are --microbatches), "
			   "--no-overlap, --extra-allreduce-mb, --host-ms or --d2d-mb";
	else if (o->slow_stage >= o->pipeline && o->pipeline)
		conflict = "--slow-stage K needs K below the --pipeline stages";
	if (conflict) {
		if (is_rank0())
			fprintf(stderr, "ddpbench: %s\n", conflict);
		return bad_arg(NULL, NULL);
	}
	if (o->straggler_rank < 0 && (o->straggler_ms > 0 || o->straggler_slowdown > 1))
		o->straggler_rank = 0;
	if (o->batch < 0)
		o->batch = o->task == TASK_MLP ? 128 : 16;
	if (o->layers < 0)
		o->layers = o->task == TASK_MLP ? 3 : 1;
	if (o->microbatches < 0)
		o->microbatches = 4;
	if (o->token_budget == 0)
		o->token_budget = (o->global_batch > 0 ? o->global_batch : o->batch) * 128;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "gen-data") == 0)
		return gen_data(argc - 1, argv + 1);
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		fputs(usage, stdout);
		return 0;
	}
	if (argc < 2 || strcmp(argv[1], "train") != 0) {
		if (is_rank0() && argc >= 2)
			fprintf(stderr, "ddpbench: unknown command '%s'\n", argv[1]);
		return bad_arg(NULL, NULL);
	}
	struct options o;
	int rc = parse_train(argc - 1, argv + 1, &o);
	if (rc)
		return rc == 1 ? 0 : rc;
	struct dataset ds;
	char err[4096];
	if (dataset_open(&ds, o.data, err, sizeof err) != 0) {
		if (is_rank0())
			fprintf(stderr, "ddpbench: %s\n", err);
		return 2;
	}
	if (o.task == TASK_VARLEN && o.batching == BATCH_BUDGET && o.token_budget < ds.max_len) {
		if (is_rank0())
			fprintf(stderr, "ddpbench: --token-budget %d is below the longest sequence (%d)\n",
				o.token_budget, ds.max_len);
		return 2;
	}
	return train(&o, &ds);
}
