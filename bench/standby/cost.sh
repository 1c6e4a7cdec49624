#!/usr/bin/env bash
# What a standby costs its source (issue 35): a one-node source with
# QUEEN_LINK_TOKEN set, produced to at a fixed RATE (1 KiB records, acks=all,
# 8 partitions, 15 s; the load generator of ../shared/perf), in interleaved
# rounds alone and with a one-node standby following it on the same machine.
# Prints per round the source's CPU per record (the figure a shared machine
# moves least), the standby's, the produce latency, and the standby's lagMs
# sampled from /health while the load runs.
#
#   bash bench/standby/cost.sh <queen-binary> [RATE=50000] [ROUNDS=3]
set -u
QBIN=$1; RATE=${2:-50000}; ROUNDS=${3:-3}
KBENCH=${KBENCH:-${XDG_CACHE_HOME:-$HOME/.cache}/queen-perf/kbench}
HZ=$(getconf CLK_TCK)
W=$(mktemp -d /tmp/standby-cost.XXXXXX); trap 'rm -rf "$W"' EXIT
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
waithttp() { for _ in $(seq 300); do curl -sf "http://127.0.0.1:$1/health" >/dev/null && return 0; sleep 0.2; done; return 1; }
start() { # dir http kafka raft [env...]
  local d=$1 h=$2 k=$3 r=$4; shift 4
  ( cd "$W" && exec env PORT=$h QUEEN_BIND_ADDR=127.0.0.1 QUEEN_RAFT_DIR=$d QUEEN_RAFT_LISTEN=127.0.0.1:$r \
      QUEEN_KAFKA_ADDR=127.0.0.1:$k QUEEN_KAFKA_ADVERTISED_ADDR=127.0.0.1:$k \
      QUEEN_LINK_TOKEN=link-token-0123456789abcdef "$@" "$QBIN" >$d.log 2>&1 ) &
  echo $!
}
lagstats() {
  python3 -c "
import statistics,sys
v=sorted(int(l.split()[0]) for l in open(sys.argv[1]) if l.split() and l.split()[0]!='None')
print('lagMs samples=%d median=%d p99=%d max=%d' % (len(v), statistics.median(v), v[max(0,int(len(v)*0.99)-1)], v[-1]) if v else 'no lag samples')" "$1"
}
one() { # label with-standby(0|1)
  local T=$W/$1; local sp sbp="" lp=""
  sp=$(start $T.src 36632 39092 37400); waithttp 36632 || { echo "$1: the source did not start"; return; }
  if [ "$2" = 1 ]; then
    sbp=$(start $T.sb 36732 39192 37500 QUEEN_STANDBY_OF=127.0.0.1:37400); waithttp 36732 || echo "$1: the standby did not start"
  fi
  "$KBENCH" -brokers 127.0.0.1:39092 -topic warm -size 1024 -partitions 8 -rate $RATE -duration 3s -acks all -linger 1ms >/dev/null 2>&1
  sleep 2
  local c0 s0=0 c1 s1=0 out
  c0=$(cpu $sp); [ -n "$sbp" ] && s0=$(cpu $sbp)
  if [ -n "$sbp" ]; then
    ( while true; do curl -s http://127.0.0.1:36732/health | python3 -c 'import json,sys; s=json.load(sys.stdin).get("standby") or {}; print(s.get("lagMs"), s.get("lagEntries"))' >>$T.lag 2>/dev/null; sleep 0.1; done ) &
    lp=$!
  fi
  out=$("$KBENCH" -brokers 127.0.0.1:39092 -topic m -size 1024 -partitions 8 -rate $RATE -duration 15s -acks all -linger 1ms -warmup 0s 2>/dev/null | tail -1)
  c1=$(cpu $sp); [ -n "$sbp" ] && s1=$(cpu $sbp)
  local lag=""
  if [ -n "$lp" ]; then kill $lp; wait $lp 2>/dev/null; lag=$(lagstats $T.lag); fi
  python3 -c "
import json,sys
d=json.loads(sys.argv[1]); recs=d['records'] or 1; hz=int(sys.argv[3])
print(json.dumps({'label':sys.argv[2],'rate':round(d['records_per_s']),'errors':d['errors'],
  'source_cpu_us_per_record':round(int(sys.argv[4])/hz/recs*1e6,2),'standby_cpu_us_per_record':round(int(sys.argv[5])/hz/recs*1e6,2),
  'p50_ms':d['p50_ms'],'p99_ms':d['p99_ms'],'standby_lag':sys.argv[6]}))" "$out" "$1" $HZ $((c1-c0)) $((s1-s0)) "$lag"
  # The nodes were started inside $(...), so they are not this shell's
  # children to wait for: poll until they are gone.
  kill $sp $sbp 2>/dev/null
  for p in $sp $sbp; do for _ in $(seq 300); do [ -d /proc/$p ] || break; sleep 0.1; done; done
}
for i in $(seq "$ROUNDS"); do one alone-$i 0; one standby-$i 1; done
