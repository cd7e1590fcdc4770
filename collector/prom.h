/* Prometheus' text exposition format and its HTTP answer, for ddpspy watch --prometheus (prom.c). */
#ifndef DDPSPY_PROM_H
#define DDPSPY_PROM_H

#include <stddef.h>

struct prom {
	char *buf;
	size_t n, cap;
	int failed;
};

/* a family: its HELP and TYPE ("counter", "gauge", "histogram", "summary") lines, once */
void prom_family(struct prom *p, const char *name, const char *type, const char *help);
/* a sample: name (the family's, or with _bucket, _sum, _count), nlabels pairs {name, value} */
void prom_sample(struct prom *p, const char *name, const char *const *labels, int nlabels, double v);
void prom_free(struct prom *p);
/* one HTTP connection answered (GET /metrics: body) and closed */
void prom_serve(int fd, const char *body, size_t n);
/* [HOST:]PORT listened on (no HOST: every address), non-blocking; -1 with a message from who */
int prom_listen(const char *spec, const char *who);
/* a wait of at most ms on listening socket lfd (-1: a sleep), answering each scrape meanwhile with
 * what fill(ctx) puts */
void prom_wait(int lfd, int ms, void (*fill)(const void *ctx, struct prom *p), const void *ctx);

#endif
