/* The commands' one option parser: each command states its options as a table (cli.c). */
#ifndef DDPSPY_CLI_H
#define DDPSPY_CLI_H

#include <stdio.h>

enum cli_type {
	CLI_FLAG,   /* no value: *(int *)dst = set */
	CLI_STR,    /* *(const char **)dst = the value */
	CLI_LONG,   /* *(long *)dst = a whole number in lo..hi */
	CLI_DOUBLE, /* *(double *)dst = a number in lo..hi */
	CLI_RANKS,  /* *(struct cli_ranks *)dst = a rank list like 0,2-3 (malloc'ed; the last one given) */
};

struct cli_ranks {
	int *v;
	int n;
};

struct cli_opt {
	const char *name, *alias; /* "-j" and "--jobs" (alias NULL: none); messages name name */
	enum cli_type type;
	void *dst;
	double lo, hi;            /* CLI_LONG, CLI_DOUBLE */
	const char *need;         /* what a bad value is told it needs: "a whole number >= 0" */
	int set;                  /* CLI_FLAG */
};

struct cli {
	const char *cmd;            /* "report": messages begin "ddpspy report: " */
	const struct cli_opt *opts; /* ended by one with name NULL */
	void (*usage)(FILE *out);
	int stop;                   /* the first positional argument, or what follows "--", ends the options:
				     * it and everything after are positional (ddpspy run's command) */
};

/* argv's options into their destinations, its positional arguments into pos (room for argc),
 * *npos of them: 0 to go on; 1 when -h or --help printed the usage on stdout (exit 0); -1 when a
 * message and the usage went to stderr (exit 2) */
int cli_parse(const struct cli *c, int argc, char **argv, char **pos, int *npos);

/* a rank list like 0,2-3 into *out (malloc'ed), *n of them; -1 when malformed or empty */
int cli_parse_ranks(const char *s, int **out, int *n);

#endif
