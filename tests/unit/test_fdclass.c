/* File descriptor classification: each kind of descriptor a training process reads from. */
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../preload/internal.h"
#include "tap.h"

__thread struct dsp_tls dsp_tls;
int dsp_use_tsc;

static int is(int fd, int cls, const char *what)
{
	int c = dsp_fdclass_probe(fd);
	return ok(c == cls, "%s is %s (got %s)", what, ddpspy_fdclass_names[cls],
		  c >= 0 && c < DDPSPY_FDCLASS_COUNT ? ddpspy_fdclass_names[c] : "?");
}

int main(void)
{
	char tmpl[] = "/tmp/ddpspy-fdclass-XXXXXX";
	int f = mkstemp(tmpl);
	unlink(tmpl);
	is(f, DDPSPY_FD_FILE, "a regular file");
	int d = open("/tmp", O_RDONLY | O_DIRECTORY);
	is(d, DDPSPY_FD_DIR, "a directory");
	int p[2];
	pipe(p);
	is(p[0], DDPSPY_FD_PIPE, "a pipe");
	int sv[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	is(sv[0], DDPSPY_FD_UNIX, "a unix socket");
	int t = socket(AF_INET, SOCK_STREAM, 0);
	is(t, DDPSPY_FD_TCP, "a TCP socket");
	int t6 = socket(AF_INET6, SOCK_STREAM, 0);
	if (t6 >= 0)
		is(t6, DDPSPY_FD_TCP, "a TCP/IPv6 socket");
	else
		ok(1, "# skip no IPv6 on this machine");
	int u = socket(AF_INET, SOCK_DGRAM, 0);
	is(u, DDPSPY_FD_UDP, "a UDP socket");
	int n = open("/dev/null", O_RDONLY);
	is(n, DDPSPY_FD_DEVICE, "/dev/null");
	int e = eventfd(0, 0);
	is(e, DDPSPY_FD_ANON, "an eventfd");
	ok(dsp_fdclass_probe(12345) == DDPSPY_FD_UNKNOWN, "a closed descriptor is unknown");

	/* the cache: set, read back, forgotten at close */
	dsp_fdclass_set(n, DDPSPY_FD_PIPE);
	ok(dsp_fdclass(n) == DDPSPY_FD_PIPE, "the cache answers without probing");
	dsp_fdclass_forget(n);
	ok(dsp_fdclass(n) == DDPSPY_FD_DEVICE, "a forgotten descriptor is probed again");
	return done_testing();
}
