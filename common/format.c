/* Name tables generated from the X-macro lists in format.h, and the frame checksum. */
#include "format.h"

/* the names of a two-column list (enum, name) */
#define NAME_OF(e, s) s,
#define NAMES(table, count, list) const char *const table[count] = {list(NAME_OF)};

NAMES(ddpspy_role_names, DDPSPY_ROLE_COUNT, DDPSPY_ROLES)
NAMES(ddpspy_fdclass_names, DDPSPY_FDCLASS_COUNT, DDPSPY_FDCLASSES)

const char *const ddpspy_op_names[DDPSPY_OP_COUNT] = {
#define X(e, s, f) s,
	DDPSPY_OPS(X)
#undef X
};

const unsigned ddpspy_op_flags[DDPSPY_OP_COUNT] = {
#define X(e, s, f) f,
	DDPSPY_OPS(X)
#undef X
};

NAMES(ddpspy_cuda_dir_names, DDPSPY_DIR_COUNT, DDPSPY_CUDA_DIRS)
NAMES(ddpspy_cuda_sync_names, DDPSPY_SYNC_COUNT, DDPSPY_CUDA_SYNCS)
NAMES(ddpspy_gpu_copy_names, DDPSPY_GCOPY_COUNT, DDPSPY_GPU_COPIES)
NAMES(ddpspy_gpu_mem_names, DDPSPY_GMEM_COUNT, DDPSPY_GPU_MEMS)
NAMES(ddpspy_gpu_sync_names, DDPSPY_GSYNC_COUNT, DDPSPY_GPU_SYNCS)
NAMES(ddpspy_nvtx_names, DDPSPY_NVTX_COUNT, DDPSPY_NVTX_RANGES)
NAMES(ddpspy_category_names, DDPSPY_CAT_COUNT, DDPSPY_CATEGORIES)

const char *const ddpspy_event_names[DDPSPY_EV_COUNT] = {
#define X(e, s, a, m) s,
	DDPSPY_EVENT_KINDS(X)
#undef X
};

const char *const ddpspy_event_args[DDPSPY_EV_COUNT] = {
#define X(e, s, a, m) a,
	DDPSPY_EVENT_KINDS(X)
#undef X
};

const unsigned ddpspy_event_meaning[DDPSPY_EV_COUNT] = {
#define X(e, s, a, m) m,
	DDPSPY_EVENT_KINDS(X)
#undef X
};

const char *ddpspy_name(const char *const *names, int count, int64_t v)
{
	return v >= 0 && v < count ? names[v] : NULL;
}

/* Bitwise table built on first use; 1 KiB, computed in a few microseconds. */
/* slice-by-8: eight tables, eight bytes per step (several times the byte-wise speed) */
static uint32_t crc_table[8][256];
static int crc_ready;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
	__atomic_store_n(&crc_ready, 1, __ATOMIC_RELEASE);
}

uint32_t ddpspy_crc32(uint32_t crc, const void *p, size_t n)
{
	const unsigned char *b = p;

	if (!__atomic_load_n(&crc_ready, __ATOMIC_ACQUIRE))
		crc_init(); /* idempotent: concurrent callers compute the same table */
	crc = ~crc;
	while (n >= 8) {
		uint32_t lo = crc ^ ((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
		crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^ crc_table[5][(lo >> 16) & 0xff] ^
		      crc_table[4][lo >> 24] ^ crc_table[3][b[4]] ^ crc_table[2][b[5]] ^ crc_table[1][b[6]] ^
		      crc_table[0][b[7]];
		b += 8;
		n -= 8;
	}
	while (n--)
		crc = crc_table[0][(crc ^ *b++) & 0xff] ^ (crc >> 8);
	return ~crc;
}
