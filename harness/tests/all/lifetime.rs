//! No workerd outlives the harness: after a failing run, a panic while
//! workerd runs, SIGINT in the middle of a run, and SIGKILL of the harness.
//!
//! Each test marks the processes it starts with an environment variable of
//! its own and looks for workerd processes carrying it in /proc. Each starts
//! the harness as a script's background job starts it: with SIGINT ignored
//! ([`harness_command`]), so a SIGINT test proves the harness stops on Ctrl-C
//! however it was started, not only from a terminal.

use crate::common;

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use harness::world::proc;
use harness::world::workerd::WorkerdProcess;
use harness::world::workerd::config::{BindingCounter, IsolateConfig, write_config};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const MARKER: &str = "HARNESS_LIFETIME_MARK";

fn marked_workerds(mark: &str) -> Vec<u32> {
    common::marked_workerds(MARKER, mark)
}

fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

/// How long a harness under test may take to start its scenario's
/// processes: it builds the Workers or `native-fixture` first, which on a
/// fresh target directory and a loaded 2-core machine takes minutes (a
/// 60 s wait once ran out while the fixture was still building).
const START_TIMEOUT: Duration = Duration::from_secs(900);

/// Waits until `started` holds, or fails the test at once with the
/// harness's output if it ended before that.
fn wait_for_start(harness: &mut Harness, what: &str, mut started: impl FnMut() -> bool) {
    let begin = Instant::now();
    while begin.elapsed() < START_TIMEOUT {
        if started() {
            return;
        }
        if let Some(status) = harness.0.try_wait().expect("harness status") {
            let mut output = String::new();
            if let Some(mut stdout) = harness.0.stdout.take() {
                let _ = stdout.read_to_string(&mut output);
            }
            if let Some(mut stderr) = harness.0.stderr.take() {
                let _ = stderr.read_to_string(&mut output);
            }
            panic!("the harness ended ({status}) before {what} started:\n{output}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what} did not start within {START_TIMEOUT:?}");
}

const APP: &str = common::WORKERS_API;

fn scenario_dir(steps: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = format!(
        "[[scenario]]\nname = \"lifetime\"\nisolates = 2\napplication_inline = '''{APP}'''\n{steps}"
    );
    std::fs::write(dir.path().join("lifetime.toml"), file).expect("write scenario");
    dir
}

/// The harness under test; killed if the test fails before it ends.
struct Harness(Child);

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Two isolates and the count server.
const PROCESSES: usize = 3;

/// The harness, started with SIGINT ignored, as a shell without job control
/// starts a background command (`cargo test ... &` in a CI script): `trap ''
/// INT` ignores it, and an ignored signal stays ignored across `exec`. The
/// process signalled is the harness itself (`exec` keeps the shell's pid).
fn harness_command() -> Command {
    let mut command = Command::new("sh");
    command
        .args(["-c", "trap '' INT; exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_harness"));
    command
}

fn harness_run(dir: &Path, mark: &str) -> Child {
    harness_command()
        .args(["run", "--scenarios"])
        .arg(dir)
        .env(MARKER, mark)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("harness starts")
}

#[test]
fn a_failing_run_leaves_no_workerd() {
    let mark = "failing-run";
    let dir = scenario_dir(
        "[[scenario.steps]]\nsend = { requests = 3, address = \"192.0.2.1\" }\nexpect = { statuses = \"3 x 429\" }\n",
    );
    let output = harness_run(dir.path(), mark)
        .wait_with_output()
        .expect("harness ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(1),
        "the scenario fails:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("0 passed, 1 failed"), "{stdout}");
    assert_eq!(marked_workerds(mark), Vec::<u32>::new());
}

/// Signals the harness while its scenario sleeps with every workerd up, and
/// checks that none of them outlives it.
fn signal_mid_run_leaves_no_workerd(mark: &str, signal: Signal) {
    // Signalled during the sleep: the send after it (what the scenario judges) never comes.
    let dir = scenario_dir(
        "[[scenario.steps]]\nsleep_ms = 60000\n[[scenario.steps]]\nsend = { requests = 1 }\n",
    );
    let mut harness = Harness(harness_run(dir.path(), mark));
    wait_for_start(&mut harness, "its workerds", || {
        marked_workerds(mark).len() == PROCESSES
    });
    kill(Pid::from_raw(harness.0.id() as i32), signal).expect("signal sent");
    let status = harness.0.wait().expect("harness ends");
    assert_ended(status, signal, Ending::KilledBySignal);
    assert!(
        wait_until(Duration::from_secs(5), || marked_workerds(mark).is_empty()),
        "{:?}",
        marked_workerds(mark)
    );
}

#[test]
fn sigint_in_the_middle_leaves_no_workerd() {
    signal_mid_run_leaves_no_workerd("sigint", Signal::SIGINT);
}

#[test]
fn sigkill_of_the_harness_leaves_no_workerd() {
    signal_mid_run_leaves_no_workerd("sigkill", Signal::SIGKILL);
}

#[test]
fn a_panic_while_workerd_runs_leaves_no_workerd() {
    let env = harness::commands::suite::prepare_environment().expect("environment");
    let dir = tempfile::tempdir().expect("temp dir");
    let app = runtime::Application::from_toml(APP).expect("a valid application");
    let plan = runtime::GatePlan::new(&app, "edge")
        .expect("edge")
        .to_text()
        .expect("a Workers plan");
    let config = IsolateConfig {
        plan: &plan,
        bindings: &[],
        compatibility_date: &env.workerd.version,
        control_token: "t",
        counter: BindingCounter::InIsolate,
        data_points: None,
        limiting_off: false,
    };
    let path = write_config(dir.path(), &config, &env.deployable).expect("config");
    let (pid_tx, pid_rx) = std::sync::mpsc::channel();
    let workerd = env.workerd.path.clone();
    let joined = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let process = WorkerdProcess::start(&workerd, &path, Instant::now())
                .await
                .expect("workerd starts");
            let config = path.display().to_string();
            let pid = proc::pids()
                .into_iter()
                .find(|pid| proc::arguments(*pid).iter().any(|a| a.contains(&config)))
                .expect("the workerd is running");
            pid_tx.send(pid).expect("send pid");
            let _keep = process;
            panic!("a check panicked while workerd was running");
        })
    })
    .join();
    assert!(joined.is_err(), "the thread panicked");
    let pid = pid_rx.recv().expect("pid");
    assert!(
        wait_until(Duration::from_secs(5), || proc::gone(pid)),
        "workerd {pid} outlived the panic"
    );
}

