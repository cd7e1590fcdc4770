"""A Python trainer bound by its kernel launches, for the launch_bound finding's sites: each step,
one_step() calls tiny_ops(), which launches OPS tiny kernels one Python call at a time, each after
a few microseconds of host work in C (as eager PyTorch dispatches an element-wise op per line), then all-reduces one bucket and waits for the step,
through the testbed's GPU half (build/libddpbench_gpu.so, its struct gpu_ops read with ctypes) on
the simulated device. One rank. It prints each step's time in tiny_ops (ms, its own clock). Usage: pylaunch_app.py LIBDDPBENCH_GPU STEPS OPS KERNEL_NS"""
import ctypes as C
import sys
import time

CONF = [("rank", C.c_int), ("ws", C.c_int), ("local_rank", C.c_int), ("grad_floats", C.c_size_t),
        ("extra_floats", C.c_size_t), ("input_bytes", C.c_size_t), ("d2d_bytes", C.c_size_t), ("pageable", C.c_int),
        ("kernels", C.c_int), ("overlap", C.c_int), ("sync_by", C.c_int), ("side_gpu_ms", C.c_double),
        ("layer_floats", C.c_size_t), ("pipe_floats", C.c_size_t), ("dp_color", C.c_int), ("cupti_from", C.c_int),
        ("cupti_to", C.c_int), ("cupti_sync", C.c_int)]


class Conf(C.Structure):
    _fields_ = CONF


VOID = C.CFUNCTYPE(None)


class Ops(C.Structure):  # testapps/ddpbench/ddpbench.h, struct gpu_ops (GPU_OPS_VERSION 5), as far as used
    _fields_ = [("version", C.c_int), ("unique_id", C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_size_t)),
                ("init", C.CFUNCTYPE(C.c_int, C.POINTER(Conf), C.c_void_p, C.c_char_p, C.c_size_t)),
                ("upload", C.CFUNCTYPE(None, C.c_void_p, C.c_size_t)), ("kernel", C.CFUNCTYPE(None, C.c_int, C.c_double)),
                ("bucket", C.CFUNCTYPE(None, C.c_size_t, C.c_size_t)), ("grads_done", VOID), ("extra", VOID),
                ("barrier", VOID), ("read_loss", VOID), ("end_step", C.CFUNCTYPE(C.c_int, C.c_char_p, C.c_size_t)),
                ("finish", VOID)]


SHAPE = list(range(400, 0, -1))


def tiny_ops(ops, n, ns):
    for _ in range(n):
        # one tiny kernel a call, after a few us of host work in C, as an eager op's dispatch is
        ops.kernel(0, ns + 0 * sum(sorted(SHAPE)))


def one_step(ops, n, ns, err, spent):
    t = time.perf_counter()
    tiny_ops(ops, n, ns)
    spent.append(1e3 * (time.perf_counter() - t))
    ops.bucket(0, 1024)
    if ops.end_step(err, len(err)) != 0:
        sys.exit("end_step: %s" % err.value.decode())


def main():
    lib, steps, n, ns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    ops = Ops.in_dll(C.CDLL(lib), "ddpbench_gpu")
    if ops.version != 5:
        sys.exit("struct gpu_ops version %d, not 5" % ops.version)
    uid, err = C.create_string_buffer(4096), C.create_string_buffer(256)
    if ops.unique_id(uid, 4096) < 0:
        sys.exit("ncclGetUniqueId failed")
    conf = Conf(rank=0, ws=1, local_rank=0, grad_floats=1024, input_bytes=4096, kernels=1, overlap=0, dp_color=-1,
                cupti_from=-1, cupti_to=-1)
    if ops.init(C.byref(conf), uid, err, len(err)) != 0:
        sys.exit("init: %s" % err.value.decode())
    spent = []
    for _ in range(steps):
        one_step(ops, n, ns, err, spent)
    ops.finish()
    print('{"steps": %d, "kernels_per_step": %d, "tiny_ops_ms": [%s]}' % (steps, n, ", ".join("%.3f" % x for x in spent)))


main()
