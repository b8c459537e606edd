//! docs/native.md's first example as a newcomer makes it: a crate of its
//! own, outside the workspace, of the page's `Cargo.toml` (only the
//! features it names; `runtime`'s path pointed at this repository),
//! `app.toml` and `src/main.rs`, which is `runtime/examples/quickstart/`'s
//! (the page shows it in full: `harness/tests/all/readme.rs` checks the
//! excerpt, and this checks it is all of it). It is built with cargo, run,
//! and asked over real HTTP: 200, 200, then 429 with `Retry-After`. The same
//! binary with a description that does not validate stops with the error
//! naming the file, as a `main` returning it with `?` prints it.
//!
//! The crate builds in a target directory of its own under the workspace's
//! (a nested `cargo build` sharing the outer one's would wait on its lock),
//! kept between runs, so a warm run builds only the example.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("runtime/ is in the repository")
        .to_owned()
}

/// The fenced block that follows the line `marker` on `page` (such as
/// `<!-- quickstart: app.toml -->`), its lines as they are.
fn block_after(page: &str, marker: &str) -> String {
    let (_, after) = page
        .split_once(marker)
        .unwrap_or_else(|| panic!("docs/native.md has no `{marker}`"));
    let mut lines = after.trim_start().lines();
    let fence = lines.next().expect("a fence");
    assert!(fence.starts_with("```"), "{marker} is followed by {fence}");
    let mut text = String::new();
    for line in lines.take_while(|l| !l.starts_with("```")) {
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// The page's `Cargo.toml` with `runtime`'s path made this repository's.
fn manifest(page: &str) -> String {
    let mut manifest: toml::Table = block_after(page, "<!-- quickstart: Cargo.toml -->")
        .parse()
        .expect("the page's Cargo.toml");
    let runtime = manifest["dependencies"]["runtime"]
        .as_table_mut()
        .expect("runtime = { path = ..., features = [...] }");
    assert!(runtime.contains_key("path"), "{runtime:?}");
    runtime.insert(
        "path".into(),
        toml::Value::String(root().join("runtime").display().to_string()),
    );
    manifest.to_string()
}

/// A crate of the page's files in a fresh folder outside the workspace,
/// with the workspace's lockfile (the versions its tests ran with).
fn make_crate(page: &str, app_toml: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("runtime-quickstart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).expect("a folder");
    let source = std::fs::read_to_string(root().join("runtime/examples/quickstart/main.rs"))
        .expect("the example");
    std::fs::write(dir.join("Cargo.toml"), manifest(page)).expect("write");
    std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")).expect("the lockfile");
    std::fs::write(dir.join("src/main.rs"), source).expect("write");
    std::fs::write(dir.join("app.toml"), app_toml).expect("write");
    dir
}

/// `cargo build` of the crate in `dir` into a target directory kept under
/// the workspace's; the binary.
fn build(dir: &Path) -> PathBuf {
    // target/debug/deps/all-HASH: the workspace's target directory is two up.
    let exe = std::env::current_exe().expect("the test's path");
    let target = exe
        .ancestors()
        .nth(3)
        .expect("target/debug/deps")
        .join("quickstart");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["build", "--quiet", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "the page's example does not build:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    target.join("debug/quickstart")
}

/// The running example, killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn the_first_example_of_the_native_page_builds_on_its_own_and_answers_200_then_429() {
    let page = std::fs::read_to_string(root().join("docs/native.md")).expect("docs/native.md");
    let example = root().join("runtime/examples/quickstart");
    let source = std::fs::read_to_string(example.join("main.rs")).expect("main.rs");
    assert_eq!(
        block_after(
            &page,
            "<!-- excerpt: runtime/examples/quickstart/main.rs -->"
        ),
        source,
        "docs/native.md shows the example's main.rs in full"
    );
    let app_toml = std::fs::read_to_string(example.join("app.toml")).expect("app.toml");
    assert_eq!(
        block_after(&page, "<!-- quickstart: app.toml -->"),
        app_toml,
        "the page's app.toml"
    );

    let dir = make_crate(&page, &app_toml);
    let binary = build(&dir);
    let mut child = Command::new(&binary)
        .arg("127.0.0.1:0")
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the example starts");
    let stdout = child.stdout.take().expect("stdout");
    let running = Running(child);
    let mut first = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut first)
        .expect("a line");
    let url = first
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("the first line is {first:?}"))
        .to_owned();

    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for _ in 0..3 {
        let response = client
            .get(format!("{url}/api/search"))
            .send()
            .await
            .expect("an answer");
        statuses.push(response.status().as_u16());
        retry_after = response
            .headers()
            .get("Retry-After")
            .map(|v| v.to_str().expect("ascii").parse::<u64>().expect("seconds"));
    }
    assert_eq!(statuses, [200, 200, 429], "app.toml allows 2 a minute");
    let retry_after = retry_after.expect("the 429 says when to retry");
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    let health = client
        .get(format!("{url}/health"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(health.status().as_u16(), 200, "/health is not limited");
    drop(running);

    // The same program, its description's route path without its `/`
    // (line 7, column 8): `main`'s `?` prints the error as its Debug.
    let broken = app_toml.replace(r#"path = "/api/search""#, r#"path = "api/search""#);
    assert_ne!(broken, app_toml);
    std::fs::write(dir.join("app.toml"), broken).expect("write");
    let output = Command::new(&binary)
        .arg("127.0.0.1:0")
        .current_dir(&dir)
        .output()
        .expect("the example runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.starts_with("Error: rate_limits.route_path_invalid: app.toml:7:8: "),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
