#!/bin/sh
# Instructions per timer primitive in the pinned workerd (worker.js), each
# variant under instructions.sh: (variant - none) / 20 is one primitive.
#
#   harness/benches/profile/timers/timers.sh [WARM=2000] [N=1000]
set -e
HERE=$(cd "$(dirname "$0")" && pwd); D=$(mktemp -d)
cp "$HERE/worker.js" "$D/"
cat > "$D/config.capnp" <<EOT
using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [ (name = "w", worker = .w) ],
  sockets = [ (name = "http", address = "127.0.0.1:0", http = (), service = "w") ],
  v8Flags = ["--no-liftoff"],
);
const w :Workerd.Worker = (
  modules = [ (name = "worker.js", esModule = embed "worker.js") ],
  compatibilityDate = "2026-11-17",
);
EOT
for V in none settimeout noclear wait abort abortlisten; do
  "$HERE/../instructions.sh" "$D" "${1:-2000}" "${2:-1000}" "/api/$V" | sed "s#^[^:]*:#/api/$V:#"
done
