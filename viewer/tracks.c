/* ddpspy view's output (its events and metadata, the budget of events per file) and the tracks of
 * a rank beside its threads' calls: its GPU streams, the program's NVTX ranges, its steps with
 * their split and the findings, its input read rate, a pipeline stage's idle. Under view.c
 * (view_int.h). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../collector/json.h"
#include "view_int.h"

/* ns as microseconds with their nanoseconds: the same ns always prints the same */
void vo_us(FILE *o, const char *key, int64_t ns)
{
	const char *sign = ns < 0 ? "-" : "";
	uint64_t v = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
	fprintf(o, ",\"%s\":%s%llu.%03llu", key, sign, (unsigned long long)(v / 1000), (unsigned long long)(v % 1000));
}

void vo_ev(struct view *v, const char *ph, int pid, int tid, int64_t t)
{
	fprintf(v->o, ",\n{\"ph\":\"%s\",\"pid\":%d,\"tid\":%d", ph, pid, tid);
	vo_us(v->o, "ts", t - v->base);
	v->events++;
}

void vo_meta(struct view *v, const char *what, int pid, int tid, const char *name, long sort)
{
	fprintf(v->o, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"%s\",\"args\":{\"name\":", pid, tid, what);
	json_put_string(v->o, name, SIZE_MAX);
	fputs("}}", v->o);
	if (sort != LONG_MIN)
		fprintf(v->o, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"%s_sort_index\",\"args\":{\"sort_index\":%ld}}",
		      pid, tid, !strcmp(what, "process_name") ? "process" : "thread", sort);
}

void vo_seen_tid(struct view *v, int tid)
{
	for (int i = 0; i < v->ntids; i++)
		if (v->tids[i] == tid)
			return;
	if (v->ntids < (int)(sizeof v->tids / sizeof v->tids[0]))
		v->tids[v->ntids++] = tid;
}

/* whether the current rank's next event is written: none of a rank not shown; those exempt from
 * the budget (synchronizing calls) always; the others while the file's budget lasts and fits (room
 * for it: a track) holds. One not written of a rank shown counts as left out. */
int vo_take(struct view *v, int exempt, int fits)
{
	if (!v->show[v->r])
		return 0;
	if (!fits || (!exempt && v->used >= v->quota)) {
		v->left_out++;
		return 0;
	}
	v->used += !exempt;
	return 1;
}

/* NVTX: ranges drawn once they end, when they overlap a window (a push-pop range as a slice of
 * its thread, a start-end range, which may end on another thread, as an async slice of the rank),
 * marks as instants */
static int nvtx_shown(struct view *v, int64_t t0, int64_t t1)
{
	return vw_window_of(v->w, v->nw, t0, t1) >= 0 && vo_take(v, 0, 1);
}

static void nvtx_name(struct view *v, const char *m, int64_t domain)
{
	fputs(",\"cat\":\"nvtx\",\"name\":", v->o);
	json_put_string(v->o, m[0] ? m : "(range)", SIZE_MAX);
	fprintf(v->o, ",\"args\":{\"domain\":%lld}}", (long long)domain);
}

