//! The Wrangler file `harness wrangler APP --write FILE --deployable NAME`
//! writes, taken by the real tools: wrangler 4.164 (the release in
//! `tools/fixtures/wrangler/`, on the Node.js 22 of `tools/fixtures/node22/`)
//! accepts it in a dry-run deploy and uploads its `vars.PLAN`, `ratelimits`
//! and data points' dataset (`analytics_engine_datasets`, another dataset of
//! the user's kept beside it) as the deployable's plan has them, and the pinned workerd
//! runs the Worker on the bindings read back from the file, refusing at the
//! file's limit. Nothing reaches the network, and wrangler writes nothing
//! outside the test's temporary folders.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use harness::commands::suite::prepare_environment;
use harness::engine::CONTROL_HEADER;
use harness::judge::scenario::fallback_line;
use harness::language::scenario::Behaviour;
use harness::world::workerd::config::{BindingCounter, IsolateConfig, write_config};
use harness::world::workerd::{EmulatedBinding, WorkerdProcess};
use runtime::config::Application;

/// Two Workers deployables, so the file names the one it is for: `edge`
/// serves the API, with two routes of their own besides the built-in limits.
const APP: &str = r#"
[connections.shop-limits]
driver = "cloudflare_rate_limits"
namespace = 4100

[rate_limits]
store = "shop-limits"
data_points = "shop_rate_limits"

[[deployables]]
name = "edge"
target = "workers"
serves_api = true

[[deployables]]
name = "site"
target = "workers"
serves_api = false

[[routes]]
path = "/api/login"
rate_limit = { requests = 5, window = 60 }

[[routes]]
path = "/api/search"
rate_limit = { requests = 20, window = 10 }
"#;

/// The `ratelimits` entries the application's bindings are: name,
/// namespace id, limit, period.
const ENTRIES: [(&str, &str, u64, u64); 4] = [
    ("SHOP_LIMITS_20_PER_10S", "4100", 20, 10),
    ("SHOP_LIMITS_5_PER_60S", "4101", 5, 60),
    ("SHOP_LIMITS_120_PER_60S", "4102", 120, 60),
    ("SHOP_LIMITS_600_PER_60S", "4103", 600, 60),
];

/// The user's Wrangler files before the build step writes into them: a
/// Worker's name, entry and date, a var of its own, and comments.
const BEFORE: [(&str, &str); 2] = [
    (
        "wrangler.jsonc",
        r#"{
  // the shop's API on Workers
  "name": "shop-edge",
  "main": "worker.js", // the Worker's module
  "compatibility_date": "2026-11-17",
  /* a var of our own */
  "vars": { "SHOP": "books" },
  "analytics_engine_datasets": [
    { "binding": "ORDERS", "dataset": "shop_orders" } // our own dataset
  ]
}
"#,
    ),
    (
        "wrangler.toml",
        r#"# the shop's API on Workers
name = "shop-edge"
main = "worker.js" # the Worker's module
compatibility_date = "2026-11-17"

[vars]
SHOP = "books" # a var of our own

[[analytics_engine_datasets]]
binding = "ORDERS" # our own dataset
dataset = "shop_orders"
"#,
    ),
];

/// The comments of [`BEFORE`]'s files, which must survive the write.
const COMMENTS: [&str; 8] = [
    "// the shop's API on Workers",
    "// the Worker's module",
    "/* a var of our own */",
    "// our own dataset",
    "# the shop's API on Workers",
    "# the Worker's module",
    "# a var of our own",
    "# our own dataset",
];

/// What `--write` says it wrote, after `updated` or `unchanged`.
const WROTE: &str = "4 ratelimits entries of connection `shop-limits`, the plan of deployable \
                     `edge` as vars.PLAN, the analytics_engine_datasets entry \
                     RATE_LIMIT_DATA_POINTS of dataset `shop_rate_limits`";

/// What wrangler bundles: a module asking one of the bindings.
const WORKER_JS: &str = r#"export default {
  async fetch(request, env) {
    const { success } = await env.SHOP_LIMITS_5_PER_60S.limit({ key: "k" });
    return new Response(success ? "ok" : "limited", { status: success ? 200 : 429 });
  },
};
"#;

