/* What each event kind means to the analysis, read from the kinds table in common/format.h (its
 * category and properties, the fourth column) and from its argument names (where its descriptor,
 * bytes, operation, communicator, sequence number, peer and path are). Every phase asks here;
 * none switches on kinds. */
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "trace.h"

static struct kind kinds[DDPSPY_EV_COUNT];
static const struct kind unknown = { /* a newer writer's kind: its time is host time */
	.m = DDPSPY_CAT_HOST, .fd = -1, .fdclass = -1, .bytes = -1, .op = -1, .comm = -1, .seq = -1,
	.peer = -1, .begin = -1, .path = -1,
};
static int ready;

/* the position of name in the comma-separated list args, -1 when absent */
static int8_t position(const char *args, const char *name)
{
	size_t n = strlen(name);
	int i = 0;
	for (const char *p = args; *p; i++) {
		size_t l = strcspn(p, ",");
		if (l == n && !memcmp(p, name, n))
			return (int8_t)i;
		p += l + (p[l] == ',');
	}
	return -1;
}

static void build(void)
{
	for (int k = 0; k < DDPSPY_EV_COUNT; k++) {
		const char *a = ddpspy_event_args[k];
		struct kind *d = &kinds[k];
		d->m = ddpspy_event_meaning[k];
		d->fd = position(a, d->m & DDPSPY_KM_FD_IS_RET ? "ret" : "fd");
		d->fdclass = position(a, "fdclass");
		d->bytes = position(a, "bytes");
		d->op = position(a, "op");
		d->comm = position(a, "comm");
		d->seq = position(a, "seq");
		d->peer = position(a, "peer");
		d->begin = position(a, "begin");
		d->path = position(a, "path");
	}
	ready = 1;
}

const struct kind *an_kind(int kind)
{
	if (!ready) /* (the collector's analysis is single-threaded) */
		build();
	return kind >= 0 && kind < DDPSPY_EV_COUNT ? &kinds[kind] : &unknown;
}

int an_category(const struct ev *e)
{
	const struct kind *k = an_kind(e->kind);
	int c = (int)DDPSPY_KM_CAT(k->m);
	/* reads of a device or an eventfd are not input */
	if ((k->m & DDPSPY_KM_INPUT_FD) && (e->fdclass == DDPSPY_FD_DEVICE || e->fdclass == DDPSPY_FD_ANON))
		return CAT_HOST;
	return c;
}

int an_is_coll(int kind)
{
	return (an_kind(kind)->m & (DDPSPY_KM_COLL | DDPSPY_KM_WAITS)) != 0;
}

int an_is_sync_kind(int kind)
{
	const struct kind *k = an_kind(kind);
	return (k->m & (DDPSPY_KM_COLL | DDPSPY_KM_WAITS)) || DDPSPY_KM_CAT(k->m) == DDPSPY_CAT_MARKER;
}

int an_completes(const struct ev *e)
{
	return (an_kind(e->kind)->m & DDPSPY_KM_WAITS) && e->op >= 0 && e->op < DDPSPY_OP_COUNT &&
	       (ddpspy_op_flags[e->op] & DDPSPY_OPF_DONE);
}

int an_kept_sync(const struct ev *e)
{
	return an_is_sync_kind(e->kind) && (!(an_kind(e->kind)->m & DDPSPY_KM_WAITS) || an_completes(e));
}

int an_blocking_coll(const struct ev *e)
{
	unsigned m = an_kind(e->kind)->m;
	return (m & DDPSPY_KM_COLL) && !(m & DDPSPY_KM_NONBLOCKING);
}

int an_exit_aligns(const struct ev *e)
{
	return e->seq >= 0 && an_blocking_coll(e) &&
	       ((an_kind(e->kind)->m & DDPSPY_KM_EXIT_ALIGNS) ||
		(e->op >= 0 && e->op < DDPSPY_OP_COUNT && (ddpspy_op_flags[e->op] & DDPSPY_OPF_SYM)));
}

int an_is_file_read(const struct ev *e)
{
	return (an_kind(e->kind)->m & DDPSPY_KM_READS) && e->fdclass == DDPSPY_FD_FILE;
}

/* e's argument at position i, or def when it has none there */
static int64_t arg(const struct trace_event *e, int i, int64_t def)
{
	return i >= 0 && i < e->nargs ? e->args[i] : def;
}

int an_convert(const struct trace_event *e, struct ev *v)
{
	const struct kind *k = an_kind(e->kind);
	if (DDPSPY_KM_CAT(k->m) == DDPSPY_CAT_NONE)
		return 0;
	v->t = e->t_ns;
	v->d = e->dur_ns;
	v->kind = (int16_t)e->kind;
	v->bytes = arg(e, k->bytes, -1);
	v->seq = (int32_t)arg(e, k->seq, -1);
	v->fd = (int32_t)arg(e, k->fd, -1);
	v->fdclass = (int8_t)arg(e, k->fdclass, 0);
	v->op = k->begin >= 0 ? (int8_t)(arg(e, k->begin, 0) != 0) : (int8_t)arg(e, k->op, -1); /* markers: 1 begin */
	/* one sequence space per operation where there is no communicator */
	v->comm = k->m & DDPSPY_KM_SEQ_PER_OP ? -2 - v->op : (int32_t)arg(e, k->comm, 0);
	v->path = -1;
	return 1;
}