void vo_on_nvtx(void *ctx, const struct proc *p, const struct trace_event *e, int64_t t)
{
	static int8_t P_range = -2, P_id, P_domain, P_msg;
	struct view *v = ctx;
	if (P_range == -2) {
		P_range = an_argpos(DDPSPY_EV_NVTX, "range");
		P_id = an_argpos(DDPSPY_EV_NVTX, "id");
		P_domain = an_argpos(DDPSPY_EV_NVTX, "domain");
		P_msg = an_argpos(DDPSPY_EV_NVTX, "message");
	}
	int64_t range = an_arg(e, P_range, -1), id = an_arg(e, P_id, 0), domain = an_arg(e, P_domain, 0);
	char m[NVTX_NAME] = "";
	if (e->str && e->str_index == P_msg)
		snprintf(m, sizeof m, "%.*s", (int)(e->slen < sizeof m - 1 ? e->slen : sizeof m - 1), e->str);
	int pid = v->pid[v->r];
	if (range == DDPSPY_NVTX_PUSH || range == DDPSPY_NVTX_POP) {
		int i = 0;
		while (i < v->nnvt && v->nvt[i].tid != e->tid)
			i++;
		if (i == v->nnvt) {
			struct nvthr *n = realloc(v->nvt, (size_t)(i + 1) * sizeof *n);
			if (!n)
				return;
			v->nvt = n;
			v->nvt[v->nnvt++] = (struct nvthr){ .tid = e->tid };
		}
		struct nvthr *h = &v->nvt[i];
		if (range == DDPSPY_NVTX_PUSH) {
			if (h->depth < NVTX_DEPTH) {
				h->t[h->depth] = t;
				memcpy(h->msg[h->depth], m, sizeof m);
			}
			h->depth++;
		} else if (h->depth > 0 && --h->depth < NVTX_DEPTH && nvtx_shown(v, h->t[h->depth], t)) {
			vo_ev(v, "X", pid, e->tid, h->t[h->depth]);
			vo_us(v->o, "dur", t - h->t[h->depth]);
			nvtx_name(v, h->msg[h->depth], domain);
			vo_seen_tid(v, e->tid);
		}
	} else if (range == DDPSPY_NVTX_START) {
		struct nvstart *n = realloc(v->nvs, (size_t)(v->nnvs + 1) * sizeof *n);
		if (!n)
			return;
		v->nvs = n;
		v->nvs[v->nnvs] = (struct nvstart){ .id = id, .t = t, .tid = e->tid };
		memcpy(v->nvs[v->nnvs++].msg, m, sizeof m);
	} else if (range == DDPSPY_NVTX_END) {
		for (int i = 0; i < v->nnvs; i++) {
			if (v->nvs[i].id != id)
				continue;
			struct nvstart st = v->nvs[i];
			v->nvs[i] = v->nvs[--v->nnvs];
			if (!nvtx_shown(v, st.t, t))
				break;
			for (int end = 0; end < 2; end++) { /* (an async pair, the rank's own by id2.local) */
				vo_ev(v, end ? "e" : "b", pid, end ? e->tid : st.tid, end ? t : st.t);
				fprintf(v->o, ",\"id2\":{\"local\":\"0x%llx\"}", (unsigned long long)id);
				nvtx_name(v, st.msg, domain);
			}
			vo_seen_tid(v, st.tid);
			vo_seen_tid(v, e->tid);
			break;
		}
	} else if (range == DDPSPY_NVTX_MARK && nvtx_shown(v, t, t)) {
		vo_ev(v, "i", pid, e->tid, t);
		fputs(",\"s\":\"t\"", v->o);
		nvtx_name(v, m, domain);
		vo_seen_tid(v, e->tid);
	}
}
/* the rank's device work in the windows: a track per stream */
void vo_gpu_tracks(struct view *v)
{
	struct proc *p = v->a->ranks[v->r].p;
	uint32_t streams[MAX_STREAMS];
	int ns = 0;
	if (an_gpu_open(p) < 0) /* (a rank over its share: its work read again, for this rank only) */
		fprintf(stderr, "ddpspy view: %s could not be read again: rank %d's GPU tracks hold only its NCCL kernels "
			"and pageable copies\n", p->file, p->rank);
	for (size_t i = 0; i < an_gpu_nwork(p); i++) {
		struct gpuitem g;
		an_gpu_work(p, i, &g);
		int win = vw_window_of(v->w, v->nw, g.t, g.t + g.d);
		if (win < 0)
			continue;
		int s = 0;
		while (s < ns && streams[s] != g.stream)
			s++;
		if (s == ns && ns < MAX_STREAMS)
			streams[ns++] = g.stream;
		int shown = vo_take(v, 0, s < MAX_STREAMS);
		if (g.nccl && g.seq >= 0) {
			struct varr a = { .rank = v->r, .gpu = 1, .comm = g.comm, .seq = g.seq, .op = g.op, .t = g.t,
					  .end = g.t + g.d, .bytes = g.bytes, .tid = GPU_TID(v->r, s), .shown = shown };
			v->oom |= vw_arr_add(&v->arr, &a) < 0;
		}
		if (!shown)
			continue;
		vo_ev(v, "X", v->pid[v->r], GPU_TID(v->r, s), g.t);
		vo_us(v->o, "dur", g.d);
		fputs(",\"name\":", v->o);
		const char *name = an_gpu_work_name(p, i);
		if (name) {
			json_put_string(v->o, name, SIZE_MAX);
		} else if (g.plugin) { /* (NCCL's profiler plugin names no kernel: its operation) */
			char nm[48];
			snprintf(nm, sizeof nm, "NCCL %s", g.op >= 0 && g.op < DDPSPY_OP_COUNT ? ddpspy_op_names[g.op] : "collective");
			json_put_string(v->o, nm, SIZE_MAX);
		} else
			json_put_string(v->o, !strcmp(g.cls, "copy_in") ? "copy HtoD" : !strcmp(g.cls, "copy") ? "copy" : "kernel", SIZE_MAX);
		fprintf(v->o, ",\"cat\":\"gpu\",\"args\":{\"work\":\"%s\",\"stream\":%u,\"corr\":%u", g.nccl ? "nccl" : g.cls,
		      g.stream, g.corr);
		if (g.bytes > 0)
			fprintf(v->o, ",\"bytes\":%lld", (long long)g.bytes);
		if (!strcmp(g.cls, "copy_in") || !strcmp(g.cls, "copy"))
			fprintf(v->o, ",\"pageable\":%s", g.pageable ? "true" : "false");
		if (g.nccl && g.seq >= 0) {
			if (g.comm != INT32_MIN)
				fprintf(v->o, ",\"comm\":%d", g.comm);
			fprintf(v->o, ",\"seq\":%d", g.seq);
			if (g.op >= 0 && g.op < DDPSPY_OP_COUNT)
				fprintf(v->o, ",\"op\":\"%s\"", ddpspy_op_names[g.op]);
		}
		if (g.launch != g.t)
			vo_us(v->o, "launched_at", g.launch - v->base);
		if (g.plugin)
			fputs(",\"source\":\"nccl-plugin\"", v->o);
		fputs("}}", v->o);
	}
	for (int s = 0; s < ns && v->show[v->r]; s++) {
		char b[64];
		if (streams[s] == UINT32_MAX) /* (an_gpu_work's stream for the plugin's kernels) */
			snprintf(b, sizeof b, "NCCL kernels (NCCL's profiler plugin)");
		else
			snprintf(b, sizeof b, "GPU %d stream %u", p->gpu ? v->a->ranks[v->r].gpu.device : 0, streams[s]);
		vo_meta(v, "thread_name", v->pid[v->r], GPU_TID(v->r, s), b, 2000 + s);
	}
	an_gpu_close(p);
}

