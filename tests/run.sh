#!/usr/bin/env bash
# Runs every test: the unit tests (build/tests/*) and the end-to-end tests (tests/e2e/test_*.py),
# each speaking TAP. Prints each failure, skip and re-run with its reason, each file's counts and
# time, the re-runs of live comparisons (tests/e2e/lib.py: live), and as the last line
# "N passed, N failed, N skipped". Exit 0 only when nothing failed.
set -u
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
pass=0 fail=0 skipped=0 reruns=0 rerun_files=""
log=$(mktemp)
run() {
	local name=$1; shift
	local start=$SECONDS
	if "$@" >"$log" 2>&1; then status=0; else status=$?; fi
	local p f s
	p=$(grep -cE '^ok [0-9]+' "$log" | tr -d ' ')
	s=$(grep -cE '^ok [0-9]+ .*# SKIP' "$log" | tr -d ' ')
	f=$(grep -cE '^not ok [0-9]+' "$log" | tr -d ' ')
	p=$((p - s))
	# live comparisons that missed inside this machine's noise and were run again (lib.live)
	local r
	r=$(grep -cE '^# rerun ' "$log" | tr -d ' ')
	# a test program that died without reporting counts as one failure
	if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		echo "FAIL $name: exited $status without a failing test line"
		tail -n 20 "$log" | sed 's/^/    /'
	fi
	grep -E '^not ok' "$log" | sed "s|^|FAIL $name: |"
	grep -E '^ok [0-9]+ .*# SKIP' "$log" | sed "s|^|SKIP $name: |"
	grep -E '^# rerun ' "$log" | sed "s|^# |RERUN $name: |"
	printf '%-28s %3d passed %3d failed %3d skipped %2d reruns %4ds\n' "$name" "$p" "$f" "$s" "$r" $((SECONDS - start))
	pass=$((pass + p)) fail=$((fail + f)) skipped=$((skipped + s)) reruns=$((reruns + r))
	[ "$r" -eq 0 ] || rerun_files="$rerun_files $name:$r"
}
for t in build/tests/test_*; do
	run "unit/$(basename "$t")" "$t"
done
for t in tests/e2e/test_*.py; do
	run "e2e/$(basename "$t" .py)" timeout 1200 "$PY" "$t"
done
rm -f "$log"
echo "reruns of live comparisons: $reruns${rerun_files:+ (}${rerun_files# }${rerun_files:+)}; total time $((SECONDS))s"
echo "$pass passed, $fail failed, $skipped skipped"
[ "$fail" -eq 0 ]