/// The plan of deployable `edge`, as `validate --plan` writes it.
fn edge_plan() -> String {
    let app = Application::from_toml(APP).expect("a valid application");
    runtime::GatePlan::new(&app, "edge")
        .expect("edge")
        .to_text()
        .expect("a Workers plan")
}

/// Writes [`BEFORE`]'s files and the Worker's module into `dir`, then runs
/// `harness wrangler --write FILE --deployable edge` on each; checks that
/// a second run leaves it byte for byte as it was. The files' paths.
fn written_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::write(dir.join("worker.js"), WORKER_JS).expect("worker.js");
    let mut written = Vec::new();
    for (name, before) in BEFORE {
        let path = dir.join(name);
        std::fs::write(&path, before).expect("the file before");
        let (code, stdout, stderr) =
            common::wrangler_write(dir, APP, name, &["--deployable", "edge"]);
        assert_eq!(code, Some(0), "{name}: {stdout}{stderr}");
        assert_eq!(stdout, format!("{name}: updated ({WROTE})\n"));
        let first = std::fs::read(&path).expect("written");
        let (code, stdout, _) = common::wrangler_write(dir, APP, name, &["--deployable", "edge"]);
        assert_eq!(
            (code, stdout.as_str()),
            (Some(0), format!("{name}: unchanged ({WROTE})\n").as_str())
        );
        assert_eq!(
            std::fs::read(&path).expect("written"),
            first,
            "{name}: a second run changes nothing"
        );
        let text = String::from_utf8(first).expect("text");
        let marker = if name.ends_with(".toml") { "#" } else { "/" };
        for comment in COMMENTS.iter().filter(|c| c.starts_with(marker)) {
            assert!(text.contains(comment), "{name} lost `{comment}`:\n{text}");
        }
        written.push(path);
    }
    written
}

/// The `backend NAME` lines of a plan: the bindings its gate asks.
fn backends(plan: &str) -> Vec<&str> {
    plan.lines()
        .filter_map(|line| line.strip_prefix("backend "))
        .collect()
}

#[test]
fn wrangler_uploads_the_written_files_plan_var_and_the_plans_ratelimits() {
    let node = common::node_22().unwrap_or_else(|why| panic!("{why}"));
    let wrangler = common::wrangler_package();
    let dir = tempfile::tempdir().expect("temp dir");
    let plan = edge_plan();
    // The plan of `edge`, not of `site` (which serves no API).
    assert!(
        plan.starts_with("rate-limits-plan 2\ndeployable edge\n"),
        "{plan}"
    );
    let expected: Vec<serde_json::Value> = ENTRIES
        .iter()
        .map(|(name, namespace_id, limit, period)| {
            serde_json::json!({
                "name": name,
                "type": "ratelimit",
                "namespace_id": namespace_id,
                "simple": { "limit": limit, "period": period },
            })
        })
        .collect();
    for path in written_files(dir.path()) {
        let name = path.file_name().expect("a name").to_string_lossy();
        let work = path.parent().expect("its folder");
        let home = tempfile::tempdir().expect("wrangler's home");
        let upload = format!("{name}.multipart");
        let started = Instant::now();
        let output = common::wrangler_command(&node, &wrangler, work, home.path())
            .args(["deploy", "--dry-run", "--config"])
            .arg(&path)
            .args(["--outdir", &format!("{name}.out"), "--outfile", &upload])
            .output()
            .expect("wrangler runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "{name}: wrangler exited {}:\n{stdout}\n{stderr}",
            output.status
        );
        eprintln!("{name}: wrangler's dry run took {:?}", started.elapsed());

        // What wrangler says the Worker has.
        assert!(
            stdout.contains("Your Worker has access to the following bindings:"),
            "{name}:\n{stdout}"
        );
        for (binding, _, limit, period) in ENTRIES {
            let line = format!("env.{binding} ({limit} requests/{period}s)");
            assert!(
                stdout
                    .lines()
                    .any(|l| l.starts_with(&line) && l.trim_end().ends_with("Rate Limit")),
                "{name}: no `{line} ... Rate Limit` in:\n{stdout}"
            );
        }
        let first_line = plan.lines().next().expect("a first line");
        assert!(
            stdout.contains(&format!("env.PLAN (\"{first_line}")),
            "{name}:\n{stdout}"
        );
        assert!(stdout.contains("env.SHOP (\"books\")"), "{name}:\n{stdout}");
        assert!(stdout.contains("Environment Variable"), "{name}:\n{stdout}");
        assert!(
            stdout.contains("--dry-run: exiting now."),
            "{name}:\n{stdout}"
        );

        // What it would upload, exactly.
        let metadata =
            common::wrangler_upload_metadata(&std::fs::read(work.join(&upload)).expect("upload"));
        assert_eq!(metadata["main_module"], "worker.js", "{name}");
        assert_eq!(metadata["compatibility_date"], "2026-11-17", "{name}");
        let bindings = metadata["bindings"].as_array().expect("bindings");
        let text = |var: &str| {
            bindings
                .iter()
                .find(|b| b["name"] == var)
                .unwrap_or_else(|| panic!("{name}: no {var} in {bindings:?}"))
                .clone()
        };
        assert_eq!(
            text("PLAN"),
            serde_json::json!({ "name": "PLAN", "type": "plain_text", "text": plan }),
            "{name}: the plan, to the byte, as plain text"
        );
        assert_eq!(
            text("SHOP"),
            serde_json::json!({ "name": "SHOP", "type": "plain_text", "text": "books" }),
            "{name}"
        );
        let ratelimits: Vec<serde_json::Value> = bindings
            .iter()
            .filter(|b| b["type"] == "ratelimit")
            .cloned()
            .collect();
        assert_eq!(ratelimits, expected, "{name}: binding for binding");
        // Each one a binding the plan's gate asks, and every one it asks.
        let uploaded: Vec<&str> = ratelimits
            .iter()
            .filter_map(|b| b["name"].as_str())
            .collect();
        assert_eq!(uploaded, backends(&plan), "{name}");
        assert_datasets(&name, &plan, bindings);
        assert_eq!(bindings.len(), ENTRIES.len() + 4, "{name}: {bindings:?}");
    }
}

