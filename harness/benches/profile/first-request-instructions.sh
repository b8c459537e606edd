#!/bin/bash
# Instructions of a Worker's first request alone, every workerd thread
# counted under valgrind's callgrind (so the figure does not depend on the
# machine's load): workerd serves CONFIG_DIR (a directory of configs.sh,
# written with LIFTOFF=1) uninstrumented until its start is over, a
# connection is opened, instrumentation is switched on, and one GET PATH
# (default /api/items) is sent and answered. A companion to start.sh, which
# counts the start and the first request together.
#
#   harness/benches/profile/first-request-instructions.sh /tmp/gate-configs/on [PATH]
set -e
D=$(cd "$1" && pwd); P=${2:-/api/items}
HERE=$(cd "$(dirname "$0")" && pwd)
W=${WORKERD:-$HERE/../../../tools/fixtures/workers/node_modules/@cloudflare/workerd-linux-64/bin/workerd}
PORT=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"); OUT=$(mktemp -d)
(cd "$D" && exec valgrind --tool=callgrind --smc-check=all-non-file --instr-atstart=no \
  --callgrind-out-file="$OUT/cg.%p" "$W" serve config.capnp --socket-addr "http=127.0.0.1:$PORT" \
  >"$OUT/workerd.log" 2>&1) &
VPID=$!
i=0; until bash -c "exec 9<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null; do sleep 0.5; i=$((i+1)); [ $i -gt 240 ] && exit 1; done
# workerd listens before its start is over (it loads the root certificates
# and evaluates the Worker's modules after binding the socket): under
# valgrind, give it time to finish.
sleep "${SETTLE_SECONDS:-12}"
exec 3<>"/dev/tcp/127.0.0.1/$PORT"
callgrind_control -i on "$VPID" >/dev/null 2>&1
printf 'GET %s HTTP/1.1\r\nHost: x\r\nCF-Connecting-IP: 192.0.2.1\r\n\r\n' "$P" >&3
timeout 30 head -c 12 <&3 >/dev/null
sleep 0.5
callgrind_control -d "$VPID" >/dev/null 2>&1
sleep 1; kill "$VPID"; wait "$VPID" 2>/dev/null || true
F=$(ls "$OUT"/cg.*.1)
echo "$1: $(awk '/^totals:/ {print $2}' "$F") instructions in the first request (callgrind file in $OUT)"
