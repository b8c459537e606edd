//! `harness cloudflare`, proved offline: Cloudflare's API is a `wiremock`
//! server answering as the API documents (envelopes, the upload, the
//! workers.dev route, tails, deletes, and every fault), the Worker's
//! workers.dev URL a second one that counts and refuses like a binding, and
//! the tail a real WebSocket server (tokio-tungstenite) speaking
//! `trace-v1`. Every request, the tail protocol, the DELETEs on each exit
//! path, the faults, the dry run against wrangler's own upload body, and a
//! fake token that must appear in no output at all.

use crate::common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use harness::commands::cloudflare::{
    self, CloudflareError, CloudflareRequest, Reach, Timing, run::is_run_script,
};
use harness::world::cloudflare::api::{Api, ApiError};
use harness::world::cloudflare::credentials::Credentials;
use harness::world::cloudflare::retry::RetryPolicy;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{
    Request as Handshake, Response as HandshakeResponse,
};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const ACCOUNT: &str = "acct-0123";
/// Recognisable, so a leak is found wherever it went.
const FAKE_TOKEN: &str = "cfut-FAKE-TOKEN-7e1d5c9a-NEVER-PRINT-ME";
/// The address the fake edge says requests come from.
const RUNNER_ADDRESS: &str = "203.0.113.250";

fn ok(result: serde_json::Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(serde_json::json!({
        "success": true, "errors": [], "messages": [], "result": result
    }))
}

fn api_error(status: u16, code: i64, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(serde_json::json!({
        "success": false, "errors": [{"code": code, "message": message}], "messages": [], "result": null
    }))
}

/// The fake edge: what was uploaded, what each Worker counted, the tail
/// events each Worker emitted, what the tails saw.
#[derive(Default)]
struct Edge {
    /// script -> (content type, body) of its upload.
    uploads: HashMap<String, (String, Vec<u8>)>,
    /// script -> the ratelimit bindings it was uploaded with.
    ratelimits: HashMap<String, Vec<String>>,
    /// (script, key) -> requests counted.
    counts: HashMap<(String, String), usize>,
    /// Requests let through per key before the first refusal.
    passes: usize,
    /// /health calls per script, and how many answer 404 first (not yet routed).
    health_calls: HashMap<String, usize>,
    health_misses: usize,
    /// script -> tail events, as JSON texts.
    events: HashMap<String, Vec<String>>,
    /// Requests to a Worker that carried an Authorization header.
    authorized_worker_requests: usize,
    api_requests_to_worker: usize,
    /// The tails: (script, subprotocol answered, first message), and closes.
    tails: Vec<(String, Option<String>, String)>,
    tails_closed: Vec<String>,
    /// Slow each Worker answer by this much.
    delay: Duration,
}

type Shared = Arc<Mutex<Edge>>;

struct UploadResponder(Shared);

impl Respond for UploadResponder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let script = request
            .url
            .path()
            .rsplit('/')
            .next()
            .unwrap_or("")
            .to_owned();
        let content_type = request
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let names: Vec<String> = common::metadata_of(&common::parts(&content_type, &request.body))
            ["bindings"]
            .as_array()
            .expect("bindings")
            .iter()
            .filter(|b| b["type"] == "ratelimit")
            .filter_map(|b| b["name"].as_str().map(str::to_owned))
            .collect();
        let mut edge = self.0.lock().unwrap();
        edge.ratelimits.insert(script.clone(), names);
        edge.uploads
            .insert(script.clone(), (content_type, request.body.clone()));
        ok(serde_json::json!({ "id": script, "startup_time_ms": 3, "etag": "x" }))
    }
}

struct TailResponder(u16);

impl Respond for TailResponder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let segments: Vec<&str> = request.url.path().split('/').collect();
        let script = segments[segments.len() - 2];
        ok(serde_json::json!({
            "id": format!("tail-{script}"),
            "url": format!("ws://127.0.0.1:{}/tail/{script}", self.0),
            "expires_at": "2030-01-01T00:00:00Z"
        }))
    }
}

/// The Worker of every script at `/w/{script}`: health, and API routes
/// counted per caller (or per the runner's address) with `passes` let through.
struct WorkerResponder(Shared);

impl Respond for WorkerResponder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut edge = self.0.lock().unwrap();
        let delay = edge.delay;
        let rest = request.url.path().strip_prefix("/w/").unwrap_or("");
        let (script, route) = rest.split_once('/').unwrap_or((rest, ""));
        let (script, route) = (script.to_owned(), format!("/{route}"));
        if request.headers.contains_key("authorization") {
            edge.authorized_worker_requests += 1;
        }
        if route == "/health" {
            let calls = edge.health_calls.entry(script).or_default();
            *calls += 1;
            if *calls <= edge.health_misses {
                return ResponseTemplate::new(404).set_body_string("not routed yet");
            }
            return ResponseTemplate::new(200)
                .set_body_json(serde_json::json!({"status": "ok", "counting": "binding"}));
        }
        edge.api_requests_to_worker += 1;
        let caller = request
            .headers
            .get("x-test-caller")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let key = caller.clone().unwrap_or_else(|| RUNNER_ADDRESS.to_owned());
        let count = edge.counts.entry((script.clone(), key)).or_default();
        *count += 1;
        let first = *count == 1;
        let refused = *count > edge.passes;
        // A Worker uploaded without LIMITS_120_PER_60S logs its fallback once.
        let uploaded_120 = edge
            .ratelimits
            .get(&script)
            .is_some_and(|names| names.iter().any(|n| n == "LIMITS_120_PER_60S"));
        // Stamped now, as Cloudflare stamps an invocation.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let logs = if first && caller.is_none() && !uploaded_120 {
            serde_json::json!([{
                "message": [r#"{"event":"rate_limits.fallback","binding":"LIMITS_120_PER_60S","reason":"missing"}"#],
                "level": "warn",
                "timestamp": now
            }])
        } else {
            serde_json::json!([])
        };
        let mut headers = serde_json::json!({ "cf-connecting-ip": RUNNER_ADDRESS });
        if let Some(caller) = &caller {
            headers["x-test-caller"] = caller.clone().into();
        }
        let event = serde_json::json!({
            "outcome": "ok",
            "scriptName": script,
            "exceptions": [],
            "logs": logs,
            "eventTimestamp": now,
            "event": { "request": {
                "url": format!("https://{script}.acct.workers.dev{route}"),
                "method": "GET",
                "headers": headers,
                "cf": { "colo": "FRA" }
            }}
        });
        edge.events
            .entry(script)
            .or_default()
            .push(event.to_string());
        let response = if refused {
            ResponseTemplate::new(429)
                .insert_header("retry-after", "60")
                .insert_header("ratelimit-policy", "\"address\";q=120;w=60")
                .set_body_json(serde_json::json!({"error": "rate_limited", "retry_after": 60}))
        } else {
            ResponseTemplate::new(200).set_body_json(serde_json::json!({"ok": true}))
        };
        response.set_delay(delay)
    }
}

