/* Fuzzing `ddpspy dump` and `ddpspy report` on hostile input: libFuzzer's entry point, and a plain
 * main() (built with -DREPLAY) that runs the same function on given files and directories, for
 * `make test` to replay the seeds and every input that ever broke the collector under ASan+UBSan.
 *
 * One input is a set of trace files: split at every "DDPSPY\r\n" magic into the files of one
 * directory. A first byte of 0xff is dropped and the CRCs are kept as they are; otherwise each
 * frame's CRC is recomputed first, so the fuzzer's mutations reach the decoders instead of dying
 * at the checksum (../shared/repro's inputs use the same convention).
 *
 * Besides not crashing, every run's output is checked: each line of `dump --json` and the whole
 * of `report --json` must be valid JSON (RFC 8259, valid UTF-8, no NaN or infinity), and text
 * output must carry no control character but the newline. A violation aborts, as a crash does. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/format.h"

int cmd_dump(int argc, char **argv);
int cmd_report(int argc, char **argv);

static char dir[64];

/* ---- the output check ---- */
struct p {
	const unsigned char *s, *end;
};

static int ws(struct p *p)
{
	while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
		p->s++;
	return 1;
}

/* One UTF-8 sequence at p->s: well-formed (no overlong form, no surrogate, at most U+10FFFF). */
static int utf8(struct p *p)
{
	const unsigned char *s = p->s;
	unsigned c = *s, n, min, cp;
	if (c < 0x80) {
		p->s++;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf)
		n = 1, min = 0x80, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 2, min = 0x800, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 3, min = 0x10000, cp = c & 0x07;
	else
		return 0;
	if (p->end - s <= (long)n)
		return 0;
	for (unsigned i = 1; i <= n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	p->s += n + 1;
	return 1;
}

static int string(struct p *p)
{
	p->s++; /* the opening quote */
	while (p->s < p->end && *p->s != '"') {
		if (*p->s < 0x20)
			return 0;
		if (*p->s == '\\') {
			p->s++;
			if (p->s >= p->end)
				return 0;
			if (*p->s == 'u') {
				for (int i = 1; i <= 4; i++)
					if (p->s + i >= p->end || !strchr("0123456789abcdefABCDEF", p->s[i]))
						return 0;
				p->s += 5;
			} else if (strchr("\"\\/bfnrt", *p->s) && *p->s) {
				p->s++;
			} else {
				return 0;
			}
		} else if (!utf8(p)) {
			return 0;
		}
	}
	if (p->s >= p->end)
		return 0;
	p->s++;
	return 1;
}

static int digits(struct p *p)
{
	const unsigned char *s = p->s;
	while (p->s < p->end && *p->s >= '0' && *p->s <= '9')
		p->s++;
	return p->s > s;
}

static int number(struct p *p)
{
	if (*p->s == '-')
		p->s++;
	if (p->s < p->end && *p->s == '0')
		p->s++;
	else if (!digits(p))
		return 0;
	if (p->s < p->end && *p->s == '.') {
		p->s++;
		if (!digits(p))
			return 0;
	}
	if (p->s < p->end && (*p->s == 'e' || *p->s == 'E')) {
		p->s++;
		if (p->s < p->end && (*p->s == '+' || *p->s == '-'))
			p->s++;
		if (!digits(p))
			return 0;
	}
	return 1;
}

static int word(struct p *p, const char *w)
{
	size_t n = strlen(w);
	if ((size_t)(p->end - p->s) < n || memcmp(p->s, w, n))
		return 0;
	p->s += n;
	return 1;
}

static int value(struct p *p, int depth)
{
	ws(p);
	if (p->s >= p->end || depth > 64)
		return 0;
	switch (*p->s) {
	case '"':
		return string(p);
	case 't':
		return word(p, "true");
	case 'f':
		return word(p, "false");
	case 'n':
		return word(p, "null");
	case '{':
	case '[': {
		unsigned char close = *p->s == '{' ? '}' : ']';
		int obj = close == '}';
		p->s++;
		ws(p);
		if (p->s < p->end && *p->s == close) {
			p->s++;
			return 1;
		}
		for (;;) {
			if (obj) {
				ws(p);
				if (p->s >= p->end || *p->s != '"' || !string(p) || !ws(p) || p->s >= p->end ||
				    *p->s++ != ':')
					return 0;
			}
			if (!value(p, depth + 1))
				return 0;
			ws(p);
			if (p->s >= p->end)
				return 0;
			if (*p->s == ',') {
				p->s++;
				continue;
			}
			if (*p->s++ != close)
				return 0;
			return 1;
		}
	}
	default:
		return (*p->s == '-' || (*p->s >= '0' && *p->s <= '9')) && number(p);
	}
}

static int valid_json(const char *s, size_t n)
{
	struct p p = {(const unsigned char *)s, (const unsigned char *)s + n};
	if (!value(&p, 0))
		return 0;
	ws(&p);
	return p.s == p.end;
}

static void fail(const char *what, const char *out, size_t n)
{
	fprintf(stderr, "fuzz_collector: %s:\n%.*s\n", what, (int)(n < 4000 ? n : 4000), out);
	abort();
}

/* Runs one command with its output in memory, then checks it. */
static void run(int (*cmd)(int, char **), int json)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *mem = open_memstream(&buf, &n);
	if (!mem)
		return;
	FILE *saved = stdout, *saved_err = stderr, *null = fopen("/dev/null", "w");
	stdout = mem;
	if (null)
		stderr = null; /* the collector's warnings; a sanitizer's report goes to fd 2 directly */
	char *argv[] = {dir, json ? "--json" : NULL, NULL};
	cmd(json ? 2 : 1, argv);
	stdout = saved;
	stderr = saved_err;
	if (null)
		fclose(null);
	fclose(mem);
	if (json && cmd == cmd_report && n && !valid_json(buf, n))
		fail("report --json is not valid JSON", buf, n);
	for (size_t i = 0, s = 0; i < n; i++) {
		unsigned char c = (unsigned char)buf[i];
		if (c < 0x20 && c != '\n' && c != '\t')
			fail(json ? "a raw control character in JSON output" : "a control character in text output",
			     buf + s, n - s);
		if (c == '\n') {
			if (json && cmd == cmd_dump && !valid_json(buf + s, i - s))
				fail("a line of dump --json is not valid JSON", buf + s, i - s);
			s = i + 1;
		}
	}
	free(buf);
}

