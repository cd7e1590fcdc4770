/* FNV-1a, the one hash of ddpspy's tables (stack and module tables in the writer, MPI
 * communicator identities, the collector's path table): fold bytes or whole words into h,
 * starting from DDPSPY_FNV_SEED. */
#ifndef DDPSPY_HASH_H
#define DDPSPY_HASH_H

#include <stddef.h>
#include <stdint.h>

#define DDPSPY_FNV_SEED 1469598103934665603ull

static inline uint64_t ddpspy_fnv_word(uint64_t h, uint64_t v)
{
	return (h ^ v) * 1099511628211ull;
}

static inline uint64_t ddpspy_fnv_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++)
		h = ddpspy_fnv_word(h, s[i]);
	return h;
}

#endif
