//! The reference process on its own: Cloudflare's simulator, loaded from the
//! pinned miniflare in `node_modules` and run in the pinned workerd as
//! miniflare wires it, counts per namespace and key with a fresh storage, and
//! its windows follow the scenario clock the harness sets.

use std::time::Instant;

use harness::world::paths::pinned_workerd_dir;
use harness::world::workerd::WorkerdProcess;
use harness::world::workerd::reference::{STORE_FLAGS, Simulator, fresh_storage};
use harness::world::workerd::{WorkerdChoice, find_workerd};

/// `POST /clock`, as the engine sets the scenario clock of every process.
async fn set_clock(client: &reqwest::Client, base: &str, offset_ms: i64) {
    let response = client
        .post(format!("{base}/clock"))
        .json(&serde_json::json!({ "offset_ms": offset_ms }))
        .send()
        .await
        .expect("the reference answers");
    assert!(response.status().is_success(), "{response:?}");
}

async fn limit(client: &reqwest::Client, base: &str, namespace: &str, key: &str) -> bool {
    let answer: serde_json::Value = client
        .post(format!("{base}/limit"))
        .header("MF-Namespace", namespace)
        .json(&serde_json::json!({ "key": key, "limit": 2, "period": 60, "delta": 1 }))
        .send()
        .await
        .expect("the reference answers")
        .json()
        .await
        .expect("JSON");
    answer["success"].as_bool().expect("a boolean success")
}

#[tokio::test(flavor = "current_thread")]
async fn the_simulator_counts_per_namespace_and_its_windows_follow_the_scenario_clock() {
    let workerd = find_workerd(&WorkerdChoice::default()).expect("the pinned workerd");
    let simulator = Simulator::load(&pinned_workerd_dir()).expect("the pinned miniflare");
    let dir = tempfile::tempdir().expect("temp dir");
    let storage = fresh_storage().expect("storage");
    let config = simulator
        .write_reference_config(dir.path(), storage.path())
        .expect("config");
    let process =
        WorkerdProcess::start_with_flags(&workerd.path, &config, STORE_FLAGS, Instant::now())
            .await
            .expect("the reference process starts");
    let base = process.url();
    let client = reqwest::Client::new();

    // Far from any window boundary: the next minute starts a minute from now.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    let to_next_minute = 60_000 - now % 60_000;
    set_clock(&client, &base, to_next_minute + 1_000).await;

    assert!(limit(&client, &base, "1001", "k").await);
    assert!(limit(&client, &base, "1001", "k").await);
    assert!(
        !limit(&client, &base, "1001", "k").await,
        "the third of 2 is refused"
    );
    assert!(
        limit(&client, &base, "1002", "k").await,
        "another namespace counts apart"
    );

    // A minute later on the scenario clock, a new window.
    set_clock(&client, &base, to_next_minute + 61_000).await;
    assert!(
        limit(&client, &base, "1001", "k").await,
        "the next window starts empty"
    );

    let refused = client
        .post(format!("{base}/clock"))
        .json(&serde_json::json!({ "offset_ms": "soon" }))
        .send()
        .await
        .expect("answers");
    assert_eq!(refused.status().as_u16(), 400);
    drop(process.stop().await);
}
