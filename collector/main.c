/* The ddpspy command: dispatches to its subcommands. */
#include <stdio.h>
#include <string.h>

int cmd_run(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_view(int argc, char **argv);
int cmd_watch(int argc, char **argv);

static void usage(FILE *to)
{
	fprintf(to, "usage: ddpspy COMMAND [ARGS]\n"
		    "  run [-o DIR] -- CMD...   run CMD with ddpspy's preload library, traces in DIR\n"
		    "  report DIR... [--json]    the verdict: what bounds the job, which rank, what to change\n"
		    "  view DIR... -o FILE[.gz]  the job's timeline for Perfetto UI or Chromium's DevTools\n"
		    "  watch DIR [--interval S] [--hang-after S] [--exit-on hang]  follow a running job\n"
		    "  compare --weak|--strong DIR... [--json]  scaling across world sizes\n"
		    "  dump DIR|FILE... [--json] [--summary]  print every process, thread and event\n"
		    "  version                  print the version\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 2, argv + 2);
	if (!strcmp(argv[1], "report"))
		return cmd_report(argc - 2, argv + 2);
	if (!strcmp(argv[1], "view"))
		return cmd_view(argc - 2, argv + 2);
	if (!strcmp(argv[1], "watch"))
		return cmd_watch(argc - 2, argv + 2);
	if (!strcmp(argv[1], "compare"))
		return cmd_compare(argc - 2, argv + 2);
	if (!strcmp(argv[1], "dump"))
		return cmd_dump(argc - 2, argv + 2);
	if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
		printf("ddpspy %s\n", DDPSPY_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "ddpspy: unknown command %s\n", argv[1]);
	usage(stderr);
	return 2;
}