/* the findings that name rank (-1: none) as instants at the start of each window: of ri's first
 * step in it, or of the window when ri is NULL */
void vo_finding_marks(struct view *v, int pid, int tid, int rank, const struct rankinfo *ri)
{
	const struct analysis *a = v->a;
	for (int i = 0; i < a->nfindings; i++) {
		const struct finding *f = &a->findings[i];
		if (f->rank != rank)
			continue;
		for (int w = 0; w < v->nw; w++) {
			char nm[64];
			snprintf(nm, sizeof nm, "%s [%.2f]", f->kind, f->severity);
			vo_ev(v, "i", pid, tid, ri && ri->steps && v->w[w].first >= 0 ? ri->steps[v->w[w].k0].t0 : v->w[w].t0);
			fputs(",\"s\":\"t\",\"cat\":\"finding\",\"name\":", v->o);
			json_put_string(v->o, nm, SIZE_MAX);
			fprintf(v->o, ",\"args\":{\"kind\":\"%s\",\"severity\":%.3f,\"title\":", f->kind, f->severity);
			json_put_string(v->o, f->title, SIZE_MAX);
			fputs(",\"evidence\":", v->o);
			json_put_string(v->o, f->text, SIZE_MAX);
			for (int k = 0; k < 4 && f->advice[k]; k++) {
				fprintf(v->o, ",\"advice_%d\":", k + 1);
				json_put_string(v->o, f->advice[k], SIZE_MAX);
			}
			fputs("}}", v->o);
		}
	}
}

/* the rank's steps track: its steps in the windows, with their split, and its findings */
void vo_steps_track(struct view *v)
{
	const struct rankinfo *ri = &v->a->ranks[v->r];
	int pid = v->pid[v->r];
	if (!ri->steps)
		return;
	for (int w = 0; w < v->nw; w++) {
		for (size_t k = v->w[w].k0; k <= v->w[w].k1; k++) {
			const struct rankstep *s = &ri->steps[k];
			char nm[32];
			snprintf(nm, sizeof nm, "step %d", vw_step_number(v->a, k));
			vo_ev(v, "X", pid, STEP_TID(v->r), s->t0);
			vo_us(v->o, "dur", s->t1 - s->t0);
			fputs(",\"cat\":\"step\",\"name\":", v->o);
			json_put_string(v->o, nm, SIZE_MAX);
			fprintf(v->o, ",\"args\":{\"ms\":%.3f,\"compute_ms\":%.3f,\"data_ms\":%.3f,\"comms_ms\":%.3f,\"host_ms\":%.3f,"
				     "\"waiting_for_peers_ms\":%.3f,\"latest_arrival_ms\":%.3f}}",
			      MS(s->t1 - s->t0), s->cat[CAT_COMPUTE], s->cat[CAT_DATA], s->cat[CAT_COMMS], s->cat[CAT_HOST],
			      s->wait + s->p2p[0] + s->p2p[1], s->late_max);
		}
	}
	vo_finding_marks(v, pid, STEP_TID(v->r), ri->rank, ri);
	vo_meta(v, "thread_name", pid, STEP_TID(v->r), "steps", 0);
}

