/* ddpbench's models and their kernels. The MLP trains for real (softmax cross-entropy, SGD).
 * The token model is a transformer-shaped cost model: per layer, single-head attention over the
 * padded length and a ReLU MLP, with the MLP weights trained and the attention's backward taken
 * with its scores held constant; its cost grows with padded length as attention + MLP do, which is
 * what token skew needs. Gradients live in one flat buffer in reverse layer order (see ddpbench.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ddpbench.h"

#define POKE_ROWS 32 /* rows between two progress calls, so overlapped all-reduces advance */

struct model {
	enum task task;
	int nl;
	size_t nparams;
	float *p, *g;
	size_t first[MAX_LAYERS], count[MAX_LAYERS];
	double loss;
	/* MLP */
	int dims[MAX_LAYERS + 1];
	float *act[MAX_LAYERS + 1];    /* act[0] is the batch's x */
	float *delta, *delta2;
	size_t cap_rows;
	const int *labels;
	int rows;
	/* token model */
	int d, f, n, lp;
	float *emb;                    /* vocab x d, fixed */
	float *xin[MAX_LAYERS + 1], *x1[MAX_LAYERS], *h[MAX_LAYERS];
	float *dx, *dx1, *dh, *scores;
	size_t cap_tok;
	int cap_lp;
};

/* C[MxN] += A[MxK] B[KxN] */
static void gemm_nn(int M, int N, int K, const float *A, const float *B, float *C)
{
	for (int i = 0; i < M; i++)
		for (int k = 0; k < K; k++) {
			float a = A[(size_t)i * K + k];
			const float *b = B + (size_t)k * N;
			float *c = C + (size_t)i * N;
			for (int j = 0; j < N; j++)
				c[j] += a * b[j];
		}
}

/* C[MxN] += A^T B with A[KxM], B[KxN] */
static void gemm_tn(int M, int N, int K, const float *A, const float *B, float *C)
{
	for (int k = 0; k < K; k++)
		for (int i = 0; i < M; i++) {
			float a = A[(size_t)k * M + i];
			const float *b = B + (size_t)k * N;
			float *c = C + (size_t)i * N;
			for (int j = 0; j < N; j++)
				c[j] += a * b[j];
		}
}

/* C[MxN] = A B^T with A[MxK], B[NxK] */
static void gemm_nt(int M, int N, int K, const float *A, const float *B, float *C)
{
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			const float *a = A + (size_t)i * K, *b = B + (size_t)j * K;
			float s = 0;
			for (int k = 0; k < K; k++)
				s += a[k] * b[k];
			C[(size_t)i * N + j] = s;
		}
}

/* the testbed cannot measure anything without its activations: say so and stop */
static void out_of_memory(int rows)
{
	fprintf(stderr, "ddpbench: out of memory for the activations of a %d-sample batch\n", rows);
	abort();
}

static volatile float burn_sink;

/* Keeps the CPU busy with arithmetic for ms milliseconds: the extra time of a slower device. */
static void burn(double ms, poke_fn poke, void *arg)
{
	double end = now_ms() + ms, next_poke = now_ms() + 1;
	float a = 1.0f, b = 0.999f;
	for (;;) {
		for (int i = 0; i < 4096; i++)
			a = a * b + 0.001f;
		double t = now_ms();
		if (t >= end)
			break;
		if (poke && t >= next_poke) {
			poke(arg);
			next_poke = t + 1;
		}
	}
	burn_sink = a;
}

static void init_params(struct model *m, uint64_t seed)
{
	uint64_t s = seed;
	for (size_t i = 0; i < m->nparams; i++)
		m->p[i] = (float)(rng_uniform(&s) - 0.5) * 0.1f;
}

