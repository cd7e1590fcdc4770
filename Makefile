# ddpspy: one plain Makefile. `make` builds build/libddpspy.so and build/ddpspy; `make test`
# runs every test (installing missing dependencies first); `make bench` measures overhead.

CC ?= cc
CFLAGS ?= -O2 -g
VERSION := 0.1.0
WARN := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wstrict-prototypes
BASE := $(CFLAGS) $(WARN) -std=gnu11 -D_GNU_SOURCE -DDDPSPY_VERSION='"$(VERSION)"' \
	-I/usr/include/x86_64-linux-gnu
B := build

MPI_CFLAGS := $(shell pkg-config --cflags ompi-c 2>/dev/null)
MPICC := $(shell command -v mpicc 2>/dev/null)

# CUDA: its headers (and nvcc) from CUDA_HOME, for the CUDA runtime wrappers, the simulated device's
# stand-ins and the CUDA test programs; nothing links against CUDA
CUDA_HOME ?= /usr/local/cuda
HAVE_CUDA := $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h)
HAVE_CUPTI := $(wildcard $(CUDA_HOME)/include/cupti.h)
HAVE_NCCL := $(wildcard $(CUDA_HOME)/include/nccl.h)
HAVE_NVTX := $(wildcard $(CUDA_HOME)/include/nvtx3/nvToolsExt.h)
GPU_DEF := $(if $(HAVE_CUPTI),-DDDPSPY_GPU) $(if $(HAVE_NVTX),-DDDPSPY_NVTX)
NVCC := $(wildcard $(CUDA_HOME)/bin/nvcc)

PRELOAD_SRC := preload/init.c preload/config.c preload/clock.c preload/ring.c \
	preload/registry.c preload/writer.c preload/record.c preload/resolve.c \
	preload/fdclass.c preload/identity.c preload/pthread.c preload/sleep.c preload/io.c \
	preload/gloo.c preload/markers.c preload/selfcost.c preload/inflight.c preload/blocked.c \
	preload/pyframes.c preload/cpusample.c common/format.c
ifneq ($(MPI_CFLAGS),)
PRELOAD_SRC += preload/mpi.c
endif
ifneq ($(HAVE_CUDA),)
PRELOAD_SRC += preload/cuda.c
endif
ifneq ($(HAVE_CUPTI),)
PRELOAD_SRC += cupti/gpu.c cupti/share.c cupti/tids.c
endif
ifneq ($(HAVE_NCCL),)
PRELOAD_SRC += preload/nccl.c
endif
ifneq ($(HAVE_NVTX),)
PRELOAD_SRC += preload/nvtx.c
endif
PRELOAD_SRC += preload/ncclprof.c
PRELOAD_OBJ := $(PRELOAD_SRC:%.c=$(B)/obj/%.o)

COLLECTOR_SRC := collector/main.c collector/cli.c collector/run.c collector/dump.c collector/trace.c collector/tracemeta.c collector/elfsym.c collector/tracedir.c \
	collector/json.c collector/analyze.c collector/kinds.c collector/stats.c collector/load.c \
	collector/hostsite.c collector/ranges.c collector/inflight.c collector/tracefollow.c collector/watch.c collector/watchprom.c collector/watchfind.c collector/prom.c collector/clocks.c collector/pattern.c collector/steps.c collector/sweep.c collector/sweepcore.c collector/lsweep.c collector/p2p.c collector/split.c collector/splitmpi.c collector/gpushard.c collector/cpu.c collector/evidence.c collector/findings.c collector/finddata.c collector/findhost.c collector/findsite.c collector/findphase.c collector/findhang.c collector/findpipe.c collector/findshard.c collector/findgpu.c collector/words.c collector/verdict.c \
	collector/report.c collector/compare.c collector/gpu.c collector/gpucover.c collector/gpudev.c collector/gpujoin.c collector/gpustep.c collector/ncclplug.c collector/par.c collector/runs.c collector/spread.c collector/proc.c collector/stream.c collector/loadmpi.c collector/mpijob.c collector/model.c collector/waits.c common/format.c \
	viewer/timeline.c viewer/tracks.c viewer/view.c viewer/html.c
