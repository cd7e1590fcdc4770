/* JSON output helpers (see json.h). */
#include "json.h"

#include <math.h>
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

void json_raw_escaped(FILE *out, const char *s, size_t n)
{
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

/* A preformed fragment of members (a finding's evidence): copied, except that a bare word outside
 * strings other than true, false and null (a nan or inf that printf made of a number) becomes
 * null, so the output stays JSON whatever the numbers were. */
void json_fragment(FILE *out, const char *frag)
{
	int in_str = 0;
	for (const char *p = frag; *p;) {
		if (in_str) {
			if (*p == '\\' && p[1]) {
				putc(*p++, out);
			} else if (*p == '"') {
				in_str = 0;
			}
			putc(*p++, out);
			continue;
		}
		if (*p == '"') {
			in_str = 1;
			putc(*p++, out);
			continue;
		}
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p == '-' && ((p[1] | 0x20) == 'n' || (p[1] | 0x20) == 'i'))) {
			const char *e = p + (*p == '-');
			while ((*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z'))
				e++;
			size_t n = (size_t)(e - p);
			if ((n == 4 && !memcmp(p, "true", 4)) || (n == 5 && !memcmp(p, "false", 5)) ||
			    (n == 4 && !memcmp(p, "null", 4)))
				fwrite(p, 1, n, out);
			else
				fputs("null", out);
			p = e;
			continue;
		}
		putc(*p++, out);
	}
}

void json_begin(struct json *j, FILE *out)
{
	j->out = out;
	j->first = 1;
	putc('{', out);
}

void json_end(struct json *j)
{
	fputs("}\n", j->out);
}

void json_key(struct json *j, const char *k)
{
	if (!j->first)
		putc(',', j->out);
	j->first = 0;
	json_raw_escaped(j->out, k, strlen(k));
	putc(':', j->out);
}

void json_strn(struct json *j, const char *k, const char *v, size_t n)
{
	json_key(j, k);
	if (v)
		json_raw_escaped(j->out, v, n);
	else
		fputs("null", j->out);
}

void json_str(struct json *j, const char *k, const char *v)
{
	json_strn(j, k, v, v ? strlen(v) : 0);
}

void json_int(struct json *j, const char *k, int64_t v)
{
	json_key(j, k);
	fprintf(j->out, "%lld", (long long)v);
}

void json_num(struct json *j, const char *k, double v)
{
	json_key(j, k);
	if (isfinite(v))
		fprintf(j->out, "%.6g", v);
	else
		fputs("null", j->out); /* (only damaged input makes one: JSON has no NaN) */
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
