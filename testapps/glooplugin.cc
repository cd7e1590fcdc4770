// Loaded by gloo_host with dlopen(RTLD_LOCAL), as Python loads an extension module: it and the
// libfakegloo.so it links are then invisible to RTLD_NEXT, like PyTorch's libgloo.
#include <stdexcept>

namespace gloo {
struct AllreduceOptions { int fail; };
struct BarrierOptions { int x; };
struct BroadcastOptions { int x; };
extern int calls;
void allreduce(const AllreduceOptions &o);
void barrier(BarrierOptions &o);
void broadcast(BroadcastOptions &o);
} // namespace gloo

// Runs n allreduces, a barrier and a broadcast, then one allreduce that throws. Returns the
// real library's call count, or -1 when the exception did not arrive.
extern "C" int plugin_run(int n)
{
	gloo::AllreduceOptions a{0};
	gloo::BarrierOptions b{0};
	gloo::BroadcastOptions c{0};
	for (int i = 0; i < n; i++)
		gloo::allreduce(a);
	gloo::barrier(b);
	gloo::broadcast(c);
	try {
		gloo::AllreduceOptions f{1};
		gloo::allreduce(f);
		return -1;
	} catch (const std::runtime_error &) {
	}
	return gloo::calls;
}