/// The script's events not yet sent, as frames: text and binary in turn.
fn frames_since(edge: &Shared, script: &str, sent: &mut usize) -> Vec<Message> {
    let events: Vec<String> = edge
        .lock()
        .unwrap()
        .events
        .get(script)
        .map(|e| e[*sent..].to_vec())
        .unwrap_or_default();
    events
        .into_iter()
        .map(|event| {
            *sent += 1;
            if *sent % 2 == 1 {
                Message::text(event)
            } else {
                Message::binary(event.into_bytes())
            }
        })
        .collect()
}

/// A tail server: answers `trace-v1`, keeps the first message, then sends
/// the script's events as they come (text and binary frames in turn).
// The callback's signature is tungstenite's (its error is an HTTP response).
#[allow(clippy::result_large_err)]
async fn serve_tails(listener: tokio::net::TcpListener, edge: Shared) {
    while let Ok((stream, _)) = listener.accept().await {
        let edge = edge.clone();
        tokio::spawn(async move {
            let asked = Arc::new(Mutex::new((String::new(), None::<String>)));
            let seen = asked.clone();
            let callback = move |request: &Handshake, mut response: HandshakeResponse| {
                let script = request.uri().path().trim_start_matches("/tail/").to_owned();
                let protocol = request
                    .headers()
                    .get("sec-websocket-protocol")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                if protocol
                    .as_deref()
                    .is_some_and(|p| p.split(',').any(|p| p.trim() == "trace-v1"))
                {
                    response.headers_mut().insert(
                        "sec-websocket-protocol",
                        "trace-v1".parse().expect("header"),
                    );
                }
                *seen.lock().unwrap() = (script, protocol);
                Ok(response)
            };
            let Ok(socket) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
                return;
            };
            let (script, protocol) = asked.lock().unwrap().clone();
            let (mut sink, mut frames) = socket.split();
            let first = match frames.next().await {
                Some(Ok(Message::Text(text))) => text.to_string(),
                other => format!("{other:?}"),
            };
            edge.lock()
                .unwrap()
                .tails
                .push((script.clone(), protocol, first));
            let mut sent = 0;
            loop {
                tokio::select! {
                    frame = frames.next() => match frame {
                        Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                        Some(Ok(_)) => {}
                    },
                    () = tokio::time::sleep(Duration::from_millis(10)) => {
                        for frame in frames_since(&edge, &script, &mut sent) {
                            if sink.send(frame).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            }
            edge.lock().unwrap().tails_closed.push(script);
        });
    }
}

/// The fake Cloudflare: the API, the Workers, the tails.
struct Fake {
    api: MockServer,
    worker: MockServer,
    edge: Shared,
}

impl Fake {
    async fn start(passes: usize) -> Fake {
        let edge: Shared = Arc::new(Mutex::new(Edge {
            passes,
            ..Edge::default()
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let ws_port = listener.local_addr().expect("address").port();
        tokio::spawn(serve_tails(listener, edge.clone()));
        let api = MockServer::start().await;
        let scripts = format!("/accounts/{ACCOUNT}/workers/scripts");
        Mock::given(method("GET"))
            .and(path(format!("/accounts/{ACCOUNT}/workers/subdomain")))
            .respond_with(ok(serde_json::json!({ "subdomain": "acct" })))
            .mount(&api)
            .await;
        Mock::given(method("PUT"))
            .and(path_regex(format!("^{scripts}/[a-z0-9-]+$")))
            .respond_with(UploadResponder(edge.clone()))
            .mount(&api)
            .await;
        Mock::given(method("POST"))
            .and(path_regex(format!("^{scripts}/[a-z0-9-]+/subdomain$")))
            .respond_with(ok(
                serde_json::json!({ "enabled": true, "previews_enabled": false }),
            ))
            .mount(&api)
            .await;
        Mock::given(method("POST"))
            .and(path_regex(format!("^{scripts}/[a-z0-9-]+/tails$")))
            .respond_with(TailResponder(ws_port))
            .mount(&api)
            .await;
        Mock::given(method("DELETE"))
            .and(path_regex(format!(
                "^{scripts}/[a-z0-9-]+(/tails/[a-z0-9-]+)?$"
            )))
            .respond_with(ok(serde_json::Value::Null))
            .mount(&api)
            .await;
        let worker = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(WorkerResponder(edge.clone()))
            .mount(&worker)
            .await;
        Fake { api, worker, edge }
    }

    fn reach(&self) -> Reach {
        Reach {
            credentials: Some(credentials()),
            base_url: self.api.uri(),
            url_template: self.url_template(),
            retry: quick_retry(),
            timing: Timing {
                answer_every: Duration::from_millis(20),
                answer_within: Duration::from_secs(10),
                tail_quiet: Duration::from_millis(500),
                tail_most: Duration::from_secs(5),
            },
            judge: harness::judge::cloudflare::check,
            interrupted: never_interrupted,
        }
    }

    fn url_template(&self) -> String {
        format!("{}/w/{{script}}", self.worker.uri())
    }

    /// (method, path) of every API request, in order.
    async fn api_calls(&self) -> Vec<(String, String)> {
        self.api
            .received_requests()
            .await
            .unwrap_or_default()
            .iter()
            .map(|r| {
                let query = r.url.query().map(|q| format!("?{q}")).unwrap_or_default();
                (r.method.to_string(), format!("{}{query}", r.url.path()))
            })
            .collect()
    }

    async fn deletes(&self) -> Vec<String> {
        self.api_calls()
            .await
            .into_iter()
            .filter(|(m, _)| m == "DELETE")
            .map(|(_, p)| p)
            .collect()
    }

    /// How many tails and scripts were deleted.
    async fn deleted(&self) -> (usize, usize) {
        let deletes = self.deletes().await;
        (
            deletes.iter().filter(|d| d.contains("/tails/")).count(),
            deletes
                .iter()
                .filter(|d| d.ends_with("?force=true"))
                .count(),
        )
    }
}

/// A run in this process is never interrupted: listening for Ctrl-C would
/// take the signal's default action from every other test here.
fn never_interrupted() -> BoxFuture<'static, &'static str> {
    Box::pin(std::future::pending())
}

fn credentials() -> Credentials {
    Credentials::from_lookup(|name| {
        Some(match name {
            "CLOUDFLARE_API_TOKEN" => FAKE_TOKEN.to_owned(),
            _ => ACCOUNT.to_owned(),
        })
    })
    .expect("credentials")
}

fn quick_retry() -> RetryPolicy {
    RetryPolicy {
        attempts: 3,
        first_backoff: Duration::from_millis(10),
        longest_wait: Duration::from_secs(5),
    }
}

const SCENARIOS: &str = r#"application = "apps/app.toml"
deployable = "edge"

[[scenario]]
name = "an address is refused after its limit"
on_cloudflare = { refusal_by = 3 }

[[scenario.steps]]
send = { requests = 121, address = "203.0.113.7" }
expect = { statuses = "120 x 200 then 429", retry_after = 60, headers = { "content-type" = "application/json" } }

[[scenario]]
name = "an upload without one binding logs its fallback"
on_cloudflare = { refusal_by = 3 }
bindings = { LIMITS_120_PER_60S = "missing" }

[[scenario.steps]]
send = { requests = 121, address = "203.0.113.8" }
expect = { statuses = "120 x 200 then 429", retry_after = 60 }

[[scenario.steps]]
send = { requests = 3, caller = "caller-1", address = "203.0.113.8" }
expect = { statuses = "3 x 200" }

[[scenario.expect.fallback]]
binding = "LIMITS_120_PER_60S"
reason = "missing"

[[scenario]]
name = "local only"

[[scenario.steps]]
send = { requests = 1, distinct_addresses = true }
"#;

/// A scenarios directory with `scenarios` beside the test application.
fn scenarios_dir(scenarios: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join("apps")).expect("apps");
    std::fs::write(dir.path().join("apps/app.toml"), common::WORKERS_API).expect("app");
    std::fs::write(dir.path().join("edge.toml"), scenarios).expect("scenarios");
    dir
}

fn request(scenarios: &Path, out: &Path) -> CloudflareRequest {
    CloudflareRequest {
        filter: None,
        scenarios: Some(scenarios.to_owned()),
        namespace_base: 900_001,
        prefix: "hrtest".to_owned(),
        out: out.to_owned(),
        jobs: 2,
        dry_run: false,
    }
}

/// One script's requests, in order (upload, route, tail, then the tail's
/// and the script's DELETEs), and its tail: `trace-v1`, `{"debug":false}`
/// first, closed at the end, opened before the route answered.
fn assert_script_lifecycle(edge: &Edge, calls: &[(String, String)], script: &str) {
    assert!(is_run_script("hrtest", script), "{script}");
    let base = format!("/accounts/{ACCOUNT}/workers/scripts/{script}");
    let mine: Vec<(String, String)> = calls
        .iter()
        .filter(|(_, p)| {
            p.starts_with(&format!("{base}/")) || p.starts_with(&format!("{base}?")) || *p == base
        })
        .cloned()
        .collect();
    let tail = format!("tail-{script}");
    assert_eq!(
        mine,
        [
            ("PUT".to_owned(), base.clone()),
            ("POST".to_owned(), format!("{base}/subdomain")),
            ("POST".to_owned(), format!("{base}/tails")),
            ("DELETE".to_owned(), format!("{base}/tails/{tail}")),
            ("DELETE".to_owned(), format!("{base}?force=true")),
        ],
        "the requests for {script}, in order"
    );
    // The tail: trace-v1, {"debug":false} first, closed at the end.
    let (_, protocol, first) = edge
        .tails
        .iter()
        .find(|(s, _, _)| s == script)
        .expect("a tail connected");
    assert_eq!(protocol.as_deref(), Some("trace-v1"));
    assert_eq!(first, r#"{"debug":false}"#);
    assert!(
        edge.tails_closed.iter().any(|s| s == script),
        "the tail was closed: {:?}",
        edge.tails_closed
    );
    // It waited for the route (3 misses first).
    assert!(edge.health_calls[script] >= 4, "{:?}", edge.health_calls);
}

/// The report: both scenarios passed, bounded, with their figures, in
/// `results.json` and as JUnit properties.
fn assert_report(out: &Path) {
    // The report: the figures, and the local-only scenario left out.
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).expect("results"))
            .expect("JSON");
    let scenarios = results["scenarios"].as_array().expect("scenarios");
    assert_eq!(scenarios.len(), 2, "{results:#}");
    assert!(
        scenarios
            .iter()
            .all(|s| s["verdict"] == "pass" && s["on_cloudflare"] == "bounded x3"),
        "{results:#}"
    );
    assert!(
        scenarios
            .iter()
            .all(|s| s["passed_before_first_429"] == "step 1: 130/120"),
        "{results:#}"
    );
    let junit = std::fs::read_to_string(out.join("junit.xml")).expect("junit");
    assert!(junit.contains("testsuite name=\"cloudflare\""), "{junit}");
    assert!(
        junit.contains("passed before the first 429") && junit.contains("value=\"130\""),
        "{junit}"
    );
}

/// The report page beside them: where it ran (the run's scripts, never the
/// account or its token), a row per scenario, a timeline each with a mark
/// per request sent at its own time, the tail's fallback line, and none of
/// the addresses or callers sent.
fn assert_report_page(out: &Path) {
    let html = std::fs::read_to_string(out.join("report.html")).expect("report.html");
    assert!(html.contains("<h1>On Cloudflare itself</h1>"), "{html}");
    let ran = html
        .split("<p class=\"run\">")
        .nth(1)
        .and_then(|p| p.split("</p>").next())
        .expect("where it ran");
    assert!(
        ran.starts_with("Cloudflare&#x27;s edge, the real binding: scripts hrtest-")
            && ran.contains("-N, Worker wasm-bindgen, compatibility date 2026-11-17"),
        "{ran}"
    );
    assert!(
        html.contains(
            "2 passed</span>, <span class=\"\">0 failed</span>, <span>1 left local</span>"
        ),
        "{html}"
    );
    assert_eq!(html.matches("<tr class=\"scenario-row\"").count(), 2);
    assert_eq!(html.matches("<svg class=\"timeline\"").count(), 2);
    assert!(!html.contains("No step ran."));
    // A mark per request sent, each at its own time (not all at the start).
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).expect("results"))
            .expect("JSON");
    let sent: u64 = results["scenarios"]
        .as_array()
        .expect("scenarios")
        .iter()
        .filter_map(|s| s["requests"].as_u64())
        .sum();
    assert_eq!(sent, 131 + 131 + 3, "{results:#}");
    let xs: std::collections::BTreeSet<&str> = html
        .split("<rect class=\"req ")
        .skip(1)
        .filter_map(|mark| mark.split("x=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(html.matches("<rect class=\"req ").count() as u64, sent);
    assert!(
        xs.len() > 50,
        "the requests' marks are spread over time: {xs:?}"
    );
    assert_eq!(html.matches("<rect class=\"req s429\"").count(), 2);
    // The tail's fallback line, in the one lane, as a mark and in the list.
    assert_eq!(html.matches("<path class=\"fallback\"").count(), 1);
    assert!(
        html.contains("<li>Cloudflare: LIMITS_120_PER_60S missing at "),
        "{html}"
    );
    assert!(html.contains(">Cloudflare</text>"));
    // Nothing of the account's, nothing sent.
    for secret in [FAKE_TOKEN, ACCOUNT, "acct.workers.dev", "/w/"] {
        assert!(!html.contains(secret), "{secret} is on the page");
    }
    for key in ["203.0.113.7", "203.0.113.8", "caller-1", RUNNER_ADDRESS] {
        assert!(!html.contains(key), "{key} is on the page");
    }
}

/// One upload as Cloudflare's API takes it: a metadata part with
/// `main_module`, `compatibility_date` and the plan's bindings (their ids
/// from the run's base; the application and deployable as text), and a
/// typed part per module. Whether it left out LIMITS_120_PER_60S.
fn assert_upload_is_shaped_as_cloudflare_takes_it(content_type: &str, body: &[u8]) -> bool {
    assert!(
        content_type.starts_with("multipart/form-data; boundary="),
        "{content_type}"
    );
    let parts = common::parts(content_type, body);
    let metadata = common::metadata_of(&parts);
    assert_eq!(metadata["main_module"], "entry.js");
    assert_eq!(metadata["compatibility_date"], "2026-11-17");
    let bindings = metadata["bindings"].as_array().expect("bindings");
    let ratelimits: Vec<&serde_json::Value> = bindings
        .iter()
        .filter(|b| b["type"] == "ratelimit")
        .collect();
    for b in &ratelimits {
        let id: u64 = b["namespace_id"]
            .as_str()
            .expect("a string id")
            .parse()
            .expect("a number");
        assert!((900_001..900_005).contains(&id), "{b}");
        assert!(
            matches!(b["simple"]["period"].as_u64(), Some(10 | 60)),
            "{b}"
        );
    }
    let names: Vec<&str> = ratelimits
        .iter()
        .filter_map(|b| b["name"].as_str())
        .collect();
    let without_120 = !names.contains(&"LIMITS_120_PER_60S");
    if without_120 {
        assert_eq!(names, ["LIMITS_600_PER_60S"]);
    } else {
        assert_eq!(names, ["LIMITS_120_PER_60S", "LIMITS_600_PER_60S"]);
    }
    let plan = bindings
        .iter()
        .find(|b| b["name"] == "PLAN")
        .expect("the gate's plan as a text binding");
    assert_eq!(plan["type"], "plain_text");
    let plan = plan["text"].as_str().expect("text");
    assert!(
        plan.starts_with("rate-limits-plan 2\ndeployable edge\n"),
        "{plan}"
    );
    assert!(plan.contains(" 90000"), "{plan}");
    assert!(
        !bindings
            .iter()
            .any(|b| b["name"] == "APPLICATION" || b["name"] == "DEPLOYABLE"),
        "the Worker reads its plan, not the description: {bindings:?}"
    );
    let kinds: Vec<(String, Option<String>, Option<String>)> = parts[1..]
        .iter()
        .map(|p| (p.name.clone(), p.filename.clone(), p.content_type.clone()))
        .collect();
    assert_eq!(
        kinds[0],
        (
            "entry.js".into(),
            Some("entry.js".into()),
            Some("application/javascript+module".into())
        )
    );
    assert_eq!(
        kinds[1],
        (
            "deployable.js".into(),
            Some("deployable.js".into()),
            Some("application/javascript+module".into())
        )
    );
    assert_eq!(
        kinds[2],
        (
            "deployable_bg.wasm".into(),
            Some("deployable_bg.wasm".into()),
            Some("application/wasm".into())
        )
    );
    assert!(parts[3].bytes.starts_with(b"\0asm"), "the wasm is wasm");
    assert!(
        kinds[3..]
            .iter()
            .all(|(name, _, ct)| name.starts_with("snippets/")
                && ct.as_deref() == Some("application/javascript+module")),
        "{kinds:?}"
    );
    without_120
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_run_uploads_routes_tails_sends_checks_and_deletes() {
    let fake = Fake::start(130).await;
    fake.edge.lock().unwrap().health_misses = 3;
    let scenarios = scenarios_dir(SCENARIOS);
    let out = tempfile::tempdir().expect("out");
    let held = cloudflare::run_with(&request(scenarios.path(), out.path()), fake.reach())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(held, "both marked scenarios hold on the fake edge");

    let calls = fake.api_calls().await;
    let requests = fake.api.received_requests().await.unwrap_or_default();
    // The fake's side of each tail's close may come a moment after ours.
    for _ in 0..100 {
        if fake.edge.lock().unwrap().tails_closed.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Every API request carries the token, and only API requests do.
    for r in &requests {
        assert_eq!(
            r.headers.get("authorization").and_then(|v| v.to_str().ok()),
            Some(format!("Bearer {FAKE_TOKEN}").as_str()),
            "{} {}",
            r.method,
            r.url
        );
    }
    let edge = fake.edge.lock().unwrap();
    assert_eq!(
        edge.authorized_worker_requests, 0,
        "the token went to a Worker"
    );
    assert_eq!(
        calls[0],
        (
            "GET".into(),
            format!("/accounts/{ACCOUNT}/workers/subdomain")
        )
    );
    let scripts: Vec<String> = edge.uploads.keys().cloned().collect();
    assert_eq!(
        scripts.len(),
        2,
        "one Worker per marked scenario: {scripts:?}"
    );
    for script in &scripts {
        assert_script_lifecycle(&edge, &calls, script);
    }
    // The bodies of the subdomain and tail calls, as Cloudflare documents them.
    for r in &requests {
        let p = r.url.path();
        if p.ends_with("/subdomain") && r.method.as_str() == "POST" {
            assert_eq!(
                r.body_json::<serde_json::Value>().expect("JSON"),
                serde_json::json!({"enabled": true, "previews_enabled": false})
            );
        }
        if p.ends_with("/tails") {
            assert_eq!(
                r.body_json::<serde_json::Value>().expect("JSON"),
                serde_json::json!({"filters": []})
            );
        }
    }
    // The uploads, one of them without a binding.
    let without_120 = edge
        .uploads
        .values()
        .filter(|(content_type, body)| {
            assert_upload_is_shaped_as_cloudflare_takes_it(content_type, body)
        })
        .count();
    assert_eq!(without_120, 1, "the second upload omits one binding");
    // Each carries the run's marker, which `clean` reads back before a delete.
    for (script, (content_type, body)) in &edge.uploads {
        let metadata = common::metadata_of(&common::parts(content_type, body));
        let marker = metadata["bindings"]
            .as_array()
            .expect("bindings")
            .iter()
            .find(|b| b["name"] == "HARNESS_RUN")
            .unwrap_or_else(|| panic!("{script} carries no marker: {metadata}"));
        let run = script.rsplit_once('-').expect("PREFIX-xxxxxx-N").0;
        assert_eq!(
            marker,
            &serde_json::json!({"type": "plain_text", "name": "HARNESS_RUN", "text": format!("harness cloudflare run {run}")})
        );
    }
    drop(edge);

    assert_report(out.path());
    assert_report_page(out.path());
    assert_eq!(
        caught_signals() & (1 << (libc::SIGINT - 1) | 1 << (libc::SIGTERM - 1)),
        0,
        "the run took Ctrl-C or SIGTERM from the tests' process"
    );
}

/// The signals this process catches (`SigCgt` in /proc: bit N - 1 for signal N).
fn caught_signals() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix("SigCgt:"))
        .expect("a SigCgt line");
    u64::from_str_radix(mask.trim(), 16).expect("a hex mask")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bound_broken_fails_the_scenario_and_still_deletes() {
    // The fake edge never refuses: no 429 by 3 x the limit.
    let fake = Fake::start(usize::MAX).await;
    let scenarios = scenarios_dir(SCENARIOS);
    let out = tempfile::tempdir().expect("out");
    let mut req = request(scenarios.path(), out.path());
    req.filter = Some("an address".into());
    let held = cloudflare::run_with(&req, fake.reach()).await.expect("ran");
    assert!(!held);
    let results = std::fs::read_to_string(out.path().join("results.json")).expect("results");
    assert!(results.contains("no 429 in 361"), "{results}");
    assert!(results.contains("no refusal by 3 x the limit"), "{results}");
    assert_eq!(fake.edge.lock().unwrap().api_requests_to_worker, 361);
    assert_eq!(fake.deleted().await, (1, 1), "{:?}", fake.deletes().await);
}

fn panicking_judge(
    _: &harness::language::scenario::Prepared,
    _: &harness::engine::Observation,
) -> harness::judge::cloudflare::Judgement {
    panic!("a check panicked on purpose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_panic_in_a_check_still_deletes_the_tail_and_the_script() {
    let fake = Fake::start(130).await;
    let scenarios = scenarios_dir(SCENARIOS);
    let out = tempfile::tempdir().expect("out");
    let mut reach = fake.reach();
    reach.judge = panicking_judge;
    let held = cloudflare::run_with(&request(scenarios.path(), out.path()), reach)
        .await
        .expect("ran");
    assert!(!held);
    let report = std::fs::read_to_string(out.path().join("report.md")).expect("report");
    assert!(report.contains("a check panicked on purpose"), "{report}");
    assert_eq!(fake.deleted().await, (2, 2), "{:?}", fake.deletes().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_token_is_one_line_naming_the_permission_and_what_was_noted_is_deleted() {
    let fake = Fake::start(130).await;
    Mock::given(method("PUT"))
        .respond_with(api_error(403, 10000, "Authentication error"))
        .with_priority(1)
        .mount(&fake.api)
        .await;
    let scenarios = scenarios_dir(SCENARIOS);
    let out = tempfile::tempdir().expect("out");
    let error = cloudflare::run_with(&request(scenarios.path(), out.path()), fake.reach())
        .await
        .expect_err("refused");
    let text = error.to_string();
    assert!(
        matches!(
            error,
            CloudflareError::Api(ApiError::Refused { status: 403, .. })
        ),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("\"Workers Scripts: Edit\""), "{text}");
    assert!(text.contains("10000: Authentication error"), "{text}");
    assert!(!text.contains(FAKE_TOKEN));
    // The script was noted before its upload: its DELETE was sent anyway.
    assert!(
        fake.deletes()
            .await
            .iter()
            .any(|d| d.ends_with("?force=true"))
    );
}

fn api(base: &str) -> Api {
    Api::new(credentials(), base, quick_retry()).expect("client")
}

fn upload() -> harness::world::cloudflare::upload::Upload {
    use harness::world::cloudflare::upload::*;
    Upload {
        metadata: Metadata {
            main_module: "entry.js".into(),
            compatibility_date: "2026-11-17".into(),
            compatibility_flags: vec![],
            bindings: vec![Binding::Ratelimit {
                name: "LIMITS_120_PER_60S".into(),
                namespace_id: "900001".into(),
                simple: Simple {
                    limit: 120,
                    period: 60,
                },
            }],
        },
        modules: vec![Module {
            name: "entry.js".into(),
            kind: ModuleKind::EsModule,
            bytes: b"export default {}".to_vec(),
        }],
    }
}

#[tokio::test]
async fn a_429_is_retried_after_what_retry_after_asks() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .respond_with(api_error(429, 971, "Please wait").insert_header("retry-after", "1"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .respond_with(ok(serde_json::json!({"id": "s"})))
        .mount(&server)
        .await;
    let started = Instant::now();
    api(&server.uri())
        .upload("s", &upload())
        .await
        .expect("uploaded on the second attempt");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After not honoured: {:?}",
        started.elapsed()
    );
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        2
    );

    // Always 429: given up after the attempts, in one line.
    let busy = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(api_error(429, 971, "Please wait").insert_header("retry-after", "0"))
        .mount(&busy)
        .await;
    let error = api(&busy.uri())
        .account_subdomain()
        .await
        .expect_err("gave up");
    assert!(
        matches!(error, ApiError::RateLimited { attempts: 3, .. }),
        "{error}"
    );
    assert_eq!(error.to_string().lines().count(), 1);
}

#[tokio::test]
async fn a_5xx_is_retried_with_backoff_and_given_up_after_the_attempts() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(502).set_body_string("<html>bad gateway</html>"))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ok(serde_json::json!({"enabled": true})))
        .mount(&server)
        .await;
    api(&server.uri())
        .enable_subdomain("s")
        .await
        .expect("third attempt");
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        3
    );

    let down = MockServer::start().await;
    Mock::given(method("DELETE"))
        .respond_with(api_error(503, 10013, "service unavailable"))
        .mount(&down)
        .await;
    let error = api(&down.uri())
        .delete_script("s")
        .await
        .expect_err("gave up");
    let text = error.to_string();
    assert!(
        matches!(
            error,
            ApiError::ServerError {
                status: 503,
                attempts: 3,
                ..
            }
        ),
        "{text}"
    );
    assert!(
        text.contains("10013: service unavailable") && text.lines().count() == 1,
        "{text}"
    );
    assert_eq!(down.received_requests().await.unwrap_or_default().len(), 3);
}

