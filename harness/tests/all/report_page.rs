//! The report page `harness run --html` writes, as a person sees it: a small
//! run of three Workers scenarios (one passing, one with a wrong
//! expectation, one whose binding hangs, cools off and is probed) opened
//! from disk in Debian's headless chromium, driven over the DevTools
//! protocol (`headless_chrome` without its `fetch` feature: it downloads
//! nothing).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption;
use headless_chrome::{Browser, LaunchOptions, Tab};

/// The scenario that fails, and the one that passes.
const FAILING: &str = "the second step's last request is refused (a wrong expectation)";
const PASSING: &str = "three requests pass";
/// The scenario whose binding cools off: it passes too.
const COOLING: &str = "a hanging binding is left alone and probed after its cool-off";

/// Where the failing scenario's wrong expectation is written.
const WRONG: &str = "expect = { statuses = \"200 then 429\" }";

/// Debian's chromium, installed with apt-get when it is missing and the
/// test runs as root, as the harness installs redis-server (saying so on
/// stderr); anywhere else the test fails naming the command.
fn chromium() -> PathBuf {
    if let Ok(path) = which::which("chromium") {
        return path;
    }
    let root = nix::unistd::geteuid().is_root();
    assert!(
        root && which::which("apt-get").is_ok(),
        "chromium is not installed: run `sudo apt-get install chromium`"
    );
    let lock = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::env::temp_dir().join("harness-apt-chromium.lock"))
        .and_then(|file| file.lock().map(|()| file))
        .expect("the apt-get lock");
    if let Ok(path) = which::which("chromium") {
        return path;
    }
    eprintln!(
        "report_page: chromium is not installed; running `apt-get update` and `apt-get install chromium`"
    );
    for args in [
        &["update", "-qq"][..],
        &["install", "-y", "-qq", "chromium"][..],
    ] {
        let status = Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .expect("apt-get runs");
        assert!(status.success(), "`apt-get {}` failed", args.join(" "));
    }
    drop(lock);
    which::which("chromium").expect("apt-get installed chromium on PATH")
}

/// Writes the two scenarios into `dir`; the line and column of the wrong
/// expectation's statuses, as the failure names them.
fn write_scenarios(dir: &Path) -> (usize, usize) {
    let app = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/apps/cloudflare.toml");
    let text = format!(
        "application = \"{}\"\ndeployable = \"edge\"\n\n\
         [[scenario]]\nname = \"{PASSING}\"\n\n\
         [[scenario.steps]]\nsend = {{ requests = 3, address = \"203.0.113.7\" }}\nexpect = {{ statuses = \"3 x 200\" }}\n\n\
         [[scenario]]\nname = \"{FAILING}\"\n\n\
         [[scenario.steps]]\nsend = {{ requests = 2, address = \"198.51.100.4\" }}\nexpect = {{ statuses = \"2 x 200\" }}\n\n\
         [[scenario.steps]]\nadvance_clock = {{ seconds = 15 }}\n\n\
         [[scenario.steps]]\nsend = {{ requests = 2, address = \"198.51.100.4\" }}\n{WRONG}\n\n\
         [[scenario]]\nname = \"{COOLING}\"\nbindings = {{ LIMITS_120_PER_60S = \"hanging\" }}\n\n\
         [[scenario.steps]]\nsend = {{ requests = 1, path = \"/health\" }}\n\n\
         [[scenario.steps]]\nsend = {{ requests = 4, address = \"192.0.2.9\" }}\nexpect = {{ statuses = \"4 x 200\" }}\n\n\
         [[scenario.steps]]\nset_bindings = {{ LIMITS_120_PER_60S = \"healthy\" }}\n\n\
         [[scenario.steps]]\nadvance_clock = {{ seconds = 10 }}\n\n\
         [[scenario.steps]]\nsend = {{ requests = 2, address = \"192.0.2.9\" }}\nexpect = {{ statuses = \"2 x 200\" }}\n\n\
         [[scenario.expect.fallback]]\nbinding = \"LIMITS_120_PER_60S\"\nreason = \"timed_out\"\n",
        app.display()
    );
    std::fs::write(dir.join("two.toml"), &text).expect("write the scenarios");
    let (index, line) = text
        .lines()
        .enumerate()
        .find(|(_, line)| *line == WRONG)
        .expect("the wrong expectation");
    let column = line.find("\"200").expect("its statuses") + 1;
    (index + 1, column)
}