struct model *model_new(const struct options *o, const struct dataset *ds)
{
	struct model *m = calloc(1, sizeof *m);
	if (!m)
		return NULL;
	m->task = o->task;
	if (o->task == TASK_MLP) {
		m->nl = o->layers + 1;
		m->dims[0] = ds->features;
		for (int l = 1; l < m->nl; l++)
			m->dims[l] = o->hidden;
		m->dims[m->nl] = ds->classes;
		for (int l = m->nl - 1; l >= 0; l--) {
			m->first[l] = m->nparams;
			m->count[l] = (size_t)m->dims[l] * m->dims[l + 1] + m->dims[l + 1];
			m->nparams += m->count[l];
		}
	} else {
		m->nl = o->layers;
		m->d = 64;
		m->f = 4 * m->d;
		for (int l = m->nl - 1; l >= 0; l--) {
			m->first[l] = m->nparams;
			m->count[l] = 2 * (size_t)m->d * m->f;
			m->nparams += m->count[l];
		}
		m->emb = malloc((size_t)ds->vocab * m->d * sizeof(float));
		if (!m->emb)
			goto err;
		uint64_t s = o->seed + 17;
		for (size_t i = 0; i < (size_t)ds->vocab * m->d; i++)
			m->emb[i] = (float)(rng_uniform(&s) - 0.5);
	}
	m->p = malloc(m->nparams * sizeof(float));
	m->g = calloc(m->nparams, sizeof(float));
	if (!m->p || !m->g)
		goto err;
	init_params(m, o->seed);
	return m;
err:
	free(m->emb);
	free(m->p);
	free(m->g);
	free(m);
	return NULL;
}

int model_layers(const struct model *m)
{
	return m->nl;
}

size_t model_params(const struct model *m)
{
	return m->nparams;
}

void model_layer_range(const struct model *m, int l, size_t *first, size_t *count)
{
	*first = m->first[l];
	*count = m->count[l];
}

float *model_grad(struct model *m)
{
	return m->g;
}

double model_loss(const struct model *m)
{
	return m->loss;
}

void model_sgd(float *p, const float *g, size_t n, float scale)
{
	const float lr = 0.05f * scale;
	for (size_t i = 0; i < n; i++)
		p[i] -= lr * g[i];
}

void model_step(struct model *m, float scale)
{
	model_sgd(m->p, m->g, m->nparams, scale);
}

/* ---- MLP ---- */

static float *mlp_w(struct model *m, float *base, int l)
{
	return base + m->first[l];
}

static float *mlp_b(struct model *m, float *base, int l)
{
	return base + m->first[l] + (size_t)m->dims[l] * m->dims[l + 1];
}

static int mlp_reserve(struct model *m, int rows)
{
	if ((size_t)rows <= m->cap_rows)
		return 0;
	int maxd = 0;
	for (int l = 0; l <= m->nl; l++)
		maxd = m->dims[l] > maxd ? m->dims[l] : maxd;
	for (int l = 1; l <= m->nl; l++) {
		free(m->act[l]);
		m->act[l] = malloc((size_t)rows * m->dims[l] * sizeof(float));
	}
	free(m->delta);
	free(m->delta2);
	m->delta = malloc((size_t)rows * maxd * sizeof(float));
	m->delta2 = malloc((size_t)rows * maxd * sizeof(float));
	m->cap_rows = (size_t)rows;
	for (int l = 1; l <= m->nl; l++)
		if (!m->act[l])
			return -1;
	return m->delta && m->delta2 ? 0 : -1;
}

/* y[B x dims[l+1]] = x W_l + b_l for x[B x dims[l]], with a ReLU but on the last layer; its rows in
 * chunks with poke called between them, so that collectives in flight advance */
static void layer_forward(struct model *m, int l, const float *x, float *y, int B, poke_fn poke, void *arg)
{
	int in = m->dims[l], out = m->dims[l + 1];
	const float *bias = mlp_b(m, m->p, l);
	for (int i = 0; i < B; i++)
		memcpy(y + (size_t)i * out, bias, (size_t)out * sizeof(float));
	int rows = poke ? POKE_ROWS : B; /* (whole, where nothing is in flight) */
	for (int r = 0; r < B; r += rows) {
		int n = B - r < rows ? B - r : rows;
		gemm_nn(n, out, in, x + (size_t)r * in, mlp_w(m, m->p, l), y + (size_t)r * out);
		if (poke)
			poke(arg);
	}
	if (l < m->nl - 1)
		for (size_t i = 0; i < (size_t)B * out; i++)
			y[i] = y[i] > 0 ? y[i] : 0;
}

