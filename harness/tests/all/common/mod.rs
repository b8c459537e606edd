//! What several of the harness's test modules share: minimal applications
//! and a probe for the workerd processes a test started.

use harness::world::proc;

/// An API on Workers counting through Cloudflare's binding.
pub const WORKERS_API: &str = r#"
[connections.limits]
driver = "cloudflare_rate_limits"
namespace = 1001

[rate_limits]
store = "limits"

[[deployables]]
name = "edge"
target = "workers"
serves_api = true
"#;

/// The pids of live `workerd serve` processes whose environment holds
/// `VAR=mark`: the processes a test started, marked through their parent.
pub fn marked_workerds(var: &str, mark: &str) -> Vec<u32> {
    let needle = format!("{var}={mark}");
    live_processes(|pid| {
        proc::name(pid).is_some_and(|name| name == "workerd")
            && proc::arguments(pid).iter().any(|arg| arg == "serve")
            && proc::environment(pid).contains(&needle)
    })
}

/// The live children of `parent` named `name` (as /proc's `comm` has it).
/// A redis-server rewrites its environment with its title, so the processes
/// a harness started are found by their parent, not by a mark.
pub fn children_named(parent: u32, name: &str) -> Vec<u32> {
    live_processes(|pid| {
        proc::stat(pid).is_some_and(|stat| stat.parent == parent)
            && proc::name(pid).is_some_and(|n| n == name)
    })
}

/// The pids of live (not zombie) processes for which `wanted(pid)` holds.
fn live_processes(wanted: impl Fn(u32) -> bool) -> Vec<u32> {
    proc::pids()
        .into_iter()
        .filter(|pid| !proc::gone(*pid) && wanted(*pid))
        .collect()
}

/// A native API counting in the Redis connection `cache`, with a route's own
/// 20 per 10 s on `/api/search`, its clients by `CF-Connecting-IP` (the
/// tests send from 127.0.0.1). `store` is the connection's address line(s):
/// `url = "redis://..."` or `nodes = [...]`.
pub fn native_redis_app(store: &str) -> String {
    format!(
        r#"
[connections.cache]
driver = "redis"
{store}

[rate_limits]
store = "cache"

[[deployables]]
name = "api"
target = "native"
serves_api = true
# The harness connects from loopback, standing in for cloudflared (a
# Cloudflare Tunnel): the relay that passes CF-Connecting-IP on.
client_address = {{ cloudflare_via = ["127.0.0.1"] }}

[[routes]]
path = "/api/search"
rate_limit = {{ requests = 20, window = 10 }}
"#
    )
}
