/* ddpspy's optional public API: mark training steps explicitly.
 *
 *     #include "ddpspy.h"
 *     for (...) { ddpspy_step_begin(); train_one_step(); ddpspy_step_end(); }
 *
 * `ddpspy report` then takes its steps from these markers (step_source "markers") instead of
 * finding them in the pattern of collectives. Without LD_PRELOAD=libddpspy.so both calls do
 * nothing: they go through a weak reference to the library's ddpspy_mark, which stays NULL, so
 * the program has no link-time dependency on ddpspy. The reference is resolved when the program
 * is loaded, which needs a position-independent executable (Debian's gcc and clang default) or a
 * shared library. Other languages call the library's exported ddpspy_step_begin() and
 * ddpspy_step_end() when it is preloaded (Python: ctypes.CDLL(None).ddpspy_step_begin()).
 * Thread-safe; each call records one event on the calling thread (a few tens of nanoseconds). */
#ifndef DDPSPY_H
#define DDPSPY_H

#ifdef __cplusplus
extern "C" {
#endif

void ddpspy_mark(int begin) __attribute__((weak));

/* Start of a training step: before fetching its batch. */
static inline void ddpspy_step_begin(void)
{
	if (ddpspy_mark)
		ddpspy_mark(1);
}

/* End of a training step: after the optimizer step. */
static inline void ddpspy_step_end(void)
{
	if (ddpspy_mark)
		ddpspy_mark(0);
}

#ifdef __cplusplus
}
#endif
#endif