# (every header a collector object may include: a change to one rebuilds them all)
COLLECTOR_HDR := common/format.h common/evcodec.h common/hash.h collector/base.h collector/trace.h collector/tracefile.h collector/elfsym.h \
	collector/tracemeta.h collector/mpread.h collector/json.h collector/cli.h collector/analysis.h collector/analysis_int.h \
	collector/load_int.h collector/gpu_int.h collector/steps_int.h collector/split_int.h collector/findings_int.h \
	collector/prom.h viewer/vw.h viewer/view_int.h
COLLECTOR_OBJ := $(COLLECTOR_SRC:%.c=$(B)/cobj/%.o)

SIM := $(if $(HAVE_CUDA),$(B)/simgpu/libcudart.so.13 $(B)/simgpu/libcupti.so.13 $(B)/simgpu/libcuda.so.1 \
	$(B)/simgpu/libnccl.so.2) \
	$(if $(and $(HAVE_CUDA),$(NVCC)),$(B)/testapps/gpu_app $(B)/testapps/gpu_app_pt $(B)/testapps/gpu_app_static \
		$(B)/testapps/cupti_rules \
		$(B)/testapps/gpu_probe) \
	$(if $(and $(HAVE_NCCL),$(NVCC)),$(B)/testapps/nccl_app $(B)/libddpbench_gpu.so $(B)/testapps/libnccl-profiler-test.so) \
	$(if $(HAVE_CUDA),$(B)/testapps/cuda_c $(B)/testapps/cuda_c_ctor) \
	$(if $(HAVE_CUDA),$(B)/simgpu12/libcudart.so.12 $(B)/simgpu12/libcupti.so.12 $(B)/simgpu12/libcuda.so.1 \
		$(B)/testapps/cuda_c12) \
	$(if $(and $(HAVE_CUDA),$(NVCC)),$(B)/testapps/gpu_app12)

TESTAPPS := $(B)/testapps/families $(B)/testapps/threads $(B)/testapps/forker $(B)/testapps/cpuhot \
	$(B)/testapps/gloo_host $(B)/testapps/libfakegloo.so \
	$(B)/testapps/libglooplugin.so $(B)/bench/overhead $(B)/testapps/fakepy $(B)/testapps/fakepy314