static void clear_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[512];
	while (d && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
}

/* Recomputes the CRC of every frame that fits in the file. */
static void fix_crcs(unsigned char *f, size_t n)
{
	size_t off = DDPSPY_FILE_HEADER_LEN;
	while (off + DDPSPY_FRAME_HEADER_LEN <= n) {
		uint32_t len = (uint32_t)f[off] | (uint32_t)f[off + 1] << 8 | (uint32_t)f[off + 2] << 16 |
			       (uint32_t)f[off + 3] << 24;
		if (len > n - off - DDPSPY_FRAME_HEADER_LEN)
			break;
		ddpspy_put_le32(f + off + 4, ddpspy_crc32(0, f + off + DDPSPY_FRAME_HEADER_LEN, len));
		off += DDPSPY_FRAME_HEADER_LEN + len;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!dir[0]) {
		snprintf(dir, sizeof dir, "/tmp/ddpspy-fuzz-%d", (int)getpid());
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			abort();
	}
	int keep_crc = size > 0 && data[0] == 0xff;
	if (keep_crc) {
		data++;
		size--;
	}
	unsigned char *copy = malloc(size + 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	clear_dir();
	/* the files: from each magic to the next (bytes before the first magic are a file too) */
	size_t start = 0;
	int nfiles = 0;
	for (size_t i = 1; i <= size && nfiles < 64; i++) {
		if (i < size && (size - i < DDPSPY_MAGIC_LEN || memcmp(copy + i, DDPSPY_MAGIC, DDPSPY_MAGIC_LEN)))
			continue;
		if (!keep_crc)
			fix_crcs(copy + start, i - start);
		char p[128];
		snprintf(p, sizeof p, "%s/r%05d-h-%d.ddpspy", dir, nfiles, 100 + nfiles);
		FILE *f = fopen(p, "wb");
		if (f) {
			fwrite(copy + start, 1, i - start, f);
			fclose(f);
		}
		nfiles++;
		start = i;
	}
	free(copy);
	run(cmd_dump, 0);
	run(cmd_dump, 1);
	run(cmd_report, 0);
	run(cmd_report, 1);
	/* and as a long trace (the test-only limits, docs/report.md): 4 synchronizing calls of a thread
	 * kept while loading, the steps found again from them all with a sample kept, 8 calls beyond
	 * for the clocks, and 4 device records a rank (the rest read again when it is split) */
	setenv("DDPSPY_REPORT_PREFIX", "4", 1);
	setenv("DDPSPY_REPORT_SPREAD", "8", 1);
	setenv("DDPSPY_REPORT_GPU_KEEP", "4", 1);
	run(cmd_report, 1);
	unsetenv("DDPSPY_REPORT_PREFIX");
	unsetenv("DDPSPY_REPORT_SPREAD");
	unsetenv("DDPSPY_REPORT_GPU_KEEP");
	return 0;
}

#ifdef REPLAY
static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return 1;
	}
	unsigned char *buf = NULL;
	size_t n = 0, cap = 0;
	for (;;) {
		if (n == cap) {
			unsigned char *m = realloc(buf, cap = cap ? cap * 2 : 65536);
			if (!m)
				return 1;
			buf = m;
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		if (!r)
			break;
		n += r;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return 0;
}

/* fuzz_collector FILE|DIR...: each file is one input; a directory's files are inputs each */
int main(int argc, char **argv)
{
	int inputs = 0, bad = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) < 0) {
			perror(argv[i]);
			bad++;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			bad += replay_file(argv[i]);
			inputs++;
			continue;
		}
		DIR *d = opendir(argv[i]);
		struct dirent *e;
		while (d && (e = readdir(d)) != NULL) {
			char p[4096];
			if (e->d_name[0] == '.')
				continue;
			snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
			if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
				bad += replay_file(p);
				inputs++;
			}
		}
		if (d)
			closedir(d);
	}
	clear_dir();
	if (dir[0])
		rmdir(dir);
	printf("%d inputs replayed\n", inputs);
	return bad ? 1 : 0;
}
#endif
