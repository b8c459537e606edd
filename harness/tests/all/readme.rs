//! The documentation's Rust blocks are code that compiles, and its links
//! lead somewhere. The pages are README.md, every `docs/*.md`,
//! `scenarios/README.md` and the benchmarks' two pages.
//!
//! A ```rust block is one of two things:
//! - an excerpt: preceded by `<!-- excerpt: FILE -->`, it is made of that
//!   file's lines, in order and one after another, apart from where a
//!   `// ...` line stands for lines left out. The Workers' sources are
//!   built here (through the harness's own build, as the scenarios build
//!   them); runtime's examples are built by `cargo test` itself;
//! - a doctest, on a page a crate's `lib.rs` includes as its documentation
//!   (`#![doc = include_str!(...)]`), which `cargo test --doc` compiles and
//!   runs. Such a page holds no excerpts (a Worker's code does not build on
//!   the host).
//!
//! Every relative link names a file that exists, and its `#anchor` a
//! heading of that page; the README links every `docs/` page, and each
//! `docs/` page links each of its sections, so a reader reaches any part
//! in two links.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use harness::world::paths::repo_root;
use harness::world::wasm::{WorkerChoice, build_worker};

/// One ```rust block of a page.
#[derive(Debug)]
struct Block {
    /// The file its `<!-- excerpt: FILE -->` marker names, if it has one.
    marker: Option<String>,
    /// The fence's info string (`rust`, `rust,no_run`, ...).
    info: String,
    lines: Vec<String>,
}

