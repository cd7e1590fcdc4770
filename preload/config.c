/* Every DDPSPY_* variable, read once at start from one table; bad values warn and fall back.
 * Also the library's diagnostics, which must work in any state of the host program. */
#include "internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct dsp_config dsp_cfg;

enum { OPT_STR, OPT_LONG, OPT_BOOL, OPT_OCTAL };

static const struct option {
	const char *name;
	int type;
	long def, min, max;
	const char *sdef;
	size_t off;
} options[] = {
	{"DDPSPY_OUT", OPT_STR, 0, 0, 0, "ddpspy-out", offsetof(struct dsp_config, out)},
	{"DDPSPY_RING_KB", OPT_LONG, 4096, 4, 1 << 20, NULL, offsetof(struct dsp_config, ring_kb)},
	{"DDPSPY_FLUSH_MS", OPT_LONG, 100, 1, 60000, NULL, offsetof(struct dsp_config, flush_ms)},
	{"DDPSPY_STACK_US", OPT_LONG, 1000, -1, 1L << 40, NULL, offsetof(struct dsp_config, stack_us)},
	{"DDPSPY_DISABLE", OPT_BOOL, 0, 0, 1, NULL, offsetof(struct dsp_config, disable)},
	{"DDPSPY_LOG", OPT_BOOL, 0, 0, 1, NULL, offsetof(struct dsp_config, log)},
	{"DDPSPY_SIGNALS", OPT_BOOL, 1, 0, 1, NULL, offsetof(struct dsp_config, signals)},
	{"DDPSPY_FILE_MODE", OPT_OCTAL, 0600, 0, 0777, NULL, offsetof(struct dsp_config, file_mode)},
	{"DDPSPY_CLOCK_OFFSET_NS", OPT_STR, 0, 0, 0, "", offsetof(struct dsp_config, clock_offset)},
	{"DDPSPY_GPU", OPT_BOOL, 1, 0, 1, NULL, offsetof(struct dsp_config, gpu)},
	{"DDPSPY_CUPTI", OPT_STR, 0, 0, 0, "", offsetof(struct dsp_config, cupti)},
	{"DDPSPY_GPU_API_ALL", OPT_BOOL, 0, 0, 1, NULL, offsetof(struct dsp_config, gpu_api_all)},
	{"DDPSPY_NVTX", OPT_BOOL, 1, 0, 1, NULL, offsetof(struct dsp_config, nvtx)},
	{"DDPSPY_NCCL_PLUGIN", OPT_BOOL, 1, 0, 1, NULL, offsetof(struct dsp_config, nccl_plugin)},
	{"DDPSPY_INFLIGHT_MS", OPT_LONG, 1000, -1, 1L << 40, NULL, offsetof(struct dsp_config, inflight_ms)},
	{"DDPSPY_PYFRAMES", OPT_BOOL, 1, 0, 1, NULL, offsetof(struct dsp_config, pyframes)},
	{"DDPSPY_SAMPLE_HZ", OPT_LONG, 100, 0, 1000, NULL, offsetof(struct dsp_config, sample_hz)},
};

static void vsay(const char *fmt, va_list ap)
{
	char buf[512];
	int saved = errno;
	int n = snprintf(buf, sizeof buf, "ddpspy[%d]: ", (int)getpid());
	if (n < 0)
		n = 0;
	int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	n += m;
	if (n > (int)sizeof buf - 2)
		n = (int)sizeof buf - 2;
	buf[n++] = '\n';
	ssize_t w = write(2, buf, (size_t)n);
	(void)w;
	errno = saved;
}

void dsp_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay(fmt, ap);
	va_end(ap);
}

void dsp_log(const char *fmt, ...)
{
	if (!dsp_cfg.log)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsay(fmt, ap);
	va_end(ap);
}

/* secure_getenv: in a setuid or setgid program (secure execution) every setting reads as unset;
 * init.c then records nothing at all. */
void dsp_config_load(void)
{
	for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
		const struct option *o = &options[i];
		char *field = (char *)&dsp_cfg + o->off;
		const char *v = secure_getenv(o->name);
		if (o->type == OPT_STR) {
			*(const char **)field = v && *v ? v : o->sdef;
			continue;
		}
		long val = o->def;
		if (v && *v) {
			char *end;
			errno = 0;
			long x = strtol(v, &end, o->type == OPT_OCTAL ? 8 : 10);
			if (errno || *end || x < o->min || x > o->max ||
			    (o->type == OPT_BOOL && x != 0 && x != 1))
				if (o->type == OPT_OCTAL)
					dsp_warn("%s=%s is not an octal mode; using %03lo", o->name, v, o->def);
				else
					dsp_warn("%s=%s is not %s %ld..%ld; using %ld", o->name, v,
						 o->type == OPT_BOOL ? "one of" : "a whole number in", o->min,
						 o->max, o->def);
			else
				val = x;
		}
		if (o->type == OPT_BOOL)
			*(int *)field = (int)val;
		else
			*(long *)field = val;
	}
}
