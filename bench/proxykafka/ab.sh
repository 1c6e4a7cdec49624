#!/usr/bin/env bash
# Interleaved A/B of max produce throughput through queen's Kafka door:
# A = proxy on (QUEEN_PROXY_ENFORCE=true, SASL/PLAIN with the bootstrap API key,
#     plan dedicated-s with its rates overridden high, so the path runs every
#     check, charge and meter but never throttles)
# B = plain (no proxy, SASL/PLAIN with a static user).
# ROUNDS rounds of A,B, each a fresh data dir, 10 s measured; medians and ratio.
# Every other setting at its default. Needs kbench from ../shared/perf built
# into $PERF_BIN (default ~/.cache/queen-perf).
#   bash bench/proxykafka/ab.sh <queen-binary> [ROUNDS]
set -u
QBIN=${1:?queen binary}; ROUNDS=${2:-5}
B=${PERF_BIN:-$HOME/.cache/queen-perf}
T=$(mktemp -d /tmp/abpk.XXXXXX); PID=""
cleanup() { [ -n "$PID" ] && kill $PID 2>/dev/null && wait $PID 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
waithttp() { for _ in $(seq 300); do curl -sf "http://127.0.0.1:$1/health" >/dev/null && return 0; sleep 0.2; done; return 1; }
KEY="qk_live_$(openssl rand -base64 32 | tr '+/' '-_' | tr -d '=')"
CP=cp-bench-token
kb() { KBENCH_SASL_USER=$2 KBENCH_SASL_PASS=$3 $B/kbench -brokers 127.0.0.1:$1 -topic ab -size 1024 -partitions 8 -duration 10s -acks all -linger 5ms -producers 4 2>$T/kb.err | tail -1 |
  python3 -c 'import json,sys; d=json.load(sys.stdin); print(int(d["records_per_s"]) if d["errors"]==0 else "0:"+str(d.get("first_error")))'; }
common=(PORT=56632 QUEEN_BIND_ADDR=127.0.0.1 QUEEN_RAFT_LISTEN=127.0.0.1:57400 QUEEN_KAFKA_ADDR=127.0.0.1:59092
  QUEEN_KAFKA_ADVERTISED_ADDR=127.0.0.1:59092 QUEEN_KAFKA_SASL=plain)
as=(); bs=()
for r in $(seq $ROUNDS); do
  rm -rf $T/a; sync; sleep 2
  (cd $T && exec env "${common[@]}" QUEEN_RAFT_DIR=$T/a QUEEN_PROXY_EMBEDDED=true QUEEN_PROXY_PORT=56711 \
     QUEEN_PROXY_JWT_SECRET=bench-session-secret QUEEN_PROXY_CP_TOKEN=$CP QUEEN_PROXY_ENFORCE=true \
     QUEEN_PROXY_BOOTSTRAP_TENANT=acme QUEEN_PROXY_BOOTSTRAP_API_KEY=$KEY QUEEN_PROXY_BOOTSTRAP_PLAN=dedicated-s \
     QUEEN_PROXY_SPOOL_DIR=$T/a/spool $QBIN >$T/a.log 2>&1) & PID=$!
  waithttp 56632
  for _ in $(seq 100); do curl -sf -X PUT localhost:56711/api/cp/clusters/acme/overrides -H "x-queen-cp-token: $CP" \
     -H 'content-type: application/json' -d '{"requests_per_sec":1000000,"requests_burst":1000000,"messages_per_sec":100000000,"messages_burst":100000000}' >/dev/null && break; sleep 0.2; done
  as+=($(kb 59092 acme $KEY)); kill $PID; wait $PID 2>/dev/null; PID=""
  rm -rf $T/b; sync; sleep 2
  (cd $T && exec env "${common[@]}" QUEEN_RAFT_DIR=$T/b QUEEN_KAFKA_SASL_USERS=bench:bench-pass $QBIN >$T/b.log 2>&1) & PID=$!
  waithttp 56632 && bs+=($(kb 59092 bench bench-pass)); kill $PID; wait $PID 2>/dev/null; PID=""
  echo "round $r: proxy ${as[-1]} plain ${bs[-1]}" >&2
done
python3 -c "
import statistics,json,sys
a=[int(x) for x in sys.argv[1].split()]; b=[int(x) for x in sys.argv[2].split()]
print(json.dumps({'proxy':a,'plain':b,'proxy_median':statistics.median(a),'plain_median':statistics.median(b),'ratio':round(statistics.median(a)/statistics.median(b),3)}))" "${as[*]}" "${bs[*]}"
