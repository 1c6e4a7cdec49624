#!/usr/bin/env bash
# Runs every fuzz target of the module, one after the other, for FUZZTIME
# each (default 1m; e.g. FUZZTIME=10m scripts/fuzz.sh). Not part of CI:
# CI runs the seed corpora only, as ordinary tests. A failing input is
# kept by Go under the package's testdata/fuzz/<target>/; commit it with
# the fix so it stays a regression seed.
set -uo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-1m}"
PARALLEL="${FUZZ_PARALLEL:-2}"

failed=()
count=0
# "path/to/file_test.go:func FuzzName(" -> package dir and target name.
while IFS= read -r hit; do
  file="${hit%%:*}"
  name="$(sed -E 's/.*func (Fuzz[A-Za-z0-9_]+)\(.*/\1/' <<<"$hit")"
  pkg="$(dirname "$file")"
  count=$((count + 1))
  echo "=== $pkg $name ($FUZZTIME)"
  if ! go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -parallel "$PARALLEL"; then
    failed+=("$pkg $name")
  fi
done < <(grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(' . | sort)

echo
echo "$count fuzz targets, ${#failed[@]} failed"
for f in "${failed[@]}"; do echo "FAILED: $f"; done
[ "${#failed[@]}" -eq 0 ]
