/* A finding and its evidence: typed values appended in order (analysis.h's struct fv), one that
 * does not fit left out (a view closes what is left open); and the words the families share. The
 * base of the findings (findings_int.h); it calls no family. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "findings_int.h"

struct finding *an_add_finding(struct analysis *a, const char *kind, int rank, double sev)
{
	if (a->nfindings == MAX_FINDINGS)
		return NULL;
	struct finding *f = &a->findings[a->nfindings++];
	memset(f, 0, sizeof *f);
	snprintf(f->kind, sizeof f->kind, "%s", kind);
	f->rank = rank;
	f->severity = sev < 0 ? 0 : sev > 1 ? 1 : sev;
	return f;
}

static struct fv *ev_add(struct finding *f, const char *key, int type)
{
	if (f->nev == MAX_EVIDENCE)
		return NULL;
	struct fv *v = &f->ev[f->nev++];
	memset(v, 0, sizeof *v);
	v->key = key;
	v->type = (uint8_t)type;
	return v;
}

void an_ev_int(struct finding *f, const char *key, int64_t i)
{
	struct fv *v = ev_add(f, key, FV_INT);
	if (v)
		v->v.i = i;
}

void an_ev_num(struct finding *f, const char *key, double d, int decimals)
{
	struct fv *v = ev_add(f, key, FV_NUM);
	if (v) {
		v->v.d = d;
		v->decimals = (uint8_t)decimals;
	}
}

void an_ev_bool(struct finding *f, const char *key, int b)
{
	struct fv *v = ev_add(f, key, FV_BOOL);
	if (v)
		v->v.i = !!b;
}

/* a string (NULL: null), cut to what room is left in strs */
void an_ev_str(struct finding *f, const char *key, const char *s)
{
	size_t room = sizeof f->strs - f->nstrs;
	if (!s || room < 2) {
		ev_add(f, key, FV_NULL);
		return;
	}
	struct fv *v = ev_add(f, key, FV_STR);
	if (!v)
		return;
	size_t n = strnlen(s, room - 1);
	memcpy(f->strs + f->nstrs, s, n);
	f->strs[f->nstrs + n] = 0;
	v->v.s = f->nstrs;
	f->nstrs += (uint32_t)n + 1;
}

void an_ev_hidden_num(struct finding *f, const char *key, double d)
{
	int n = f->nev;
	an_ev_num(f, key, d, 0);
	if (f->nev > n)
		f->ev[n].hidden = 1;
}

void an_ev_hidden_str(struct finding *f, const char *key, const char *s)
{
	int n = f->nev;
	an_ev_str(f, key, s);
	if (f->nev > n)
		f->ev[n].hidden = 1;
}

/* a list or an object (type FV_LIST, FV_OBJ), up to the next an_ev_end */
void an_ev_open(struct finding *f, const char *key, int type)
{
	ev_add(f, key, type);
}

void an_ev_end(struct finding *f)
{
	ev_add(f, NULL, FV_END);
}

void an_human_bytes(double b, char *buf, size_t n)
{
	if (b >= 1048576)
		snprintf(buf, n, "%.1f MiB", b / 1048576);
	else if (b >= 1024)
		snprintf(buf, n, "%.1f KiB", b / 1024);
	else
		snprintf(buf, n, "%.0f B", b);
}

const char *an_op_name(int op)
{
	const char *s = ddpspy_name(ddpspy_op_names, DDPSPY_OP_COUNT, op);
	return s ? s : "collective";
}
