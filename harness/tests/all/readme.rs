//! README.md's Rust blocks are code that compiles. Each is preceded by
//! `<!-- excerpt: FILE -->` and is an excerpt of that file: its lines, in
//! order and one after another, apart from where a `// ...` line stands for
//! lines left out. The Workers' sources are built here (through the
//! harness's own build, as the scenarios build them); runtime's examples
//! are built by `cargo test` itself.

use std::path::Path;

use harness::world::paths::repo_root;
use harness::world::wasm::{WorkerChoice, build_deployable};

/// Every ```rust block of `markdown`, with the file its marker names.
fn excerpts(markdown: &str) -> Vec<(Option<String>, Vec<String>)> {
    let mut found = Vec::new();
    let mut marker = None;
    let mut block: Option<Vec<String>> = None;
    for line in markdown.lines() {
        match &mut block {
            Some(lines) if line.trim_start().starts_with("```") => {
                found.push((marker.take(), std::mem::take(lines)));
                block = None;
            }
            Some(lines) => lines.push(line.to_owned()),
            None if line.trim() == "```rust" => block = Some(Vec::new()),
            None => {
                if let Some(file) = line
                    .trim()
                    .strip_prefix("<!-- excerpt: ")
                    .and_then(|rest| rest.strip_suffix(" -->"))
                {
                    marker = Some(file.to_owned());
                } else if !line.trim().is_empty() && !line.trim_start().starts_with("```") {
                    marker = None;
                }
            }
        }
    }
    found
}

/// Whether `block` is an excerpt of `source` (see the module's documentation).
fn is_excerpt(block: &[String], source: &str) -> Result<(), String> {
    let source: Vec<&str> = source.lines().map(str::trim).collect();
    let mut from = 0;
    for part in block.split(|l| l.trim().starts_with("// ...")) {
        let part: Vec<&str> = part.iter().map(|l| l.trim()).collect();
        if part.is_empty() {
            continue;
        }
        let at = (from..=source.len().saturating_sub(part.len()))
            .find(|&i| source[i..i + part.len()] == part[..])
            .ok_or_else(|| {
                format!(
                    "not found in order, one line after another:\n{}",
                    part.join("\n")
                )
            })?;
        from = at + part.len();
    }
    Ok(())
}

#[test]
fn every_rust_block_of_the_readme_is_an_excerpt_of_code_that_builds() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let blocks = excerpts(&readme);
    assert!(blocks.len() >= 5, "{blocks:?}");
    let mut workers = Vec::new();
    for (marker, block) in &blocks {
        let file = marker.as_deref().unwrap_or_else(|| {
            panic!(
                "a ```rust block without `<!-- excerpt: FILE -->` before it:\n{}",
                block.join("\n")
            )
        });
        let source =
            std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        if let Err(why) = is_excerpt(block, &source) {
            panic!("README.md's block from {file}: {why}");
        }
        let worker = WorkerChoice::ALL
            .into_iter()
            .find(|w| Path::new(file).starts_with(w.crate_dir()));
        match worker {
            Some(worker) if !workers.contains(&worker) => workers.push(worker),
            Some(_) => {}
            None => assert!(
                file.starts_with("runtime/examples/"),
                "{file}: neither a Worker the harness builds nor an example cargo test builds"
            ),
        }
    }
    assert_eq!(
        workers.len(),
        WorkerChoice::ALL.len(),
        "every Worker is shown: {workers:?}"
    );
    for worker in workers {
        build_deployable(worker).unwrap_or_else(|e| panic!("{}: {e}", worker.name()));
    }
}

#[test]
fn an_excerpt_is_checked_line_by_line_and_in_order() {
    let source = "fn a() {\n    one();\n    two();\n    three();\n}\n";
    let lines = |text: &str| text.lines().map(str::to_owned).collect::<Vec<_>>();
    assert!(is_excerpt(&lines("one();\ntwo();"), source).is_ok());
    assert!(is_excerpt(&lines("fn a() {\n// ...\nthree();"), source).is_ok());
    // A line left out without `// ...`, and lines out of order.
    assert!(is_excerpt(&lines("one();\nthree();"), source).is_err());
    assert!(is_excerpt(&lines("three();\n// ...\none();"), source).is_err());
    assert!(is_excerpt(&lines("four();"), source).is_err());
}
