#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME, JOBS targets at a time
# (each with -parallel 1 when JOBS > 1, so that JOBS equals the cores used),
# keeps each target's output in LOGS, and prints one line per target: its
# executions and whether it passed. A failing input is written by go test
# into the package's testdata/fuzz/<target>/, where it joins the seed corpus.
#
#   FUZZTIME=10m JOBS=2 scripts/fuzz.sh
set -euo pipefail
: "${FUZZTIME:=30s}" "${JOBS:=1}" "${GO:=go}"
LOGS=${LOGS:-$(mktemp -d -t fuzz-XXXXXX)}
export FUZZTIME GO LOGS
export PARALLEL=""
if [ "$JOBS" -gt 1 ]; then PARALLEL="-parallel 1"; fi

targets() {
	"$GO" list -f '{{.ImportPath}} {{.Dir}}' ./... | while read -r pkg dir; do
		grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed "s|^func |$pkg |" || true
	done
}

one() {
	local pkg=$1 target=$2 log
	log="$LOGS/$(echo "$pkg" | tr / _)_$target.log"
	# shellcheck disable=SC2086
	if "$GO" test -run='^$' -fuzz="^$target\$" -fuzztime="$FUZZTIME" $PARALLEL "$pkg" >"$log" 2>&1; then
		local execs
		execs=$(grep -o 'execs: [0-9]*' "$log" | tail -n 1)
		echo "PASS $pkg $target: ${execs:-execs not reported (go test reports every 3 s)}"
	else
		echo "FAIL $pkg $target: see $log"
		return 1
	fi
}
export -f one

echo "fuzzing every target for $FUZZTIME, $JOBS at a time; logs in $LOGS"
targets | xargs -P "$JOBS" -L 1 bash -c 'one "$0" "$1"'