/// Runs the built harness on `scenarios`, writing the page to `page`.
fn run_harness(scenarios: &Path, page: &Path) {
    let output = Command::new(env!("CARGO_BIN_EXE_harness"))
        .arg("run")
        .arg("--scenarios")
        .arg(scenarios)
        .arg("--html")
        .arg(page)
        .env_remove("HARNESS_EDGE")
        .env_remove("HARNESS_BINDING")
        .env_remove("HARNESS_WORKER")
        .env_remove("WORKERD")
        .env_remove("WORKERD_VERSION")
        .output()
        .expect("the harness runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(1),
        "one scenario fails: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("2 passed, 1 failed, 0 skipped"), "{stdout}");
}

/// What `expression` (JavaScript giving a JSON string) gives on `tab`.
fn read(tab: &Tab, expression: &str) -> serde_json::Value {
    let value = tab
        .evaluate(expression, false)
        .expect("the page answers")
        .value
        .expect("a value");
    serde_json::from_str(value.as_str().expect("a JSON string")).expect("JSON")
}

/// The rows and sections a person sees now: each visible row's name,
/// result and place, and each visible section's name and request marks.
const SEEN: &str = r#"JSON.stringify({
  rows: Array.from(document.querySelectorAll('#scenarios tbody tr'))
    .filter(r => r.offsetParent !== null)
    .map(r => ({ name: r.cells[0].innerText, result: r.cells[1].innerText, place: r.cells[2].innerText })),
  sections: Array.from(document.querySelectorAll('section.scenario'))
    .filter(s => s.offsetParent !== null)
    .map(s => ({
      name: s.querySelector('h2').innerText,
      failedAt: (s.querySelector('.failed-at') || { innerText: '' }).innerText,
      block: (s.querySelector('pre.failure') || { innerText: '' }).innerText,
      marks: s.querySelectorAll('svg.timeline rect.req').length,
      failedSteps: Array.from(s.querySelectorAll('svg.timeline g.step.failed text')).map(t => t.textContent),
      differs: s.querySelectorAll('svg.timeline circle.differs').length,
      coolOffs: Array.from(s.querySelectorAll('svg.timeline rect.cooloff'))
        .map(r => ({ width: r.getBoundingClientRect().width, title: r.textContent })),
      probes: Array.from(s.querySelectorAll('svg.timeline g.probe'))
        .map(g => ({ height: g.getBoundingClientRect().height, title: g.textContent })),
    })),
  shown: document.getElementById('shown').innerText,
})"#;

/// The failing section marks its failed step and the one request whose
/// status its step did not expect (the second of step 3: 200, not 429),
/// and shows no empty log block.
fn assert_failure_marked(section: &serde_json::Value, seen: &serde_json::Value) {
    let failed_steps = section["failedSteps"].as_array().expect("failed steps");
    assert_eq!(failed_steps.len(), 1, "{seen}");
    assert!(
        failed_steps[0]
            .as_str()
            .is_some_and(|t| t.starts_with("3. ")),
        "{seen}"
    );
    assert_eq!(section["differs"], 1, "{seen}");
    assert!(
        !section["block"]
            .as_str()
            .is_some_and(|b| b.contains("last 0 of 0")),
        "an empty log block: {seen}"
    );
}

/// The names of the rows [`SEEN`] saw.
fn row_names(seen: &serde_json::Value) -> Vec<&str> {
    seen["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect()
}

/// Clicks the toggle that shows or hides the passed scenarios.
fn toggle_passes(tab: &Tab) {
    let toggle = tab
        .find_element("input[name=result][value=passed]")
        .expect("the passed toggle");
    toggle.click().expect("clicked");
}

/// The hanging binding's section in what [`SEEN`] saw: one cool-off
/// shaded in its isolate's lane, from the first request's deadline to the
/// call that probed it after the clock moved 10 s, and that probe marked;
/// 1 + 4 + 2 requests.
fn assert_cool_off_and_probe(seen: &serde_json::Value) {
    let cooling = seen["sections"]
        .as_array()
        .expect("sections")
        .iter()
        .find(|s| s["name"].as_str().is_some_and(|n| n.ends_with(COOLING)))
        .expect("the cool-off's section");
    assert_eq!(cooling["marks"], 7, "{seen}");
    let cool_offs = cooling["coolOffs"].as_array().expect("cool-offs");
    assert_eq!(cool_offs.len(), 1, "{seen}");
    assert!(
        cool_offs[0]["width"].as_f64().is_some_and(|w| w > 10.0),
        "a span a person sees: {seen}"
    );
    let title = cool_offs[0]["title"].as_str().unwrap_or_default();
    assert!(
        title.starts_with("isolate 0: LIMITS_120_PER_60S cooling off from ")
            && title.contains("(no answer in time)"),
        "{seen}"
    );
    // Probed once the scenario clock had moved past the 10 s cool-off.
    let probed_at: f64 = title
        .split("; probed at ")
        .nth(1)
        .and_then(|t| t.strip_suffix(" s"))
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("a probe's time in {title}"));
    assert!(probed_at >= 10.0, "{title}");
    let probes = cooling["probes"].as_array().expect("probes");
    assert_eq!(probes.len(), 1, "{seen}");
    assert!(
        probes[0]["height"].as_f64().is_some_and(|h| h > 5.0),
        "{seen}"
    );
    assert!(
        probes[0]["title"]
            .as_str()
            .is_some_and(|t| t.contains("it answered in time")),
        "{seen}"
    );
}