/* softmax cross-entropy of logits z[B x C] against labels; d = d loss / d z over a batch of total
 * samples (B of them here: a micro-batch's part); returns the loss summed over the B */
static double softmax_xent(const float *z, const int *labels, int B, int C, int total, float *d)
{
	double loss = 0;
	for (int i = 0; i < B; i++) {
		const float *zi = z + (size_t)i * C;
		float *di = d + (size_t)i * C, mx = zi[0], sum = 0;
		for (int j = 1; j < C; j++)
			mx = zi[j] > mx ? zi[j] : mx;
		for (int j = 0; j < C; j++)
			sum += di[j] = expf(zi[j] - mx);
		for (int j = 0; j < C; j++)
			di[j] = (di[j] / sum - (j == labels[i])) / (float)total;
		loss -= log(fmax(1e-30, (di[labels[i]] * total + 1)));
	}
	return loss;
}

/* layer l of the forward pass (the batch taken at layer 0, the loss after the last) */
static void mlp_forward_layer(struct model *m, const struct batch *b, int l, double slowdown, poke_fn poke,
	void *arg)
{
	int B = b->n;
	if (l == 0) {
		if (mlp_reserve(m, B) != 0)
			out_of_memory(B);
		m->rows = B;
		m->labels = b->y;
		m->act[0] = b->x;
	}
	double t = now_ms();
	layer_forward(m, l, m->act[l], m->act[l + 1], B, poke, arg);
	if (slowdown > 1)
		burn((slowdown - 1) * (now_ms() - t), poke, arg);
	if (l == m->nl - 1)
		m->loss = softmax_xent(m->act[m->nl], m->labels, B, m->dims[m->nl], B, m->delta) / B;
}

static void mlp_forward(struct model *m, const struct batch *b, double slowdown)
{
	for (int l = 0; l < m->nl; l++)
		mlp_forward_layer(m, b, l, slowdown, NULL, NULL);
}

/* layer l's gradients added to (gw += x^T dy, gb += the rows of dy) from its input x[B x dims[l]]
 * and the loss's gradient dy at its output; dx = dy W^T where x > 0 (the ReLU before), unless NULL */
static void layer_backward(struct model *m, int l, const float *x, const float *dy, float *dx, int B, poke_fn poke,
	void *arg)
{
	int in = m->dims[l], out = m->dims[l + 1];
	float *gw = mlp_w(m, m->g, l), *gb = mlp_b(m, m->g, l);
	for (int r = 0; r < B; r += POKE_ROWS) {
		int n = B - r < POKE_ROWS ? B - r : POKE_ROWS;
		gemm_tn(in, out, n, x + (size_t)r * in, dy + (size_t)r * out, gw);
		for (int i = r; i < r + n; i++)
			for (int j = 0; j < out; j++)
				gb[j] += dy[(size_t)i * out + j];
		if (poke)
			poke(arg);
	}
	if (!dx)
		return;
	for (int r = 0; r < B; r += POKE_ROWS) {
		int n = B - r < POKE_ROWS ? B - r : POKE_ROWS;
		float *dp = dx + (size_t)r * in;
		gemm_nt(n, in, out, dy + (size_t)r * out, mlp_w(m, m->p, l), dp);
		const float *a = x + (size_t)r * in;
		for (size_t i = 0; i < (size_t)n * in; i++)
			dp[i] = a[i] > 0 ? dp[i] : 0;
		if (poke)
			poke(arg);
	}
}