ifneq ($(MPICC),)
TESTAPPS += $(B)/testapps/mpi_app $(B)/testapps/stencil $(B)/testapps/hang_mpi $(B)/ddpbench
endif
ifneq ($(HAVE_NVTX),)
TESTAPPS += $(B)/testapps/nvtx_app
endif
DDPBENCH_SRC := $(wildcard testapps/ddpbench/*.c)
UNIT := $(B)/tests/test_ring $(B)/tests/test_format $(B)/tests/test_fdclass \
	$(B)/tests/test_identity $(B)/tests/test_kinds $(B)/tests/test_sort $(B)/tests/test_p2pnum \
	$(B)/tests/test_pattern

.PHONY: all deps test bench gen clean testapps stress lab demo fixtures fuzz sanitized sim
all: $(B)/libddpspy.so $(B)/ddpspy

deps:
	@bash .ci/deps

$(B)/obj/%.o: %.c common/format.h common/evcodec.h common/hash.h preload/internal.h preload/ring.h cupti/gpu.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(MPI_CFLAGS) $(GPU_DEF) -fPIC -fvisibility=hidden -ftls-model=initial-exec \
		-fno-omit-frame-pointer $(if $(findstring gloo,$<),-fexceptions) \
		$(if $(or $(findstring cuda,$<),$(findstring cupti,$<),$(findstring nccl,$<),$(findstring nvtx,$<)),-isystem $(CUDA_HOME)/include) -c $< -o $@

$(B)/obj/preload/mpi.o: preload/mpi_wrappers.inc
$(B)/obj/preload/io.o: preload/io_wrappers.inc

$(B)/libddpspy.so: $(PRELOAD_OBJ) preload/exports.map
	@echo "libddpspy.so: CUDA runtime capture $(if $(HAVE_CUDA),built,left out); GPU capture (CUPTI) $(if $(HAVE_CUPTI),built,left out); NCCL capture $(if $(HAVE_NCCL),built,left out); NVTX ranges $(if $(HAVE_NVTX),built,left out) (CUDA headers $(if $(HAVE_CUDA),in,not found in) $(CUDA_HOME))"
	$(CC) -shared -o $@ $(PRELOAD_OBJ) -Wl,--version-script=preload/exports.map \
		-Wl,-z,now -Wl,-z,nodelete -lmsgpackc -lurcu-bp -lurcu-common -ldl -lpthread

$(B)/cobj/%.o: %.c $(COLLECTOR_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -c $< -o $@

$(B)/ddpspy: $(COLLECTOR_OBJ)
	$(CC) -o $@ $(COLLECTOR_OBJ) -lmsgpackc -lz -lm -lpthread -ldl

# ---- make bench only: the preload without its calls in flight, to measure their cost beside it ----
$(B)/bench/nocall/obj/%.o: %.c common/format.h common/evcodec.h common/hash.h preload/internal.h preload/ring.h cupti/gpu.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -DDSP_NO_INFLIGHT $(MPI_CFLAGS) $(GPU_DEF) -fPIC -fvisibility=hidden -ftls-model=initial-exec \
		-fno-omit-frame-pointer $(if $(findstring gloo,$<),-fexceptions) \
		$(if $(or $(findstring cuda,$<),$(findstring cupti,$<),$(findstring nccl,$<),$(findstring nvtx,$<)),-isystem $(CUDA_HOME)/include) -c $< -o $@
$(B)/bench/nocall/obj/preload/mpi.o: preload/mpi_wrappers.inc
$(B)/bench/nocall/obj/preload/io.o: preload/io_wrappers.inc
$(B)/bench/libddpspy-nocall.so: $(PRELOAD_SRC:%.c=$(B)/bench/nocall/obj/%.o) preload/exports.map
	$(CC) -shared -o $@ $(PRELOAD_SRC:%.c=$(B)/bench/nocall/obj/%.o) -Wl,--version-script=preload/exports.map \
		-Wl,-z,now -Wl,-z,nodelete -lmsgpackc -lurcu-bp -lurcu-common -ldl -lpthread

# ---- the same with AddressSanitizer and UBSan (make test runs these too) ----
SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
COLLECTOR_LIB_SRC := $(filter-out collector/main.c,$(COLLECTOR_SRC))
$(B)/asan/cobj/%.o: %.c $(COLLECTOR_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(SAN) -c $< -o $@
$(B)/asan/ddpspy: $(COLLECTOR_SRC:%.c=$(B)/asan/cobj/%.o)
	$(CC) $(SAN) -o $@ $^ -lmsgpackc -lz -lm -lpthread -ldl
$(B)/asan/fuzz_replay: tests/fuzz/fuzz_collector.c $(COLLECTOR_LIB_SRC:%.c=$(B)/asan/cobj/%.o)
	$(CC) $(BASE) $(SAN) -DREPLAY -o $@ $^ -lmsgpackc -lz -lm -lpthread -ldl
$(B)/asan/obj/%.o: %.c common/format.h common/evcodec.h common/hash.h preload/internal.h preload/ring.h cupti/gpu.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(SAN) $(MPI_CFLAGS) $(GPU_DEF) -fPIC -fvisibility=hidden -ftls-model=initial-exec \
		$(if $(findstring gloo,$<),-fexceptions) \
		$(if $(or $(findstring cuda,$<),$(findstring cupti,$<),$(findstring nccl,$<),$(findstring nvtx,$<)),-isystem $(CUDA_HOME)/include) -c $< -o $@
$(B)/asan/obj/preload/mpi.o: preload/mpi_wrappers.inc
$(B)/asan/obj/preload/io.o: preload/io_wrappers.inc
$(B)/asan/libddpspy.so: $(PRELOAD_SRC:%.c=$(B)/asan/obj/%.o) preload/exports.map
	$(CC) $(SAN) -shared -o $@ $(PRELOAD_SRC:%.c=$(B)/asan/obj/%.o) \
		-Wl,--version-script=preload/exports.map -Wl,-z,now -Wl,-z,nodelete \
		-lmsgpackc -lurcu-bp -lurcu-common -ldl -lpthread
$(B)/asan/tests/%: tests/unit/%.c tests/unit/tap.h collector/trace.c collector/tracemeta.c collector/trace.h collector/tracefile.h collector/tracemeta.h collector/base.h common/format.c \
	common/format.h common/evcodec.h common/hash.h collector/kinds.c collector/analysis_int.h preload/ring.c preload/ring.h preload/fdclass.c preload/identity.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(SAN) -o $@ $< $(UNIT_SRC_$*) -lmsgpackc -lz -lm -lpthread -ldl
UNIT_SRC_test_ring := preload/ring.c
UNIT_SRC_test_format := collector/trace.c collector/tracemeta.c common/format.c
UNIT_SRC_test_fdclass := preload/fdclass.c common/format.c
UNIT_SRC_test_identity := preload/identity.c common/format.c
UNIT_SRC_test_kinds := collector/kinds.c common/format.c
UNIT_SRC_test_sort := collector/stats.c collector/kinds.c common/format.c
UNIT_SRC_test_p2pnum := $(COLLECTOR_LIB_SRC)
UNIT_SRC_test_pattern := $(COLLECTOR_LIB_SRC)
SANITIZED := $(B)/asan/ddpspy $(B)/asan/fuzz_replay $(B)/asan/libddpspy.so \
	$(UNIT:$(B)/tests/%=$(B)/asan/tests/%)
sanitized: $(SANITIZED)

# libFuzzer over dump and report (clang): make fuzz [FUZZ_SECONDS=600]; seeds are the fixtures,
# findings land in build/fuzz/findings/ (copy one that crashed into tests/fuzz/crashes/)
FUZZ_SECONDS ?= 600
$(B)/fuzz/fuzz_collector: tests/fuzz/fuzz_collector.c $(COLLECTOR_LIB_SRC)
	@mkdir -p $(dir $@)
	clang -O1 -g -std=gnu11 -D_GNU_SOURCE -DDDPSPY_VERSION='"$(VERSION)"' \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -o $@ $^ -lmsgpackc -lz -lm -lpthread -ldl
fuzz: $(B)/fuzz/fuzz_collector all testapps
	@bash .ci/deps --quiet --fuzz
	@bash tests/fuzz/run.sh $(FUZZ_SECONDS)

# ---- the simulated device (docs/testing.md): stand-ins with the real ABI, and CUDA test programs ----
sim: $(SIM)
	@$(if $(HAVE_CUDA),echo "simulated device: $(SIM)",echo "simulated device: not built, no CUDA headers in $(CUDA_HOME)")
$(B)/simgpu/libcudart.so.13: testapps/simgpu/cudart.c testapps/simgpu/cudart_api.c testapps/simgpu/cudart.map \
	testapps/simgpu/simgpu.h testapps/simgpu/cudart_int.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -I$(CUDA_HOME)/include -fPIC -shared -o $@ testapps/simgpu/cudart.c testapps/simgpu/cudart_api.c \
		-Wl,-soname,libcudart.so.13 \
		-Wl,--version-script=testapps/simgpu/cudart.map -lpthread
# every callback id's name, from CUPTI's own headers, for the stand-in's cuptiGetCallbackName
$(B)/simgpu/cbid_names.h: $(CUDA_HOME)/include/cupti_runtime_cbid.h $(CUDA_HOME)/include/cupti_driver_cbid.h
	@mkdir -p $(dir $@)
	{ sed -n 's/^ *CUPTI_RUNTIME_TRACE_CBID_\([A-Za-z0-9_]*\) *= *\([0-9][0-9]*\),.*/RT(\1, \2)/p' $(word 1,$^); \
	  sed -n 's/^ *CUPTI_DRIVER_TRACE_CBID_\([A-Za-z0-9_]*\) *= *\([0-9][0-9]*\),.*/DRV(\1, \2)/p' $(word 2,$^); } | \
		grep -v '(INVALID,\|(SIZE,' > $@.tmp && mv $@.tmp $@
$(B)/simgpu/libcupti.so.13: testapps/simgpu/cupti.c testapps/simgpu/cupti.map testapps/simgpu/simgpu.h $(B)/simgpu/cbid_names.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -I$(CUDA_HOME)/include -I$(B)/simgpu -fPIC -shared -o $@ $< -Wl,-soname,libcupti.so.13 \
		-Wl,-Bsymbolic -Wl,--version-script=testapps/simgpu/cupti.map -ldl -lpthread
# CUDA 12's stand-ins: the same sources, CUDA 12's sonames, version nodes and CUPTI records
$(B)/simgpu12/libcudart.so.12: testapps/simgpu/cudart.c testapps/simgpu/cudart_api.c testapps/simgpu/cudart12.map \
	testapps/simgpu/simgpu.h testapps/simgpu/cudart_int.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -I$(CUDA_HOME)/include -fPIC -shared -o $@ testapps/simgpu/cudart.c testapps/simgpu/cudart_api.c \
		-Wl,-soname,libcudart.so.12 -Wl,--version-script=testapps/simgpu/cudart12.map -lpthread
$(B)/simgpu12/libcupti.so.12: testapps/simgpu/cupti.c testapps/simgpu/cupti12.map testapps/simgpu/simgpu.h \
	$(B)/simgpu/cbid_names.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -DSIMGPU_MAJOR=12 -I$(CUDA_HOME)/include -I$(B)/simgpu -fPIC -shared -o $@ $< \
		-Wl,-soname,libcupti.so.12 -Wl,-Bsymbolic -Wl,--version-script=testapps/simgpu/cupti12.map -ldl -lpthread
$(B)/simgpu12/libcuda.so.1: $(B)/simgpu/libcuda.so.1
	@mkdir -p $(dir $@)
	cp $< $@
$(B)/testapps/cuda_c12: testapps/cuda_c.c $(B)/simgpu12/libcudart.so.12
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -isystem $(CUDA_HOME)/include -o $@ $< $(B)/simgpu12/libcudart.so.12
# gpu_app on CUDA 12's runtime: nvcc's code, linked against the CUDA 12 stand-in instead of cudart 13
$(B)/testapps/gpu_app12: testapps/gpu_app.cu testapps/kineto_shape.h testapps/globaltimer.cuh $(B)/simgpu12/libcudart.so.12
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -std=c++17 -cudart none -o $@ $< -Xlinker $(B)/simgpu12/libcudart.so.12
$(B)/testapps/cuda_c: testapps/cuda_c.c $(B)/simgpu/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -isystem $(CUDA_HOME)/include -o $@ $< $(B)/simgpu/libcudart.so.13
$(B)/testapps/libcuda_ctor.so: testapps/cuda_ctor.c $(B)/simgpu/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -isystem $(CUDA_HOME)/include -fPIC -shared -o $@ $< $(B)/simgpu/libcudart.so.13
$(B)/testapps/cuda_c_ctor: testapps/cuda_c.c $(B)/testapps/libcuda_ctor.so $(B)/simgpu/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -DCUDA_CTOR -isystem $(CUDA_HOME)/include -o $@ $< -L$(B)/testapps -lcuda_ctor \
		-Wl,-rpath,'$$ORIGIN' -Wl,--no-as-needed $(B)/simgpu/libcudart.so.13
$(B)/testapps/nvtx_app: testapps/nvtx_app.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -isystem $(CUDA_HOME)/include -o $@ $< -ldl -lpthread
$(B)/simgpu/libnccl.so.2: testapps/simgpu/nccl.c testapps/simgpu/nccl_prof.c testapps/simgpu/nccl_prof.h \
	testapps/simgpu/simgpu.h common/nccl_profiler.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -isystem $(CUDA_HOME)/include -fPIC -shared -o $@ testapps/simgpu/nccl.c testapps/simgpu/nccl_prof.c \
		-Wl,-soname,libnccl.so.2 -ldl -lpthread
$(B)/simgpu/libcuda.so.1: testapps/simgpu/driver.c testapps/simgpu/simgpu.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -I$(CUDA_HOME)/include -fPIC -shared -o $@ $< -Wl,-soname,libcuda.so.1 -ldl
# a profiler plugin for NCCL that writes what it is told (test_nccl)
$(B)/testapps/libnccl-profiler-test.so: testapps/ncclprof_test.c common/nccl_profiler.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -fPIC -shared -o $@ $< -lpthread
$(B)/testapps/gpu_app: testapps/gpu_app.cu testapps/kineto_shape.h testapps/globaltimer.cuh
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -std=c++17 -cudart shared -o $@ $<
$(B)/testapps/cupti_rules: testapps/cupti_rules.cu
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -std=c++17 -cudart shared -o $@ $<
$(B)/testapps/gpu_probe: testapps/gpu_probe.cu testapps/globaltimer.cuh
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -std=c++17 -cudart shared -o $@ $<
$(B)/testapps/nccl_app: testapps/nccl_app.cu testapps/kineto_shape.h $(B)/simgpu/libnccl.so.2
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -std=c++17 -cudart shared -o $@ $< -Xlinker $(B)/simgpu/libnccl.so.2
# the testbed's GPU half (ddpbench train --gpu dlopens it from its own directory)
$(B)/libddpbench_gpu.so: testapps/ddpbench/gpu.cu testapps/ddpbench/ddpbench.h testapps/kineto_shape.h testapps/globaltimer.cuh $(B)/simgpu/libnccl.so.2
	$(NVCC) -O2 -std=c++17 -cudart shared -Xcompiler -fPIC -shared -o $@ $< -Xlinker $(B)/simgpu/libnccl.so.2
$(B)/testapps/gpu_app_static: testapps/gpu_app.cu testapps/kineto_shape.h testapps/globaltimer.cuh
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -std=c++17 -o $@ $<
$(B)/testapps/gpu_app_pt: testapps/gpu_app.cu testapps/kineto_shape.h testapps/globaltimer.cuh
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -std=c++17 -cudart shared --default-stream per-thread -o $@ $<

# ---- tests ----
$(B)/tests/test_ring: tests/unit/test_ring.c preload/ring.c tests/unit/tap.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -o $@ tests/unit/test_ring.c preload/ring.c -lpthread
$(B)/tests/test_format: tests/unit/test_format.c collector/trace.c collector/tracemeta.c collector/trace.h collector/tracefile.h collector/tracemeta.h collector/base.h common/evcodec.h common/format.c tests/unit/tap.h $(B)/libddpspy.so
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -o $@ tests/unit/test_format.c collector/trace.c collector/tracemeta.c common/format.c -lmsgpackc -lz
$(B)/tests/test_fdclass: tests/unit/test_fdclass.c preload/fdclass.c common/format.c tests/unit/tap.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -o $@ tests/unit/test_fdclass.c preload/fdclass.c common/format.c
$(B)/tests/test_kinds: tests/unit/test_kinds.c collector/kinds.c collector/analysis_int.h collector/analysis.h \
	common/format.c common/format.h tests/unit/tap.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -o $@ tests/unit/test_kinds.c collector/kinds.c common/format.c
$(B)/tests/test_sort: tests/unit/test_sort.c collector/stats.c collector/kinds.c collector/analysis_int.h \
	collector/trace.h common/format.c tests/unit/tap.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -o $@ tests/unit/test_sort.c collector/stats.c collector/kinds.c common/format.c
$(B)/tests/test_p2pnum: tests/unit/test_p2pnum.c $(COLLECTOR_LIB_SRC) collector/analysis_int.h collector/analysis.h \
	collector/trace.h common/format.h tests/unit/tap.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -o $@ tests/unit/test_p2pnum.c $(COLLECTOR_LIB_SRC) -lmsgpackc -lz -lm -lpthread -ldl
$(B)/tests/test_pattern: tests/unit/test_pattern.c $(COLLECTOR_LIB_SRC) collector/analysis_int.h collector/analysis.h \
	collector/steps_int.h common/format.h tests/unit/tap.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -o $@ tests/unit/test_pattern.c $(COLLECTOR_LIB_SRC) -lmsgpackc -lz -lm -lpthread -ldl
$(B)/tests/test_identity: tests/unit/test_identity.c preload/identity.c common/format.c tests/unit/tap.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -o $@ tests/unit/test_identity.c preload/identity.c common/format.c

# (its symbols exported, as an interpreter's are: ddpspy looks CPython up by them)
$(B)/testapps/fakepy: testapps/fakepy.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -rdynamic -o $@ $<
$(B)/testapps/fakepy314: testapps/fakepy.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -rdynamic -DPY_MINOR=14 -o $@ $<

$(B)/testapps/%: testapps/%.c 
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -o $@ $< -lpthread -ldl
$(B)/testapps/mpi_app: testapps/mpi_app.c
	@mkdir -p $(dir $@)
	$(MPICC) $(BASE) -o $@ $<
$(B)/testapps/stencil: testapps/stencil.c
	@mkdir -p $(dir $@)
	$(MPICC) $(BASE) -o $@ $<
$(B)/testapps/hang_mpi: testapps/hang_mpi.c
	@mkdir -p $(dir $@)
	$(MPICC) $(BASE) -o $@ $<
# the testbed: optimized like a real trainer's kernels would be
$(B)/ddpbench: $(DDPBENCH_SRC) testapps/ddpbench/ddpbench.h include/ddpspy.h
	$(MPICC) $(BASE) -O3 -ffast-math $(if $(HAVE_NVTX),-DDDPBENCH_NVTX -isystem $(CUDA_HOME)/include) -o $@ $(DDPBENCH_SRC) \
		-lm -lpthread -ldl
$(B)/testapps/libfakegloo.so: testapps/fakegloo.cc testapps/fakegloo.h
	@mkdir -p $(dir $@)
	$(CXX) -O2 -g -fPIC -shared -o $@ $<
$(B)/testapps/libglooplugin.so: testapps/glooplugin.cc testapps/fakegloo.h $(B)/testapps/libfakegloo.so
	$(CXX) -O2 -g -fPIC -shared -o $@ $< -L$(B)/testapps -lfakegloo -Wl,-rpath,'$$ORIGIN'
$(B)/bench/gentrace: bench/gentrace.c common/format.c common/format.h common/evcodec.h common/hash.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -o $@ bench/gentrace.c common/format.c -lmsgpackc -lm
$(B)/bench/decode: bench/decode.c common/format.h common/evcodec.h common/hash.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -o $@ bench/decode.c -lmsgpackc
$(B)/bench/overhead: bench/overhead.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -O2 -o $@ $<

testapps: $(TESTAPPS)

test: 
	@bash .ci/deps --quiet --torch --browser --prometheus
	@$(MAKE) --no-print-directory all testapps $(UNIT) $(B)/bench/gentrace $(SANITIZED) sim
	@bash tests/run.sh

# (each target builds what it runs: bench's capture limits run testapps/threads, its CPU sampler part cpuhot)
bench:
	@bash .ci/deps --quiet
	@$(MAKE) --no-print-directory all sim $(B)/bench/overhead $(B)/bench/libddpspy-nocall.so $(B)/bench/gentrace $(B)/bench/decode \
		$(B)/testapps/threads $(B)/testapps/cpuhot $(if $(MPICC),$(B)/ddpbench)
	@bash bench/run.sh
	@echo
	@bash bench/collector.sh
	@echo
	@bash bench/viewer.sh

# reruns the concurrency tests many times to shake out races: make stress [N=50]
N ?= 50
stress: all testapps $(UNIT)
	@for i in $$(seq $(N)); do \
		build/tests/test_ring >/dev/null || { echo "test_ring failed on run $$i"; exit 1; }; \
		/usr/bin/python3 tests/e2e/test_threads.py >/tmp/ddpspy-stress.log 2>&1 || { cat /tmp/ddpspy-stress.log; echo "test_threads failed on run $$i"; exit 1; }; \
		/usr/bin/python3 tests/e2e/test_process.py >/tmp/ddpspy-stress.log 2>&1 || { cat /tmp/ddpspy-stress.log; echo "test_process failed on run $$i"; exit 1; }; \
	done; echo "stress: $(N) runs passed"
	@/usr/bin/python3 tests/capture_limits.py 20
	@d=$$(mktemp -d); for i in $$(seq $(N)); do \
		LD_PRELOAD=$(CURDIR)/build/libddpspy.so DDPSPY_OUT=$$d build/testapps/forker spawns 400 >$$d.log 2>&1 \
			|| { cat $$d.log; rm -rf $$d $$d.log; echo "spawns failed on run $$i"; exit 1; }; \
		rm -rf $$d; mkdir $$d; \
	done; rm -rf $$d $$d.log; echo "spawns: $(N) x 400 children under the preload, every redirect intact"
	@d=$$(mktemp -d); for i in $$(seq $(N)); do \
		LD_PRELOAD=$(CURDIR)/build/libddpspy.so DDPSPY_OUT=$$d build/testapps/forker fdlowest 1.5 >$$d.log 2>&1 \
			|| { cat $$d.log; rm -rf $$d $$d.log; echo "fdlowest failed on run $$i"; exit 1; }; \
		rm -rf $$d; mkdir $$d; \
	done; rm -rf $$d $$d.log; echo "fdlowest: $(N) x 1.5 s of opens and dup2s onto the next number under the preload, none disturbed"

# the README's first command: a 4-rank testbed job with a straggler, traced, and its report
demo:
	@bash .ci/deps --quiet
	@$(MAKE) --no-print-directory all $(B)/ddpbench
	@bash tools/demo.sh

# seed 000/001 case tables and the GPU cases (simulated device) on the testbed under ddpspy ->
# lab/results.md (about 7 minutes)
lab:
	@bash .ci/deps --quiet
	@$(MAKE) --no-print-directory all $(B)/ddpbench sim
	@/usr/bin/python3 lab/lab.py

gen:
	python3 tools/gen_mpi.py > preload/mpi_wrappers.inc
	python3 tools/gen_io.py > preload/io_wrappers.inc

# the golden reports of tests/fixtures/ made again from the stored traces, after an intended change
# of the analysis (read `git diff tests/fixtures` before committing; tests/fixtures/README.md)
fixtures: all
	@/usr/bin/python3 tests/fixtures/record.py --golden

clean:
	rm -rf $(B)
