/* ddpbench: a data-parallel trainer on MPI that reproduces the DDP pathologies of the field notes
 * on demand and measures its own phases, the ground truth ddpspy's report is judged against.
 * This header is shared by its files: main (CLI), data (dataset files and storage), loader
 * (sampler and input threads), model (MLP and token kernels), fsdp and pipe (the sharded step and
 * the pipeline's), train (the step loop). */
#pragma once
#include <stdint.h>
#include <stddef.h>

#define MAX_LAYERS 16

/* --slow-data variants, combinable */
enum { SLOW_SMALL_READS = 1, SLOW_STAT = 2, SLOW_SYNC = 4, SLOW_DELAY = 8 };
enum task { TASK_MLP, TASK_UNIFORM, TASK_VARLEN };
enum batching { BATCH_FIXED, BATCH_BUCKET, BATCH_BUDGET };
enum schedule { SCHEDULE_GPIPE, SCHEDULE_1F1B };

struct options {
	const char *data;
	int steps, warmup;
	int batch, global_batch;       /* per rank (weak scaling) or global (strong scaling) */
	int accum;                     /* micro-batches per step (gradient accumulation) */
	int workers, prefetch;
	double bucket_mb;
	int overlap;
	int hidden, layers, features;  /* model shape; features is the dataset's */
	int straggler_rank;
	double straggler_ms, straggler_slowdown;
	int straggler_from; /* the straggler's delay from this step (warm-up included) on */
	double extra_allreduce_mb;
	double rank0_work_ms;
	unsigned slow_data;
	int slow_rank;                 /* -1: every rank */
	int read_chunk;
	double read_delay_ms;
	double decode_us;              /* CPU time per sample added to the decode */
	enum task task;
	enum batching batching;
	int token_budget;
	int uniform_len;
	uint64_t seed;
	int markers;                   /* call ddpspy_step_begin/end around each step */
	int nvtx;                      /* NVTX ranges around the step and its phases */
	/* --gpu: the step's work on a GPU (gpu.cu) */
	int gpu;
	double gpu_ms;                 /* forward + backward + optimizer kernels per step */
	double input_mb;               /* the batch as the GPU takes it (0: its own bytes) */
	int pageable;                  /* copy it from pageable memory, not pinned */
	double d2d_mb;                 /* a device-to-device copy of the batch each step (torch.cat, clone) */
	double side_gpu_ms;            /* a kernel this long on a second device each step (its own context) */
	int cupti_from, cupti_to;      /* steps a second CUPTI client profiles, counting warm-up (-1: none) */
	int cupti_no_sync;             /* it stops without synchronizing the device (an on-demand trace) */
	int host_sync;                 /* read the loss back with a blocking copy every step */
	int sync_by;                   /* how --host-sync waits (SYNC_BY_*) */
	int gpu_kernels;               /* kernels per layer and phase (launch-bound when many) */
	double host_ms;                /* host work per step before enqueueing it */
	/* --fsdp: parameters and gradients sharded over the ranks (fsdp.c) */
	int fsdp;
	int fsdp_prefetch;             /* the next layer's all-gather started before this layer's compute */
	/* --pipeline: the layers in stages over the ranks, micro-batches passed on (pipe.c) */
	int pipeline;                  /* stages (0: none) */
	int microbatches;
	enum schedule schedule;
	int slow_stage;                /* -1: none */
	double slow_stage_ms;          /* its extra work per micro-batch */
};

/* The GPU half (gpu.cu, build/libddpbench_gpu.so), as ddpbench finds it with dlsym:
 * "ddpbench_gpu", a struct gpu_ops. testapps/pylaunch_app.py reads both structs with ctypes: a
 * change here is made there too, with GPU_OPS_VERSION. */
enum { GPU_FORWARD, GPU_BACKWARD, GPU_OPTIMIZER };
struct gpu_conf {
	int rank, ws, local_rank;
	size_t grad_floats, extra_floats, input_bytes, d2d_bytes;
	int pageable, kernels, overlap, sync_by;
	double side_gpu_ms;
	size_t layer_floats;           /* --fsdp: the largest layer's parameters (0: not sharded) */
	size_t pipe_floats;            /* --pipeline: the largest micro-batch it sends or receives (0: none) */
	int dp_color;                  /* --pipeline with replicas: its stage (-1: no communicator of them) */
	int cupti_from, cupti_to;      /* --cupti-client: the steps it profiles (-1: none) */
	int cupti_sync;                /* and it synchronizes the device before its stop */
};
/* what --cupti-client's client got: timed kernels and copies launched in its window but its last
 * step (by its external ids), and every record CUPTI handed it */