static void mlp_backward(struct model *m, int l, poke_fn poke, void *arg)
{
	memset(mlp_w(m, m->g, l), 0, m->count[l] * sizeof(float));
	layer_backward(m, l, m->act[l], m->delta, l ? m->delta2 : NULL, m->rows, poke, arg);
	if (l == 0)
		return;
	float *t = m->delta;
	m->delta = m->delta2;
	m->delta2 = t;
}

/* ---- token model ---- */

static int tok_reserve(struct model *m, int n, int lp)
{
	size_t tok = (size_t)n * lp;
	if (tok > m->cap_tok) {
		for (int l = 0; l <= m->nl; l++) {
			free(m->xin[l]);
			m->xin[l] = malloc(tok * m->d * sizeof(float));
			if (!m->xin[l])
				return -1;
		}
		for (int l = 0; l < m->nl; l++) {
			free(m->x1[l]);
			free(m->h[l]);
			m->x1[l] = malloc(tok * m->d * sizeof(float));
			m->h[l] = malloc(tok * m->f * sizeof(float));
			if (!m->x1[l] || !m->h[l])
				return -1;
		}
		free(m->dx);
		free(m->dx1);
		m->dx = malloc(tok * m->d * sizeof(float));
		m->dx1 = malloc(tok * m->d * sizeof(float));
		if (!m->dx || !m->dx1)
			return -1;
		m->cap_tok = tok;
	}
	if (lp > m->cap_lp) {
		free(m->scores);
		free(m->dh);
		m->scores = malloc((size_t)lp * lp * sizeof(float));
		m->dh = malloc((size_t)lp * m->f * sizeof(float));
		if (!m->scores || !m->dh)
			return -1;
		m->cap_lp = lp;
	}
	return 0;
}

/* S = softmax(X X^T / sqrt(d)) for one sequence */
static void attention_scores(struct model *m, const float *x)
{
	int lp = m->lp;
	float *S = m->scores, scale = 1.0f / sqrtf((float)m->d);
	gemm_nt(lp, lp, m->d, x, x, S);
	for (int i = 0; i < lp; i++) {
		float *r = S + (size_t)i * lp, mx = r[0] * scale, sum = 0;
		for (int j = 0; j < lp; j++)
			mx = r[j] * scale > mx ? r[j] * scale : mx;
		for (int j = 0; j < lp; j++)
			sum += r[j] = expf(r[j] * scale - mx);
		for (int j = 0; j < lp; j++)
			r[j] /= sum;
	}
}

static void tok_forward(struct model *m, const struct batch *b, double slowdown)
{
	m->n = b->n;
	m->lp = b->len_max;
	if (tok_reserve(m, m->n, m->lp) != 0)
		out_of_memory(m->n);
	int d = m->d, f = m->f, lp = m->lp;
	size_t per = (size_t)lp * d;
	for (size_t t = 0; t < (size_t)m->n * lp; t++)
		memcpy(m->xin[0] + t * d, m->emb + (size_t)b->tok[t] * d, d * sizeof(float));
	for (int l = 0; l < m->nl; l++) {
		double t0 = now_ms();
		const float *w1 = m->p + m->first[l], *w2 = w1 + (size_t)d * f;
		for (int s = 0; s < m->n; s++) {
			const float *x = m->xin[l] + s * per;
			float *x1 = m->x1[l] + s * per, *h = m->h[l] + (size_t)s * lp * f;
			float *y = m->xin[l + 1] + s * per;
			attention_scores(m, x);
			memcpy(x1, x, per * sizeof(float));
			gemm_nn(lp, d, lp, m->scores, x, x1);
			memset(h, 0, (size_t)lp * f * sizeof(float));
			gemm_nn(lp, f, d, x1, w1, h);
			for (size_t i = 0; i < (size_t)lp * f; i++)
				h[i] = h[i] > 0 ? h[i] : 0;
			memcpy(y, x1, per * sizeof(float));
			gemm_nn(lp, d, f, h, w2, y);
		}
		if (slowdown > 1)
			burn((slowdown - 1) * (now_ms() - t0), NULL, NULL);
	}
	/* loss: the mean of the last layer's output; its gradient is a constant */
	size_t all = (size_t)m->n * per;
	double sum = 0;
	for (size_t i = 0; i < all; i++)
		sum += m->xin[m->nl][i];
	m->loss = sum / (double)all;
	for (size_t i = 0; i < all; i++)
		m->dx[i] = 1.0f / (float)all;
}

