/* Rank detection from each launcher's environment, launchers, and workers. */
#include <string.h>

#include "../../preload/internal.h"
#include "tap.h"

__thread struct dsp_tls dsp_tls;
int dsp_use_tsc;

static const char **env;

static const char *get(const char *name)
{
	for (int i = 0; env[i]; i += 2)
		if (!strcmp(env[i], name))
			return env[i + 1];
	return NULL;
}

/* cmdline as /proc/self/cmdline has it: NUL-separated; pass the words with '|' between */
static void detect(struct dsp_identity *id, const char **e, const char *words)
{
	char cmd[512];
	size_t n = strlen(words);
	memcpy(cmd, words, n + 1);
	for (size_t i = 0; i < n; i++)
		if (cmd[i] == '|')
			cmd[i] = 0;
	env = e;
	dsp_identity_detect(id, get, cmd, n + 1);
}

int main(void)
{
	struct dsp_identity id;

	detect(&id, (const char *[]){"RANK", "3", "LOCAL_RANK", "1", "WORLD_SIZE", "8", NULL},
	       "python3|train.py");
	ok(id.role == DDPSPY_ROLE_RANK && id.rank == 3 && id.local_rank == 1 && id.world_size == 8 &&
	   !strcmp(id.source, "torchrun"), "torchrun worker: RANK/LOCAL_RANK/WORLD_SIZE");

	detect(&id, (const char *[]){"OMPI_COMM_WORLD_RANK", "2", "OMPI_COMM_WORLD_LOCAL_RANK", "0",
				     "OMPI_COMM_WORLD_SIZE", "4", NULL}, "./app");
	ok(id.role == DDPSPY_ROLE_RANK && id.rank == 2 && id.local_rank == 0 && id.world_size == 4 &&
	   !strcmp(id.source, "ompi"), "Open MPI: OMPI_COMM_WORLD_*");

	detect(&id, (const char *[]){"PMI_RANK", "5", "PMI_SIZE", "6", "MPI_LOCALRANKID", "1", NULL},
	       "./app");
	ok(id.rank == 5 && id.world_size == 6 && id.local_rank == 1 && !strcmp(id.source, "pmi"),
	   "MPICH hydra: PMI_RANK/PMI_SIZE/MPI_LOCALRANKID");

	detect(&id, (const char *[]){"PMIX_RANK", "7", "OMPI_COMM_WORLD_SIZE", "16", NULL}, "./app");
	ok(id.rank == 7 && id.world_size == 16 && !strcmp(id.source, "pmix"), "PMIx: PMIX_RANK");

	detect(&id, (const char *[]){"SLURM_PROCID", "9", "SLURM_LOCALID", "1", "SLURM_NTASKS", "12",
				     "SLURM_STEP_ID", "0", NULL}, "./app");
	ok(id.rank == 9 && id.local_rank == 1 && id.world_size == 12 && !strcmp(id.source, "slurm"),
	   "srun task: SLURM_PROCID in a job step");

	detect(&id, (const char *[]){"SLURM_PROCID", "0", "SLURM_NTASKS", "1", NULL}, "bash|job.sh");
	ok(id.role == DDPSPY_ROLE_OTHER && id.rank == -1,
	   "a batch script's SLURM_PROCID=0 outside a step is not rank 0");

	detect(&id, (const char *[]){"RANK", "1", "WORLD_SIZE", "2", "SLURM_PROCID", "0",
				     "SLURM_STEP_ID", "0", NULL}, "python3|train.py");
	ok(id.rank == 1 && !strcmp(id.source, "torchrun"),
	   "torchrun under srun: RANK wins over the agent's SLURM_PROCID");

	detect(&id, (const char *[]){NULL}, "mpirun|-np|4|./app");
	ok(id.role == DDPSPY_ROLE_LAUNCHER && id.rank == -1, "mpirun is a launcher");

	detect(&id, (const char *[]){"OMPI_COMM_WORLD_RANK", "0", NULL}, "/usr/bin/orted|-mca");
	ok(id.role == DDPSPY_ROLE_LAUNCHER, "orted is a launcher even with MPI variables");

	detect(&id, (const char *[]){"SLURM_PROCID", "0", "SLURM_STEP_ID", "0", NULL},
	       "/usr/bin/python3|/usr/bin/torchrun|--nproc_per_node=2|train.py");
	ok(id.role == DDPSPY_ROLE_LAUNCHER && id.rank == -1,
	   "the torchrun agent (python3 /usr/bin/torchrun) is a launcher, not rank 0");

	detect(&id, (const char *[]){NULL}, "python3|-m|torch.distributed.run|train.py");
	ok(id.role == DDPSPY_ROLE_LAUNCHER, "python -m torch.distributed.run is a launcher");

	detect(&id, (const char *[]){"RANK", "1", NULL},
	       "python3|-c|from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)|--multiprocessing-fork");
	ok(id.role == DDPSPY_ROLE_WORKER && id.parent_rank == 1 && id.rank == -1,
	   "a multiprocessing spawn child of rank 1 is its worker");

	detect(&id, (const char *[]){"RANK", "x1", NULL}, "python3|train.py");
	ok(id.role == DDPSPY_ROLE_OTHER, "a malformed RANK is ignored");

	detect(&id, (const char *[]){NULL}, "./app");
	ok(id.role == DDPSPY_ROLE_OTHER && id.rank == -1 && id.world_size == -1,
	   "no launcher variables: other, rank unknown");
	return done_testing();
}
