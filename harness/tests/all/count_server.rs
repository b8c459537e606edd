//! The run's count server (`harness::world::workerd::count_server`) keeps each scenario in
//! a scope of its own: scenarios counting the same key in the same minute of
//! scenario time, at the same time, never see each other's counts.

use crate::common;

use std::process::Command;

const MARKER: &str = "HARNESS_SHARED_STORE_MARK";

#[test]
fn scenarios_sharing_the_runs_store_never_see_each_others_counts() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Two isolates each, so every one of them counts in the run's store; the
    // same address, and each starts at the beginning of a minute of scenario
    // time: one count without scopes, and all but the first 120 requests of
    // the four scenarios would be refused.
    let mut file = String::new();
    for n in 1..=4 {
        file.push_str(&format!(
            "[[scenario]]\nname = \"scope {n}\"\nisolates = 2\napplication_inline = '''{app}'''\n\
             [[scenario.steps]]\nsend = {{ requests = 121, address = \"198.51.100.99\" }}\n\
             expect = {{ statuses = \"120 x 200 then 429\" }}\n\n",
            app = common::WORKERS_API
        ));
    }
    std::fs::write(dir.path().join("scopes.toml"), file).expect("write scenarios");
    let output = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["run", "--jobs", "2", "--scenarios"])
        .arg(dir.path())
        .env(MARKER, "scopes")
        .output()
        .expect("harness runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("4 passed, 0 failed"),
        "{stdout}\n{stderr}"
    );
    assert_eq!(
        common::marked_workerds(MARKER, "scopes"),
        Vec::<u32>::new(),
        "the run's store is gone with the harness"
    );
}