const NATIVE_APP: &str = r#"
name = "shop"

[connections.cache]
driver = "redis"
url = "redis://127.0.0.1:1"

[rate_limits]
store = "cache"

[[deployables]]
name = "server"
target = "native"
serves_api = true
"#;

/// Starts `harness native` with a redis-server and two native instances,
/// signals the harness once all three are announced, and checks that none outlives it.
fn signal_leaves_no_redis_or_native_instance(signal: Signal) {
    use std::io::BufRead;
    let dir = tempfile::tempdir().expect("temp dir");
    let app = dir.path().join("app.toml");
    std::fs::write(&app, NATIVE_APP).expect("write app");
    let mut harness = Harness(
        harness_command()
            .arg("native")
            .arg(&app)
            .args(["server", "--instances", "2", "--redis"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("harness starts"),
    );
    let stdout = harness.0.stdout.take().expect("stdout");
    let mut pids = Vec::new();
    for line in std::io::BufReader::new(stdout).lines().take(3) {
        let line = line.expect("a line");
        let announced: serde_json::Value = serde_json::from_str(&line).expect("json");
        pids.push(announced["pid"].as_u64().expect("a pid") as u32);
    }
    assert_eq!(pids.len(), 3, "redis-server and two instances announced");
    assert!(pids.iter().all(|pid| !proc::gone(*pid)));
    signal_and_expect_gone(&mut harness, signal, Ending::StopsOnCtrlC, &pids);
}

/// How a signalled harness must end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Killed by the signal itself (`harness run` has no handler).
    KilledBySignal,
    /// SIGINT is Ctrl-C, which `harness native` waits for: it stops its
    /// processes and exits 0. SIGKILL still kills it.
    StopsOnCtrlC,
}

fn assert_ended(status: std::process::ExitStatus, signal: Signal, ending: Ending) {
    use std::os::unix::process::ExitStatusExt;
    if ending == Ending::StopsOnCtrlC && signal == Signal::SIGINT {
        assert_eq!(status.code(), Some(0), "a clean stop on Ctrl-C: {status:?}");
    } else {
        assert_eq!(
            status.signal(),
            Some(signal as i32),
            "killed by {signal}: {status:?}"
        );
    }
}

/// Signals the harness, checks how it ended, and that none of `pids` outlives it.
fn signal_and_expect_gone(harness: &mut Harness, signal: Signal, ending: Ending, pids: &[u32]) {
    kill(Pid::from_raw(harness.0.id() as i32), signal).expect("signal sent");
    let status = harness.0.wait().expect("harness ends");
    assert_ended(status, signal, ending);
    assert!(
        wait_until(Duration::from_secs(5), || pids
            .iter()
            .all(|pid| proc::gone(*pid))),
        "outlived the harness: {:?}",
        pids.iter()
            .filter(|pid| !proc::gone(**pid))
            .collect::<Vec<_>>()
    );
}

#[test]
fn sigkill_of_the_harness_leaves_no_redis_or_native_instance() {
    signal_leaves_no_redis_or_native_instance(Signal::SIGKILL);
}

#[test]
fn sigint_of_the_harness_leaves_no_redis_or_native_instance() {
    signal_leaves_no_redis_or_native_instance(Signal::SIGINT);
}

#[test]
fn a_panic_while_redis_runs_leaves_no_redis_server() {
    let (pid_tx, pid_rx) = std::sync::mpsc::channel();
    let joined = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let server = harness::world::redis::RedisServer::start()
                .await
                .expect("redis-server");
            pid_tx.send(server.pid().expect("a pid")).expect("send pid");
            let _keep = server;
            panic!("a check panicked while redis-server was running");
        })
    })
    .join();
    assert!(joined.is_err(), "the thread panicked");
    let pid = pid_rx.recv().expect("pid");
    assert!(
        wait_until(Duration::from_secs(5), || proc::gone(pid)),
        "redis-server {pid} outlived the panic"
    );
}

