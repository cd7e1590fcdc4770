/* The collector's JSON writer and the escapers of its output (json.h). */
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong form, no surrogate,
 * nothing past U+10FFFF), 0 when there is none. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0], len, min, cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, min = 0x80, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, min = 0x800, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, min = 0x10000, cp = c & 0x07;
	else
		return 0;
	if (n < len)
		return 0;
	for (unsigned i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* The one JSON string escaper: s[0..n) as the inside of a JSON string into buf (at most cap
 * bytes with the terminator; a sequence that does not fit is left out whole). Paths and names are
 * bytes: valid UTF-8 passes, anything else becomes U+FFFD, control characters \u00XX. Returns the
 * length written. */
size_t json_escape(char *buf, size_t cap, const char *s, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		const unsigned char *c = (const unsigned char *)s + i;
		char tmp[8];
		size_t tl, used = 1;
		if (*c == '"' || *c == '\\') {
			tmp[0] = '\\';
			tmp[1] = (char)*c;
			tl = 2;
		} else if (*c < 0x20 || *c == 0x7f) {
			tl = (size_t)snprintf(tmp, sizeof tmp, "\\u%04x", *c);
		} else if ((used = utf8_len(c, n - i)) > 0) {
			memcpy(tmp, c, used);
			tl = used;
		} else {
			memcpy(tmp, "\\ufffd", 6);
			tl = 6;
			used = 1;
		}
		if (o + tl + 1 > cap)
			break;
		memcpy(buf + o, tmp, tl);
		o += tl;
		i += used;
	}
	if (cap)
		buf[o] = 0;
	return o;
}

void json_put_string(FILE *out, const char *s, size_t n)
{
	if (!s)
		s = "", n = 0;
	else if (n == SIZE_MAX)
		n = strlen(s);
	char buf[256 * 6 + 1]; /* each byte of a piece may take 6 */
	putc('"', out);
	while (n > 0) {
		/* escape a piece at a time; a piece ends on a whole sequence */
		size_t take = n < 256 ? n : 256;
		while (take < n && take > 252 && (((unsigned char)s[take]) & 0xc0) == 0x80)
			take--;
		size_t w = json_escape(buf, sizeof buf, s, take);
		fwrite(buf, 1, w, out);
		s += take;
		n -= take;
	}
	putc('"', out);
}

/* what comes before a member: its separator and, in an object, its key */
static void member(struct json *j, const char *key)
{
	int d = j->depth - 1;
	if (d < 0)
		return;
	if (!j->first[d])
		fputs(j->array[d] || j->spaced[d] ? ", " : ",", j->out);
	j->first[d] = 0;
	if (j->array[d])
		return;
	json_put_string(j->out, key ? key : "", key ? strlen(key) : 0);
	fputs(j->spaced[d] ? ": " : ":", j->out);
}

static void open_container(struct json *j, const char *key, int array, int spaced)
{
	member(j, key);
	if (j->depth == JSON_DEPTH) { /* a broken invariant of the caller's: say so, loudly */
		fprintf(stderr, "ddpspy: %s:%d: JSON nested deeper than %d\n", __FILE__, __LINE__, JSON_DEPTH);
		abort();
	}
	int d = j->depth++;
	j->first[d] = 1;
	j->array[d] = (unsigned char)array;
	j->spaced[d] = (unsigned char)(spaced || (d > 0 && j->spaced[d - 1]));
	putc(array ? '[' : '{', j->out);
}

void json_begin(struct json *j, FILE *out)
{
	j->out = out;
	j->depth = 0;
	open_container(j, NULL, 0, 0);
}

void json_end(struct json *j)
{
	while (j->depth > 0)
		json_close(j);
	putc('\n', j->out);
}

void json_obj(struct json *j, const char *key)
{
	open_container(j, key, 0, 0);
}

void json_obj_spaced(struct json *j, const char *key)
{
	open_container(j, key, 0, 1);
}

void json_arr(struct json *j, const char *key)
{
	open_container(j, key, 1, 0);
}

void json_close(struct json *j)
{
	if (j->depth > 0)
		putc(j->array[--j->depth] ? ']' : '}', j->out);
}

void json_strn(struct json *j, const char *key, const char *v, size_t n)
{
	member(j, key);
	if (v)
		json_put_string(j->out, v, n);
	else
		fputs("null", j->out);
}

void json_str(struct json *j, const char *key, const char *v)
{
	json_strn(j, key, v, v ? strlen(v) : 0);
}

void json_int(struct json *j, const char *key, int64_t v)
{
	member(j, key);
	fprintf(j->out, "%lld", (long long)v);
}

void json_num(struct json *j, const char *key, double v)
{
	member(j, key);
	if (isfinite(v))
		fprintf(j->out, "%.6g", v);
	else
		fputs("null", j->out); /* (only damaged input makes one: JSON has no NaN) */
}

void json_fixed(struct json *j, const char *key, double v, int decimals)
{
	member(j, key);
	if (isfinite(v))
		fprintf(j->out, "%.*f", decimals, v);
	else
		fputs("null", j->out);
}

void json_bool(struct json *j, const char *key, int v)
{
	member(j, key);
	fputs(v ? "true" : "false", j->out);
}

void json_null(struct json *j, const char *key)
{
	member(j, key);
	fputs("null", j->out);
}

/* Text output: s[0..n) (n SIZE_MAX: to its terminator) with every control character written as
 * \xNN: a newline in a thread name could fake a line of output, an escape sequence could drive
 * the terminal. The result lives in one of 8 rotating buffers (so one printf can take several),
 * cut at 4095 bytes of input. */
const char *text_safe(const char *s, size_t n)
{
	static char bufs[8][4096 * 4 + 1];
	static unsigned next;
	char *b = bufs[next++ & 7];
	size_t o = 0;
	if (!s)
		return "(null)";
	for (size_t i = 0; i < n && i < 4095 && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f)
			o += (size_t)snprintf(b + o, 5, "\\x%02x", c);
		else
			b[o++] = (char)c;
	}
	b[o] = 0;
	return b;
}

void html_put(FILE *out, const char *s, size_t n)
{
	if (!s)
		return;
	if (n == SIZE_MAX)
		n = strlen(s);
	for (size_t i = 0; i < n;) {
		const unsigned char *c = (const unsigned char *)s + i;
		size_t used = 1;
		switch (*c) {
		case '&': fputs("&amp;", out); break;
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '"': fputs("&quot;", out); break;
		case '\'': fputs("&#39;", out); break;
		case '\t': case '\n': putc(*c, out); break;
		default:
			if (*c < 0x20 || *c == 0x7f)
				fprintf(out, "\\x%02x", *c); /* as the text report shows them */
			else if ((used = utf8_len(c, n - i)) > 0)
				fwrite(c, 1, used, out);
			else {
				fputs("\xef\xbf\xbd", out); /* U+FFFD */
				used = 1;
			}
		}
		i += used;
	}
}
