/* Process start and stop: the constructor, the final drain at exit, fork (DataLoader workers
 * record into their own file), exec and _exit (the old image's file is completed first) and
 * fatal signals (the writer completes the file before the default action runs). */
#include "internal.h"
#include "../cupti/gpu.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <limits.h>
#include <link.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <unistd.h>

int dsp_on;
struct dsp_identity dsp_id;
pid_t dsp_pid; /* this process (getpid is a system call): set at start and in a fork child */
static int initialised;

/* exec family: the calls programs make; glibc's execl/execvp reach execve internally (no PLT),
 * so each entry point is wrapped on its own. */
DSP_REAL(int, execve, (const char *, char *const[], char *const[]), NULL)
DSP_REAL(int, execv, (const char *, char *const[]), NULL)
DSP_REAL(int, execvp, (const char *, char *const[]), NULL)
DSP_REAL(int, execvpe, (const char *, char *const[], char *const[]), NULL)
DSP_REAL(int, fexecve, (int, char *const[], char *const[]), NULL)
DSP_REAL(void, _exit, (int), NULL)
DSP_REAL(void, _Exit, (int), NULL)

void dsp_writer_exec_begin(void);
void dsp_writer_exec_failed(void);
void dsp_writer_signal_flush(int sig, int timeout_ms);

int dsp_vfork_child(void)
{
	return getpid() != dsp_pid;
}

static const char *env_get(const char *name)
{
	return getenv(name);
}

/* ---- fatal signals ---- */
static const int fatal[] = {SIGTERM, SIGHUP, SIGQUIT, SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	int saved = errno;
	if (getpid() == dsp_pid) /* not in a vfork child */
		dsp_writer_signal_flush(sig, 2000);
	signal(sig, SIG_DFL);
	errno = saved;
	/* a fault re-executes the faulting instruction and dies with the default action; a signal
	 * that was sent (kill, raise, abort: si_code <= 0) is sent again */
	int fault = sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL;
	if (!fault || !si || si->si_code <= 0)
		raise(sig);
}

/* Only where the program kept the default action: we never replace a program's handler, and
 * a handler the program installs later replaces ours. SIGINT is left alone: Python installs
 * its KeyboardInterrupt handler only where it finds SIG_DFL. */
static void install_signal_handlers(void)
{
	struct sigaction sa, old;

	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_fatal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
		if (sigaction(fatal[i], NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
		    old.sa_handler == SIG_DFL)
			sigaction(fatal[i], &sa, NULL);
}

/* ---- fork ---- */
static void atfork_prepare(void)
{
	struct dsp_tls *t = &dsp_tls;
	t->guard++;
	dsp_writer_atfork_prepare();
	dsp_stack_atfork_prepare();
	dsp_cpu_atfork_prepare();
	dsp_registry_fork_prepare();
}

static void atfork_parent(void)
{
	dsp_registry_fork_parent();
	dsp_cpu_atfork_parent();
	dsp_stack_atfork_parent();
	dsp_writer_atfork_parent();
	dsp_tls.guard--;
}

static void atfork_child(void)
{
	int parent_rank = dsp_id.role == DDPSPY_ROLE_WORKER ? dsp_id.parent_rank : dsp_id.rank;
	dsp_pid = getpid();
	dsp_stack_atfork_child();
	dsp_registry_fork_child();
	/* a fork without exec of a rank is that rank's helper (a DataLoader worker); any fork
	 * child names its parent */
	dsp_id.parent_pid = (int)getppid();
	if (dsp_id.role == DDPSPY_ROLE_RANK || dsp_id.role == DDPSPY_ROLE_WORKER) {
		dsp_id.role = DDPSPY_ROLE_WORKER;
		dsp_id.parent_rank = parent_rank;
		dsp_id.rank = -1;
	}
	dsp_writer_atfork_child();
	dsp_tls.guard--;
}

int dsp_inject(const char *var)
{
	Dl_info di;
	char self[PATH_MAX], named[PATH_MAX];
	const char *v = getenv(var);
	if (!dladdr((void *)dsp_inject, &di) || !di.dli_fname || !realpath(di.dli_fname, self))
		return 0;
	if (!v || !*v)
		return setenv(var, self, 1) == 0;
	return realpath(v, named) && !strcmp(named, self);
}

/* Loaded ahead of the C library (LD_PRELOAD, /etc/ld.so.preload), as ddpspy must be; not when a
 * library loaded it late: the CUDA driver or NVTX through an injection variable a child inherited
 * from a traced parent after LD_PRELOAD was taken out of its environment. */
struct order { uintptr_t self; int at, libc, i; };

static int order_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct order *o = ctx;
	uintptr_t lo, hi;
	(void)size;
	dsp_object_range(info, &lo, &hi);
	if (o->self >= lo && o->self < hi)
		o->at = o->i;
	if (o->libc < 0 && info->dlpi_name && strstr(info->dlpi_name, "/libc.so"))
		o->libc = o->i;
	o->i++;
	return 0;
}

