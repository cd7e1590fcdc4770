/* The commands' one option parser (cli.h): report, view, compare, dump and run each give a table of
 * their options; a value is checked here, and a bad one or an unknown option is said the same way
 * by every command. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

int cli_parse_ranks(const char *s, int **out, int *n)
{
	int *v = NULL;
	size_t cap = 0;
	*n = 0;
	while (*s) {
		char *end;
		long a = strtol(s, &end, 10), b;
		if (end == s || a < 0 || a > 1 << 24)
			goto bad;
		b = a;
		if (*end == '-') {
			s = end + 1;
			b = strtol(s, &end, 10);
			if (end == s || b < a || b > 1 << 24)
				goto bad;
		}
		for (long r = a; r <= b; r++) {
			int *nv = room_for(v, (size_t)*n, &cap, sizeof *nv, 16);
			if (!nv)
				goto bad;
			v = nv;
			v[(*n)++] = (int)r;
		}
		if (*end == ',')
			end++;
		else if (*end)
			goto bad;
		s = end;
	}
	if (!*n)
		goto bad;
	*out = v;
	return 0;
bad:
	free(v);
	*n = 0;
	return -1;
}

/* the value s of o into its destination; -1 when it is not what o needs */
static int take(const struct cli_opt *o, const char *s)
{
	char *end;
	errno = 0;
	switch (o->type) {
	case CLI_STR:
		*(const char **)o->dst = s;
		return 0;
	case CLI_LONG: {
		long x = strtol(s, &end, 10);
		if (errno || end == s || *end || x < o->lo || x > o->hi)
			return -1;
		*(long *)o->dst = x;
		return 0;
	}
	case CLI_DOUBLE: {
		double x = strtod(s, &end);
		if (end == s || *end || !(x >= o->lo && x <= o->hi))
			return -1;
		*(double *)o->dst = x;
		return 0;
	}
	case CLI_RANKS: {
		struct cli_ranks *r = o->dst, got;
		if (cli_parse_ranks(s, &got.v, &got.n) < 0)
			return -1;
		free(r->v);
		*r = got;
		return 0;
	}
	case CLI_FLAG:
		break;
	}
	return -1;
}

static const struct cli_opt *find(const struct cli *c, const char *s)
{
	for (const struct cli_opt *o = c->opts; o && o->name; o++)
		if (!strcmp(s, o->name) || (o->alias && !strcmp(s, o->alias)))
			return o;
	return NULL;
}

int cli_parse(const struct cli *c, int argc, char **argv, char **pos, int *npos)
{
	*npos = 0;
	for (int i = 0; i < argc; i++) {
		const char *s = argv[i];
		if (c->stop && (!strcmp(s, "--") || s[0] != '-')) {
			for (int k = i + !strcmp(s, "--"); k < argc; k++)
				pos[(*npos)++] = argv[k];
			return 0;
		}
		if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
			c->usage(stdout);
			return 1;
		}
		if (s[0] != '-') {
			pos[(*npos)++] = argv[i];
			continue;
		}
		const struct cli_opt *o = find(c, s);
		if (o && o->type == CLI_FLAG) {
			*(int *)o->dst = o->set;
			continue;
		}
		if (!o || i + 1 >= argc) {
			fprintf(stderr, "ddpspy %s: unknown option or missing value: %s\n", c->cmd, s);
			c->usage(stderr);
			return -1;
		}
		if (take(o, argv[++i]) < 0) {
			fprintf(stderr, "ddpspy %s: %s needs %s, not '%s'\n", c->cmd, o->name, o->need, argv[i]);
			return -1;
		}
	}
	return 0;
}
