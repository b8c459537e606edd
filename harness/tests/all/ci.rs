//! `.ci/run` runs the README's two commands, as written there and in its
//! order: what it reads from the README is what a reader of the README sees
//! under "The two commands", so CI cannot drift from the README.

use std::process::Command;

/// The commands of the first fenced block under `## The two commands`, one
/// a line, without the comment after `#`.
fn readme_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(harness::world::paths::repo_root().join("README.md"))
        .expect("read README.md");
    let section = readme
        .split("\n## The two commands")
        .nth(1)
        .expect("README has a section \"The two commands\"");
    let section = section.split("\n## ").next().unwrap_or(section);
    let block = section
        .split("```")
        .nth(1)
        .expect("a fenced block in that section");
    block
        .lines()
        .skip(1) // the fence's language tag
        .map(|line| line.split(" #").next().unwrap_or(line).trim().to_owned())
        .filter(|line| !line.is_empty())
        .collect()
}

#[test]
fn ci_runs_the_readmes_two_commands_in_its_order() {
    let output = Command::new("bash")
        .arg(harness::world::paths::repo_root().join(".ci/run"))
        .arg("--print-commands")
        .output()
        .expect(".ci/run runs");
    assert!(output.status.success(), "{output:?}");
    let printed: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    let readme = readme_commands();
    assert_eq!(printed, readme);
    // The main job first (the conformance run), then the tests.
    assert_eq!(readme.len(), 2, "{readme:?}");
    assert!(
        readme[0].starts_with("cargo run -p harness -- run"),
        "{readme:?}"
    );
    assert!(readme[1].starts_with("cargo test"), "{readme:?}");
    // CI keeps the JUnit XML and the report page QA open.
    for output in [
        "--junit reports/conformance.xml",
        "--html reports/conformance.html",
    ] {
        assert!(readme[0].contains(output), "no `{output}` in {readme:?}");
    }
}
