//! workerd refusing its config, or dying mid-scenario, is reported as such,
//! with its stderr, and not as a timeout.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use harness::world::workerd::WorkerdProcess;
use harness::world::workerd::process::ProcessError;

#[test]
fn a_refused_config_is_reported_with_workerds_stderr() {
    let env = harness::commands::suite::prepare_environment().expect("environment");
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.capnp");
    std::fs::write(&config, "using Workerd = import \"/workerd/workerd.capnp\";\nconst config :Workerd.Config = (servicez = []);\n")
        .expect("write");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let started = Instant::now();
    let result = runtime.block_on(WorkerdProcess::start(
        &env.workerd.path,
        &config,
        Instant::now(),
    ));
    match result {
        Err(ProcessError::ExitedBeforeListening { status, stderr }) => {
            assert!(status.contains("exit status"), "{status}");
            assert!(stderr.contains("servicez"), "workerd's own words: {stderr}");
        }
        Err(other) => panic!("not reported as a refused config: {other}"),
        Ok(_) => panic!("workerd accepted a broken config"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "not a timeout: {:?}",
        started.elapsed()
    );
}

#[test]
fn workerd_dying_mid_scenario_is_reported_as_a_crash() {
    let mark = "crash-mid-scenario";
    let dir = tempfile::tempdir().expect("temp dir");
    let scenarios = dir.path().join("scenarios");
    std::fs::create_dir(&scenarios).expect("dir");
    std::fs::write(
        scenarios.join("crash.toml"),
        r#"[[scenario]]
name = "crash"
application_inline = '''
[[deployables]]
name = "site"
target = "workers"
serves_api = false
'''
deployable = "site"

[[scenario.steps]]
sleep_ms = 6000

[[scenario.steps]]
send = { requests = 2, path = "/health" }
"#,
    )
    .expect("write");
    let child = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["run", "--scenarios"])
        .arg(&scenarios)
        .env("HARNESS_CRASH_MARK", mark)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("harness starts");
    // Kill the isolate's workerd while the scenario sleeps.
    let deadline = Instant::now() + Duration::from_secs(120);
    let victim = loop {
        if let Some(pid) = marked_workerd(mark) {
            break pid;
        }
        assert!(Instant::now() < deadline, "workerd never started");
        std::thread::sleep(Duration::from_millis(50));
    };
    // Long enough for it to listen on a loaded machine (seconds, under
    // stress), and well inside the scenario's sleep.
    std::thread::sleep(Duration::from_millis(2500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(victim as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill workerd");
    let output = child.wait_with_output().expect("harness ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("exited mid-scenario"), "{stdout}");
    assert!(
        stdout.contains("signal: 9"),
        "the exit status is named: {stdout}"
    );
    assert!(!stdout.contains("timed out"), "{stdout}");
}

fn marked_workerd(mark: &str) -> Option<u32> {
    common::marked_workerds("HARNESS_CRASH_MARK", mark)
        .first()
        .copied()
}
