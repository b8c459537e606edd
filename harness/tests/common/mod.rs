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
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = state
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'));
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let serving = cmdline.split(|b| *b == 0).any(|arg| arg == b"serve");
            comm.trim() == "workerd"
                && serving
                && !zombie
                && environ.split(|b| *b == 0).any(|kv| kv == needle.as_bytes())
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
