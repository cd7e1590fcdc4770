/* The trace format end to end at the byte level: what the preload's writer produced is read
 * back exactly by the reader, and every truncation or corruption of it is reported at the
 * right offset without losing what came before. Run from the repository root after `make`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../collector/trace.h"
#include "../../common/format.h"
#include "tap.h"

struct count {
	int events, stats_ok, order_ok, threads, starts;
	int64_t last_t;
};

static int on_event(void *ctx, struct trace_file *f, const struct trace_event *e)
{
	struct count *c = ctx;
	(void)f;
	c->events++;
	if (e->kind == DDPSPY_EV_STAT && e->str && e->slen == strlen("/nonexistent/ddpspy-produce") &&
	    !memcmp(e->str, "/nonexistent/ddpspy-produce", e->slen) && e->args[0] == -1 &&
	    e->dur_ns >= 0 && e->dur_ns < 100000000)
		c->stats_ok++;
	c->starts += e->kind == DDPSPY_EV_THREAD_START;
	if (e->t_ns >= c->last_t)
		c->order_ok++;
	c->last_t = e->t_ns;
	return 0;
}

static int on_thread(void *ctx, struct trace_file *f, const struct trace_thread *t)
{
	(void)f;
	(void)t;
	((struct count *)ctx)->threads++;
	return 0;
}

/* what a full reading delivers, to compare a cursor's events with */
struct seen {
	int64_t *v; /* kind, start, duration, first argument, per event */
	size_t n, cap;
};

static int on_record(void *ctx, struct trace_file *f, const struct trace_event *e)
{
	struct seen *s = ctx;
	(void)f;
	if (s->n + 4 > s->cap) {
		s->cap = s->cap ? s->cap * 2 : 4096;
		s->v = realloc(s->v, s->cap * sizeof *s->v);
	}
	s->v[s->n++] = e->kind;
	s->v[s->n++] = e->t_ns;
	s->v[s->n++] = e->dur_ns;
	s->v[s->n++] = e->nargs ? e->args[0] : -7;
	return 0;
}

/* a cursor over the whole file (tid 0) or one thread gives the full reading's events, in order;
 * returns how many matched before the first difference, -1 at the end when it was damaged */
static long cursor_matches(const char *path, const struct seen *s, int tid, const uint8_t *want, int *end)
{
	struct trace_cursor c;
	struct trace_event e;
	long m = 0;
	size_t i = 0;
	*end = trace_cursor_open(&c, path, tid, NULL, 0, NULL, want);
	while (*end == 0) {
		int r = trace_cursor_next(&c, &e);
		if (r <= 0) {
			*end = r;
			break;
		}
		while (i < s->n && want && !want[s->v[i]])
			i += 4;
		if (i >= s->n || e.kind != s->v[i] || e.t_ns != s->v[i + 1] || e.dur_ns != s->v[i + 2] ||
		    (e.nargs ? e.args[0] : -7) != s->v[i + 3] || (tid && e.tid != tid))
			break;
		i += 4;
		m++;
	}
	trace_cursor_close(&c);
	return m;
}

static int read_file(const char *path, struct count *c, struct trace_file *f, int *rc)
{
	struct trace_visitor v = { .ctx = c, .on_thread = on_thread, .on_event = on_event };
	memset(c, 0, sizeof *c);
	c->last_t = INT64_MIN;
	if (trace_open(f, path) < 0)
		return -1;
	*rc = trace_read(f, &v);
	return 0;
}

/* the file read in three spans cut at any bytes (ddpspy watch's intervals): together the full
 * reading's events, in order, each span clean; a cursor over a span gives the same; a span whose
 * end cuts the file's last frame short (one being written) is clean too */
