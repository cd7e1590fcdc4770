/* ddpbench --fsdp: the MLP's parameters and gradients sharded over the ranks, as FSDP and ZeRO-3
 * do. Each rank keeps 1/ws of every layer's parameters; before a layer's forward and again before
 * its backward the layer's parameters are all-gathered (and dropped after use: reshard after
 * forward), and after its backward its gradients are reduce-scattered, each rank keeping the sum of
 * its own part, on which it runs the optimizer. With prefetch (the default) the next layer's
 * all-gather is started before this layer's compute and waited for after it (FSDP's forward and
 * backward prefetch); without (--no-prefetch) each is issued and waited for right where its layer
 * needs it. The reduce-scatters run behind the next layers' backward and are waited for before the
 * optimizer. Collectives in flight advance while the layers compute (the model pokes MPI). */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "ddpbench.h"

struct fsdp {
	struct model *m;
	int rank, ws, nl, prefetch;
	size_t first[MAX_LAYERS], count[MAX_LAYERS], shard[MAX_LAYERS]; /* shard: count / ws, rounded up */
	float *own[MAX_LAYERS];   /* this rank's part of each layer's parameters */
	float *gown[MAX_LAYERS];  /* the sum of every rank's gradients of that part */
	float *stage[MAX_LAYERS]; /* ws x shard: a layer gathered, or its gradients to scatter */
	MPI_Request ag[MAX_LAYERS], rs[MAX_LAYERS];
	int ag_on[MAX_LAYERS];    /* an all-gather of the layer in flight */
	double comm_ms;           /* this step's time in collectives (starting, waiting, blocking) */
};

struct fsdp *fsdp_new(struct model *m, int rank, int ws, int prefetch)
{
	struct fsdp *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	*f = (struct fsdp){ .m = m, .rank = rank, .ws = ws, .nl = model_layers(m), .prefetch = prefetch };
	const float *p = model_params_of(m);
	for (int l = 0; l < f->nl; l++) {
		model_layer_range(m, l, &f->first[l], &f->count[l]);
		f->shard[l] = (f->count[l] + (size_t)ws - 1) / (size_t)ws;
		f->own[l] = calloc(f->shard[l], sizeof(float));
		f->gown[l] = calloc(f->shard[l], sizeof(float));
		f->stage[l] = calloc(f->shard[l] * (size_t)ws, sizeof(float));
		if (!f->own[l] || !f->gown[l] || !f->stage[l]) {
			fsdp_free(f);
			return NULL;
		}
		/* (every rank initialized the whole model alike: its part is taken from it) */
		size_t lo = (size_t)rank * f->shard[l], n = lo < f->count[l] ? f->count[l] - lo : 0;
		memcpy(f->own[l], p + f->first[l] + lo, (n < f->shard[l] ? n : f->shard[l]) * sizeof(float));
		f->ag[l] = f->rs[l] = MPI_REQUEST_NULL;
	}
	return f;
}

void fsdp_free(struct fsdp *f)
{
	if (!f)
		return;
	for (int l = 0; l < f->nl; l++) {
		free(f->own[l]);
		free(f->gown[l]);
		free(f->stage[l]);
	}
	free(f);
}

/* the collectives in flight advanced (called between the layers' rows) */
static void poke(void *arg)
{
	struct fsdp *f = arg;
	double t = now_ms();
	int done;
	MPI_Testall(f->nl, f->ag, &done, MPI_STATUSES_IGNORE);
	MPI_Testall(f->nl, f->rs, &done, MPI_STATUSES_IGNORE);
	f->comm_ms += now_ms() - t;
}

static void gather_start(struct fsdp *f, int l)
{
	double t = now_ms();
	MPI_Iallgather(f->own[l], (int)f->shard[l], MPI_FLOAT, f->stage[l], (int)f->shard[l], MPI_FLOAT,
		MPI_COMM_WORLD, &f->ag[l]);
	f->ag_on[l] = 1;
	f->comm_ms += now_ms() - t;
}

/* layer l's parameters whole in the model: its all-gather waited for, or issued and waited for */
static void gathered(struct fsdp *f, int l)
{
	double t = now_ms();
	if (f->ag_on[l])
		MPI_Wait(&f->ag[l], MPI_STATUS_IGNORE);
	else
		MPI_Allgather(f->own[l], (int)f->shard[l], MPI_FLOAT, f->stage[l], (int)f->shard[l], MPI_FLOAT,
			MPI_COMM_WORLD);
	f->ag_on[l] = 0;
	f->comm_ms += now_ms() - t;
	memcpy(model_params_of(f->m) + f->first[l], f->stage[l], f->count[l] * sizeof(float));
}

static void scatter_start(struct fsdp *f, int l)
{
	double t = now_ms();
	float *s = f->stage[l];
	memcpy(s, model_grad(f->m) + f->first[l], f->count[l] * sizeof(float));
	memset(s + f->count[l], 0, (f->shard[l] * (size_t)f->ws - f->count[l]) * sizeof(float));
	MPI_Ireduce_scatter_block(s, f->gown[l], (int)f->shard[l], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &f->rs[l]);
	f->comm_ms += now_ms() - t;
}

void fsdp_step(struct fsdp *f, const struct batch *b, double slowdown, double *compute_ms, double *comm_ms)
{
	double t0 = now_ms();
	f->comm_ms = 0;
	int nl = f->nl;
	for (int l = 0; l < nl; l++) {
		gathered(f, l);
		if (f->prefetch && l + 1 < nl)
			gather_start(f, l + 1);
		model_forward_layer(f->m, b, l, slowdown, poke, f);
	}
	for (int l = nl - 1; l >= 0; l--) {
		gathered(f, l);
		if (f->prefetch && l > 0)
			gather_start(f, l - 1);
		model_backward_layer(f->m, l, slowdown, poke, f);
		scatter_start(f, l);
	}
	double t = now_ms();
	MPI_Waitall(nl, f->rs, MPI_STATUSES_IGNORE);
	f->comm_ms += now_ms() - t;
	/* the optimizer on this rank's part, with the gradients' mean over the ranks */
	for (int l = 0; l < nl; l++)
		model_sgd(f->own[l], f->gown[l], f->shard[l], 1.0f / (float)f->ws);
	*comm_ms += f->comm_ms;
	*compute_ms += now_ms() - t0 - f->comm_ms;
}