/* the input read rate of the rank and its workers in the windows, a counter */
void vo_rate_track(struct view *v)
{
	double any = 0;
	for (int i = 0; i < v->nw * RATE_BINS; i++)
		any += v->bins[i];
	if (!any || !v->show[v->r])
		return;
	for (int w = 0; w < v->nw; w++) {
		int64_t span = v->w[w].t1 - v->w[w].t0;
		double binw = span > 0 ? (double)span / RATE_BINS : 1;
		for (int b = 0; b <= RATE_BINS; b++) {
			double x = b < RATE_BINS ? v->bins[w * RATE_BINS + b] / (binw / 1e9) / 1e6 : 0;
			vo_ev(v, "C", v->pid[v->r], 0, v->w[w].t0 + (int64_t)(b * binw));
			fprintf(v->o, ",\"name\":\"input read\",\"args\":{\"MB/s\":%.3f}}", x);
		}
	}
}

/* A pipeline stage's idle (collector/findpipe.c): each wait of its training thread for another
 * stage in point-to-point calls (p2p.c), as a slice of its own track, so that the bubble and the
 * waits for a slower stage stand out between the stages, which are shown in order */
void vo_pipe_track(struct view *v)
{
	const struct analysis *a = v->a;
	const struct stepdata *sd = a->sd;
	int r = v->r, n = 0;
	if (!a->pipe_stage || !sd || !sd->pblk || a->pipe_stage[r] < 0)
		return;
	for (size_t i = sd->pbo[r]; i < sd->pbo[r + 1]; i++) {
		const struct an_p2pblk *b = &sd->pblk[i];
		if (b->L < 0 || b->wait <= 0 || vw_window_of(v->w, v->nw, b->t, b->t + b->wait) < 0)
			continue;
		char nm[96];
		snprintf(nm, sizeof nm, "idle: waiting for stage %d (rank %d, late %s)", a->pipe_stage[b->L],
			 a->ranks[b->L].rank, b->late_sender ? "sender" : "receiver");
		vo_ev(v, "X", v->pid[r], PIPE_TID(r), b->t);
		vo_us(v->o, "dur", b->wait);
		fputs(",\"cat\":\"idle\",\"name\":", v->o);
		json_put_string(v->o, nm, SIZE_MAX);
		fprintf(v->o, ",\"args\":{\"stage\":%d,\"waited_for_stage\":%d,\"ms\":%.3f}}", a->pipe_stage[r],
			a->pipe_stage[b->L], MS(b->wait));
		n++;
	}
	if (n)
		vo_meta(v, "thread_name", v->pid[r], PIPE_TID(r), "pipeline stage idle", 1);
}


/* A pipeline stage's idle on its device: each send's or receive's kernel from its start to the
 * start of the peer's kernel of the same message (the last arrival of that instance), as a slice
 * of the stage's idle track, as its training thread's waits are on the host (vo_pipe_track).
 * After every rank's device tracks: the instances need both ends. */
void vo_pipe_device(struct view *v)
{
	const struct analysis *a = v->a;
	struct varrs *s = &v->arr;
	char *named = a->pipe_stage ? calloc((size_t)a->nranks, 1) : NULL;
	if (!named) {
		v->oom |= a->pipe_stage != NULL;
		return;
	}
	vw_arr_sort(s);
	for (size_t i = 0; i < s->n;) {
		size_t j = vw_inst(s, i);
		const struct varr *L = &s->v[j - 1];
		for (size_t m = i; L->gpu && an_msg_op(L->op) && m + 1 < j; m++) {
			const struct varr *r = &s->v[m];
			int st = a->pipe_stage[r->rank];
			if (!r->shown || r->rank == L->rank || r->t >= L->t || st < 0 || a->pipe_stage[L->rank] < 0)
				continue;
			char nm[96];
			snprintf(nm, sizeof nm, "idle: waiting for stage %d (rank %d)", a->pipe_stage[L->rank],
				 a->ranks[L->rank].rank);
			vo_ev(v, "X", v->pid[r->rank], PIPE_TID(r->rank), r->t);
			vo_us(v->o, "dur", L->t - r->t);
			fputs(",\"cat\":\"idle\",\"name\":", v->o);
			json_put_string(v->o, nm, SIZE_MAX);
			fprintf(v->o, ",\"args\":{\"stage\":%d,\"waited_for_stage\":%d,\"ms\":%.3f,\"on\":\"device\"}}", st,
				a->pipe_stage[L->rank], MS(L->t - r->t));
			if (!named[r->rank]++)
				vo_meta(v, "thread_name", v->pid[r->rank], PIPE_TID(r->rank), "pipeline stage idle (device)", 1);
		}
		i = j;
	}
	free(named);
}