#[tokio::test]
async fn a_connection_that_fails_is_retried_and_reported_in_one_line() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let base = format!("http://{}", closed.local_addr().expect("addr"));
    drop(closed);
    let error = api(&base)
        .account_subdomain()
        .await
        .expect_err("unreachable");
    let text = error.to_string();
    assert!(
        matches!(error, ApiError::Unreachable { attempts: 3, .. }),
        "{text}"
    );
    assert!(
        text.contains("CLOUDFLARE_API_BASE_URL") && text.lines().count() == 1,
        "{text}"
    );
    assert!(!text.contains(FAKE_TOKEN));
}

#[tokio::test]
async fn an_upload_rejected_for_a_binding_names_it_with_the_api_s_message() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .respond_with(api_error(
            400,
            10021,
            "Uncaught Error: binding LIMITS_120_PER_60S of type ratelimit: namespace_id must be\na positive integer",
        ))
        .mount(&server)
        .await;
    let error = api(&server.uri())
        .upload("s-1", &upload())
        .await
        .expect_err("rejected");
    let text = error.to_string();
    assert!(
        matches!(&error, ApiError::BindingRejected { binding, script, .. } if binding == "LIMITS_120_PER_60S" && script == "s-1"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.contains("namespace_id must be a positive integer"),
        "{text}"
    );
    // One attempt: a rejection is not retried.
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        1
    );
}

