/* Who this process is in the job: rank, local rank and world size from the launcher's
 * environment, or a launcher, or a worker of some rank. A pure function of the environment and
 * the command line, so tests can feed it any launcher's variables. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

static int num(const char *(*get)(const char *), const char *name, int *out)
{
	const char *v = get(name);
	char *end;
	long x;

	if (!v || !*v)
		return 0;
	x = strtol(v, &end, 10);
	if (*end || x < 0 || x > 1 << 24)
		return 0;
	*out = (int)x;
	return 1;
}

static const char *base(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

/* Launchers by program name, and Python launchers by module or script in their arguments. */
static int is_launcher(const char *cmdline, size_t len)
{
	static const char *const progs[] = {"mpirun", "mpiexec", "orterun", "prterun", "orted",
					    "prted", "srun", "hydra_pmi_proxy", "torchrun",
					    "mpiexec.hydra", "mpiexec.openmpi", "mpirun.openmpi",
					    NULL};
	static const char *const args[] = {"torch.distributed.run", "torch.distributed.launch",
					   "torchrun", NULL};
	size_t i = 0;
	int argi = 0;

	while (i < len) {
		const char *a = cmdline + i;
		const char *b = base(a);
		for (int k = 0; argi == 0 && progs[k]; k++)
			if (!strcmp(b, progs[k]))
				return 1;
		/* python -m torch.distributed.run, or python /usr/bin/torchrun */
		for (int k = 0; argi > 0 && argi < 4 && args[k]; k++)
			if (!strcmp(a, args[k]) || !strcmp(b, args[k]))
				return 1;
		i += strlen(a) + 1;
		argi++;
	}
	return 0;
}

/* Python's multiprocessing "spawn"/"forkserver" children are new interpreters started with the
 * parent's environment: they inherit RANK but are workers of that rank, not the rank. */
static int is_mp_child(const char *cmdline, size_t len)
{
	for (size_t i = 0; i < len; i += strlen(cmdline + i) + 1)
		if (strstr(cmdline + i, "multiprocessing.spawn") ||
		    strstr(cmdline + i, "multiprocessing.forkserver") ||
		    !strcmp(cmdline + i, "--multiprocessing-fork"))
			return 1;
	return 0;
}

void dsp_identity_detect(struct dsp_identity *id, const char *(*get)(const char *name),
			 const char *cmdline, size_t cmdline_len)
{
	int r = -1, lr = -1, ws = -1;
	const char *src = NULL;

	*id = (struct dsp_identity){DDPSPY_ROLE_OTHER, -1, -1, -1, -1, -1, ""};
	if (is_launcher(cmdline, cmdline_len)) {
		id->role = DDPSPY_ROLE_LAUNCHER;
		return;
	}
	/* Most specific first: torchrun sets RANK for each worker even under Slurm or MPI, where
	 * the outer launcher's variables describe the agent's task, not the training rank. */
	if (num(get, "RANK", &r)) {
		src = "torchrun";
		num(get, "LOCAL_RANK", &lr);
		num(get, "WORLD_SIZE", &ws);
	} else if (num(get, "OMPI_COMM_WORLD_RANK", &r)) {
		src = "ompi";
		num(get, "OMPI_COMM_WORLD_LOCAL_RANK", &lr);
		num(get, "OMPI_COMM_WORLD_SIZE", &ws);
	} else if (num(get, "PMI_RANK", &r)) {
		src = "pmi";
		if (!num(get, "MPI_LOCALRANKID", &lr))
			num(get, "PMI_LOCAL_RANK", &lr);
		num(get, "PMI_SIZE", &ws);
	} else if (num(get, "PMIX_RANK", &r)) {
		src = "pmix";
		num(get, "PMIX_LOCAL_RANK", &lr);
		if (!num(get, "PMIX_SIZE", &ws))
			num(get, "OMPI_COMM_WORLD_SIZE", &ws);
	} else if ((get("SLURM_STEP_ID") || get("SLURM_STEPID")) && num(get, "SLURM_PROCID", &r)) {
		/* only inside a job step: the batch script itself also has SLURM_PROCID=0 */
		src = "slurm";
		num(get, "SLURM_LOCALID", &lr);
		if (!num(get, "SLURM_NTASKS", &ws))
			num(get, "SLURM_NPROCS", &ws);
	}
	if (!src)
		return;
	if (is_mp_child(cmdline, cmdline_len)) {
		id->role = DDPSPY_ROLE_WORKER;
		id->parent_rank = r;
		snprintf(id->source, sizeof id->source, "%s", src);
		return;
	}
	id->role = DDPSPY_ROLE_RANK;
	id->rank = r;
	id->local_rank = lr;
	id->world_size = ws;
	snprintf(id->source, sizeof id->source, "%s", src);
}
