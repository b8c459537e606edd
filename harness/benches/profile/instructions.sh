#!/bin/sh
# Instructions per request of a workerd serving CONFIG_DIR (a directory of
# configs.sh), under valgrind's callgrind: WARM requests with instrumentation
# off, then N measured, GET /api/items from distinct addresses over 8
# keep-alive connections (load.mjs). Counts every thread of workerd, so it
# does not depend on the machine's load; the instructions of V8's optimising
# compilers still at work are shown apart, for subtracting.
#
#   harness/benches/profile/instructions.sh /tmp/gate-configs/on [WARM=500] [N=1000] [PATH=/api/items]
set -e
D=$(cd "$1" && pwd); WARM=${2:-500}; N=${3:-1000}; P=${4:-/api/items}
HERE=$(cd "$(dirname "$0")" && pwd)
W=${WORKERD:-$HERE/../../../tools/fixtures/workers/node_modules/@cloudflare/workerd-linux-64/bin/workerd}
PORT=$((17000 + $$ % 900)); OUT=$(mktemp -d)
(cd "$D" && exec valgrind --tool=callgrind --smc-check=all-non-file --instr-atstart=no \
  --callgrind-out-file="$OUT/cg.%p" "$W" serve config.capnp --socket-addr "http=127.0.0.1:$PORT" \
  >"$OUT/workerd.log" 2>&1) &
VPID=$!
i=0; until curl -s -o /dev/null "http://127.0.0.1:$PORT/health"; do sleep 1; i=$((i+1)); [ $i -gt 600 ] && exit 1; done
node "$HERE/load.mjs" "$PORT" "$WARM" "$P"
callgrind_control -i on "$VPID" >/dev/null 2>&1
node "$HERE/load.mjs" "$PORT" "$N" "$P"
callgrind_control -i off "$VPID" >/dev/null 2>&1
callgrind_control -d "$VPID" >/dev/null 2>&1
sleep 1; kill "$VPID"; wait "$VPID" 2>/dev/null || true
TOTAL=$(cat "$OUT"/cg.* | awk '/^totals:/ {s += $2} END {print s}')
JIT=$(for f in "$OUT"/cg.*; do callgrind_annotate --inclusive=no --threshold=100 "$f" 2>/dev/null; done |
  awk '/compiler::|turboshaft|maglev|Maglev|baseline::/ {gsub(",", "", $1); s += $1} END {print s + 0}')
echo "$1: $((TOTAL / N)) instructions per request, of which $((JIT / N)) in V8's compilers ($N requests; callgrind files in $OUT)"