#[test]
fn a_person_sees_a_row_per_scenario_the_failure_at_its_place_and_the_filter_hides_passes() {
    let chromium = chromium();
    let dir = tempfile::tempdir().expect("temp dir");
    let scenarios = dir.path().join("scenarios");
    std::fs::create_dir(&scenarios).expect("dir");
    let (line, column) = write_scenarios(&scenarios);
    let page = dir.path().join("report/conformance.html");
    run_harness(&scenarios, &page);

    let options = LaunchOptions::default_builder()
        .path(Some(chromium))
        .headless(true)
        // Root cannot run chromium's sandbox.
        .sandbox(false)
        .window_size(Some((1100, 1300)))
        .idle_browser_timeout(Duration::from_secs(60))
        .build()
        .expect("launch options");
    let browser = Browser::new(options).expect("chromium starts");
    let tab = browser.new_tab().expect("a tab");
    let url = format!("file://{}", page.display());
    tab.navigate_to(&url)
        .and_then(|tab| tab.wait_until_navigated())
        .expect("the page opens");

    let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report_page.png");
    let png = tab
        .capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true)
        .expect("a screenshot");
    std::fs::write(&screenshot, png).expect("write the screenshot");
    eprintln!(
        "report_page: screenshot of the page: {}",
        screenshot.display()
    );

    let seen = read(&tab, SEEN);
    let rows = seen["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 3, "{seen}");
    let failing = rows
        .iter()
        .find(|r| r["name"].as_str().is_some_and(|n| n.ends_with(FAILING)))
        .expect("the failing row");
    assert_eq!(failing["result"], "failed", "{seen}");
    let location = format!("two.toml:{line}:{column}");
    // The table's place is the line that failed, not the scenario's first.
    assert!(
        failing["place"]
            .as_str()
            .is_some_and(|p| p.ends_with(&location)),
        "{seen}"
    );
    let sections = seen["sections"].as_array().expect("sections");
    let section = sections
        .iter()
        .find(|s| s["name"].as_str().is_some_and(|n| n.ends_with(FAILING)))
        .expect("the failing section");
    assert!(
        section["failedAt"]
            .as_str()
            .is_some_and(|f| f.ends_with(&location)),
        "failed at {location}: {seen}"
    );
    assert!(
        section["block"]
            .as_str()
            .is_some_and(|b| b.contains("--> ") && b.contains(&location)),
        "{seen}"
    );
    // As many marks as requests sent: 2 + 2, and 3 for the passing one.
    assert_eq!(section["marks"], 4, "{seen}");
    assert_failure_marked(section, &seen);
    let passing = sections
        .iter()
        .find(|s| s["name"].as_str().is_some_and(|n| n.ends_with(PASSING)))
        .expect("the passing section");
    assert_eq!(passing["marks"], 3, "{seen}");
    assert_eq!(passing["differs"], 0, "{seen}");
    assert_eq!(
        passing["failedSteps"].as_array().map(Vec::len),
        Some(0),
        "{seen}"
    );
    assert_eq!(
        passing["coolOffs"].as_array().map(Vec::len),
        Some(0),
        "{seen}"
    );

    assert_cool_off_and_probe(&seen);

    // Passes hidden: the failing row and section alone are left.
    toggle_passes(&tab);
    let seen = read(&tab, SEEN);
    let names = row_names(&seen);
    assert!(names.len() == 1 && names[0].ends_with(FAILING), "{seen}");
    assert_eq!(seen["sections"].as_array().map(Vec::len), Some(1), "{seen}");
    assert_eq!(seen["shown"], "1 of 3 scenarios shown", "{seen}");

    // By name: passes shown again, and only the name typed.
    toggle_passes(&tab);
    let filter = tab.find_element("#filter").expect("the filter");
    filter.type_into("three").expect("typed");
    let seen = read(&tab, SEEN);
    let names = row_names(&seen);
    assert!(names.len() == 1 && names[0].ends_with(PASSING), "{seen}");
    drop(tab);
    drop(browser);
}
