/* What a process was doing when its file ended, for the hang verdict (findhang.c): its calls in
 * flight (format 2.9: the writer records a call that has not returned after DDPSPY_INFLIGHT_MS,
 * and every call in flight at the file's last flush), those that no later event of their thread
 * ended, and per collective sequence space (a communicator, or a gloo operation) the highest
 * sequence number completed and called. */
#include <stdio.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "tracefile.h"

/* the space of collective v (comm, kind), added when new; NULL when full */
static struct an_space *space_of(struct an_hang *h, const struct ev *v)
{
	int16_t kind = v->kind == DDPSPY_EV_MPI_ICOLL ? DDPSPY_EV_MPI_COLL : v->kind;
	for (int i = 0; i < h->nspace; i++)
		if (h->space[i].comm == v->comm && h->space[i].kind == kind)
			return &h->space[i];
	if (h->nspace == AN_SPACES)
		return NULL;
	struct an_space *s = &h->space[h->nspace++];
	*s = (struct an_space){ .comm = v->comm, .kind = kind, .done_op = -1, .issued_op = -1, .done = -1, .issued = -1 };
	return s;
}

static void issued(struct an_hang *h, const struct ev *v, int completed)
{
	struct an_space *s = v->seq >= 0 && (an_kind(v->kind)->m & DDPSPY_KM_COLL) ? space_of(h, v) : NULL;
	if (!s)
		return;
	if (v->seq > s->issued) {
		s->issued = v->seq;
		s->issued_op = v->op;
	}
	if (completed && v->seq > s->done) {
		s->done = v->seq;
		s->done_op = v->op;
		s->done_t = v->t + v->d;
	}
}

void an_stuck_add(struct proc *p, const struct trace_file *f, const struct trace_inflight *c)
{
	struct an_hang *h = &p->hang;
	struct ev v;
	if (!an_convert(&c->ev, &v))
		return;
	if (c->fdclass > 0 && c->fdclass < DDPSPY_FDCLASS_COUNT) /* (what the writer found, not the call's guess) */
		v.fdclass = (int8_t)c->fdclass;
	if (c->at_ns > h->last)
		h->last = c->at_ns;
	issued(h, &v, 0);
	/* the same call seen again (a later look, the file's end): its latest */
	int i = 0;
	while (i < h->nstuck && !(h->stuck[i].tid == c->ev.tid && h->stuck[i].raw == c->ev.raw))
		i++;
	if (i == h->nstuck) {
		if (h->nstuck == AN_STUCK) { /* full: the latest started gives way, the longest in flight stay */
			int late = 0;
			for (int k = 1; k < h->nstuck; k++)
				if (h->stuck[k].v.t > h->stuck[late].v.t)
					late = k;
			h->stuck_over++;
			if (h->stuck[late].v.t <= v.t)
				return;
			i = late;
		} else {
			h->nstuck++;
		}
	}
	struct an_stuck *s = &h->stuck[i];
	s->v = v;
	s->raw = c->ev.raw;
	s->tid = c->ev.tid;
	s->end = c->end;
	snprintf(s->path, sizeof s->path, "%.*s", (int)sizeof s->path - 1, c->path);
	char fr[AN_STUCK_CALLERS + 1][112];
	int nf = an_frames(f, c->ev.stack, fr, AN_STUCK_CALLERS + 1);
	memcpy(s->site, nf > 0 ? fr[0] : "", nf > 0 ? sizeof s->site : 1);
	s->ncallers = nf > 1 ? nf - 1 : 0;
	for (int k = 0; k < s->ncallers; k++)
		memcpy(s->callers[k], fr[k + 1], sizeof s->callers[k]);
}

void an_stuck_event(struct proc *p, const struct trace_event *e, const struct ev *v)
{
	struct an_hang *h = &p->hang;
	if (e->t_ns + e->dur_ns > h->last)
		h->last = e->t_ns + e->dur_ns;
	if (!v)
		return;
	/* a call in flight that returned: the event of its thread that starts where it did */
	for (int i = 0; i < h->nstuck; i++)
		if (h->stuck[i].tid == e->tid && h->stuck[i].raw == e->raw) {
			h->stuck[i] = h->stuck[--h->nstuck];
			break;
		}
	unsigned m = an_kind(v->kind)->m;
	if (DDPSPY_KM_CAT(m) == DDPSPY_CAT_COMMS && !(m & DDPSPY_KM_NONBLOCKING) && v->d > h->comms_max)
		h->comms_max = v->d;
	issued(h, v, !(m & DDPSPY_KM_NONBLOCKING));
}

void an_stuck_alive(struct proc *p, int64_t t)
{
	struct an_hang *h = &p->hang;
	if (t > h->last) /* (a hung rank's calls were in flight till here) */
		h->last = t;
}

void an_stuck_loaded(struct proc *p, const struct trace_file *f)
{
	snprintf(p->hang.end_reason, sizeof p->hang.end_reason, "%s", f->ended ? f->end_reason : "");
}