#[tokio::test]
async fn clean_deletes_the_scripts_of_runs_with_the_prefix_and_no_other() {
    let server = MockServer::start().await;
    let scripts = format!("/accounts/{ACCOUNT}/workers/scripts");
    Mock::given(method("GET"))
        .and(path(scripts.clone()))
        .respond_with(ok(serde_json::json!([
            {"id": "hrtest-abc123-1"}, {"id": "hrtest-abc123-2"}, {"id": "hrtest-prod"},
            {"id": "hrtest-abc123"}, {"id": "shop-api"}, {"id": "hrtest-zz9zz9-14"}
        ])))
        .mount(&server)
        .await;
    // Each script a run uploaded, read back with its run's marker.
    for (script, run) in [
        ("hrtest-abc123-1", "hrtest-abc123"),
        ("hrtest-abc123-2", "hrtest-abc123"),
        ("hrtest-zz9zz9-14", "hrtest-zz9zz9"),
    ] {
        Mock::given(method("GET"))
            .and(path(format!("{scripts}/{script}/settings")))
            .respond_with(ok(serde_json::json!({"bindings": [
                {"type": "plain_text", "name": "HARNESS_RUN", "text": format!("harness cloudflare run {run}")}
            ]})))
            .mount(&server)
            .await;
    }
    Mock::given(method("DELETE"))
        .respond_with(ok(serde_json::Value::Null))
        .mount(&server)
        .await;
    let cleaned = cloudflare::clean_with(&api(&server.uri()), "hrtest")
        .await
        .expect("cleaned");
    assert_eq!(
        cleaned.deleted,
        ["hrtest-abc123-1", "hrtest-abc123-2", "hrtest-zz9zz9-14"]
    );
    assert!(cleaned.kept.is_empty() && cleaned.is_complete());
    let deletes: Vec<String> = server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|r| r.method.as_str() == "DELETE")
        .map(|r| format!("{}?{}", r.url.path(), r.url.query().unwrap_or("")))
        .collect();
    assert_eq!(
        deletes,
        [
            format!("{scripts}/hrtest-abc123-1?force=true"),
            format!("{scripts}/hrtest-abc123-2?force=true"),
            format!("{scripts}/hrtest-zz9zz9-14?force=true"),
        ]
    );
}