static void tok_backward(struct model *m, int l, poke_fn poke, void *arg)
{
	int d = m->d, f = m->f, lp = m->lp;
	size_t per = (size_t)lp * d;
	const float *w1 = m->p + m->first[l], *w2 = w1 + (size_t)d * f;
	float *gw1 = m->g + m->first[l], *gw2 = gw1 + (size_t)d * f;
	memset(gw1, 0, m->count[l] * sizeof(float));
	for (int s = 0; s < m->n; s++) {
		float *dx = m->dx + s * per, *dx1 = m->dx1 + s * per, *dh = m->dh;
		const float *h = m->h[l] + (size_t)s * lp * f, *x1 = m->x1[l] + s * per;
		/* y = x1 + relu(x1 W1) W2 */
		gemm_tn(f, d, lp, h, dx, gw2);
		gemm_nt(lp, f, d, dx, w2, dh);
		for (size_t i = 0; i < (size_t)lp * f; i++)
			dh[i] = h[i] > 0 ? dh[i] : 0;
		gemm_tn(d, f, lp, x1, dh, gw1);
		/* dx1 = dx + dh W1^T */
		gemm_nt(lp, d, f, dh, w1, dx1);
		for (size_t i = 0; i < per; i++)
			dx1[i] += dx[i];
		/* x1 = x + S x, with S held constant: dx = dx1 + S^T dx1 */
		attention_scores(m, m->xin[l] + s * per);
		memcpy(dx, dx1, per * sizeof(float));
		gemm_tn(lp, d, lp, m->scores, dx1, dx);
		if (poke)
			poke(arg);
	}
}

void model_forward(struct model *m, const struct batch *b, double slowdown)
{
	if (m->task == TASK_MLP)
		mlp_forward(m, b, slowdown);
	else
		tok_forward(m, b, slowdown);
}

void model_backward_layer(struct model *m, int l, double slowdown, poke_fn poke, void *arg)
{
	double t = now_ms();
	if (m->task == TASK_MLP)
		mlp_backward(m, l, poke, arg);
	else
		tok_backward(m, l, poke, arg);
	if (slowdown > 1)
		burn((slowdown - 1) * (now_ms() - t), poke, arg);
}

void model_forward_layer(struct model *m, const struct batch *b, int l, double slowdown, poke_fn poke, void *arg)
{
	mlp_forward_layer(m, b, l, slowdown, poke, arg);
}

float *model_params_of(struct model *m)
{
	return m->p;
}

/* ---- pipeline stages (pipe.c): the MLP's layers on rows the caller holds ---- */

int model_dim(const struct model *m, int i)
{
	return m->dims[i];
}

void model_stage_forward(struct model *m, int l, const float *x, float *y, int rows, double slowdown, poke_fn poke,
	void *arg)
{
	double t = now_ms();
	layer_forward(m, l, x, y, rows, poke, arg);
	if (slowdown > 1)
		burn((slowdown - 1) * (now_ms() - t), poke, arg);
}

void model_stage_backward(struct model *m, int l, const float *x, const float *dy, float *dx, int rows,
	double slowdown, poke_fn poke, void *arg)
{
	double t = now_ms();
	layer_backward(m, l, x, dy, dx, rows, poke, arg);
	if (slowdown > 1)
		burn((slowdown - 1) * (now_ms() - t), poke, arg);
}

double model_stage_loss(const struct model *m, const float *z, const int *labels, int rows, int total, float *dz)
{
	return softmax_xent(z, labels, rows, m->dims[m->nl], total, dz);
}

void model_burn(double ms, poke_fn poke, void *arg)
{
	burn(ms, poke, arg);
}
