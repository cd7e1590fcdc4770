// The stand-in gloo's declarations (testapps/fakegloo.cc), in gloo 0.5's names and shapes
// (gloo/context.h, gloo/transport/unbound_buffer.h), for the library and its caller alike.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace gloo {
namespace transport {
class UnboundBuffer {
      public:
	UnboundBuffer(void *p, size_t n) : ptr(p), size(n) {}
	virtual ~UnboundBuffer() {}
	void *const ptr;
	const size_t size;
	virtual void send(int rank, uint64_t slot, size_t offset = 0, size_t nbytes = 0) = 0;
	virtual void recv(int rank, uint64_t slot, size_t offset = 0, size_t nbytes = 0) = 0;
};
} // namespace transport

class Context {
      public:
	Context(int r, int s) : rank(r), size(s) {}
	virtual ~Context() {}
	const int rank;
	const int size;
	int base = 2;
	std::unique_ptr<transport::UnboundBuffer> createUnboundBuffer(void *ptr, size_t size);
};

// the options: each input or output a caller sets becomes a buffer made through the context
struct Options {
	Context *ctx;
	std::vector<std::unique_ptr<transport::UnboundBuffer>> bufs;
	int fail = 0;
	void set(void *p, size_t n) { bufs.push_back(ctx->createUnboundBuffer(p, n)); }
};
struct AllreduceOptions : Options {};
struct BarrierOptions : Options {};
struct BroadcastOptions : Options {};
struct GatherOptions : Options {};
extern int calls;
void allreduce(const AllreduceOptions &o);
void barrier(BarrierOptions &o);
void broadcast(BroadcastOptions &o);
void gather(GatherOptions &o);
} // namespace gloo