/// An account holding the user's own `shop-worker-1`, `shop-abcdef-2`
/// and `shop-k3x9q2-17`, named as a run's script would be, beside one a
/// run with prefix `shop` really uploaded (it carries the harness's
/// marker) and one of another shape. Each look-alike's settings hold what
/// a user's might: no marker, a `HARNESS_RUN` of the user's own, and an
/// answer that is no API envelope (a proxy's page), so it cannot be read.
async fn an_account_with_look_alikes() -> MockServer {
    let server = MockServer::start().await;
    let scripts = format!("/accounts/{ACCOUNT}/workers/scripts");
    Mock::given(method("GET"))
        .and(path(scripts.clone()))
        .respond_with(ok(serde_json::json!([
            {"id": "shop-worker-1"}, {"id": "shop-abcdef-2"}, {"id": "shop-k3x9q2-17"},
            {"id": "shop-q7w2e9-1"}, {"id": "shop-api"}
        ])))
        .mount(&server)
        .await;
    let settings = |bindings: serde_json::Value| {
        ok(serde_json::json!({
            "bindings": bindings, "compatibility_date": "2026-11-17", "compatibility_flags": []
        }))
    };
    let answers = [
        (
            "shop-worker-1",
            settings(serde_json::json!([
                {"type": "plain_text", "name": "PLAN", "text": "the user's own"},
                {"type": "kv_namespace", "name": "CART", "namespace_id": "0f2a"}
            ])),
        ),
        (
            "shop-abcdef-2",
            settings(serde_json::json!([
                {"type": "plain_text", "name": "HARNESS_RUN", "text": "checkout, run 2"}
            ])),
        ),
        (
            "shop-k3x9q2-17",
            ResponseTemplate::new(200).set_body_string("<html>down for maintenance</html>"),
        ),
        (
            "shop-q7w2e9-1",
            settings(serde_json::json!([
                {"type": "ratelimit", "name": "LIMITS_120_PER_60S", "namespace_id": "900001",
                 "simple": {"limit": 120, "period": 60}},
                {"type": "plain_text", "name": "PLAN", "text": "rate-limits-plan 2\n"},
                {"type": "plain_text", "name": "HARNESS_RUN",
                 "text": "harness cloudflare run shop-q7w2e9"}
            ])),
        ),
    ];
    for (script, answer) in answers {
        Mock::given(method("GET"))
            .and(path(format!("{scripts}/{script}/settings")))
            .respond_with(answer)
            .mount(&server)
            .await;
        Mock::given(method("DELETE"))
            .and(path(format!("{scripts}/{script}")))
            .respond_with(ok(serde_json::Value::Null))
            .expect(u64::from(script == "shop-q7w2e9-1"))
            .named(format!("DELETE {script}"))
            .mount(&server)
            .await;
    }
    server
}

