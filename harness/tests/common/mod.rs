//! What several integration tests share: minimal applications and a probe
//! for the workerd processes a test started.
#![allow(dead_code)] // Each test binary uses its own part of this module.

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
    live_processes(|pid, comm, _| {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let serving = cmdline.split(|b| *b == 0).any(|arg| arg == b"serve");
        comm == "workerd" && serving && environ.split(|b| *b == 0).any(|kv| kv == needle.as_bytes())
    })
}

/// The live children of `parent` named `name` (as /proc's `comm` has it).
/// A redis-server rewrites its environment with its title, so the processes
/// a harness started are found by their parent, not by a mark.
pub fn children_named(parent: u32, name: &str) -> Vec<u32> {
    live_processes(|_, comm, stat| {
        let ppid = stat
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        comm == name && ppid == Some(parent)
    })
}

/// The pids of live (not zombie) processes for which `wanted(pid, comm,
/// stat)` holds, `stat` being /proc's stat line after the name.
fn live_processes(wanted: impl Fn(u32, &str, &str) -> bool) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let rest = stat.rsplit(')').next().unwrap_or_default().trim_start();
            !rest.starts_with('Z') && wanted(*pid, comm.trim(), rest)
        })
        .collect()
}

/// A native API counting in the Redis connection `cache`, with a route's own
/// 20 per 10 s on `/api/search`. `store` is the connection's address line(s):
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

[[routes]]
path = "/api/search"
rate_limit = {{ requests = 20, window = 10 }}
"#
    )
}
