/* Prometheus' text exposition format (version 0.0.4), for ddpspy watch --prometheus: a family's
 * HELP and TYPE once, then its samples, each `name{label="value",...} value`. Label values escape
 * backslash, double quote and newline; HELP text backslash and newline; values are Go's float
 * text (NaN, +Inf, -Inf). And the one-request HTTP answer that serves it. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base.h"
#include "prom.h"

static void put(struct prom *p, const char *s, size_t n)
{
	if (p->failed)
		return;
	while (p->n + n + 1 > p->cap) {
		char *m = room_for(p->buf, p->cap, &p->cap, 1, 4096);
		if (!m) {
			p->failed = 1;
			return;
		}
		p->buf = m;
	}
	memcpy(p->buf + p->n, s, n);
	p->n += n;
	p->buf[p->n] = 0;
}

static void puts_(struct prom *p, const char *s)
{
	put(p, s, strlen(s));
}

/* s with each character in `which` escaped by a backslash (a newline as \n) */
static void escaped(struct prom *p, const char *s, const char *which)
{
	for (; s && *s; s++) {
		if (*s == '\n') {
			puts_(p, "\\n");
		} else {
			if (strchr(which, *s))
				put(p, "\\", 1);
			put(p, s, 1);
		}
	}
}

void prom_family(struct prom *p, const char *name, const char *type, const char *help)
{
	puts_(p, "# HELP ");
	puts_(p, name);
	put(p, " ", 1);
	escaped(p, help, "\\");
	puts_(p, "\n# TYPE ");
	puts_(p, name);
	put(p, " ", 1);
	puts_(p, type);
	put(p, "\n", 1);
}

void prom_sample(struct prom *p, const char *name, const char *const *labels, int nlabels, double v)
{
	char num[64];
	puts_(p, name);
	for (int i = 0; i < nlabels; i++) {
		puts_(p, i ? "," : "{");
		puts_(p, labels[2 * i]);
		puts_(p, "=\"");
		escaped(p, labels[2 * i + 1], "\\\"");
		put(p, "\"", 1);
	}
	if (nlabels)
		put(p, "}", 1);
	if (isnan(v))
		snprintf(num, sizeof num, " NaN\n");
	else if (isinf(v))
		snprintf(num, sizeof num, " %sInf\n", v > 0 ? "+" : "-");
	else if (v == floor(v) && fabs(v) < 1e15)
		snprintf(num, sizeof num, " %.0f\n", v);
	else
		snprintf(num, sizeof num, " %.9g\n", v);
	puts_(p, num);
}

void prom_free(struct prom *p)
{
	free(p->buf);
	*p = (struct prom){ 0 };
}

static void write_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* One connection on fd: its request read (1 s at most), `GET /metrics` answered with body, any
 * other path 404, anything else 400; then closed. */
void prom_serve(int fd, const char *body, size_t n)
{
	char req[4096];
	size_t got = 0;
	struct pollfd pf = { fd, POLLIN, 0 };
	while (got < sizeof req - 1 && !memmem(req, got, "\r\n\r\n", 4) && poll(&pf, 1, 1000) > 0) {
		ssize_t r = read(fd, req + got, sizeof req - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	req[got] = 0;
	char head[256];
	const char *status = "400 Bad Request", *type = "text/plain; charset=utf-8", *b = "bad request\n";
	size_t bn = strlen(b);
	if (!strncmp(req, "GET ", 4)) {
		const char *path = req + 4;
		size_t pl = strcspn(path, " ?\r\n");
		if (pl == 8 && !strncmp(path, "/metrics", 8)) {
			status = "200 OK";
			type = "text/plain; version=0.0.4; charset=utf-8";
			b = body;
			bn = n;
		} else {
			status = "404 Not Found";
			b = "ddpspy watch serves /metrics\n";
			bn = strlen(b);
		}
	}
	int hl = snprintf(head, sizeof head, "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			  status, type, bn);
	write_all(fd, head, (size_t)hl);
	write_all(fd, b, bn);
	close(fd);
}