/// `clean --prefix shop` once deleted every script named
/// `shop-<6 letters or digits>-<digits>`, the user's own with them. Only
/// the one carrying the harness's marker is deleted; the look-alikes are
/// listed as kept, with why.
#[tokio::test]
async fn clean_deletes_no_look_alike_and_lists_each_as_kept() {
    let server = an_account_with_look_alikes().await;
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["cloudflare", "clean", "--prefix", "shop"])
        .env("CLOUDFLARE_API_TOKEN", FAKE_TOKEN)
        .env("CLOUDFLARE_ACCOUNT_ID", ACCOUNT)
        .env("CLOUDFLARE_API_BASE_URL", server.uri())
        .kill_on_drop(true)
        .output()
        .await
        .expect("harness runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Every DELETE but the run's own is `expect(0)`.
    server.verify().await;
    assert!(stdout.contains("deleted script shop-q7w2e9-1"), "{stdout}");
    for kept in [
        "kept script shop-worker-1: not a run's (no HARNESS_RUN binding)",
        "kept script shop-abcdef-2: not a run's (its HARNESS_RUN binding is not the harness's marker for it)",
        "kept script shop-k3x9q2-17: could not verify",
    ] {
        assert!(stdout.contains(kept), "{kept:?} in:\n{stdout}");
    }
    assert!(!stdout.contains("shop-api"), "{stdout}");
    // A script left unverified is not a clean account: exit 1, not 0.
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(!contains(&output.stdout, FAKE_TOKEN) && !contains(&output.stderr, FAKE_TOKEN));
}

/// [`cloudflare::clean_with`]'s own account of it: what it deleted, and
/// each look-alike kept with why.
#[tokio::test]
async fn clean_keeps_what_carries_no_marker_and_what_it_cannot_verify() {
    use harness::commands::cloudflare::Kept;
    let server = an_account_with_look_alikes().await;
    let cleaned = cloudflare::clean_with(&api(&server.uri()), "shop")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    server.verify().await;
    assert_eq!(cleaned.deleted, ["shop-q7w2e9-1"]);
    let kept: Vec<(&str, &Kept)> = cleaned
        .kept
        .iter()
        .map(|k| (k.script.as_str(), &k.why))
        .collect();
    assert!(
        matches!(
            kept.as_slice(),
            [
                ("shop-worker-1", Kept::NoMarker),
                ("shop-abcdef-2", Kept::OtherMarker),
                (
                    "shop-k3x9q2-17",
                    Kept::Unverified(ApiError::Unexpected { .. })
                ),
            ]
        ),
        "{kept:?}"
    );
    assert!(!cleaned.is_complete());
}