/// A native scenario's redis-server and instances, as `harness run` starts
/// them, die with the harness too.
fn native_scenario_signalled_leaves_nothing(mark: &str, signal: Signal) {
    let dir = tempfile::tempdir().expect("temp dir");
    let app = common::native_redis_app("url = \"redis://127.0.0.1:1\"");
    std::fs::write(
        dir.path().join("native.toml"),
        format!(
            "[[scenario]]\nname = \"native lifetime\"\nisolates = 2\ndeployable = \"api\"\napplication_inline = \'\'\'{app}\'\'\'\n[[scenario.steps]]\nsleep_ms = 60000\n[[scenario.steps]]\nsend = {{ requests = 1 }}\n"
        ),
    )
    .expect("write scenario");
    let mut harness = Harness(harness_run(dir.path(), mark));
    let parent = harness.0.id();
    let mut pids = Vec::new();
    wait_for_start(
        &mut harness,
        "redis-server and two native instances",
        || {
            pids = common::children_named(parent, "redis-server");
            pids.extend(common::children_named(parent, "native-fixture"));
            pids.len() == 3
        },
    );
    signal_and_expect_gone(&mut harness, signal, Ending::KilledBySignal, &pids);
}

#[test]
fn sigkill_mid_native_scenario_leaves_no_redis_or_native_instance() {
    native_scenario_signalled_leaves_nothing("native-sigkill", Signal::SIGKILL);
}

#[test]
fn sigint_mid_native_scenario_leaves_no_redis_or_native_instance() {
    native_scenario_signalled_leaves_nothing("native-sigint", Signal::SIGINT);
}

/// The environment a process started with, as `NAME=value` entries.
fn environment_of(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|bytes| {
            bytes
                .split(|b| *b == 0)
                .map(|entry| String::from_utf8_lossy(entry).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// No child of the harness inherits the Cloudflare credentials, and the
/// native fixture's control token is in its environment (readable by its
/// owner only), never its argv (`/proc/PID/cmdline`, readable by everyone).
#[test]
fn children_get_no_cloudflare_credentials_and_no_token_in_their_argv() {
    let token_canary = "cloudflare-token-canary-7f3a";
    let account_canary = "cloudflare-account-canary-91c2";
    let dir = tempfile::tempdir().expect("temp dir");
    let app = common::native_redis_app("url = \"redis://127.0.0.1:1\"");
    std::fs::write(
        dir.path().join("native.toml"),
        format!(
            "[[scenario]]\nname = \"native secrets\"\nisolates = 2\ndeployable = \"api\"\napplication_inline = \'\'\'{app}\'\'\'\n[[scenario.steps]]\nsleep_ms = 60000\n[[scenario.steps]]\nsend = {{ requests = 1 }}\n"
        ),
    )
    .expect("write scenario");
    let child = harness_command()
        .args(["run", "--scenarios"])
        .arg(dir.path())
        .env(MARKER, "secrets")
        .env("CLOUDFLARE_API_TOKEN", token_canary)
        .env("CLOUDFLARE_ACCOUNT_ID", account_canary)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("harness starts");
    let mut harness = Harness(child);
    let parent = harness.0.id();
    let (mut redis, mut fixtures) = (Vec::new(), Vec::new());
    wait_for_start(
        &mut harness,
        "redis-server and two native instances",
        || {
            redis = common::children_named(parent, "redis-server");
            fixtures = common::children_named(parent, "native-fixture");
            redis.len() == 1 && fixtures.len() == 2
        },
    );
    for pid in redis.iter().chain(&fixtures) {
        let environment = environment_of(*pid).join("\n");
        assert!(
            !environment.contains(token_canary) && !environment.contains(account_canary),
            "process {pid} inherited a Cloudflare credential"
        );
    }
    for pid in &fixtures {
        let token = environment_of(*pid)
            .into_iter()
            .find_map(|entry| {
                entry
                    .strip_prefix(&format!("{}=", harness::world::native::CONTROL_TOKEN_VAR))
                    .map(str::to_owned)
            })
            .expect("the control token in the fixture's environment");
        assert!(!token.is_empty(), "a control token");
        let argv = std::fs::read(format!("/proc/{pid}/cmdline")).expect("argv");
        let argv = String::from_utf8_lossy(&argv);
        assert!(
            !argv.contains(&token),
            "the control token is on the fixture's argv"
        );
    }
}
