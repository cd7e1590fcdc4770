/* The baseline for the collector's speed: decode every frame of the given trace files with
 * msgpack-c's object API (msgpack_unpack_next), walk every event (1.x: msgpack arrays; 2.x: the
 * packed encoding, each varint read), count them, and do nothing else.
 *
 * usage: decode FILE... */
#include <fcntl.h>
#include <msgpack.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/evcodec.h"
#include "../common/format.h"

/* Reads every field of every packed event; returns how many (stops at the first malformed one). */
static unsigned long long walk_packed(const unsigned char *na, uint32_t nna, const unsigned char *p, uint32_t len)
{
	const unsigned char *end = p + len;
	unsigned long long n = 0;
	uint64_t v, kind, nargs;
	while (p < end) {
		unsigned h = *p++;
		kind = h & DDPSPY_EVC_ESCAPE;
		if (kind == DDPSPY_EVC_ESCAPE) {
			if (!(p = ddpspy_get_varint(p, end, &kind)) || !(p = ddpspy_get_varint(p, end, &nargs)))
				break;
		} else if (kind < nna) {
			nargs = na[kind];
		} else {
			break;
		}
		if (!(p = ddpspy_get_varint(p, end, &v)) || !(p = ddpspy_get_varint(p, end, &v)) ||
		    ((h & DDPSPY_EVC_STACK) && !(p = ddpspy_get_varint(p, end, &v))) || (uint64_t)(end - p) < (nargs + 7) / 8)
			break;
		const unsigned char *mask = p;
		p += (nargs + 7) / 8;
		for (uint64_t i = 0; p && i < nargs; i++)
			if (mask[i / 8] >> (i % 8) & 1)
				p = ddpspy_get_varint(p, end, &v);
		if (p && (h & DDPSPY_EVC_STR) && (p = ddpspy_get_varint(p, end, &v)) && v <= (uint64_t)(end - p))
			p += v;
		if (!p)
			break;
		n++;
	}
	return n;
}

int main(int argc, char **argv)
{
	unsigned long long events = 0, frames = 0;
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	for (int i = 1; i < argc; i++) {
		int fd = open(argv[i], O_RDONLY);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0) {
			perror(argv[i]);
			return 1;
		}
		const unsigned char *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		close(fd);
		if (m == MAP_FAILED)
			return 1;
		size_t off = DDPSPY_FILE_HEADER_LEN;
		while (off + 8 <= (size_t)st.st_size) {
			uint32_t len = (uint32_t)m[off] | (uint32_t)m[off + 1] << 8 | (uint32_t)m[off + 2] << 16 |
				       (uint32_t)m[off + 3] << 24;
			if (off + 8 + len > (size_t)st.st_size)
				break;
			size_t p = 0;
			if (msgpack_unpack_next(&u, (const char *)m + off + 8, len, &p) != MSGPACK_UNPACK_SUCCESS)
				break;
			frames++;
			const msgpack_object *o = &u.data, *na = NULL, *b = NULL;
			for (uint32_t k = 0; o->type == MSGPACK_OBJECT_MAP && k < o->via.map.size; k++) {
				const msgpack_object_kv *kv = &o->via.map.ptr[k];
				if (kv->key.type != MSGPACK_OBJECT_STR)
					continue;
				if (kv->key.via.str.size == 2 && !memcmp(kv->key.via.str.ptr, "ev", 2) &&
				    kv->val.type == MSGPACK_OBJECT_ARRAY)
					events += kv->val.via.array.size;
				else if (kv->key.via.str.size == 2 && !memcmp(kv->key.via.str.ptr, "na", 2))
					na = &kv->val;
				else if (kv->key.via.str.size == 1 && kv->key.via.str.ptr[0] == 'b')
					b = &kv->val;
			}
			if (na && b && na->type == MSGPACK_OBJECT_BIN && b->type == MSGPACK_OBJECT_BIN)
				events += walk_packed((const unsigned char *)na->via.bin.ptr, na->via.bin.size,
						      (const unsigned char *)b->via.bin.ptr, b->via.bin.size);
			off += 8 + len;
		}
		munmap((void *)m, (size_t)st.st_size);
	}
	msgpack_unpacked_destroy(&u);
	printf("%llu events in %llu frames\n", events, frames);
	return 0;
}
