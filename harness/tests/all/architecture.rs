//! The harness's layers are what docs/harness.md's "Architecture" section
//! says they are: every module of `harness/src` belongs to one layer folder, imports
//! only its own layer and those below (`crate::` and `super::` paths, test
//! modules included), and no two modules, nor two parts of a layer (a file or
//! a sub-folder), import each other, directly or round a longer loop.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom first; `main.rs` (the command line) sits above them all.
const LAYERS: [&str; 5] = ["language", "world", "engine", "judge", "commands"];

/// A module's path inside the crate, such as `["world", "workerd", "config"]`.
type Module = Vec<String>;

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, keyed by its path relative to `dir`.
fn read_tree(dir: &Path) -> BTreeMap<PathBuf, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("a directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("a source file");
                let relative = path.strip_prefix(root).expect("under the root").to_owned();
                out.insert(relative, text);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// `world/workerd/config.rs` is `world::workerd::config`, `world/mod.rs` is
/// `world`; `lib.rs` is the crate's root (the empty path).
fn module_of(file: &Path) -> Module {
    let mut parts: Vec<String> = file
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_owned());
    }
    parts
}

/// The code of a file without its comments (doc comments name modules in
/// links, which is no import).
fn code_of(text: &str) -> Vec<&str> {
    text.lines()
        .map(|line| {
            if line.trim_start().starts_with("//") {
                ""
            } else if let Some(at) = line.find(" //") {
                &line[..at]
            } else {
                line
            }
        })
        .collect()
}

/// Reads a path after `crate::` or `super::` (`a::b::{c, d::e}` included),
/// pushing each full path (below the given prefix) into `out`; returns where it ended.
fn read_paths(text: &[u8], mut at: usize, prefix: &[String], out: &mut Vec<Module>) -> usize {
    let mut path = prefix.to_vec();
    loop {
        while at < text.len() && text[at].is_ascii_whitespace() {
            at += 1;
        }
        if at < text.len() && text[at] == b'{' {
            at += 1;
            loop {
                at = read_paths(text, at, &path, out);
                while at < text.len() && text[at].is_ascii_whitespace() {
                    at += 1;
                }
                match text.get(at) {
                    Some(b',') => at += 1,
                    Some(b'}') => return at + 1,
                    _ => return at,
                }
                while at < text.len() && text[at].is_ascii_whitespace() {
                    at += 1;
                }
                if text.get(at) == Some(&b'}') {
                    return at + 1;
                }
            }
        }
        let start = at;
        while at < text.len() && (text[at].is_ascii_alphanumeric() || text[at] == b'_') {
            at += 1;
        }
        let segment = String::from_utf8_lossy(&text[start..at]).into_owned();
        if !segment.is_empty() && segment != "self" {
            path.push(segment);
        }
        if text[at..].starts_with(b"::") {
            at += 2;
        } else {
            out.push(path);
            return at;
        }
    }
}

/// The paths a module's code names through `crate::` and `super::`, made absolute.
fn references(module: &Module, text: &str) -> Vec<Module> {
    let mut out = Vec::new();
    // Inside an inline module (`mod tests { .. }`), `super` is the file's own module.
    let mut inline = false;
    for line in code_of(text) {
        let trimmed = line.trim_start();
        if (trimmed.starts_with("mod ") || trimmed.starts_with("pub mod "))
            && trimmed.ends_with('{')
        {
            inline = true;
        }
        let bytes = line.as_bytes();
        for (at, _) in line.match_indices("crate::") {
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                continue;
            }
            read_paths(bytes, at + "crate::".len(), &[], &mut out);
        }
        let mut at = 0;
        while let Some(found) = line[at..].find("super::") {
            let start = at + found;
            if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b':') {
                at = start + "super::".len();
                continue;
            }
            // `super` of a file's module (`mod.rs` included) is its parent;
            // of an inline module, the file's module.
            let mut base = module.clone();
            if !inline {
                base.pop();
            }
            let mut end = start;
            while line[end..].starts_with("super::") {
                end += "super::".len();
                if line[end..].starts_with("super::") {
                    base.pop();
                }
            }
            let end = read_paths(bytes, end, &base, &mut out);
            at = end.max(start + 1);
        }
    }
    out
}

/// The longest module `path` starts with (a path names an item inside it).
fn resolve(path: &Module, modules: &BTreeSet<Module>) -> Option<Module> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| modules.contains(prefix))
}

/// A module's layer's rank, bottom 0; `main` above every layer.
fn rank(module: &Module) -> Option<usize> {
    let top = module.first()?;
    if top == "main" {
        return Some(LAYERS.len());
    }
    LAYERS.iter().position(|layer| layer == top)
}

/// The part of its layer a module is in: a file of the layer folder, or a sub-folder.
fn part(module: &Module) -> Module {
    module.iter().take(2).cloned().collect()
}

fn name(module: &Module) -> String {
    if module.is_empty() {
        "crate".to_owned()
    } else {
        module.join("::")
    }
}