enum { CLIENT_KERNELS, CLIENT_COPIES, CLIENT_RECORDS, CLIENT_N };
/* how loss.item() waits for the device (--sync-by): a copy and a stream synchronize; polling an
 * event; a cudaFree (which may synchronize: cuda_runtime_api.h); a cudaMemcpy2DAsync into pageable
 * memory (which holds the host until it is done) */
enum { SYNC_BY_COPY, SYNC_BY_POLL, SYNC_BY_FREE, SYNC_BY_2D };
#define GPU_OPS_VERSION 5
struct gpu_ops {
	int version;
	int (*unique_id)(void *id, size_t len);          /* rank 0: the NCCL id's bytes, or -1 */
	int (*init)(const struct gpu_conf *c, const void *id, char *err, size_t len);
	void (*upload)(const void *src, size_t bytes);    /* the batch, host to device */
	void (*kernel)(int phase, double ns);             /* GPU_*: ns of work on the compute stream */
	void (*bucket)(size_t first, size_t count);       /* all-reduce this range of the gradients */
	void (*grads_done)(void);                         /* the optimizer waits for the all-reduces */
	void (*extra)(void);                              /* the extra all-reduce */
	void (*barrier)(void);                            /* a barrier the host waits for */
	void (*read_loss)(void);                          /* loss.item(): the host waits */
	int (*end_step)(char *err, size_t len);           /* -1: a CUDA or NCCL call failed */
	void (*finish)(void);
	/* --fsdp: a layer's parameters all-gathered (count floats, this rank's part of them) on the
	 * communication stream once the compute stream has reached this point: where the host calls it
	 * decides what it overlaps; then the compute stream waits for it (its slot) before the layer's
	 * kernel; a layer's gradients reduce-scattered (count floats, all of them) once the compute
	 * stream has made them */
	int (*gather)(size_t count);
	void (*gathered)(int slot);
	void (*scatter)(size_t count);
	/* --pipeline: send_count floats to rank `to` and recv_count from rank `from` (-1: none) as one
	 * group on the compute stream; the stage's count gradients all-reduced among its replicas */
	void (*p2p)(int to, size_t send_count, int from, size_t recv_count);
	void (*dp_reduce)(size_t count);
	int (*client)(long *counts);                      /* --cupti-client: CLIENT_N counts; -1 none */
};

/* A gen-data directory, as described by its manifest. */
struct dataset {
	char dir[3072];
	int64_t samples;               /* samples.bin: samples x sample_bytes, u32 label then payload */
	int sample_bytes, features, classes;
	int64_t sequences;             /* tokens.bin (u16 tokens) + lengths.bin (u32 per sequence) */
	int vocab, max_len;
	uint32_t *seq_len;             /* loaded by dataset_open */
	uint64_t *seq_off;             /* prefix sums, in tokens */
	int64_t total_tokens;
};

/* One batch as the training step sees it. Owned by the loader; valid until the next
 * loader_next call. */
struct batch {
	int n;                         /* samples in this batch */
	int64_t *idx;                  /* n sample or sequence indices */
	/* MLP task */
	float *x;                      /* n x features */
	int *y;                        /* n labels */
	/* token tasks */
	int len_max;                   /* padded length */
	int *len;                      /* n real lengths */
	uint16_t *tok;                 /* n x len_max, zero-padded */
	long real_tokens;
	/* buffers */
	char *raw;
	size_t cap_samples, cap_tokens;
};

/* rng.c-style helpers, in data.c */
uint64_t rng_next(uint64_t *s);
double rng_uniform(uint64_t *s);
void shuffle(int64_t *v, int64_t n, uint64_t seed);
double now_ms(void);
double cpu_ms(void);
void sleep_ms(double ms);

/* data.c */
int gen_data(int argc, char **argv);
/* Reads DIR/manifest and the sequence lengths. Returns 0, or -1 with a message in err. */
int dataset_open(struct dataset *ds, const char *dir, char *err, size_t errlen);
void item_path(const struct dataset *ds, int64_t i, char *buf, size_t len);

/* A storage endpoint: one thread that answers batch read requests over a socket after a fixed
 * latency, standing in for a remote filesystem or object store. */
struct storage;
struct storage *storage_start(const char *path, double latency_ms);
/* Reads n ranges (1 .. 65536) through the storage's socket into dst (packed). Returns 0 or -1. */
int storage_read(struct storage *st, int n, const uint64_t *off, const uint32_t *len, char *dst);
void storage_stop(struct storage *st);