/// Every Rust block of `markdown`, with the file its marker names.
fn rust_blocks(markdown: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut marker = None;
    // The open fence's info string, while inside a fenced block.
    let mut open: Option<(String, Vec<String>)> = None;
    for line in markdown.lines() {
        let trimmed = line.trim();
        match &mut open {
            Some((info, lines)) if trimmed.starts_with("```") => {
                if info == "rust" || info.starts_with("rust,") {
                    found.push(Block {
                        marker: marker.take(),
                        info: std::mem::take(info),
                        lines: std::mem::take(lines),
                    });
                }
                marker = None;
                open = None;
            }
            Some((_, lines)) => lines.push(line.to_owned()),
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    open = Some((info.trim().to_owned(), Vec::new()));
                } else if let Some(file) = trimmed
                    .strip_prefix("<!-- excerpt: ")
                    .and_then(|rest| rest.strip_suffix(" -->"))
                {
                    marker = Some(file.to_owned());
                } else if !trimmed.is_empty() {
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

/// The documentation's pages, relative to the repository's root: README.md
/// first, then `docs/` in name order, then the rest.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .map(|path| path.strip_prefix(root).expect("under the root").to_owned())
        .collect();
    docs.sort();
    let mut pages = vec![PathBuf::from("README.md")];
    pages.extend(docs);
    pages.extend(["scenarios/README.md", "BENCHMARKS.md", "BENCHMARKS-log.md"].map(PathBuf::from));
    pages
}

/// The pages the workspace's crates include as their documentation
/// (`#![doc = include_str!("PATH")]` in a member's `src/lib.rs`), relative
/// to the repository's root.
fn crate_doc_pages(root: &Path) -> BTreeSet<PathBuf> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let manifest: toml::Table = manifest.parse().expect("the workspace's manifest");
    let members = manifest["workspace"]["members"]
        .as_array()
        .expect("workspace.members");
    let mut pages = BTreeSet::new();
    for member in members {
        let src = root
            .join(member.as_str().expect("a member's path"))
            .join("src");
        let Ok(lib) = std::fs::read_to_string(src.join("lib.rs")) else {
            continue;
        };
        for line in lib.lines() {
            let Some(included) = line
                .trim()
                .strip_prefix("#![doc = include_str!(\"")
                .and_then(|rest| rest.strip_suffix("\")]"))
            else {
                continue;
            };
            let page = normalise(&src.join(included));
            let page = page
                .strip_prefix(root)
                .unwrap_or_else(|_| panic!("{}: outside the repository", page.display()));
            pages.insert(page.to_owned());
        }
    }
    pages
}

/// `path` with its `.` and `..` segments resolved, without touching the disk.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[test]
fn every_rust_block_of_every_page_is_an_excerpt_of_code_that_builds_or_a_doctest() {
    let root = repo_root();
    let doctest_pages = crate_doc_pages(&root);
    assert!(
        doctest_pages.contains(Path::new("docs/runtime.md")),
        "runtime's crate documentation is docs/runtime.md: {doctest_pages:?}"
    );
    let mut workers = Vec::new();
    let mut readme_shows = BTreeSet::new();
    let mut doctests = 0;
    for page in pages(&root) {
        let text = std::fs::read_to_string(root.join(&page))
            .unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        let is_crate_doc = doctest_pages.contains(&page);
        for block in rust_blocks(&text) {
            let Some(file) = block.marker.as_deref() else {
                assert!(
                    is_crate_doc,
                    "{}: a ```rust block without `<!-- excerpt: FILE -->` before it, on a page \
                     no crate includes as its documentation:\n{}",
                    page.display(),
                    block.lines.join("\n")
                );
                assert_eq!(
                    block.info,
                    "rust",
                    "{}: a doctest that is not compiled and run is no check",
                    page.display()
                );
                doctests += 1;
                continue;
            };
            assert!(
                !is_crate_doc,
                "{}: an excerpt on a crate's documentation page would be a doctest too ({file})",
                page.display()
            );
            // A user's build has no harness hooks: an excerpt is a user's code.
            if let Some(hook) = block.lines.iter().find(|line| is_harness_hook(line)) {
                panic!(
                    "{}'s block from {file} names a harness hook, which a user's build does not \
                     have: {hook}",
                    page.display()
                );
            }
            let source =
                std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            if let Err(why) = is_excerpt(&block.lines, &source) {
                panic!("{}'s block from {file}: {why}", page.display());
            }
            let worker = WorkerChoice::ALL
                .into_iter()
                .find(|w| Path::new(file).starts_with(w.crate_dir()));
            if page == Path::new("README.md") {
                readme_shows.insert(worker.map_or("runtime/examples", |w| w.name()));
            }
            match worker {
                Some(worker) if !workers.contains(&worker) => workers.push(worker),
                Some(_) => {}
                None => assert!(
                    file.starts_with("runtime/examples/"),
                    "{file}: neither a Worker the harness builds nor an example cargo test builds"
                ),
            }
        }
    }
    assert!(doctests >= 3, "runtime's page has its doctests: {doctests}");
    let mut every_way: BTreeSet<&str> = WorkerChoice::ALL.iter().map(|w| w.name()).collect();
    every_way.insert("runtime/examples");
    assert_eq!(
        readme_shows, every_way,
        "the README shows one example of each way of using it"
    );
    assert_eq!(
        workers.len(),
        WorkerChoice::ALL.len(),
        "every Worker is shown: {workers:?}"
    );
    for worker in workers {
        build_worker(worker).unwrap_or_else(|e| panic!("{}: {e}", worker.name()));
    }
}

/// Whether a line of code names what only the harness's builds have: the
/// hidden `runtime::unstable_for_tools` (its `testing` hooks among them).
fn is_harness_hook(line: &str) -> bool {
    line.contains("unstable_for_tools") || line.contains("runtime::testing")
}

/// A heading's anchor as GitHub makes it: lower case, spaces as `-`, and
/// nothing but letters, digits, `-` and `_` kept.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

/// The lines of `markdown` outside its fenced blocks (and not their fences).
fn prose_lines(markdown: &str) -> impl Iterator<Item = &str> {
    let mut fenced = false;
    markdown.lines().filter(move |line| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// The anchors of a page's headings (`## Title` -> `title`; a repeated
/// heading gets `-1`, `-2`, ...), and the `##` sections' own, in order.
fn anchors(markdown: &str) -> (BTreeSet<String>, Vec<String>) {
    let mut all = BTreeSet::new();
    let mut sections = Vec::new();
    for line in prose_lines(markdown) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let level = 1 + heading.chars().take_while(|&c| c == '#').count();
        let Some(text) = heading.trim_start_matches('#').strip_prefix(' ') else {
            continue;
        };
        let base = slug(text);
        let mut anchor = base.clone();
        let mut n = 0;
        while all.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        all.insert(anchor.clone());
        if level == 2 {
            sections.push(anchor);
        }
    }
    (all, sections)
}

/// Every link target of `markdown` outside fenced blocks: `[text](target)`.
fn links(markdown: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in prose_lines(markdown) {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            found.push(rest[..end].to_owned());
            rest = &rest[end..];
        }
    }
    found
}

/// What is wrong with the links of `page` (its text `markdown`), whose
/// files are read through `read` (a path relative to the root, `None` when
/// there is no such file); none when every link leads somewhere.
fn broken_links(
    page: &Path,
    markdown: &str,
    read: &dyn Fn(&Path) -> Option<String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for target in links(markdown) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
        let file = if file.is_empty() {
            page.to_owned()
        } else {
            normalise(&page.parent().unwrap_or(Path::new("")).join(file))
        };
        let Some(text) = read(&file) else {
            problems.push(format!(
                "{}: a link to {target}: no such file",
                page.display()
            ));
            continue;
        };
        if !anchor.is_empty() && !anchors(&text).0.contains(anchor) {
            problems.push(format!(
                "{}: a link to {target}: {} has no heading `#{anchor}`",
                page.display(),
                file.display()
            ));
        }
    }
    problems
}

