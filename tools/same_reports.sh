#!/bin/bash
# tools/same_reports.sh OLD NEW DIR...: whether two builds of the collector give byte-identical
# reports (`report --json` and the text report, with their exit status) on every directory under
# DIR... that holds .ddpspy files. The check for a change that must not change the analysis
# (docs/testing.md): keep every trace a test run makes with DDPSPY_TEST_KEEP=DIR make test, build
# the old collector from the commit before, and compare. Exit 1 when any report differs.
set -u
if [ $# -lt 3 ]; then
	echo "usage: tools/same_reports.sh OLD_DDPSPY NEW_DDPSPY DIR..." >&2
	exit 2
fi
old=$1 new=$2
shift 2
n=0 bad=0
while IFS= read -r d; do
	for mode in --json --text; do
		flag=$mode
		[ "$mode" = --text ] && flag=
		a=$("$old" report $flag "$d" 2>&1; echo "exit $?")
		b=$("$new" report $flag "$d" 2>&1; echo "exit $?")
		n=$((n + 1))
		if [ "$a" != "$b" ]; then
			bad=$((bad + 1))
			echo "differs: report $mode $d"
			diff <(echo "$a") <(echo "$b") | head -5
		fi
	done
done < <(find "$@" -name '*.ddpspy' -printf '%h\n' | sort -u)
echo "$((n / 2)) trace directories, $n reports compared, $bad differ"
[ "$bad" = 0 ]