/// The upload's datasets: the user's own, and the one the plan writes its
/// data points through.
fn assert_datasets(name: &str, plan: &str, bindings: &[serde_json::Value]) {
    // The dataset the plan writes its data points through, and the user's own.
    assert!(
        plan.ends_with("\ndata_points RATE_LIMIT_DATA_POINTS\n"),
        "{plan}"
    );
    let datasets: Vec<serde_json::Value> = bindings
        .iter()
        .filter(|b| b["type"] == "analytics_engine")
        .cloned()
        .collect();
    assert_eq!(
        datasets,
        [
            serde_json::json!({ "name": "ORDERS", "type": "analytics_engine", "dataset": "shop_orders" }),
            serde_json::json!({
                "name": "RATE_LIMIT_DATA_POINTS",
                "type": "analytics_engine",
                "dataset": "shop_rate_limits",
            }),
        ],
        "{name}"
    );
}

/// One emulated binding per `ratelimits` entry of a Wrangler file (read as
/// JSON), healthy, as the file gives its name, namespace, limit and period.
fn bindings_of(file: &serde_json::Value) -> Vec<EmulatedBinding> {
    let number = |entry: &serde_json::Value, field: &str| -> u32 {
        entry["simple"][field]
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or_else(|| panic!("simple.{field} of {entry}"))
    };
    file["ratelimits"]
        .as_array()
        .expect("ratelimits")
        .iter()
        .map(|entry| EmulatedBinding {
            name: entry["name"].as_str().expect("a name").to_owned(),
            namespace_id: entry["namespace_id"]
                .as_str()
                .and_then(|id| id.parse().ok())
                .unwrap_or_else(|| panic!("namespace_id of {entry}")),
            limit: number(entry, "limit"),
            period: number(entry, "period"),
            initial: Behaviour::Healthy,
            in_config: true,
        })
        .collect()
}

/// The file's limit of `/api/login` (its entry `SHOP_LIMITS_5_PER_60S`):
/// the test sends one request more.
const LOGIN_LIMIT: usize = 5;

/// The one address the requests come from (`CF-Connecting-IP`).
const ADDRESS: &str = "192.0.2.80";