#[test]
fn every_link_leads_somewhere_and_every_part_is_two_links_from_the_readme() {
    let root = repo_root();
    let read = |path: &Path| -> Option<String> {
        let full = root.join(path);
        // A link to a folder is fine: GitHub lists it.
        if full.is_dir() {
            Some(String::new())
        } else {
            // A file that is no text (a screenshot) exists, with no headings.
            std::fs::read(full)
                .ok()
                .map(|bytes| String::from_utf8(bytes).unwrap_or_default())
        }
    };
    let mut problems = Vec::new();
    let pages = pages(&root);
    for page in &pages {
        let text = read(page).unwrap_or_else(|| panic!("{}", page.display()));
        problems.extend(broken_links(page, &text, &read));
    }
    let readme = read(Path::new("README.md")).expect("README.md");
    let readme_links: BTreeSet<String> = links(&readme).into_iter().collect();
    for page in pages.iter().filter(|p| p.starts_with("docs")) {
        let target = page.to_string_lossy().into_owned();
        if !readme_links.contains(&target) {
            problems.push(format!("README.md does not link {target}"));
        }
        let text = read(page).expect("a page");
        let own: BTreeSet<String> = links(&text)
            .into_iter()
            .filter_map(|l| l.strip_prefix('#').map(str::to_owned))
            .collect();
        for section in anchors(&text).1 {
            if !own.contains(&section) {
                problems.push(format!(
                    "{}: its contents do not link its section #{section}",
                    page.display()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_line_naming_a_harness_hook_is_found() {
    assert!(is_harness_hook(
        "        runtime::unstable_for_tools::testing::tally_refused();"
    ));
    assert!(is_harness_hook(
        "            runtime::testing::tally_refused();"
    ));
    assert!(!is_harness_hook(
        "        Err(refusal) => refusal_response(&refusal).map(JsValue::from),"
    ));
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

#[test]
fn a_block_is_found_with_its_marker_and_its_fence() {
    let page = "<!-- excerpt: a.rs -->\n```rust\none();\n```\n\nText.\n\n```rust,no_run\ntwo();\n```\n\
                <!-- excerpt: b.rs -->\n\nwords\n```rust\nthree();\n```\n```toml\nx = 1\n```\n";
    let blocks = rust_blocks(page);
    let found: Vec<(Option<&str>, &str, &[String])> = blocks
        .iter()
        .map(|b| (b.marker.as_deref(), b.info.as_str(), b.lines.as_slice()))
        .collect();
    assert_eq!(
        found,
        [
            (Some("a.rs"), "rust", &["one();".to_owned()][..]),
            (None, "rust,no_run", &["two();".to_owned()][..]),
            // A marker with a paragraph between it and the block is no marker.
            (None, "rust", &["three();".to_owned()][..]),
        ]
    );
}

#[test]
fn a_link_to_a_missing_file_or_heading_is_found() {
    let files = |path: &Path| -> Option<String> {
        match path.to_str()? {
            "docs/a.md" => {
                Some("# A\n\n## What `run` prints\n\n```\n## not a heading\n```\n".into())
            }
            "README.md" | "docs/b.md" => Some(String::new()),
            _ => None,
        }
    };
    assert_eq!(
        slug("Two cores: Cloudflare's simulator"),
        "two-cores-cloudflares-simulator"
    );
    let page = Path::new("docs/b.md");
    let ok = "[a](a.md), [its part](a.md#what-run-prints), [up](../README.md)";
    assert_eq!(broken_links(page, ok, &files), Vec::<String>::new());
    let broken = "[gone](c.md), [no part](a.md#not-a-heading), [here](#nothing)";
    let found = broken_links(page, broken, &files);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found[0].contains("c.md: no such file"), "{found:?}");
    assert!(
        found[1].contains("has no heading `#not-a-heading`"),
        "{found:?}"
    );
    assert!(found[2].contains("has no heading `#nothing`"), "{found:?}");
}
