#!/bin/bash
# Which wasm functions V8 compiles (Liftoff compiles a function on its first
# call) while workerd starts CONFIG_DIR (a directory of configs.sh) and on
# its first request (GET PATH, default /api/items): their count, their body
# bytes and V8's own timing of each, with --trace-wasm-compilation-times.
# Functions are by index; with a glued wasm that keeps its names
# (`wasm-dis deployable_bg.wasm`), NAMES=FILE.wat names them.
#
#   harness/benches/profile/liftoff.sh /tmp/gate-configs/on [PATH]
set -e
D=$(cd "$1" && pwd); P=${2:-/api/items}
HERE=$(cd "$(dirname "$0")" && pwd)
W=${WORKERD:-$HERE/../../../tools/fixtures/workers/node_modules/@cloudflare/workerd-linux-64/bin/workerd}
PORT=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"); OUT=$(mktemp -d)
cp -r "$D/." "$OUT/"
sed -i 's|^const config :Workerd.Config = (|&\n  v8Flags = ["--trace-wasm-compilation-times"],|' "$OUT/config.capnp"
sed -i 's|^  v8Flags = \["--no-liftoff"\],||' "$OUT/config.capnp"
(cd "$OUT" && exec "$W" serve config.capnp --socket-addr "http=127.0.0.1:$PORT" >"$OUT/trace.log" 2>&1) &
WPID=$!
i=0; until bash -c "exec 9<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null; do sleep 0.2; i=$((i+1)); [ $i -gt 100 ] && exit 1; done
# workerd listens before its start is over: let it finish.
sleep 1
START=$(grep -c '^Compiled function' "$OUT/trace.log" || true)
curl -s -o /dev/null -H "CF-Connecting-IP: 192.0.2.1" "http://127.0.0.1:$PORT$P"
sleep 0.5; kill "$WPID"; wait "$WPID" 2>/dev/null || true
python3 - "$OUT/trace.log" "$START" "${NAMES:-}" <<'PY'
import re, sys
log, start, wat = sys.argv[1], int(sys.argv[2]), sys.argv[3]
names = []
if wat:
    for line in open(wat):
        m = re.match(r'\s*\((?:import "[^"]*" "[^"]*" \()?func \$(\S+)', line)
        if m: names.append(m.group(1))
rows = []
for line in open(log):
    m = re.match(r"Compiled function \S+#(\d+) using Liftoff, took (\d+) .s and \d+ bytes; bodysize (\d+)", line)
    if m:
        i = int(m.group(1))
        rows.append((int(m.group(2)), int(m.group(3)), names[i] if i < len(names) else f"#{i}"))
for label, part in (("start", rows[:start]), ("first request", rows[start:])):
    print(f"{label}: {len(part)} functions, {sum(r[1] for r in part)} body bytes, {sum(r[0] for r in part)} us")
    for us, size, name in sorted(part, reverse=True)[:10]:
        print(f"  {size:6d} B {us:5d} us  {name[:100]}")
PY
