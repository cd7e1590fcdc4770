/* Prometheus' text exposition format (version 0.0.4), for ddpspy watch --prometheus: a family's
 * HELP and TYPE once, then its samples, each `name{label="value",...} value`. Label values escape
 * backslash, double quote and newline; HELP text backslash and newline; values are Go's float
 * text (NaN, +Inf, -Inf). And the HTTP side that serves it: a listening socket, each request
 * answered while its caller waits. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

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

int prom_listen(const char *spec, const char *who)
{
	char host[256] = "0.0.0.0";
	const char *colon = strrchr(spec, ':'), *port = colon ? colon + 1 : spec;
	if (colon && (size_t)(colon - spec) < sizeof host) {
		memcpy(host, spec, (size_t)(colon - spec));
		host[colon - spec] = 0;
	}
	char *end;
	long pn = strtol(port, &end, 10);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)pn) };
	if (!*port || *end || pn < 1 || pn > 65535 || inet_pton(AF_INET, host, &a.sin_addr) != 1) {
		fprintf(stderr, "%s: --prometheus needs [HOST:]PORT (an IPv4 address, a port 1-65535), not '%s'\n", who,
			spec);
		return -1;
	}
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 16) < 0) {
		fprintf(stderr, "%s: cannot listen on %s: %s\n", who, spec, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

void prom_wait(int lfd, int ms, void (*fill)(const void *ctx, struct prom *p), const void *ctx)
{
	struct pollfd pf = { lfd, POLLIN, 0 };
	if (lfd < 0) {
		usleep((useconds_t)ms * 1000);
		return;
	}
	if (poll(&pf, 1, ms) <= 0)
		return;
	int c;
	while ((c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
		struct prom p = { 0 };
		fill(ctx, &p);
		prom_serve(c, p.failed ? "" : p.buf, p.failed ? 0 : p.n);
		prom_free(&p);
	}
}