/// A loop in `graph`, if there is one, as the modules round it.
fn find_loop(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Option<Vec<Module>> {
    fn visit(
        node: &Module,
        graph: &BTreeMap<Module, BTreeSet<Module>>,
        done: &mut BTreeSet<Module>,
        stack: &mut Vec<Module>,
    ) -> Option<Vec<Module>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut round = stack[at..].to_vec();
            round.push(node.clone());
            return Some(round);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(round) = visit(next, graph, done, stack) {
                return Some(round);
            }
        }
        stack.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

/// Every way the tree breaks the layering, as sentences; none when it holds.
fn problems(tree: &BTreeMap<PathBuf, String>) -> Vec<String> {
    let modules: BTreeSet<Module> = tree.keys().map(|f| module_of(f)).collect();
    let mut problems = Vec::new();
    let mut imports: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    let mut parts: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (file, text) in tree {
        let module = module_of(file);
        if module.is_empty() {
            continue; // lib.rs only declares the layers.
        }
        let Some(from) = rank(&module) else {
            problems.push(format!(
                "{} is in no layer: every module lives in one of {LAYERS:?}",
                file.display()
            ));
            continue;
        };
        for path in references(&module, text) {
            let Some(target) = resolve(&path, &modules) else {
                continue;
            };
            if target.is_empty() || target == module {
                continue;
            }
            if let Some(to) = rank(&target)
                && to > from
            {
                problems.push(format!(
                    "{} ({}) imports {} from {}, a layer above it",
                    file.display(),
                    LAYERS.get(from).copied().unwrap_or("main"),
                    name(&path),
                    LAYERS.get(to).copied().unwrap_or("main"),
                ));
            }
            imports
                .entry(module.clone())
                .or_default()
                .insert(target.clone());
            // A module may use its own folder's parent (`super::`) and a
            // folder's module its children: only loops between distinct
            // parts count there.
            if part(&module) != part(&target) {
                parts
                    .entry(part(&module))
                    .or_default()
                    .insert(part(&target));
            }
        }
    }
    for (what, graph) in [("modules", &imports), ("parts of a layer", &parts)] {
        if let Some(round) = find_loop(graph) {
            let round: Vec<String> = round.iter().map(name).collect();
            problems.push(format!(
                "{what} import each other in a loop: {}",
                round.join(" -> ")
            ));
        }
    }
    problems
}

#[test]
fn every_module_imports_only_its_own_layer_and_those_below_and_nothing_loops() {
    let problems = problems(&read_tree(&src_dir()));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The checker itself: an import going up, and a loop, are found.
#[test]
fn an_upward_import_and_a_loop_are_found() {
    let tree = |files: &[(&str, &str)]| -> BTreeMap<PathBuf, String> {
        files
            .iter()
            .map(|(f, t)| (PathBuf::from(f), (*t).to_owned()))
            .collect()
    };
    let clean = tree(&[
        ("lib.rs", "pub mod language; pub mod engine;"),
        ("language/mod.rs", "pub mod scenario;"),
        ("language/scenario.rs", "pub struct Step;"),
        (
            "engine/mod.rs",
            "// crate::judge in a comment is no import\nmod runner;",
        ),
        (
            "engine/runner.rs",
            "use crate::language::{scenario::Step, self};\nuse super::clock;",
        ),
        (
            "engine/clock.rs",
            "#[cfg(test)]\nmod tests {\n    use super::*;\n}",
        ),
    ]);
    assert_eq!(problems(&clean), Vec::<String>::new());

    let mut upward = clean.clone();
    upward.insert(
        "language/probe.rs".into(),
        "fn f() { let _ = crate::engine::runner::run; }".into(),
    );
    let found = problems(&upward);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("language/probe.rs (language) imports engine::runner::run from engine"),
        "{found:?}"
    );

    let mut looped = clean.clone();
    looped.insert(
        "engine/clock.rs".into(),
        "use crate::engine::runner::Runner;".into(),
    );
    looped.insert("engine/runner.rs".into(), "use super::clock::X;".into());
    let found = problems(&looped);
    assert!(
        found.iter().any(|p| p.contains(
            "modules import each other in a loop: engine::clock -> engine::runner -> engine::clock"
        )),
        "{found:?}"
    );

    let mut parts_loop = clean.clone();
    parts_loop.insert("engine/a/mod.rs".into(), "use crate::engine::b::X;".into());
    parts_loop.insert("engine/b.rs".into(), "use crate::engine::a::c::Y;".into());
    parts_loop.insert("engine/a/c.rs".into(), "".into());
    let found = problems(&parts_loop);
    assert!(
        found.iter().any(|p| p.contains("parts of a layer")),
        "{found:?}"
    );

    let mut stray = clean;
    stray.insert("helpers.rs".into(), String::new());
    assert!(problems(&stray)[0].contains("helpers.rs is in no layer"));
}

/// docs/harness.md's "Architecture" section draws the layers top first:
/// the same order as [`LAYERS`], so the picture and this test cannot part ways.
#[test]
fn the_harness_guide_draws_the_layers_this_test_enforces() {
    let guide =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/harness.md"))
            .expect("docs/harness.md");
    let section = guide
        .split("\n## ")
        .find(|s| s.starts_with("Architecture"))
        .expect("docs/harness.md has an `## Architecture` section");
    let drawn: Vec<&str> = section
        .lines()
        .filter_map(|line| {
            let word = line.trim_start_matches([' ', '│', '▼']).split('/').next()?;
            LAYERS.iter().copied().find(|layer| *layer == word)
        })
        .collect();
    let mut top_first = LAYERS.to_vec();
    top_first.reverse();
    assert_eq!(
        drawn, top_first,
        "the layers as docs/harness.md draws them, top first"
    );
}
