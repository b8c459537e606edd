#!/bin/sh
# Instructions of one workerd start serving CONFIG_DIR (a directory of
# configs.sh, written with LIFTOFF=1 to see V8's default): spawn, then the
# first request (GET PATH, default /health, which builds the deployable's
# gate; /api/items asks the binding too), every thread counted under valgrind's
# callgrind, so the figure does not depend on the machine's load. Prints the
# total and the inclusive share of the phases the suite pays for at every
# start (harness/src/world/workerd/process.rs starts one workerd per isolate).
#
#   harness/benches/profile/start.sh /tmp/gate-configs/on [PATH]
set -e
D=$(cd "$1" && pwd); P=${2:-/health}
HERE=$(cd "$(dirname "$0")" && pwd)
W=${WORKERD:-$HERE/../../../tools/fixtures/workers/node_modules/@cloudflare/workerd-linux-64/bin/workerd}
PORT=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"); OUT=$(mktemp -d)
(cd "$D" && exec valgrind --tool=callgrind --smc-check=all-non-file \
  --callgrind-out-file="$OUT/cg.%p" "$W" serve config.capnp --socket-addr "http=127.0.0.1:$PORT" \
  >"$OUT/workerd.log" 2>&1) &
VPID=$!
i=0; until curl -s -o /dev/null -H "CF-Connecting-IP: 192.0.2.1" "http://127.0.0.1:$PORT$P"; do sleep 0.5; i=$((i+1)); [ $i -gt 240 ] && exit 1; done
callgrind_control -d "$VPID" >/dev/null 2>&1
sleep 1; kill "$VPID"; wait "$VPID" 2>/dev/null || true
F=$(ls "$OUT"/cg.*.1)
TOTAL=$(awk '/^totals:/ {print $2}' "$F")
echo "$1: $((TOTAL / 1000000)) million instructions per start (callgrind file in $OUT)"
callgrind_annotate --inclusive=yes --threshold=100 "$F" 2>/dev/null | grep -v "'2 " | awk -v total="$TOTAL" '
  function show(label, pattern) {
    for (i = 1; i <= n; i++) if (name[i] ~ pattern) { printf "  %-58s %5.1f %%\n", label, 100 * ir[i] / total; return }
  }
  /^ *[0-9,]+ \(/ { v = $1; gsub(",", "", v); n++; ir[n] = v; name[n] = $0 }
  END {
    show("config parse (capnp SchemaParser::parseFile)", "SchemaParser::parseFile");
    show("root certificates (rustls_native_certs)", "rustls_native_certs::load_native_certs");
    show("worker compile (modules, wasm module; evaluation below included)", "server::\\(anonymous namespace\\)::compileWorker\\(");
    show("module evaluation (entry.js, glue, wasm instance)", "workerd::Worker::Worker\\(");
    show("first request (the gate built)", "ServiceWorkerGlobalScope::request\\(");
    show("  of which wasm compiled lazily (Liftoff)", "v8::internal::wasm::CompileLazy\\(");
  }'
