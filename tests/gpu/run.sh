#!/usr/bin/env bash
# GPU capture against the real libraries on a machine with a GPU (tests/gpu/check.py; docs/gpu.md).
#
#   tests/gpu/run.sh [--sim] [--out DIR]   the checks (--sim: on the simulated device instead)
#   tests/gpu/run.sh --bundle              on the build machine: copy the shared libraries that
#                                          build/libddpspy.so and build/ddpspy need beyond glibc
#                                          (msgpack-c, liburcu, libunwind) into build/gpu-libs/,
#                                          for a GPU machine that cannot install them
#
# From the repository root, after `make`. A GPU machine without the build's dependencies takes
# build/libddpspy.so, build/ddpspy and build/gpu-libs/ from the build machine (same x86_64, a glibc
# at least as new); the checks then find the libraries there.
set -eu
cd "$(dirname "$0")/../.."
if [ "${1:-}" = "--bundle" ]; then
	rm -rf build/gpu-libs
	mkdir -p build/gpu-libs
	for so in $( (ldd build/libddpspy.so; ldd build/ddpspy) | awk '/=> \// {print $3}' | sort -u); do
		case "$(basename "$so")" in
		libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libz.so*|libgcc_s.so*|libstdc++.so*) ;;
		*) cp -L "$so" build/gpu-libs/ ;;
		esac
	done
	for so in /usr/lib/x86_64-linux-gnu/libunwind.so.8 /usr/lib/x86_64-linux-gnu/libunwind-x86_64.so.8 \
		/usr/lib/x86_64-linux-gnu/liblzma.so.5; do
		[ -e "$so" ] && cp -L "$so" build/gpu-libs/
	done
	ls build/gpu-libs
	exit 0
fi
if [ -d build/gpu-libs ]; then # last: the machine's own libraries first, where it has them
	export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$PWD/build/gpu-libs"
fi
PY=python3
[ "${1:-}" = "--sim" ] && [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
exec "$PY" tests/gpu/check.py "$@"
