/* The optional public API: explicit step markers (include/ddpspy.h). The header reaches
 * ddpspy_mark through a weak reference, so programs that use it run unchanged without the
 * preload; ddpspy_step_begin and ddpspy_step_end are for callers without the header (ctypes). */
#include "internal.h"

#pragma GCC visibility push(default)

void ddpspy_mark(int begin)
{
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return;
	uint64_t now = dsp_now();
	int64_t a[1] = {begin != 0};
	dsp_emit(t, DDPSPY_EV_STEP, now, now, 1, a);
	dsp_leave(t);
}

void ddpspy_step_begin(void)
{
	ddpspy_mark(1);
}

void ddpspy_step_end(void)
{
	ddpspy_mark(0);
}

#pragma GCC visibility pop
