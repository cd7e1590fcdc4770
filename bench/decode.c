/* The baseline for the collector's speed: decode every frame of the given trace files with
 * msgpack-c's object API (msgpack_unpack_next), count the events, and do nothing else.
 *
 * usage: decode FILE... */
#include <fcntl.h>
#include <msgpack.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/format.h"

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
			const msgpack_object *o = &u.data;
			for (uint32_t k = 0; o->type == MSGPACK_OBJECT_MAP && k < o->via.map.size; k++) {
				const msgpack_object_kv *kv = &o->via.map.ptr[k];
				if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == 2 &&
				    !memcmp(kv->key.via.str.ptr, "ev", 2) && kv->val.type == MSGPACK_OBJECT_ARRAY)
					events += kv->val.via.array.size;
			}
			off += 8 + len;
		}
		munmap((void *)m, (size_t)st.st_size);
	}
	msgpack_unpacked_destroy(&u);
	printf("%llu events in %llu frames\n", events, frames);
	return 0;
}
