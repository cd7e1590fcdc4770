/* ddpbench --pipeline S: the MLP's layers cut into S stages over the ranks, as GPipe and 1F1B
 * pipelines do. Rank r is stage r / D of data-parallel replica r % D (D = ranks / S). Each step's
 * batch is cut into M micro-batches; a stage receives a micro-batch's activations from the stage
 * before (MPI_Recv), runs its layers and sends its output on (MPI_Isend); the last stage takes the
 * loss, and backward runs back the same way, each stage receiving the gradient at its output from
 * the stage after and sending the one at its input to the stage before. GPipe runs every
 * micro-batch's forward, then every backward; 1F1B runs S - s - 1 forwards on stage s, then one
 * forward and one backward in turn, then the backwards left. The sends are completed before the
 * optimizer (MPI_Waitall); with D > 1 the stage's gradients are all-reduced among its replicas;
 * then the optimizer on the stage's layers. Gradients are summed over the micro-batches, so a step
 * learns what the whole batch would. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "ddpbench.h"

struct pipe {
	struct model *m;
	int S, D, M, stage, gpipe, rows, batch;
	int l0, l1;              /* the stage's layers [l0, l1) */
	int prev, next;          /* the ranks of the stages before and after (MPI_PROC_NULL: none) */
	MPI_Comm dp;             /* this stage's replicas */
	double slow_ms;          /* extra work per micro-batch (--slow-stage) */
	float **act;             /* act[j * (l1 - l0 + 1) + i]: micro-batch j's input of layer l0 + i (the
				  * last: the stage's output); stage 0's first points into the batch */
	float *dz;               /* the last stage: each micro-batch's loss gradient */
	float *gin;              /* each micro-batch's gradient at the stage's input, sent back */
	float *da, *db;          /* a gradient on its way through the stage's layers */
	MPI_Request *req;        /* the sends in flight */
	int nreq;
	double loss, comm_ms, wait_ms;
};

/* the stages' layers: contiguous, cut where the costliest stage costs least, into first[0..S]. A
 * layer costs its matrix products: forward, its weights' gradient and, but for the first layer,
 * the gradient at its input (a partitioner that balanced parameters would leave the first stage a
 * third lighter per layer). */
static void cut(struct model *m, int S, int *first)
{
	int nl = model_layers(m);
	double best[MAX_LAYERS + 1][MAX_LAYERS + 1]; /* [s][l]: layers [0, l) in s stages */
	int from[MAX_LAYERS + 1][MAX_LAYERS + 1];
	double pre[MAX_LAYERS + 1] = { 0 };
	for (int l = 0; l < nl; l++)
		pre[l + 1] = pre[l] + (l ? 3.0 : 2.0) * model_dim(m, l) * model_dim(m, l + 1);
	for (int s = 0; s <= S; s++)
		for (int l = 0; l <= nl; l++)
			best[s][l] = -1;
	best[0][0] = 0;
	for (int s = 1; s <= S; s++)
		for (int l = s; l <= nl; l++)
			for (int k = s - 1; k < l; k++) {
				if (best[s - 1][k] < 0)
					continue;
				double w = pre[l] - pre[k], v = best[s - 1][k] > w ? best[s - 1][k] : w;
				if (best[s][l] < 0 || v < best[s][l]) {
					best[s][l] = v;
					from[s][l] = k;
				}
			}
	first[S] = nl;
	for (int s = S; s > 0; s--)
		first[s - 1] = from[s][first[s]];
}

struct pipe *pipe_new(struct model *m, const struct options *o, int rank, int ws, int batch)
{
	struct pipe *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	int S = o->pipeline, D = ws / S, first[MAX_LAYERS + 1];
	cut(m, S, first);
	*p = (struct pipe){ .m = m, .S = S, .D = D, .M = o->microbatches, .stage = rank / D,
			    .gpipe = o->schedule == SCHEDULE_GPIPE, .rows = batch / o->microbatches, .batch = batch };
	p->l0 = first[p->stage];
	p->l1 = first[p->stage + 1];
	p->prev = p->stage > 0 ? rank - D : MPI_PROC_NULL;
	p->next = p->stage < S - 1 ? rank + D : MPI_PROC_NULL;
	p->slow_ms = p->stage == o->slow_stage ? o->slow_stage_ms : 0;
	MPI_Comm_split(MPI_COMM_WORLD, p->stage, rank, &p->dp);
	int n = p->l1 - p->l0, maxd = 0, M = p->M, C = model_dim(m, model_layers(m));
	for (int i = p->l0; i <= p->l1; i++)
		maxd = model_dim(m, i) > maxd ? model_dim(m, i) : maxd;
	p->act = calloc((size_t)M * (n + 1), sizeof *p->act);
	p->dz = malloc((size_t)M * p->rows * C * sizeof(float));
	p->gin = malloc((size_t)M * p->rows * model_dim(m, p->l0) * sizeof(float));
	p->da = malloc((size_t)p->rows * maxd * sizeof(float));
	p->db = malloc((size_t)p->rows * maxd * sizeof(float));
	p->req = malloc(2 * (size_t)M * sizeof *p->req);
	if (!p->act || !p->dz || !p->gin || !p->da || !p->db || !p->req) {
		pipe_free(p);
		return NULL;
	}
	for (int j = 0; j < M; j++)
		for (int i = 0; i <= n; i++) {
			if (i == 0 && p->stage == 0)
				continue; /* (the batch's own rows) */
			float **a = &p->act[(size_t)j * (n + 1) + i];
			if (!(*a = malloc((size_t)p->rows * model_dim(m, p->l0 + i) * sizeof(float)))) {
				pipe_free(p);
				return NULL;
			}
		}
	return p;
}

