#!/bin/sh
# Writes the throughput bench's four workerd configs (off, on = in-isolate
# binding, memory, js = the JavaScript gate) for a Worker glued in
# BINDGEN_DIR, each in OUT/VARIANT, shaped as harness/src/world/workerd/config.rs
# writes them, with `v8Flags = ["--no-liftoff"]` so wasm runs optimised code
# from the first request (counts are then steady from the start; LIFTOFF=1
# leaves V8's default, for start.sh).
#
#   harness/benches/profile/configs.sh target/harness-wasm/bindgen /tmp/gate-configs
#   harness/benches/profile/configs.sh target/harness-wasm/bindgen-workers-rs /tmp/rs-configs
#
# The Workers are glued by any harness run (`cargo run -p harness -- run
# --worker NAME zzzz`). A config binds both the plan (PLAN, written by
# `harness validate --plan`) and the description (APPLICATION, DEPLOYABLE), so
# a Worker built before plans (which read the description) runs in it too.
set -e
B=$(cd "$1" && pwd); OUT=$2
R=$(cd "$(dirname "$0")/../../.." && pwd)
PLAN=$(mktemp)
(cd "$R" && cargo run -q -p harness -- validate scenarios/apps/cloudflare.toml --plan "edge=$PLAN" >/dev/null)
# No dataset is bound here: the gate's own cost, comparable with earlier rounds.
sed -i '/^data_points /d' "$PLAN"
WASM=deployable_opt.wasm; [ -f "$B/$WASM" ] || WASM=deployable_bg.wasm
V8FLAGS='  v8Flags = ["--no-liftoff"],'; [ "${LIFTOFF:-}" = 1 ] && V8FLAGS=
bind() { cat <<EOT
    (name = "$1", wrapped = (moduleName = "harness:ratelimit", innerBindings = [
      (name = "name", text = "$1"), (name = "namespace", text = "$2"),
      (name = "limit", json = "$3"), (name = "period", json = "$4"),
      (name = "behaviour", json = "\"healthy\""),
    ])),
EOT
}
for V in off on memory js; do
  O=$OUT/$V; rm -rf "$O"; mkdir -p "$O"
  cp "$R/harness/assets/entry.js" "$R/harness/assets/ratelimit-binding.js" "$O/"
  cp "$R/scenarios/apps/cloudflare.toml" "$O/application.toml"
  cp "$PLAN" "$O/gate.plan"
  cp "$B/deployable.js" "$O/"
  cp "$B/$WASM" "$O/deployable_bg.wasm"
  cp -r "$B/snippets" "$O/"
  [ "$V" = js ] && cp "$R/harness/benches/js-gate-worker.js" "$O/entry.js"
  SNIPPETS=$(cd "$O" && find snippets -name '*.js' | sed 's/.*/    (name = "&", esModule = embed "&"),/')
  LIMITING=""; [ "$V" = off ] && LIMITING='    (name = "LIMITING", text = "off"),'
  BINDINGS=""; [ "$V" != memory ] && BINDINGS="$(bind LIMITS_20_PER_10S 1001 20 10)
$(bind LIMITS_120_PER_60S 1002 120 60)
$(bind LIMITS_600_PER_60S 1003 600 60)"
  cat > "$O/config.capnp" <<EOT
using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [ (name = "deployable", worker = .deployable) ],
  sockets = [ (name = "http", address = "127.0.0.1:0", http = (), service = "deployable") ],
  extensions = [ (modules = [
    (name = "harness:ratelimit", esModule = embed "ratelimit-binding.js", internal = true),
  ]) ],
  logging = (structuredLogging = true),
$V8FLAGS
);
const deployable :Workerd.Worker = (
  modules = [
    (name = "entry.js", esModule = embed "entry.js"),
    (name = "deployable.js", esModule = embed "deployable.js"),
    (name = "deployable_bg.wasm", wasm = embed "deployable_bg.wasm"),
$SNIPPETS
  ],
  compatibilityDate = "2026-11-17",
  bindings = [
    (name = "PLAN", text = embed "gate.plan"),
    (name = "APPLICATION", text = embed "application.toml"),
    (name = "DEPLOYABLE", text = "edge"),
    (name = "HARNESS_CONTROL_TOKEN", text = "bench"),
    (name = "HARNESS_BINDINGS", text = "[]"),
    (name = "HARNESS_HIDDEN", text = "[]"),
$LIMITING
$BINDINGS
  ],
);
EOT
done
echo "$OUT/{off,on,memory,js}"
