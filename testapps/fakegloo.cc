// A stand-in for libgloo.so with the same symbol names as gloo 0.5, for testing the gloo wrappers
// without PyTorch: each collective sleeps 2 ms and counts its calls; allreduce throws when asked.
#include <stdexcept>
#include <unistd.h>

namespace gloo {
struct AllreduceOptions { int fail; };
struct BarrierOptions { int x; };
struct BroadcastOptions { int x; };
int calls;
void allreduce(const AllreduceOptions &o)
{
	calls++;
	usleep(2000);
	if (o.fail)
		throw std::runtime_error("fake gloo: timed out");
}
void barrier(BarrierOptions &) { calls++; usleep(2000); }
void broadcast(BroadcastOptions &) { calls++; usleep(2000); }
} // namespace gloo