/// The token of the harness's control requests (the clock, the bindings'
/// statistics), which the test's traffic never carries.
const TOKEN: &str = "wrangler-file-control";

#[test]
fn workerd_runs_the_worker_from_the_written_files_bindings_to_its_limit() {
    let env = prepare_environment().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().expect("temp dir");
    let files = written_files(dir.path());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for path in files {
        let name = path.file_name().expect("a name").to_string_lossy();
        let file = common::read_wrangler_file(&path);
        let plan = file["vars"]["PLAN"].as_str().expect("vars.PLAN");
        let bindings = bindings_of(&file);
        let date = file["compatibility_date"]
            .as_str()
            .expect("compatibility_date");
        let config_dir = dir.path().join(format!("{name}.workerd"));
        std::fs::create_dir(&config_dir).expect("config dir");
        let config = IsolateConfig {
            plan,
            bindings: &bindings,
            compatibility_date: date,
            control_token: TOKEN,
            counter: BindingCounter::InIsolate,
            data_points: None,
            limiting_off: false,
        };
        let config = write_config(&config_dir, &config, &env.deployable).expect("config");
        runtime.block_on(run_to_the_limit(&env.workerd.path, &config, TOKEN, &name));
    }
}

/// Starts workerd on `config`, sends `/api/login` past its limit over HTTP,
/// and reads what the emulated binding counted and what workerd logged.
async fn run_to_the_limit(workerd: &Path, config: &Path, token: &str, name: &str) {
    let process = WorkerdProcess::start(workerd, config, Instant::now())
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let base = process.url();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    // The Worker's and its bindings' clock at a second into a minute, as a
    // scenario's starts: the 60 s window cannot end between the requests.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64;
    let offset_ms = 60_000 - now % 60_000 + 1_000;
    let clock = client
        .post(format!("{base}/clock"))
        .header(CONTROL_HEADER, token)
        .json(&serde_json::json!({ "offset_ms": offset_ms }))
        .send()
        .await
        .expect("workerd answers");
    assert!(clock.status().is_success(), "{name}: {clock:?}");

    let mut statuses = Vec::new();
    let mut retry_after = None;
    for _ in 0..=LOGIN_LIMIT {
        let response = client
            .get(format!("{base}/api/login"))
            .header(runtime::limiter::ADDRESS_HEADER, ADDRESS)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        statuses.push(response.status().as_u16());
        if response.status() == 429 {
            retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
        }
    }
    let mut expected = vec![200; LOGIN_LIMIT];
    expected.push(429);
    assert_eq!(statuses, expected, "{name}: {LOGIN_LIMIT} pass, then 429");
    let retry_after: u64 = retry_after
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name}: the 429 has a Retry-After in seconds"));
    assert!(
        (1..=60).contains(&retry_after),
        "{name}: Retry-After {retry_after}"
    );

    let stats: serde_json::Value = client
        .get(format!("{base}/bindings"))
        .header(CONTROL_HEADER, token)
        .send()
        .await
        .expect("workerd answers")
        .json()
        .await
        .expect("JSON");
    let login = &stats["SHOP_LIMITS_5_PER_60S"];
    assert_eq!(
        (
            &login["namespace"],
            &login["limit"],
            &login["period"],
            &login["behaviour"]
        ),
        (
            &serde_json::json!("4101"),
            &serde_json::json!(5),
            &serde_json::json!(60),
            &serde_json::json!("healthy")
        ),
        "{name}: the file's entry, emulated: {stats}"
    );
    assert_eq!(
        login["calls"],
        serde_json::json!(LOGIN_LIMIT + 1),
        "{name}: every request asked the file's binding: {stats}"
    );
    assert_eq!(login["invalid"], serde_json::json!(0), "{name}: {stats}");

    let lines = process
        .stop()
        .await
        .unwrap_or_else(|e| panic!("{name}: {e:?}"));
    let fallbacks: Vec<&str> = lines
        .iter()
        .filter(|line| fallback_line(&line.text).is_some())
        .map(|line| line.text.as_str())
        .collect();
    assert_eq!(
        fallbacks,
        Vec::<&str>::new(),
        "{name}: no rate_limits.fallback line"
    );
}
