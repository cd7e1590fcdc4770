/* The raw clock used on the hot path and its calibration against the system clocks. */
#include "internal.h"

#include <cpuid.h>
#include <errno.h>
#include <stdlib.h>

int dsp_use_tsc;
static int64_t offset_ns, rate_ns_per_s, rate_from = -1;

void dsp_clock_offset_init(int rank)
{
	/* item `rank` of the list, or the only item; ranks beyond the list and non-ranks get 0.
	 * An item is OFFSET or OFFSET:RATE (ns the clock gains per second from the first reading) */
	const char *p = dsp_cfg.clock_offset;
	if (!p || !*p)
		return;
	for (int i = 0; *p; i++) {
		char *end;
		errno = 0;
		long long v = strtoll(p, &end, 10), r = 0;
		if (!errno && end != p && *end == ':') {
			const char *q = end + 1;
			r = strtoll(q, &end, 10);
			if (end == q)
				errno = EINVAL;
		}
		if (errno || end == p || (*end && *end != ',')) {
			dsp_warn("DDPSPY_CLOCK_OFFSET_NS=%s is not a comma list of OFFSET or OFFSET:RATE in whole "
				 "nanoseconds; ignored", dsp_cfg.clock_offset);
			offset_ns = rate_ns_per_s = 0;
			return;
		}
		if (i == rank || (i == 0 && !*end)) {
			offset_ns = v;
			rate_ns_per_s = r;
		}
		p = *end ? end + 1 : end;
	}
}

/* the test knob's shift at monotonic time m: the offset, and the drift since the first reading
 * (a fork child keeps its parent's: one host clock) */
static int64_t knob_ns(int64_t m)
{
	if (!rate_ns_per_s)
		return offset_ns;
	if (rate_from < 0)
		rate_from = m;
	return offset_ns + (int64_t)((double)(m - rate_from) * 1e-9 * (double)rate_ns_per_s);
}

void dsp_clock_init(void)
{
	unsigned a, b, c, d;
	/* CPUID 0x80000007 EDX bit 8: invariant TSC (constant rate, runs in deep C-states); the
	 * kernel derives constant_tsc and nonstop_tsc from the same bit. Without it, TSC ticks
	 * are not time, so fall back to the vDSO clock. */
	dsp_use_tsc = __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8));
}

static int64_t ns_of(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t dsp_mono_ns(void)
{
	int64_t m = ns_of(CLOCK_MONOTONIC);
	return m + knob_ns(m);
}

void dsp_clock_sample(uint64_t *raw, int64_t *mono_ns, int64_t *real_ns)
{
	/* Bracket the monotonic read with two raw reads and keep the tightest of a few tries, so
	 * the pair is good to a few tens of nanoseconds even with an interrupt in between. */
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 5; i++) {
		uint64_t r0 = dsp_now();
		int64_t m = ns_of(CLOCK_MONOTONIC);
		int64_t re = ns_of(CLOCK_REALTIME);
		uint64_t r1 = dsp_now();
		if (r1 - r0 < best) {
			best = r1 - r0;
			*raw = r0 + (r1 - r0) / 2;
			*mono_ns = m + knob_ns(m);
			*real_ns = re + knob_ns(m);
		}
	}
}