void pipe_free(struct pipe *p)
{
	if (!p)
		return;
	int n = p->l1 - p->l0;
	for (int j = 0; p->act && j < p->M; j++)
		for (int i = p->stage == 0; i <= n; i++)
			free(p->act[(size_t)j * (n + 1) + i]);
	free(p->act);
	free(p->dz);
	free(p->gin);
	free(p->da);
	free(p->db);
	free(p->req);
	if (p->dp != MPI_COMM_NULL && p->dp)
		MPI_Comm_free(&p->dp);
	free(p);
}

/* the stage's gradients: [*lo, *lo + n) of the flat buffer (laid out in reverse layer order) */
static size_t stage_grads(const struct pipe *p, size_t *lo)
{
	size_t first, count;
	model_layer_range(p->m, p->l1 - 1, lo, &count);
	model_layer_range(p->m, p->l0, &first, &count);
	return first + count - *lo;
}

/* the forwards stage runs before its first backward: GPipe all, 1F1B S - stage - 1 */
static int warmup(const struct pipe *p)
{
	return p->gpipe ? p->M : p->S - p->stage - 1 < p->M ? p->S - p->stage - 1 : p->M;
}

double pipe_loss(const struct pipe *p)
{
	return p->loss;
}

/* the sends in flight advanced (called between the layers' rows) */
static void poke(void *arg)
{
	struct pipe *p = arg;
	double t = now_ms();
	int done;
	MPI_Testall(p->nreq, p->req, &done, MPI_STATUSES_IGNORE);
	p->comm_ms += now_ms() - t;
}

