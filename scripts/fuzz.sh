#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (default 1m; e.g.
# FUZZTIME=10m scripts/fuzz.sh), FUZZ_JOBS targets at a time (default 1),
# each with FUZZ_PARALLEL workers (default 2). Not part of CI: CI runs the
# seed corpora only, as ordinary tests. Prints one line per target with
# the executions it made; a failing input is kept by Go under the
# package's testdata/fuzz/<target>/: commit it with the fix so it stays a
# regression seed. Logs go to FUZZ_LOGS (default a temp dir).
set -uo pipefail
cd "$(dirname "$0")/.."
export FUZZTIME="${FUZZTIME:-1m}" FUZZ_PARALLEL="${FUZZ_PARALLEL:-2}"
JOBS="${FUZZ_JOBS:-1}"
export FUZZ_LOGS="${FUZZ_LOGS:-$(mktemp -d)}"

# one runs a target given as "package-dir FuzzName" and prints its result.
one() {
  pkg="$1" name="$2"
  log="$FUZZ_LOGS/$(echo "$pkg" | tr '/.' '__')-$name.log"
  if go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -parallel "$FUZZ_PARALLEL" >"$log" 2>&1; then
    result=ok
  else
    result=FAILED
  fi
  execs="$(grep -oE 'execs: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)"
  echo "$result $pkg $name execs=${execs:-0} log=$log"
}
export -f one

echo "fuzz: $FUZZTIME per target, $JOBS at a time, logs in $FUZZ_LOGS"
# "path/to/file_test.go:func FuzzName(" -> package dir and target name.
grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(' . | sort |
  sed -E 's#^(.*)/[^/]+_test\.go:[0-9]+:func (Fuzz[A-Za-z0-9_]+)\(.*#\1 \2#' |
  xargs -P "$JOBS" -L 1 bash -c 'one "$0" "$1"' | tee "$FUZZ_LOGS/summary"

total="$(wc -l <"$FUZZ_LOGS/summary")"
failed="$(grep -c '^FAILED' "$FUZZ_LOGS/summary")"
echo
echo "$total fuzz targets, $failed failed"
[ "$failed" -eq 0 ]
