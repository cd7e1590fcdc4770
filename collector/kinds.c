/* What each event kind means to the analysis, as a table built when the program starts from the
 * kinds table in common/format.h: its category and properties (the fourth column), and where its
 * descriptor, bytes, operation, communicator, sequence number, peer and path are (from its
 * argument names). The questions the phases ask of it, and the conversion of a trace event, are
 * inline in analysis_int.h; no phase switches on kinds. */
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "trace.h"

/* the table, built when the program starts; its last entry stands for a kind this collector does
 * not know (a newer writer's): its time is host time and no argument is read */
struct kind an_kinds[DDPSPY_EV_COUNT + 1];

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

int8_t an_argpos(int kind, const char *name)
{
	return kind >= 0 && kind < DDPSPY_EV_COUNT ? position(ddpspy_event_args[kind], name) : -1;
}

__attribute__((constructor)) static void build(void)
{
	for (int k = 0; k <= DDPSPY_EV_COUNT; k++) {
		const char *a = k < DDPSPY_EV_COUNT ? ddpspy_event_args[k] : "";
		struct kind *d = &an_kinds[k];
		d->m = k < DDPSPY_EV_COUNT ? ddpspy_event_meaning[k] : DDPSPY_CAT_HOST;
		d->fd = position(a, d->m & DDPSPY_KM_FD_IS_RET ? "ret" : "fd");
		d->fdclass = position(a, "fdclass");
		d->bytes = position(a, "bytes");
		d->op = position(a, "op");
		d->comm = position(a, "comm");
		d->seq = position(a, "seq");
		d->peer = position(a, "peer");
		d->begin = position(a, "begin");
		d->path = position(a, "path");
		d->tag = position(a, "tag");
		d->req = position(a, "request");
		d->count = position(a, "count");
		d->rpeer = position(a, "rpeer");
		d->rtag = position(a, "rtag");
	}
}