/* loader.c */
struct loader;
struct loader *loader_start(const struct options *o, const struct dataset *ds, int rank, int ws,
	int batch);
/* Returns the next batch, waiting for the input threads if needed; NULL on a read error. */
struct batch *loader_next(struct loader *l);
void loader_stop(struct loader *l);

/* model.c: a model is a list of layers whose gradients sit in one flat buffer laid out in
 * reverse layer order, so each gradient bucket is a contiguous range. */
typedef void (*poke_fn)(void *arg);
struct model;
struct model *model_new(const struct options *o, const struct dataset *ds);
int model_layers(const struct model *m);
size_t model_params(const struct model *m);
/* [first, first+count) of the flat gradient buffer belongs to layer l */
void model_layer_range(const struct model *m, int l, size_t *first, size_t *count);
float *model_grad(struct model *m);
/* slowdown > 1 stretches every kernel by that factor with extra arithmetic (a throttled device) */
void model_forward(struct model *m, const struct batch *b, double slowdown);
/* the MLP's layer l alone (--fsdp: each layer's parameters gathered before it), poke between rows */
void model_forward_layer(struct model *m, const struct batch *b, int l, double slowdown, poke_fn poke, void *arg);
/* the flat parameter buffer, laid out as the gradients' */
float *model_params_of(struct model *m);
void model_backward_layer(struct model *m, int l, double slowdown, poke_fn poke, void *arg);
void model_step(struct model *m, float scale);
/* the optimizer's step on n parameters p from their gradients g, scaled (model_step's, on a part) */
void model_sgd(float *p, const float *g, size_t n, float scale);
double model_loss(const struct model *m);
/* pipeline stages: the MLP's layer widths (i: 0 the features .. layers the classes); layer l on rows
 * the caller holds (forward: y from x; backward: the gradients added to, and dx, the gradient at
 * its input, unless NULL, from dy at its output); the loss of rows of logits z (summed) and its
 * gradient dz as part of a batch of total; ms of arithmetic, poke between */
int model_dim(const struct model *m, int i);
void model_stage_forward(struct model *m, int l, const float *x, float *y, int rows, double slowdown, poke_fn poke,
	void *arg);
void model_stage_backward(struct model *m, int l, const float *x, const float *dy, float *dx, int rows,
	double slowdown, poke_fn poke, void *arg);
double model_stage_loss(const struct model *m, const float *z, const int *labels, int rows, int total, float *dz);
void model_burn(double ms, poke_fn poke, void *arg);

/* fsdp.c: the sharded step. fsdp_new shards m's parameters (rank's part of each layer's);
 * fsdp_step runs forward and backward with each layer's all-gathers and reduce-scatter, then the
 * optimizer on the shards; *comm_ms the time it waited in collectives, *compute_ms the rest */
struct fsdp;
struct fsdp *fsdp_new(struct model *m, int rank, int ws, int prefetch);
void fsdp_step(struct fsdp *f, const struct batch *b, double slowdown, double *compute_ms, double *comm_ms);
void fsdp_free(struct fsdp *f);

/* pipe.c: the pipeline. pipe_new places rank in its stage (rank / (ws / stages)) with its share
 * of m's layers; pipe_step runs the step's micro-batches through the stage by the schedule, then
 * the optimizer on its layers (b: the batch, NULL on a middle stage); *comm_ms the time in
 * point-to-point calls and collectives, *wait_ms the part blocked in receives, *compute_ms the rest;
 * the step's loss (the last stage's) */
struct pipe;
struct pipe *pipe_new(struct model *m, const struct options *o, int rank, int ws, int batch);
void pipe_step(struct pipe *p, const struct batch *b, double slowdown, double *compute_ms, double *comm_ms,
	double *wait_ms);
double pipe_loss(const struct pipe *p);
void pipe_free(struct pipe *p);
/* --gpu: the stage's layers [*l0, *l1) and the most floats a micro-batch sends or receives */
void pipe_layers(const struct pipe *p, int *l0, int *l1, size_t *msg_floats);
/* --gpu: the step on the device by the same schedule: ns of a micro-batch's forward and backward
 * kernels on the stage (ns[0], ns[1]) and of its optimizer (ns[2]); *compute_ms their sum */
void pipe_gpu_step(struct pipe *p, const struct gpu_ops *G, const double *ns, double *compute_ms);

/* train.c */
int train(const struct options *o, const struct dataset *ds);
