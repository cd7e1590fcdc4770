#!/usr/bin/env bash
# Whether two builds of the collector say the same: every stored trace (tests/fixtures/*, and any
# trace directory given) reported by OLD and NEW ddpspy binaries, as JSON, as text, as an HTML page
# and as a view, at the default limits and as a long trace (the test-only DDPSPY_REPORT_PREFIX and
# DDPSPY_REPORT_SAMPLE: steps found streamed, a sample of them), byte for byte. For a change that
# must not change what a user is told (issue 39's redesign): build the old tree elsewhere
# (git worktree add /tmp/old REV && make -C /tmp/old all), then
#
#   tools/samereports.sh /tmp/old/build/ddpspy build/ddpspy [DIR ...]
#
# Prints each difference (the first lines of a diff) and, last, "N same, N different"; exit 0 only
# when nothing differs.
set -u
old=$1 new=$2
shift 2
cd "$(dirname "$0")/.."
dirs=("$@")
for d in tests/fixtures/*/; do
	ls "$d"*.ddpspy > /dev/null 2>&1 && dirs+=("${d%/}")
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
same=0 diff=0
for d in "${dirs[@]}"; do
	for limits in default long; do
		envs=()
		[ "$limits" = long ] && envs=(DDPSPY_REPORT_PREFIX=8 DDPSPY_REPORT_SAMPLE=16)
		for how in json text html view; do
			for side in old new; do
				bin=$old
				[ $side = new ] && bin=$new
				out="$tmp/$side.$how"
				case $how in
				json) env "${envs[@]}" "$bin" report --json "$d" > "$out" 2>&1 ;;
				text) env "${envs[@]}" "$bin" report "$d" > "$out" 2>&1 ;;
				html) env "${envs[@]}" "$bin" report "$d" --html "$out.page" > /dev/null 2>&1
				      cat "$out.page" > "$out" 2>/dev/null || echo "no page" > "$out" ;;
				view) env "${envs[@]}" "$bin" view "$d" -o "$out.view" > /dev/null 2>&1
				      cat "$out.view" > "$out" 2>/dev/null || echo "no view" > "$out" ;;
				esac
			done
			if cmp -s "$tmp/old.$how" "$tmp/new.$how"; then
				same=$((same + 1))
			else
				diff=$((diff + 1))
				echo "DIFFERENT $d ($limits limits, $how):"
				diff "$tmp/old.$how" "$tmp/new.$how" | head -n 6 | cut -c1-200 | sed 's/^/    /'
			fi
		done
	done
done
echo "$same same, $diff different"
[ "$diff" -eq 0 ]
