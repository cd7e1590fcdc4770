/* A trace file followed as its process writes it (ddpspy watch): each call maps it again when it
 * grew and reads the records after those read before, up to its last whole frame; a frame being
 * written is read by the next call. The file's state (its clock, stacks, threads) carries over. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/format.h"
#include "trace.h"

/* the file mapped again at its size now, when it grew: 1, 0 when it did not, -1 on an error */
static int remap(struct trace_file *f)
{
	struct stat st;
	int fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(f->error, sizeof f->error, "cannot read: %s", fd < 0 ? strerror(errno) : "not a regular file");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if ((size_t)st.st_size <= f->size) {
		close(fd);
		return 0;
	}
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		snprintf(f->error, sizeof f->error, "cannot map: %s", strerror(errno));
		return -1;
	}
	if (f->map)
		munmap((void *)f->map, f->size);
	f->map = m;
	f->size = (size_t)st.st_size;
	return 1;
}

int trace_follow(struct trace_file *f, const struct trace_visitor *v)
{
	if (remap(f) < 0)
		return 2;
	if (f->resume && f->resume >= f->size)
		return 0;
	f->error[0] = 0;
	int rc = trace_read(f, v);
	/* (a frame cut short at the end is one being written: read again from it next time) */
	if (rc == 2 && (!strncmp(f->error, "truncated frame", 15) || !strncmp(f->error, "checksum", 8))) {
		rc = 0;
		f->error[0] = 0;
	}
	if (rc != 2)
		f->resume = f->stop_offset > DDPSPY_FILE_HEADER_LEN ? f->stop_offset : DDPSPY_FILE_HEADER_LEN;
	/* (what was read is not read again: its pages given back, so a long watch holds no more than
	 * the files' unread tails) */
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), behind = f->resume & ~(pg - 1);
	if (behind)
		madvise((void *)f->map, behind, MADV_DONTNEED);
	return rc;
}
