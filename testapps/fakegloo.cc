// A stand-in for libgloo.so with the same symbol names as gloo 0.5, for testing the gloo wrappers
// without PyTorch: each collective sleeps 2 ms and counts its calls; allreduce throws when asked.
// Buffers are made as gloo makes them: the options' setters call the non-virtual
// gloo::Context::createUnboundBuffer, and the collectives make buffers of their own and send
// through the tcp transport's virtual UnboundBuffer::send (fakegloo.h).
#include <stdexcept>
#include <unistd.h>

#include "fakegloo.h"

namespace gloo {
namespace transport {
namespace tcp {
class UnboundBuffer : public transport::UnboundBuffer {
      public:
	UnboundBuffer(void *p, size_t n) : transport::UnboundBuffer(p, n) {}
	void send(int rank, uint64_t slot, size_t offset = 0, size_t nbytes = 0) override;
	void recv(int rank, uint64_t slot, size_t offset = 0, size_t nbytes = 0) override;
};
void UnboundBuffer::send(int, uint64_t, size_t, size_t) {}
void UnboundBuffer::recv(int, uint64_t, size_t, size_t) {}
} // namespace tcp
} // namespace transport

std::unique_ptr<transport::UnboundBuffer> Context::createUnboundBuffer(void *ptr, size_t size)
{
	return std::unique_ptr<transport::UnboundBuffer>(new transport::tcp::UnboundBuffer(ptr, size));
}

int calls;

// gloo's own work inside a collective: a scratch buffer, sent to the next rank
static void work(Context *ctx)
{
	char scratch[64];
	auto b = ctx->createUnboundBuffer(scratch, sizeof scratch);
	b->send((ctx->rank + 1) % ctx->size, 0);
	calls++;
	usleep(2000);
}
void allreduce(const AllreduceOptions &o)
{
	work(o.ctx);
	if (o.fail)
		throw std::runtime_error("fake gloo: timed out");
}
void barrier(BarrierOptions &o) { work(o.ctx); }
void broadcast(BroadcastOptions &o) { work(o.ctx); }
void gather(GatherOptions &o) { work(o.ctx); }
} // namespace gloo
