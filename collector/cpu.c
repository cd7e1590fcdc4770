/* CPU contention: what each thread's schedstat says ("sched" records, read by the writer at most
 * every 100 ms): its time on a CPU and its time runnable but waiting for one, cumulative. A
 * training thread that waits for a CPU is delayed by whoever holds them: the rank's input threads
 * or processes, the other ranks on its host, a collective library's threads, anything else. Over
 * a rank's analysed steps, the figures below come from the samples around the span's ends,
 * interpolated (a sample every 100 ms: per-step figures would be finer than the samples). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "trace.h"


const char *const an_cpu_group_names[CPU_GROUPS] = { "other_ranks", "input_workers", "collective_threads",
						     "other_threads" };

static void cpu_sample(struct thr *t, const struct trace_sched *s)
{
	struct schedpt x = { s->t_ns, s->run_ns, s->wait_ns };
	t->sched_last = x;
	if (t->sched_seen++ == 0)
		t->sched_first = x;
	if (t->sched_stride > 1 && t->sched_seen % t->sched_stride)
		return;
	if (t->nsched == MAX_SCHED) {
		for (size_t i = 0; i < MAX_SCHED / 2; i++)
			t->sched[i] = t->sched[2 * i];
		t->nsched = MAX_SCHED / 2;
		t->sched_stride = t->sched_stride ? 2 * t->sched_stride : 2;
	}
	if (!t->sched) {
		t->sched = malloc(MAX_SCHED * sizeof *t->sched);
		if (!t->sched)
			return;
	}
	t->sched[t->nsched++] = x;
}

/* a thread's CPU sample as its file is read, for load.c (analysis_int.h's an_parts) */
__attribute__((constructor)) static void registered(void)
{
	an_parts.cpu.sample = cpu_sample;
}

/* t's cumulative (run, wait) at time at (the process's own clock), interpolated between samples;
 * clamped to the first and last */
static void cum_at(const struct thr *t, int64_t at, double *run, double *wait)
{
	const struct schedpt *v = t->sched;
	size_t n = t->nsched;
	struct schedpt lo = t->sched_first, hi = t->sched_last;
	if (at <= lo.t || n == 0) {
		*run = at <= lo.t ? (double)lo.run : (double)hi.run;
		*wait = at <= lo.t ? (double)lo.wait : (double)hi.wait;
		return;
	}
	if (at >= hi.t) {
		*run = (double)hi.run;
		*wait = (double)hi.wait;
		return;
	}
	size_t a = 0, b = n;
	while (a < b) { /* the first kept sample at or after at */
		size_t m = (a + b) / 2;
		if (v[m].t < at)
			a = m + 1;
		else
			b = m;
	}
	if (a < n)
		hi = v[a];
	if (a > 0)
		lo = v[a - 1];
	double f = hi.t > lo.t ? (double)(at - lo.t) / (double)(hi.t - lo.t) : 1;
	*run = (double)lo.run + f * ((double)hi.run - (double)lo.run);
	*wait = (double)lo.wait + f * ((double)hi.wait - (double)lo.wait);
}

/* t's CPU time and run-queue time over [t0, t1) of the job's clock, in ns; 0 when it has no samples */
static int delta(const struct proc *p, const struct thr *t, int64_t t0, int64_t t1, double *run, double *wait)
{
	if (!t->sched_seen)
		return 0;
	double r0, w0, r1, w1;
	cum_at(t, an_file_time(p, t0), &r0, &w0);
	cum_at(t, an_file_time(p, t1), &r1, &w1);
	*run = fmax(0, r1 - r0);
	*wait = fmax(0, w1 - w0);
	return 1;
}

/* what a thread of p (a rank or a worker) is, for who takes the CPU */
static int group_of(const struct proc *p, const struct thr *t)
{
	if (p->role == DDPSPY_ROLE_WORKER)
		return CPU_INPUT;
	if (t == an_train_thread(p))
		return CPU_TRAIN;
	if (t->io_ns > 0)
		return CPU_INPUT;
	if (t->nhelper > 0)
		return CPU_COLL;
	return CPU_OTHER;
}

/* whether thread t of p serves rank r's input: its input threads, its workers' threads */
static int input_of(const struct proc *p, const struct thr *t, const struct proc *rp)
{
	if (p == rp)
		return t != an_train_thread(p) && t->io_ns > 0;
	return p->role == DDPSPY_ROLE_WORKER && p->parent_pid == rp->pid && !strcmp(p->host, rp->host);
}

void an_cpu(struct analysis *a)
{
	struct stepdata *sd = a->sd;
	if (!sd || !sd->span)
		return;
	for (int r = 0; r < a->nranks; r++) {
		struct rankinfo *ri = &a->ranks[r];
		struct cpustat *c = &ri->cpu;
		const struct proc *rp = ri->p;
		const struct thr *t = an_train_thread(rp);
		int64_t t0 = sd->span[r].t0, t1 = sd->span[r].t1;
		double run, wait, len = (double)(t1 - t0);
		if (!t || len <= 0 || !delta(rp, t, t0, t1, &run, &wait))
			continue;
		c->have = 1;
		c->cpus = rp->cpus;
		c->host_cpus = rp->host_cpus;
		c->process = rp->cpus > 0 && rp->host_cpus > 0 && rp->cpus < rp->host_cpus;
		c->on_cpu = run / len;
		c->runq = wait / len;
		/* the threads that compete for its CPUs over the same span, by group, in cores (CPU time
		 * per second): its host's, or when it is bound to some of them, its own process's and its
		 * workers' (they inherit the binding; other ranks are bound elsewhere) */
		double job = run / len;
		for (int i = 0; i < a->nprocs; i++) {
			const struct proc *p = &a->procs[i];
			/* (launchers' threads are not kept: what they hold counts as outside the job) */
			if (strcmp(p->host, rp->host) || (p->role != DDPSPY_ROLE_RANK && p->role != DDPSPY_ROLE_WORKER))
				continue;
			int mine = p == rp || (p->role == DDPSPY_ROLE_WORKER && p->parent_pid == rp->pid);
			for (int h = 0; h < p->nthr; h++) {
				const struct thr *u = &p->thr[h];
				if (u == t || !delta(p, u, t0, t1, &run, &wait))
					continue;
				job += run / len;
				if (c->process && !mine)
					continue;
				int g = group_of(p, u);
				c->cores[g] += run / len;
				c->waiting[g] += wait / len;
				c->threads[g]++;
				/* its own input over the whole run (the kind of data stall) */
				if (input_of(p, u, rp)) {
					c->in_threads++;
					c->in_run += (double)u->sched_last.run - (double)u->sched_first.run;
					c->in_wait += (double)u->sched_last.wait - (double)u->sched_first.wait;
					c->in_life += (double)(u->sched_last.t - u->sched_first.t);
					c->in_io += (double)u->io_ns;
				}
			}
		}
		/* what the host had in use beyond the job's threads (other processes, the kernel); of a
		 * rank bound to some CPUs, the part that falls on them, taken as spread evenly */
		double busy, none;
		if (delta(rp, &rp->hostcpu, t0, t1, &busy, &none))
			c->outside = fmax(0, busy / len - job) * (c->process ? (double)c->cpus / c->host_cpus : 1);
	}
}