static int preloaded(void)
{
	struct order o = {(uintptr_t)preloaded, -1, -1, 0};
	dl_iterate_phdr(order_cb, &o);
	return o.at >= 0 && (o.libc < 0 || o.at < o.libc);
}

/* ---- start and stop ---- */
__attribute__((constructor)) static void ddpspy_init(void)
{
	struct dsp_tls *t = &dsp_tls;
	char cmd[8192];
	size_t n = 0;

	t->guard = 1;
	dsp_config_load();
	dsp_pid = getpid();
	/* secure execution (setuid, setgid, file capabilities): the environment is the invoking
	 * user's, the privileges are not; such a program is never traced and nothing is created */
	if (dsp_cfg.disable || getauxval(AT_SECURE) || !preloaded()) {
		t->guard = 0;
		return;
	}
	dsp_clock_init();
	dsp_registry_init();
	int f = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (f >= 0) {
		ssize_t r;
		while (n < sizeof cmd && (r = read(f, cmd + n, sizeof cmd - n)) > 0)
			n += (size_t)r;
		close(f);
	}
	dsp_identity_detect(&dsp_id, env_get, cmd, n);
	dsp_clock_offset_init(dsp_id.rank);
	if (dsp_id.role == DDPSPY_ROLE_WORKER)
		dsp_id.parent_pid = (int)getppid();
	/* until the writer measures the raw clock's rate, assume 3 GHz for the thresholds */
	if (dsp_cfg.stack_us >= 0)
		dsp_stack_ticks = dsp_use_tsc ? (uint64_t)dsp_cfg.stack_us * 3000
					      : (uint64_t)dsp_cfg.stack_us * 1000;
	dsp_poll_ticks = (uint64_t)DSP_POLL_US * (dsp_use_tsc ? 3000 : 1000);
	if (dsp_writer_start() == 0) {
		dsp_py_modules_changed(); /* (an interpreter's executable: its frames from the first event) */
		dsp_gpu_init();
		dsp_ncclprof_init();
#ifdef DDPSPY_NVTX
		dsp_nvtx_init();
#endif
		pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
		if (dsp_cfg.signals)
			install_signal_handlers();
		initialised = 1;
		__atomic_store_n(&dsp_on, 1, __ATOMIC_RELEASE);
		dsp_log("tracing %s as %s %d", n ? cmd : "?", ddpspy_role_names[dsp_id.role],
			dsp_id.rank);
	}
	t->guard = 0;
}

static void finish(const char *reason)
{
	struct dsp_tls *t = &dsp_tls;
	if (!initialised || getpid() != dsp_pid) /* never from a vfork child */
		return;
	initialised = 0;
	t->guard++;
	if (t->at_exit && t->ring) /* (what the ending thread began: its exit destructor will not run) */
		t->at_exit(t);
	dsp_gpu_stop(); /* (at exit, already done by its atexit handler, before libcupti's destructors) */
	dsp_writer_stop_and_drain(reason);
	t->guard--;
}

__attribute__((destructor)) static void ddpspy_fini(void)
{
	finish("exit");
}

#pragma GCC visibility push(default) /* the wrappers below are exports (exports.map) */

void _exit(int status)
{
	finish("_exit");
	if (get__exit())
		real__exit(status);
	for (;;) /* unreachable in practice: glibc always has _exit */
		pause();
}

void _Exit(int status)
{
	finish("_exit");
	if (get__Exit())
		real__Exit(status);
	for (;;)
		pause();
}

#pragma GCC visibility pop

void dsp_identity_from_mpi(int rank, int size)
{
	if (dsp_id.role == DDPSPY_ROLE_RANK && dsp_id.rank == rank && dsp_id.world_size == size)
		return;
	if (dsp_id.role == DDPSPY_ROLE_WORKER || dsp_id.role == DDPSPY_ROLE_LAUNCHER)
		return;
	dsp_id.role = DDPSPY_ROLE_RANK;
	dsp_id.rank = rank;
	dsp_id.world_size = size;
	if (!dsp_id.source[0] || dsp_id.rank != rank)
		memcpy(dsp_id.source, "mpi", 4);
	dsp_writer_identity_changed();
}

