// Loaded by gloo_host with dlopen(RTLD_LOCAL), as Python loads an extension module: it and the
// libfakegloo.so it links are then invisible to RTLD_NEXT, like PyTorch's libgloo. It uses gloo
// as c10d's ProcessGroupGloo does: buffers made through the context, then the collective.
#include <stdexcept>

#include "fakegloo.h"

// Runs n allreduces of 4096 * (i + 1) bytes, a point-to-point send of 1 MiB, a barrier, a
// broadcast of 1000 bytes from rank 0 (input and output the same), a gather of 100 bytes a rank to
// the root (3 ranks), then one allreduce that throws. Returns the real library's call count, or
// -1 when the exception did not arrive.
extern "C" int plugin_run(int n)
{
	static char mem[1 << 20];
	gloo::Context ctx(0, 3);
	for (int i = 0; i < n; i++) {
		gloo::AllreduceOptions a;
		a.ctx = &ctx;
		a.set(mem, 4096 * (i + 1));
		gloo::allreduce(a);
	}
	auto p2p = ctx.createUnboundBuffer(mem, sizeof mem);
	p2p->send(1, 7);
	gloo::BarrierOptions b;
	b.ctx = &ctx;
	gloo::barrier(b);
	gloo::BroadcastOptions c;
	c.ctx = &ctx;
	c.set(mem, 1000);
	c.set(mem, 1000);
	gloo::broadcast(c);
	gloo::GatherOptions g;
	g.ctx = &ctx;
	g.set(mem, 300);
	g.set(mem + 300, 100);
	gloo::gather(g);
	try {
		gloo::AllreduceOptions f;
		f.ctx = &ctx;
		f.fail = 1;
		gloo::allreduce(f);
		return -1;
	} catch (const std::runtime_error &) {
	}
	return gloo::calls;
}
