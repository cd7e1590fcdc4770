#!/usr/bin/env bash
# make fuzz: libFuzzer over `ddpspy dump` and `ddpspy report` (tests/fuzz/fuzz_collector.c) for
# SECONDS seconds, from the fixtures and a few fresh small traces as seeds. What it finds lands in build/fuzz/findings/; an
# input that crashed goes into tests/fuzz/crashes/ once fixed, and make test replays it forever.
# usage: tests/fuzz/run.sh SECONDS
set -eu
secs=${1:-600}
cd "$(dirname "$0")/../.."
b=build/fuzz
mkdir -p $b/corpus $b/findings
/usr/bin/python3 tests/fuzz/seeds.py $b/seeds >/dev/null
cp -n tests/fuzz/crashes/* $b/seeds/ 2>/dev/null || true
# the fixtures are recorded in format 1.1; a few small traces of the current format too
n=0
for args in "threads produce 2 300" "threads reads 1 500" "forker fork 2" "families /tmp"; do
	set -- $args
	n=$((n + 1))
	t=$(mktemp -d)
	DDPSPY_OUT=$t LD_PRELOAD=$PWD/build/libddpspy.so build/testapps/$1 "${@:2}" >/dev/null 2>&1 || true
	{ printf '\xff'; cat $t/*.ddpspy 2>/dev/null; } >"$b/seeds/current-$n-$1.bin"
	rm -rf "$t"
done
# and GPU capture's records (gpu, names, gpu_events; NCCL and NVTX events), on the simulated device
for args in "gpu_app timeline" "nvtx_app 2" "nccl_app 0 1 @/id 2"; do
	set -- $args
	[ -x build/testapps/$1 ] && [ -e build/simgpu/libcupti.so.13 ] || continue
	n=$((n + 1))
	t=$(mktemp -d)
	DDPSPY_OUT=$t LD_PRELOAD=$PWD/build/libddpspy.so LD_LIBRARY_PATH=$PWD/build/simgpu SIMGPU_KERNEL_US=5 \
		build/testapps/$1 $(echo "${@:2}" | sed "s|@|$t|") >/dev/null 2>&1 || true
	{ printf '\xff'; cat $t/*.ddpspy 2>/dev/null; } >"$b/seeds/current-$n-$1.bin"
	rm -rf "$t"
done
# -rss_limit_mb: an allocation the size of the input's claims, not of the input, is a finding
log=$b/fuzz.log
set +e
$b/fuzz_collector $b/corpus $b/seeds -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 \
	-timeout=30 -artifact_prefix=$b/findings/ -print_final_stats=1 >"$log" 2>&1
rc=$?
set -e
grep -E "^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|^#[0-9]+.*DONE" "$log" || true
echo "corpus: $(ls $b/corpus | wc -l) inputs; findings: $(ls $b/findings | wc -l) (in $b/findings); log: $log"
if [ $rc -ne 0 ]; then
	grep -E "ERROR|runtime error|fuzz_collector:" "$log" | head -5
	exit 1
fi
