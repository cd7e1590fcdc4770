/* JSON output helpers (see json.h). */
#include "json.h"

#include <string.h>

void json_raw_escaped(FILE *out, const char *s, size_t n)
{
	putc('"', out);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\') {
			putc('\\', out);
			putc(c, out);
		} else if (c < 0x20) {
			fprintf(out, "\\u%04x", c);
		} else if (c < 0x80) {
			putc(c, out);
		} else {
			/* paths are bytes: pass valid UTF-8 through, replace anything else */
			size_t len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
			size_t k = 1;
			while (len && k < len && i + k < n && ((unsigned char)s[i + k] & 0xc0) == 0x80)
				k++;
			if (len && k == len) {
				fwrite(s + i, 1, len, out);
				i += len - 1;
			} else {
				fputs("\\ufffd", out);
			}
		}
	}
	putc('"', out);
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
	fprintf(j->out, "%.6g", v);
}