/* A process that no launcher named (mp.spawn's children, a script that passes its rank to
 * init_process_group, a plain single-GPU run) learns its rank from the largest communicator or
 * process group it joins (source: "nccl", "c10d"): a sub-communicator (split, a pipeline stage's
 * group) is never larger than the world's, and the world's is the one whose rank the job's other
 * files use. The launcher's environment and MPI's world know better and are kept. */
void dsp_identity_from_comm(int rank, int size, const char *source)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	if (rank < 0 || size <= 0 || rank >= size)
		return;
	dsp_tls.guard++; /* (our locks, here and the writer's, are not the program's waits) */
	pthread_mutex_lock(&lock);
	int ours = !strcmp(dsp_id.source, "nccl") || !strcmp(dsp_id.source, "c10d");
	int mine = dsp_id.role == DDPSPY_ROLE_OTHER ||
		   (dsp_id.role == DDPSPY_ROLE_RANK && ours && size > dsp_id.world_size);
	if (mine) {
		dsp_id.role = DDPSPY_ROLE_RANK;
		dsp_id.rank = rank;
		dsp_id.world_size = size;
		snprintf(dsp_id.source, sizeof dsp_id.source, "%s", source);
	}
	pthread_mutex_unlock(&lock);
	if (mine)
		dsp_writer_identity_changed();
	dsp_tls.guard--;
}

#pragma GCC visibility push(default)

/* ---- exec ----
 * The shape: complete the file (writer paused so no write is cut), exec, and if exec failed,
 * carry on recording. Not in a vfork child, which shares our memory until it execs. */
static int exec_begin(void)
{
	struct dsp_tls *t = &dsp_tls;
	if (!initialised || t->guard || getpid() != dsp_pid)
		return 0;
	t->guard++;
	dsp_writer_exec_begin();
	return 1;
}

static void exec_failed(int began)
{
	if (!began)
		return;
	int e = errno;
	dsp_writer_exec_failed();
	dsp_tls.guard--;
	errno = e;
}

/* a real exec function that cannot be found fails the call as a missing one would */
static int exec_missing(void)
{
	errno = ENOSYS;
	return -1;
}

int execve(const char *path, char *const argv[], char *const envp[])
{
	if (!get_execve())
		return exec_missing();
	int began = exec_begin();
	int rc = real_execve(path, argv, envp);
	exec_failed(began);
	return rc;
}

int execv(const char *path, char *const argv[])
{
	if (!get_execv())
		return exec_missing();
	int began = exec_begin();
	int rc = real_execv(path, argv);
	exec_failed(began);
	return rc;
}

int execvp(const char *file, char *const argv[])
{
	if (!get_execvp())
		return exec_missing();
	int began = exec_begin();
	int rc = real_execvp(file, argv);
	exec_failed(began);
	return rc;
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
	if (!get_execvpe())
		return exec_missing();
	int began = exec_begin();
	int rc = real_execvpe(file, argv, envp);
	exec_failed(began);
	return rc;
}

int fexecve(int fd, char *const argv[], char *const envp[])
{
	if (!get_fexecve())
		return exec_missing();
	int began = exec_begin();
	int rc = real_fexecve(fd, argv, envp);
	exec_failed(began);
	return rc;
}

/* execl and friends take their arguments as varargs: gather them and use the v-forms. */
#define MAX_EXECL_ARGS 4096
static int gather(const char *arg0, va_list ap, char **argv, char ***envp)
{
	int n = 0;
	argv[n++] = (char *)arg0;
	while (arg0 && n < MAX_EXECL_ARGS && (argv[n] = va_arg(ap, char *)) != NULL)
		n++;
	if (n == MAX_EXECL_ARGS) {
		errno = E2BIG;
		return -1;
	}
	argv[n] = NULL;
	if (envp)
		*envp = va_arg(ap, char **);
	return 0;
}

int execl(const char *path, const char *arg, ...)
{
	char *argv[MAX_EXECL_ARGS + 1];
	va_list ap;
	va_start(ap, arg);
	int rc = gather(arg, ap, argv, NULL);
	va_end(ap);
	return rc < 0 ? -1 : execv(path, argv);
}

int execlp(const char *file, const char *arg, ...)
{
	char *argv[MAX_EXECL_ARGS + 1];
	va_list ap;
	va_start(ap, arg);
	int rc = gather(arg, ap, argv, NULL);
	va_end(ap);
	return rc < 0 ? -1 : execvp(file, argv);
}

int execle(const char *path, const char *arg, ...)
{
	char *argv[MAX_EXECL_ARGS + 1];
	char **envp = NULL;
	va_list ap;
	va_start(ap, arg);
	int rc = gather(arg, ap, argv, &envp);
	va_end(ap);
	return rc < 0 ? -1 : execve(path, argv, envp);
}