static void spans(const char *path, size_t size, const struct seen *all)
{
	int bad = 0, tries = 0, damaged = 0, split = 0;
	for (size_t a = DDPSPY_FILE_HEADER_LEN; a < size; a += size / 7 + 1)
		for (size_t b = a; b <= size; b += size / 5 + 1) {
			size_t cut[4] = { 0, a, b, 0 };
			struct seen got = { 0 };
			int parts = 0, cursor_bad = 0;
			for (int k = 0; k < 3; k++) {
				struct trace_file f;
				struct trace_visitor v = { .ctx = &got, .on_event = on_record };
				struct trace_span sp = { cut[k], cut[k + 1] };
				size_t before = got.n;
				trace_open(&f, path);
				f.span = sp;
				damaged += trace_read(&f, &v) != 0;
				trace_close(&f);
				parts += got.n > before;
				struct trace_cursor c;
				struct trace_event e;
				size_t i = before;
				trace_cursor_open(&c, path, 0, NULL, 0, &sp, NULL);
				while (trace_cursor_next(&c, &e) > 0)
					cursor_bad += i >= got.n || e.kind != got.v[i] || e.t_ns != got.v[i + 1], i += 4;
				cursor_bad += i != got.n;
				trace_cursor_close(&c);
			}
			tries++;
			split += parts > 1;
			bad += cursor_bad || got.n != all->n || memcmp(got.v, all->v, got.n * sizeof *got.v);
			free(got.v);
		}
	ok(bad == 0 && damaged == 0 && split > 0, "%d ways to read the file in three spans (%d with events in two or "
	   "more): together the whole file's events in order, by reading and by cursor (%d differ, %d not clean)",
	   tries, split, bad, damaged);
	/* the last frame being written: cut short, a span ending there reads clean */
	char cutp[700];
	snprintf(cutp, sizeof cutp, "%s.cut", path);
	int clean = 0, cuts = 0;
	for (size_t at = size / 2; at < size; at += size / 9 + 1) {
		char cmd[1500];
		snprintf(cmd, sizeof cmd, "head -c %zu %s > %s", at, path, cutp);
		if (system(cmd) != 0)
			continue;
		struct trace_file f;
		trace_open(&f, cutp);
		f.span = (struct trace_span){ DDPSPY_FILE_HEADER_LEN, at };
		clean += trace_read(&f, &(struct trace_visitor){ 0 }) == 0;
		cuts++;
		trace_close(&f);
	}
	unlink(cutp);
	ok(cuts > 0 && clean == cuts, "a span ending where the file is cut (its last frame being written) reads clean "
	   "(%d of %d)", clean, cuts);
}

