//! One integration test binary per crate: runtime's and the harness's
//! `tests/all`, beside the harness's libtest-mimic runners. Cargo makes no
//! test target of a file by itself here (`autotests = false`), so a file put
//! straight into `tests/` would never build, and a file under `tests/all/`
//! that its parent module does not declare would never run: both are refused.

use std::collections::BTreeSet;
use std::path::Path;

use harness::world::paths::repo_root;

/// A `[[test]]` target of a crate's manifest.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    name: String,
    path: String,
    /// Run by libtest (`harness = true`, the default), not a `main` of its own.
    libtest: bool,
}

fn manifest(krate: &str) -> toml::Table {
    let path = repo_root().join(krate).join("Cargo.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn targets(manifest: &toml::Table) -> Vec<Target> {
    let entries = manifest.get("test").and_then(toml::Value::as_array);
    entries
        .into_iter()
        .flatten()
        .map(|entry| Target {
            name: entry["name"].as_str().expect("a name").to_owned(),
            path: entry["path"].as_str().expect("a path").to_owned(),
            libtest: entry
                .get("harness")
                .and_then(toml::Value::as_bool)
                .unwrap_or(true),
        })
        .collect()
}

/// The names in `dir`.
fn entries(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

#[test]
fn each_crate_links_one_test_binary_beside_the_harness_s_runners() {
    for krate in ["runtime", "harness"] {
        let manifest = manifest(krate);
        assert_eq!(
            manifest["package"].get("autotests"),
            Some(&toml::Value::Boolean(false)),
            "{krate}: cargo would make a target of every file in tests/"
        );
        let (libtest, runners): (Vec<Target>, Vec<Target>) =
            targets(&manifest).into_iter().partition(|t| t.libtest);
        assert_eq!(
            libtest,
            [Target {
                name: "all".into(),
                path: "tests/all/main.rs".into(),
                libtest: true,
            }],
            "{krate}: one libtest binary"
        );
        let mut expected: BTreeSet<String> = BTreeSet::from(["all".to_owned()]);
        for runner in &runners {
            assert_eq!(
                runner.path,
                format!("tests/{}.rs", runner.name),
                "{krate}: {runner:?}"
            );
            expected.insert(format!("{}.rs", runner.name));
        }
        assert_eq!(
            entries(&repo_root().join(krate).join("tests")),
            expected,
            "{krate}/tests holds its one binary and its runners, nothing else"
        );
    }
    let runners: Vec<String> = targets(&manifest("harness"))
        .into_iter()
        .filter(|t| !t.libtest)
        .map(|t| t.name)
        .collect();
    assert_eq!(runners, ["scenarios", "workers_rs", "differential"]);
}

/// The modules `source` declares from files (`mod NAME;`, without a `#[path]`).
fn declared(source: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut after_path = false;
    for line in source.lines().map(str::trim) {
        let name = line
            .strip_prefix("pub ")
            .unwrap_or(line)
            .strip_prefix("mod ")
            .and_then(|rest| rest.strip_suffix(';'));
        if let (Some(name), false) = (name, after_path) {
            found.insert(name.to_owned());
        }
        after_path = line.starts_with("#[path");
    }
    found
}

/// Checks that the module file `file`, whose children's files are in
/// `dir`, declares each of them, and each child's own children likewise.
fn check_module(file: &Path, dir: &Path, problems: &mut Vec<String>) {
    let source =
        std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut children = BTreeSet::new();
    if dir.is_dir() {
        for name in entries(dir) {
            let path = dir.join(&name);
            if let Some(module) = name.strip_suffix(".rs") {
                if path != file {
                    children.insert(module.to_owned());
                    check_module(&path, &dir.join(module), problems);
                }
            } else if path.join("mod.rs").is_file() {
                children.insert(name.clone());
                check_module(&path.join("mod.rs"), &path, problems);
            } else if path.is_dir() && !dir.join(format!("{name}.rs")).is_file() {
                problems.push(format!("{}: a folder of no module", path.display()));
            }
        }
    }
    let declared = declared(&source);
    for child in children.difference(&declared) {
        problems.push(format!(
            "{}: `mod {child};` is missing, so {} never runs",
            file.display(),
            dir.join(child).display()
        ));
    }
}

#[test]
fn every_file_under_tests_all_is_a_module_of_the_binary() {
    let mut problems = Vec::new();
    for krate in ["runtime", "harness"] {
        let dir = repo_root().join(krate).join("tests/all");
        check_module(&dir.join("main.rs"), &dir, &mut problems);
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn a_module_left_undeclared_is_found() {
    // A control: the check above must see a file its parent leaves out.
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("main.rs"),
        "mod kept;\n#[path = \"x.rs\"]\nmod elsewhere;\n",
    )
    .expect("write");
    std::fs::write(dir.path().join("kept.rs"), "").expect("write");
    std::fs::write(dir.path().join("elsewhere.rs"), "").expect("write");
    std::fs::create_dir(dir.path().join("shared")).expect("mkdir");
    std::fs::write(dir.path().join("shared/mod.rs"), "").expect("write");
    std::fs::write(dir.path().join("shared/part.rs"), "").expect("write");
    let mut problems = Vec::new();
    check_module(&dir.path().join("main.rs"), dir.path(), &mut problems);
    let missing: Vec<&str> = problems
        .iter()
        .filter_map(|p| p.split('`').nth(1))
        .collect();
    assert_eq!(
        missing,
        ["mod part;", "mod elsewhere;", "mod shared;"],
        "{problems:#?}"
    );
}