fn repo() -> PathBuf {
    harness::world::paths::repo_root()
}

/// The ratelimit bindings of wrangler's upload body.
fn wrangler_bindings(body: &[u8]) -> Vec<serde_json::Value> {
    common::wrangler_upload_metadata(body)["bindings"]
        .as_array()
        .expect("bindings")
        .iter()
        .filter(|b| b["type"] == "ratelimit")
        .cloned()
        .collect()
}

#[tokio::test]
async fn the_dry_run_s_bindings_are_wranglers_own_binding_for_binding() {
    let fixture = repo().join("tools/fixtures/cloudflare");
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(
        dir.path().join("wrangler-example.toml"),
        format!(
            "application = {:?}\ndeployable = \"api\"\n\n[[scenario]]\nname = \"the fixture's Worker\"\non_cloudflare = \"exact\"\n\n[[scenario.steps]]\nsend = {{ requests = 1, path = \"/api/login\" }}\n",
            fixture.join("application.toml").display().to_string()
        ),
    )
    .expect("scenario");
    let out = tempfile::tempdir().expect("out");
    let mut req = request(dir.path(), out.path());
    // The fixture's connection is numbered from 7, as wrangler's body has it.
    req.namespace_base = 7;
    req.dry_run = true;
    // No network, no credentials: the reach points nowhere.
    let reach = Reach {
        credentials: None,
        base_url: "http://127.0.0.1:9".into(),
        interrupted: never_interrupted,
        ..Reach::from_env()
    };
    assert!(
        cloudflare::run_with(&req, reach)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    );
    let folder = std::fs::read_dir(out.path())
        .expect("out")
        .map(|e| e.expect("entry").path())
        .find(|p| p.is_dir())
        .expect("a scenario folder");
    let content_type =
        std::fs::read_to_string(folder.join("content-type.txt")).expect("content type");
    let body = std::fs::read(folder.join("upload.multipart")).expect("body");
    let ours: Vec<serde_json::Value> =
        common::metadata_of(&common::parts(content_type.trim(), &body))["bindings"]
            .as_array()
            .expect("bindings")
            .iter()
            .filter(|b| b["type"] == "ratelimit")
            .cloned()
            .collect();
    let bindings_json: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(folder.join("bindings.json")).expect("bindings.json"),
    )
    .expect("JSON");
    assert_eq!(
        bindings_json
            .iter()
            .filter(|b| b["type"] == "ratelimit")
            .cloned()
            .collect::<Vec<_>>(),
        ours
    );
    let wranglers = wrangler_bindings(
        &std::fs::read(fixture.join("wrangler-4.164.0-upload.multipart")).expect("fixture"),
    );
    assert_eq!(wranglers.len(), 4);
    assert_eq!(ours, wranglers, "binding for binding, in order");

    // Wrangler itself, when a Node.js it runs on is here (never needed to pass).
    let wrangler = common::wrangler_dir().join("node_modules/wrangler");
    match common::node_22() {
        Ok(node) if wrangler.join("bin/wrangler.js").is_file() => {
            let work = tempfile::tempdir().expect("work");
            let home = tempfile::tempdir().expect("wrangler's home");
            for file in ["wrangler.jsonc", "worker.js"] {
                std::fs::copy(fixture.join(file), work.path().join(file)).expect("copy");
            }
            let output = common::wrangler_command(&node, &wrangler, work.path(), home.path())
                .args(["deploy", "--dry-run", "--outfile", "fresh.multipart"])
                .output()
                .expect("wrangler runs");
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
            let fresh = wrangler_bindings(
                &std::fs::read(work.path().join("fresh.multipart")).expect("fresh body"),
            );
            assert_eq!(ours, fresh, "wrangler 4.164 today, binding for binding");
        }
        Ok(_) => eprintln!(
            "wrangler's body not made afresh: it needs `npm ci` in tools/fixtures/wrangler; compared with the checked-in body"
        ),
        Err(why) => {
            eprintln!("wrangler's body not made afresh: {why}; compared with the checked-in body")
        }
    }
}

