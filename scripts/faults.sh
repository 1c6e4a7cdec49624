#!/usr/bin/env bash
# Runs the fault suite (e2e/faults) and prints its figures as a
# table. With no settings it is the short version CI runs; the long one:
#   QUEEN_FAULT_ROUNDS=50 QUEEN_FAULT_PARTITION_ROUNDS=20 \
#   QUEEN_FAULT_EXACTLY_ONCE_ROUNDS=20 scripts/faults.sh
# QUEEN_FAULT_SEED replays a schedule of faults a run printed. The full
# output is kept in FAULT_LOG (default ./faults.log).
set -uo pipefail
cd "$(dirname "$0")/.."
log="${FAULT_LOG:-faults.log}"
run="${FAULT_RUN:-^TestFault}"
timeout="${FAULT_TIMEOUT:-4h}"

echo "kill rounds ${QUEEN_FAULT_ROUNDS:-3 (default)}, partition rounds ${QUEEN_FAULT_PARTITION_ROUNDS:-4 (default)}, exactly-once rounds ${QUEEN_FAULT_EXACTLY_ONCE_ROUNDS:-3 (default)}; output in $log"
go test ./e2e/faults -run "$run" -count=1 -v -timeout "$timeout" 2>&1 | tee "$log" | grep -E '^(=== RUN|--- |\s+--- |FAULT-FIGURES|ok|FAIL|panic)'
status=${PIPESTATUS[0]}

echo
cols="fault rounds kafka_acked http_acked checked lost duplicated reordered phantom misplaced diverged unconsumed undelivered acked_twice minority_acks producer_resets aborted_visible"
fmt='%-12s %6s %11s %10s %9s %5s %10s %9s %7s %9s %8s %10s %11s %11s %13s %15s %15s\n'
# shellcheck disable=SC2086
printf "$fmt" $cols
grep '^FAULT-FIGURES' "$log" | while read -r _ rest; do
  declare -A f=()
  for kv in $rest; do f[${kv%%=*}]=${kv#*=}; done
  row=()
  for c in $cols; do row+=("${f[$c]:--}"); done
  # shellcheck disable=SC2059
  printf "$fmt" "${row[@]}"
  unset f
done
exit "$status"
