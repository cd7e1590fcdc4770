/* A tiny TAP producer for the unit tests: ok(cond, fmt...) prints "ok N - ..." or
 * "not ok N - ..."; done_testing() prints the plan and returns the exit status. */
#ifndef DDPSPY_TAP_H
#define DDPSPY_TAP_H

#include <stdarg.h>
#include <stdio.h>

static int tap_n, tap_failed;

__attribute__((format(printf, 2, 3))) static int ok(int cond, const char *fmt, ...)
{
	va_list ap;
	printf("%sok %d - ", cond ? "" : "not ", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	if (!cond)
		tap_failed++;
	return cond;
}

static int done_testing(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