int main(void)
{
	char dir[] = "/tmp/ddpspy-format-XXXXXX";
	char cmd[512], path[600];

	ok(ddpspy_crc32(0, "123456789", 9) == 0xcbf43926u, "CRC-32 check value");
	if (!mkdtemp(dir))
		return 1;
	snprintf(cmd, sizeof cmd,
		 "LD_PRELOAD=$PWD/build/libddpspy.so DDPSPY_OUT=%s build/testapps/threads produce 1 10000 >/dev/null",
		 dir);
	ok(system(cmd) == 0, "a traced program ran");
	snprintf(cmd, sizeof cmd, "ls %s/*.ddpspy > %s/list", dir, dir);
	system(cmd);
	snprintf(path, sizeof path, "%s/list", dir);
	FILE *l = fopen(path, "r");
	char file[600] = "";
	if (!l || !fgets(file, sizeof file, l))
		return ok(0, "the program left a trace file"), done_testing();
	fclose(l);
	file[strcspn(file, "\n")] = 0;

	struct trace_file f;
	struct count c;
	int rc = -1;
	ok(read_file(file, &c, &f, &rc) == 0 && rc == 0, "the file reads to the end");
	ok(f.have_header && f.pid > 0 && f.major == DDPSPY_FORMAT_MAJOR && !strcmp(f.role, "other"),
	   "header: pid %d, format %d.%d, role %s", f.pid, f.major, f.minor, f.role);
	ok(f.ncalib >= 2, "at least two calibration points (%zu)", f.ncalib);
	ok(c.stats_ok == 10000, "10000 stat events with path, ret -1 and a sane duration (%d)", c.stats_ok);
	ok(c.order_ok == c.events, "event times never go backwards within the file");
	ok(c.threads == 1 && c.starts == 1, "one thread announced, the producer, with its start event (%d, %d)",
	   c.threads, c.starts);
	ok(f.ended && !strcmp(f.end_reason, "exit") && f.dropped == 0, "clean end: %s, %llu dropped",
	   f.end_reason, (unsigned long long)f.dropped);
	/* a cursor reads the same events as trace_read, whole or filtered by kind */
	struct seen s = { 0 };
	struct trace_visitor rv = { .ctx = &s, .on_event = on_record };
	struct trace_file f2;
	trace_open(&f2, file);
	trace_read(&f2, &rv);
	trace_close(&f2);
	int end;
	long m = cursor_matches(file, &s, 0, NULL, &end);
	ok(m == c.events && end == 0, "a cursor returns the file's %d events in order, then its end (%ld, %d)",
	   c.events, m, end);
	m = cursor_matches(file, &s, f.threads[0].tid, NULL, &end);
	ok(m == c.events && end == 0, "... and the same through its only thread's tid (%ld)", m);
	m = cursor_matches(file, &s, f.threads[0].tid + 1000000, NULL, &end);
	ok(m == 0 && end == 0, "... and nothing for a thread that is not in the file (%ld)", m);
	uint8_t want[DDPSPY_EV_COUNT] = { 0 };
	want[DDPSPY_EV_THREAD_START] = 1;
	m = cursor_matches(file, &s, 0, want, &end);
	ok(m == 1 && end == 0, "... and only the kinds asked for (%ld thread start)", m);
	size_t full = f.size;
	int full_events = c.events;
	spans(file, full, &s);
	unsigned char *bytes = malloc(full);
	memcpy(bytes, f.map, full);
	trace_close(&f);

	/* every truncation: no crash, a header once it is whole, never more events than the file
	 * holds, and damage reported at or before the cut (a cut at a frame boundary is clean) */
	int bad = 0, reported = 0, clean = 0;
	snprintf(path, sizeof path, "%s/cut.ddpspy", dir);
	for (size_t cut = 0; cut < full; cut += (cut < 2048 ? 1 : 211)) {
		FILE *o = fopen(path, "w");
		fwrite(bytes, 1, cut, o);
		fclose(o);
		if (read_file(path, &c, &f, &rc) < 0) {
			bad += cut >= DDPSPY_FILE_HEADER_LEN;
		} else {
			if (c.events > full_events || f.stop_offset > cut)
				bad++;
			if (rc == 2)
				reported++;
			else
				clean++;
		}
		trace_close(&f);
	}
	ok(bad == 0, "every truncation reads without overrunning the cut (%d bad)", bad);
	ok(reported > 0 && clean > 0, "cuts inside a frame are reported (%d), cuts between frames are clean (%d)",
	   reported, clean);

	/* corruption: one flipped byte inside the events is caught by the checksum */
	size_t at = full * 2 / 3;
	bytes[at] ^= 0x5a;
	FILE *o = fopen(path, "w");
	fwrite(bytes, 1, full, o);
	fclose(o);
	read_file(path, &c, &f, &rc);
	ok(rc == 2 && f.stop_offset <= at && f.error[0], "a flipped byte at %zu: stopped at %zu (%s)",
	   at, f.stop_offset, f.error);
	ok(c.events > 0 && c.events < full_events, "events before the damage are still delivered (%d)",
	   c.events);
	s.n = 0;
	trace_open(&f2, path);
	trace_read(&f2, &rv);
	trace_close(&f2);
	m = cursor_matches(path, &s, 0, NULL, &end);
	ok(m == c.events && end == -1, "a cursor returns the same %d events, then says damaged (%ld, %d)",
	   c.events, m, end);
	free(s.v);
	trace_close(&f);

	/* not a trace at all */
	o = fopen(path, "w");
	fputs("hello, not a trace\n", o);
	fclose(o);
	ok(trace_open(&f, path) < 0 && strstr(f.error, "not a ddpspy trace"), "a text file is refused: %s",
	   f.error);
	trace_close(&f);
	free(bytes);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	system(cmd);
	return done_testing();
}