/// Every file under `dir`, read.
fn files_under(dir: &Path, found: &mut Vec<(PathBuf, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).expect("dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files_under(&path, found);
        } else {
            found.push((path.clone(), std::fs::read(&path).expect("file")));
        }
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// The harness binary with the fake's reach in its environment.
fn harness_command(fake: &Fake, token: Option<&str>) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_harness"));
    command
        .env_remove("CLOUDFLARE_API_TOKEN")
        .env_remove("CLOUDFLARE_ACCOUNT_ID")
        .env("CLOUDFLARE_API_BASE_URL", fake.api.uri())
        .env("HARNESS_WORKERS_DEV_URL", fake.url_template())
        .kill_on_drop(true);
    if let Some(token) = token {
        command
            .env("CLOUDFLARE_API_TOKEN", token)
            .env("CLOUDFLARE_ACCOUNT_ID", ACCOUNT);
    }
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fake_token_appears_in_no_output_of_a_full_run() {
    let fake = Fake::start(130).await;
    let scenarios = scenarios_dir(SCENARIOS);
    let out = tempfile::tempdir().expect("out");
    let mut outputs: Vec<(String, Vec<u8>)> = Vec::new();
    // A full run, a failing one (the token refused), `clean`, a dry run.
    let run = |args: Vec<String>, token: Option<&'static str>| {
        let mut command = harness_command(&fake, token);
        command.args(args);
        async move { command.output().await.expect("harness runs") }
    };
    let base = |out: &Path| {
        vec![
            "cloudflare".to_owned(),
            "--scenarios".to_owned(),
            scenarios.path().display().to_string(),
            "--namespace-base".to_owned(),
            "900001".to_owned(),
            "--prefix".to_owned(),
            "hrtest".to_owned(),
            "--out".to_owned(),
            out.display().to_string(),
        ]
    };
    let full = run(base(&out.path().join("full")), Some(FAKE_TOKEN)).await;
    assert_eq!(
        full.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&full.stderr)
    );
    let stdout = String::from_utf8_lossy(&full.stdout);
    assert!(
        stdout.contains("on Cloudflare") && stdout.contains("2 passed, 0 failed"),
        "{stdout}"
    );
    outputs.push(("full run".into(), [full.stdout, full.stderr].concat()));

    let mut dry = base(&out.path().join("dry"));
    dry.push("--dry-run".into());
    let dry = run(dry, Some(FAKE_TOKEN)).await;
    assert_eq!(
        dry.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    outputs.push(("dry run".into(), [dry.stdout, dry.stderr].concat()));

    let clean = run(
        vec![
            "cloudflare".into(),
            "clean".into(),
            "--prefix".into(),
            "hrtest".into(),
        ],
        Some(FAKE_TOKEN),
    )
    .await;
    outputs.push(("clean".into(), [clean.stdout, clean.stderr].concat()));

    Mock::given(method("GET"))
        .respond_with(api_error(401, 10001, "Unable to authenticate request"))
        .with_priority(1)
        .mount(&fake.api)
        .await;
    let refused = run(base(&out.path().join("refused")), Some(FAKE_TOKEN)).await;
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("\"Workers Scripts: Edit\""), "{stderr}");
    outputs.push((
        "refused run".into(),
        [refused.stdout, refused.stderr].concat(),
    ));

    let mut written = Vec::new();
    files_under(out.path(), &mut written);
    assert!(
        written.iter().any(|(p, _)| p.ends_with("junit.xml")),
        "{written:?}"
    );
    assert!(written.iter().any(|(p, _)| p.ends_with("upload.multipart")));
    for (path, bytes) in written {
        outputs.push((path.display().to_string(), bytes));
    }
    for (what, bytes) in &outputs {
        assert!(!contains(bytes, FAKE_TOKEN), "the token is in {what}");
        assert!(
            !contains(bytes, &FAKE_TOKEN[5..25]),
            "part of the token is in {what}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_missing_variable_is_one_line_naming_it_and_the_permission() {
    let fake = Fake::start(130).await;
    let scenarios = scenarios_dir(SCENARIOS);
    let output = harness_command(&fake, None)
        .args(["cloudflare", "--namespace-base", "900001", "--scenarios"])
        .arg(scenarios.path())
        .output()
        .await
        .expect("harness runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("harness: CLOUDFLARE_API_TOKEN is not set"),
        "{stderr}"
    );
    assert!(stderr.contains("\"Workers Scripts: Edit\""), "{stderr}");
    assert!(
        fake.api_calls().await.is_empty(),
        "nothing was asked of the API"
    );
}

/// Stops a mocked run with `signal` once traffic flows: it exits 130,
/// saying so, and the tail and the script are deleted.
async fn a_signal_mid_run_deletes_the_tail_and_the_script(
    signal: nix::sys::signal::Signal,
    named: &str,
) {
    let fake = Fake::start(usize::MAX).await;
    fake.edge.lock().unwrap().delay = Duration::from_millis(20);
    let scenarios = scenarios_dir(
        r#"application = "apps/app.toml"
deployable = "edge"

[[scenario]]
name = "a long one"
on_cloudflare = "exact"

[[scenario.steps]]
send = { requests = 2000, caller = "caller-long", spacing_ms = 20 }
expect = { statuses = "2000 x 200" }
"#,
    );
    let out = tempfile::tempdir().expect("out");
    let child = harness_command(&fake, Some(FAKE_TOKEN))
        .args([
            "cloudflare",
            "--namespace-base",
            "900001",
            "--prefix",
            "hrtest",
            "--scenarios",
        ])
        .arg(scenarios.path())
        .arg("--out")
        .arg(out.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("harness starts");
    let started = Instant::now();
    while fake.edge.lock().unwrap().api_requests_to_worker < 5 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no traffic reached the Worker"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = nix::unistd::Pid::from_raw(child.id().expect("running") as i32);
    nix::sys::signal::kill(pid, signal).expect("signal");
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("it exits")
        .expect("output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "interrupted ({named}): everything the run created on Cloudflare is deleted"
        )),
        "{stderr}"
    );
    assert_eq!(fake.deleted().await, (1, 1), "{:?}", fake.deletes().await);
    assert!(fake.edge.lock().unwrap().api_requests_to_worker < 2000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ctrl_c_mid_run_deletes_the_tail_and_the_script() {
    a_signal_mid_run_deletes_the_tail_and_the_script(nix::sys::signal::Signal::SIGINT, "Ctrl-C")
        .await;
}

/// A CI job's cancel: SIGTERM, as Ctrl-C.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_mid_run_deletes_the_tail_and_the_script() {
    a_signal_mid_run_deletes_the_tail_and_the_script(nix::sys::signal::Signal::SIGTERM, "SIGTERM")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tail_that_cannot_be_reached_fails_the_scenario_and_still_deletes() {
    let fake = Fake::start(130).await;
    // The API hands out a tail nothing listens at.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    Mock::given(method("POST"))
        .and(path_regex("/tails$"))
        .respond_with(TailResponder(port))
        .with_priority(1)
        .mount(&fake.api)
        .await;
    let scenarios = scenarios_dir(SCENARIOS);
    let out = tempfile::tempdir().expect("out");
    let mut req = request(scenarios.path(), out.path());
    req.filter = Some("an address".into());
    let held = cloudflare::run_with(&req, fake.reach()).await.expect("ran");
    assert!(!held);
    let report = std::fs::read_to_string(out.path().join("report.md")).expect("report");
    assert!(report.contains("cannot connect to the tail"), "{report}");
    assert_eq!(fake.edge.lock().unwrap().api_requests_to_worker, 0);
    assert_eq!(fake.deleted().await, (1, 1), "{:?}", fake.deletes().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dry_run_on_the_corpus_writes_every_upload_and_the_plan() {
    let out = tempfile::tempdir().expect("out");
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_harness"))
        .args([
            "cloudflare",
            "--dry-run",
            "--namespace-base",
            "900001",
            "--out",
        ])
        .arg(out.path())
        .env("CLOUDFLARE_API_BASE_URL", "http://127.0.0.1:9")
        .output()
        .await
        .expect("harness runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let plan: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("traffic.json")).expect("plan"),
    )
    .expect("JSON");
    let scenarios = plan["scenarios"].as_array().expect("scenarios");
    assert!(scenarios.len() >= 5, "{plan:#}");
    let mut ids = Vec::new();
    for (number, s) in scenarios.iter().enumerate() {
        let script = s["script"].as_str().expect("script");
        let folder = out.path().join(format!("{:02}-{script}", number + 1));
        let content_type =
            std::fs::read_to_string(folder.join("content-type.txt")).expect("content type");
        let body = std::fs::read(folder.join("upload.multipart")).expect("body");
        let metadata = common::metadata_of(&common::parts(content_type.trim(), &body));
        for b in metadata["bindings"].as_array().expect("bindings") {
            if b["type"] == "ratelimit" {
                ids.push(
                    b["namespace_id"]
                        .as_str()
                        .expect("id")
                        .parse::<u64>()
                        .expect("number"),
                );
            }
        }
        assert!(s["steps"].as_array().is_some_and(|steps| !steps.is_empty()));
    }
    // Every binding of the run has a namespace of its own, from the base up.
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len(), "shared namespace ids: {ids:?}");
    assert_eq!(sorted.first(), Some(&900_001));
    assert!(plan["left_out"].as_object().is_some_and(|l| !l.is_empty()));
    assert!(out.path().join("traffic.md").is_file());
}
