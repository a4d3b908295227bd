#!/usr/bin/env bash
# Runs the tests of the nested modules for make test, JOBS modules at a
# time: most of their time is spent waiting on servers, subprocesses and
# timeouts, not on the CPU, so two at once take about half as long on two
# cores. Each module is announced when it starts, and its `go test` output
# is printed whole when it ends, so the lines of two modules never mix. The
# modules are taken in the order given, each by the first free lane: the
# Makefile lists the longest first.
#
#   T0=$(date +%s) JOBS=2 RACED="otelsession ..." UNRACED="..." scripts/nested-tests.sh
#
# RACED modules run with -race, UNRACED without. The environment
# (SESSIONS_SKIP_LOG, SESSIONS_DAPRD_BIN, ...) reaches every go test. It
# exits non-zero when a module failed, after every module has run.
set -euo pipefail
: "${GO:=go}" "${JOBS:=2}" "${T0:=$(date +%s)}" "${RACED:=}" "${UNRACED:=}"
cd "$(dirname "$0")/.."
LOGS=$(mktemp -d -t nested-tests-XXXXXX)
trap 'rm -rf "$LOGS"' EXIT
export GO T0 LOGS

say() {
	local s=$(($(date +%s) - T0))
	printf '== [%dm%02ds] %s\n' $((s / 60)) $((s % 60)) "$*"
}

# one runs the tests of module $2, with -race when $1 is "race".
one() {
	local flags="" mod=$2 log rc=0 start
	if [ "$1" = race ]; then flags=-race; fi
	log="$LOGS/$(echo "$mod" | tr / _).log"
	start=$(date +%s)
	say "test $mod${flags:+ ($flags)}"
	# shellcheck disable=SC2086
	(cd "$mod" && "$GO" test $flags -count=1 -timeout 10m ./...) >"$log" 2>&1 || rc=$?
	{
		if command -v flock >/dev/null; then flock 9; fi # util-linux; without it, lines may mix
		if [ "$rc" -eq 0 ]; then
			say "passed $mod in $(($(date +%s) - start))s"
		else
			say "FAILED $mod (exit $rc) in $(($(date +%s) - start))s"
		fi
		cat "$log"
	} 9>"$LOGS/.print"
	return "$rc"
}
export -f say one

{
	for m in $RACED; do echo "race $m"; done
	for m in $UNRACED; do echo "plain $m"; done
} | xargs -P "$JOBS" -L 1 bash -c 'one "$0" "$1"'