static void recv_from(struct pipe *p, float *buf, int n, int from, int tag)
{
	double t = now_ms();
	MPI_Recv(buf, n, MPI_FLOAT, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	double d = now_ms() - t;
	p->comm_ms += d;
	p->wait_ms += d;
}

static void send_to(struct pipe *p, const float *buf, int n, int to, int tag)
{
	double t = now_ms();
	MPI_Isend(buf, n, MPI_FLOAT, to, tag, MPI_COMM_WORLD, &p->req[p->nreq++]);
	p->comm_ms += now_ms() - t;
}

/* micro-batch j's forward through the stage (tags: 2 j forward, 2 j + 1 backward) */
static void forward(struct pipe *p, const struct batch *b, int j, double slowdown)
{
	int n = p->l1 - p->l0, R = p->rows;
	float **a = &p->act[(size_t)j * (n + 1)];
	if (p->stage == 0)
		a[0] = b->x + (size_t)j * R * model_dim(p->m, 0);
	else
		recv_from(p, a[0], R * model_dim(p->m, p->l0), p->prev, 2 * j);
	for (int i = 0; i < n; i++)
		model_stage_forward(p->m, p->l0 + i, a[i], a[i + 1], R, slowdown, poke, p);
	if (p->slow_ms > 0)
		model_burn(p->slow_ms / 2, poke, p);
	if (p->next == MPI_PROC_NULL)
		p->loss += model_stage_loss(p->m, a[n], b->y + (size_t)j * R, R, p->batch,
					    p->dz + (size_t)j * R * model_dim(p->m, p->l1)) / p->batch;
	else
		send_to(p, a[n], R * model_dim(p->m, p->l1), p->next, 2 * j);
}

static void backward(struct pipe *p, int j, double slowdown)
{
	int n = p->l1 - p->l0, R = p->rows;
	float **a = &p->act[(size_t)j * (n + 1)], *dy = p->dz + (size_t)j * R * model_dim(p->m, p->l1);
	float *gin = p->gin + (size_t)j * R * model_dim(p->m, p->l0);
	if (p->next != MPI_PROC_NULL) {
		recv_from(p, p->da, R * model_dim(p->m, p->l1), p->next, 2 * j + 1);
		dy = p->da;
	}
	for (int l = p->l1 - 1; l >= p->l0; l--) {
		float *dx = l > p->l0 ? (dy == p->da ? p->db : p->da) : p->stage > 0 ? gin : NULL;
		model_stage_backward(p->m, l, a[l - p->l0], dy, dx, R, slowdown, poke, p);
		dy = dx;
	}
	if (p->slow_ms > 0)
		model_burn(p->slow_ms / 2, poke, p);
	if (p->prev != MPI_PROC_NULL)
		send_to(p, gin, R * model_dim(p->m, p->l0), p->prev, 2 * j + 1);
}

void pipe_step(struct pipe *p, const struct batch *b, double slowdown, double *compute_ms, double *comm_ms,
	double *wait_ms)
{
	double t0 = now_ms();
	p->comm_ms = p->wait_ms = p->loss = 0;
	p->nreq = 0;
	size_t lo, n = stage_grads(p, &lo);
	float *g = model_grad(p->m) + lo;
	memset(g, 0, n * sizeof(float));
	int M = p->M, warm = warmup(p);
	for (int j = 0; j < warm; j++)
		forward(p, b, j, slowdown);
	for (int j = warm; j < M; j++) { /* 1F1B's steady state */
		forward(p, b, j, slowdown);
		backward(p, j - warm, slowdown);
	}
	for (int j = M - warm; j < M; j++)
		backward(p, j, slowdown);
	double t = now_ms();
	MPI_Waitall(p->nreq, p->req, MPI_STATUSES_IGNORE);
	if (p->D > 1)
		MPI_Allreduce(MPI_IN_PLACE, g, (int)n, MPI_FLOAT, MPI_SUM, p->dp);
	p->comm_ms += now_ms() - t;
	model_sgd(model_params_of(p->m) + lo, g, n, 1.0f / (float)p->D);
	*comm_ms += p->comm_ms;
	*wait_ms += p->wait_ms;
	*compute_ms += now_ms() - t0 - p->comm_ms;
}

void pipe_layers(const struct pipe *p, int *l0, int *l1, size_t *msg_floats)
{
	int in = model_dim(p->m, p->l0), out = model_dim(p->m, p->l1);
	*l0 = p->l0;
	*l1 = p->l1;
	*msg_floats = (size_t)p->rows * (size_t)(in > out ? in : out);
}

/* --gpu: the micro-batches as kernels on the stage's device, by the schedule of Megatron-LM's
 * forward_backward_pipelining_without_interleaving (GPipe: every micro-batch warm-up, none steady):
 * warm-up forwards (receive, forward, send), then forward, send it and receive a gradient, backward,
 * send it and receive the next input, then the backwards left (receive, backward, send); each
 * send and receive pair one group (gpu.cu's p2p). The sends need no completing here: the stream
 * orders them before the optimizer. */
void pipe_gpu_step(struct pipe *p, const struct gpu_ops *G, const double *ns, double *compute_ms)
{
	int R = p->rows, M = p->M, prev = p->prev == MPI_PROC_NULL ? -1 : p->prev;
	int next = p->next == MPI_PROC_NULL ? -1 : p->next;
	size_t in = (size_t)R * model_dim(p->m, p->l0), out = (size_t)R * model_dim(p->m, p->l1);
	double slow = p->slow_ms * 1e6 / 2, f = ns[0] + slow, b = ns[1] + slow;
	int warm = warmup(p), steady = M - warm;
	for (int j = 0; j < warm; j++) {
		G->p2p(-1, 0, prev, in);
		G->kernel(GPU_FORWARD, f);
		G->p2p(next, out, -1, 0);
	}
	if (steady)
		G->p2p(-1, 0, prev, in);
	for (int j = 0; j < steady; j++) {
		G->kernel(GPU_FORWARD, f);
		G->p2p(next, out, next, out);
		G->kernel(GPU_BACKWARD, b);
		G->p2p(prev, in, j < steady - 1 ? prev : -1, in);
	}
	for (int j = 0; j < warm; j++) {
		G->p2p(-1, 0, next, out);
		G->kernel(GPU_BACKWARD, b);
		G->p2p(prev, in, -1, 0);
	}
	size_t lo;
	if (p->D > 1)
		G->dp_reduce(stage_grads(p, &lo));
	G->kernel(GPU_OPTIMIZER, ns[2]);
	*compute_ms += (M * (f + b) + ns[2]) / 1e6;
}
