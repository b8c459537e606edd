//! `runtime`'s public API is a reviewed change: `runtime/public-api.txt`
//! lists every public item (with its signature) of each build a user makes,
//! as rustdoc's JSON output on the nightly toolchain describes it, and this
//! test fails when the crate's API and the list disagree. Hidden items
//! (`runtime::unstable_for_tools`, the harness's) are not API and are not
//! listed. Every item listed is named on docs/runtime.md, where a reader
//! looks for it.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use harness::world::cargo_build::CargoOutput;
use harness::world::paths::repo_root;
use serde_json::Value;

/// The builds a user makes whose API differs: a native server's with every
/// native feature, a Worker's with `workers-rs`.
const BUILDS: [(&str, Option<&str>, &str); 2] = [
    ("native", None, "redis,axum,metrics"),
    ("wasm32", Some("wasm32-unknown-unknown"), "workers-rs"),
];

const UPDATE: &str = "UPDATE_PUBLIC_API";

/// The nightly toolchain and its wasm32 target, which rustdoc's JSON needs:
/// installed beforehand (`.ci/run` installs both), never by the test, which
/// downloads nothing. A missing one fails with the command that installs it.
fn nightly_with_wasm32() {
    let nightly = Command::new("rustup")
        .args(["run", "nightly", "rustc", "--version"])
        .output()
        .is_ok_and(|o| o.status.success() && !o.stdout.is_empty());
    assert!(
        nightly,
        "public_api: rustdoc's JSON needs the nightly toolchain, which is not installed; \
         install it with `rustup toolchain install nightly --profile minimal` (as .ci/run does)"
    );
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed", "--toolchain", "nightly"])
        .output()
        .expect("rustup runs");
    assert!(
        String::from_utf8_lossy(&installed.stdout)
            .lines()
            .any(|line| line.trim() == "wasm32-unknown-unknown"),
        "public_api: the nightly toolchain has no wasm32 target; add it with \
         `rustup target add wasm32-unknown-unknown --toolchain nightly` (as .ci/run does)"
    );
}

/// rustdoc's JSON description of `runtime` for one build.
fn rustdoc_json(target_dir: &Path, target: Option<&str>, features: &str) -> Value {
    let mut command = Command::new("rustup");
    command
        .args([
            "run", "nightly", "cargo", "rustdoc", "--quiet", "-p", "runtime", "--lib",
        ])
        .args(["--no-default-features", "--features", features])
        .arg("--target-dir")
        .arg(target_dir)
        .current_dir(repo_root())
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC")
        .env_remove("RUSTDOC")
        .env_remove("RUSTFLAGS")
        .env_remove("RUSTDOCFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS");
    if let Some(target) = target {
        command.args(["--target", target]);
    }
    command.args(["--", "-Z", "unstable-options", "--output-format", "json"]);
    let output = command.output().expect("rustup runs");
    assert!(
        output.status.success(),
        "rustdoc's JSON of runtime (nightly; `rustup toolchain install nightly` if it is missing) \
         failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let doc = match target {
        Some(target) => target_dir.join(target).join("doc/runtime.json"),
        None => target_dir.join("doc/runtime.json"),
    };
    serde_json::from_str(&std::fs::read_to_string(&doc).expect("runtime.json")).expect("JSON")
}

/// One public item a line: `kind path: signature`.
struct Lister<'a> {
    index: &'a serde_json::Map<String, Value>,
    lines: BTreeSet<String>,
}

impl<'a> Lister<'a> {
    fn item(&self, id: &Value) -> Option<&'a Value> {
        self.index.get(&id.to_string())
    }

    fn module(&mut self, path: &str, module: &Value) {
        for id in module["inner"]["module"]["items"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let Some(item) = self.item(id) else { continue };
            if item["visibility"] != "public" {
                continue;
            }
            self.named(path, item, None);
        }
    }

    /// An item, at `path`, under `name` (a `use`'s) or its own.
    fn named(&mut self, path: &str, item: &Value, name: Option<&str>) {
        let inner = &item["inner"];
        let Some((kind, body)) = inner.as_object().and_then(|o| o.iter().next()) else {
            return;
        };
        if kind == "use" {
            let Some(target) = self.item(&body["id"]) else {
                // A re-export of another crate's item (`pub use http::...`).
                let line = format!(
                    "use {path}::{}: {}",
                    body["name"].as_str().unwrap_or("*"),
                    body["source"].as_str().unwrap_or("")
                );
                self.lines.insert(line);
                return;
            };
            if body["is_glob"] == true {
                self.module(path, target);
            } else {
                self.named(path, target, body["name"].as_str());
            }
            return;
        }
        let name = name.or(item["name"].as_str()).unwrap_or("_");
        let here = format!("{path}::{name}");
        match kind.as_str() {
            "module" => {
                self.lines.insert(format!("mod {here}"));
                self.module(&here, item);
            }
            "function" => {
                let line = format!("fn {here}{}", function(body));
                self.lines.insert(line);
            }
            "constant" => {
                let line = format!("const {here}: {}", ty(&body["type"]));
                self.lines.insert(line);
            }
            "static" => {
                let line = format!("static {here}: {}", ty(&body["type"]));
                self.lines.insert(line);
            }
            "type_alias" => {
                let line = format!("type {here} = {}", ty(&body["type"]));
                self.lines.insert(line);
            }
            "trait" => {
                self.lines.insert(format!("trait {here}"));
                for id in body["items"].as_array().into_iter().flatten() {
                    if let Some(member) = self.item(id) {
                        self.member(&here, member);
                    }
                }
            }
            "struct" | "enum" | "union" => self.data_type(kind, &here, body),
            "macro" => {
                self.lines.insert(format!("macro {here}"));
            }
            _ => {}
        }
    }

    /// A struct, enum or union: its public fields, its variants, its
    /// inherent methods and the traits it implements.
    fn data_type(&mut self, kind: &str, here: &str, body: &Value) {
        self.lines.insert(format!("{kind} {here}"));
        let kind_body = &body["kind"];
        let fields = kind_body["plain"]["fields"]
            .as_array()
            .or(kind_body["tuple"].as_array())
            .or(body["fields"].as_array());
        for (i, id) in fields.into_iter().flatten().enumerate() {
            if let Some(field) = self.item(id) {
                let field_name = field["name"].as_str().map_or(i.to_string(), str::to_owned);
                if field["visibility"] == "public" {
                    let line = format!(
                        "field {here}::{field_name}: {}",
                        ty(&field["inner"]["struct_field"])
                    );
                    self.lines.insert(line);
                }
            }
        }
        for id in body["variants"].as_array().into_iter().flatten() {
            if let Some(variant) = self.item(id) {
                let line = format!(
                    "variant {here}::{}",
                    variant["name"].as_str().unwrap_or("_")
                );
                self.lines.insert(line);
            }
        }
        for id in body["impls"].as_array().into_iter().flatten() {
            let Some(imp) = self.item(id) else { continue };
            let imp = &imp["inner"]["impl"];
            if imp["is_synthetic"] == true || !imp["blanket_impl"].is_null() {
                continue;
            }
            if imp["trait"].is_null() {
                for id in imp["items"].as_array().into_iter().flatten() {
                    if let Some(member) = self.item(id)
                        && member["visibility"] == "public"
                    {
                        self.member(here, member);
                    }
                }
            } else {
                let line = format!("impl {} for {here}", path_of(&imp["trait"]));
                self.lines.insert(line);
            }
        }
    }

    /// A method or associated item of `owner`.
    fn member(&mut self, owner: &str, member: &Value) {
        let name = member["name"].as_str().unwrap_or("_");
        let inner = &member["inner"];
        if let Some(f) = inner.get("function") {
            self.lines
                .insert(format!("fn {owner}::{name}{}", function(f)));
        } else if let Some(c) = inner.get("assoc_const") {
            self.lines
                .insert(format!("const {owner}::{name}: {}", ty(&c["type"])));
        } else if let Some(t) = inner.get("assoc_type") {
            let _ = t;
            self.lines.insert(format!("type {owner}::{name}"));
        }
    }
}

/// A function's parameters and output, as `(name: Type, ...) -> Type`.
fn function(f: &Value) -> String {
    let sig = &f["sig"];
    let mut out = String::from("(");
    for (i, input) in sig["inputs"].as_array().into_iter().flatten().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let name = input[0].as_str().unwrap_or("_");
        if name == "self" {
            out.push_str(&ty(&input[1]).replace("Self", "self"));
        } else {
            let _ = write!(out, "{name}: {}", ty(&input[1]));
        }
    }
    out.push(')');
    if !sig["output"].is_null() {
        let _ = write!(out, " -> {}", ty(&sig["output"]));
    }
    out
}

fn path_of(path: &Value) -> String {
    let name = path["path"].as_str().unwrap_or("_");
    let args = &path["args"]["angle_bracketed"]["args"];
    let args: Vec<String> = args
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| {
            a.get("type")
                .map(ty)
                .or(a.get("lifetime").and_then(Value::as_str).map(str::to_owned))
        })
        .collect();
    if args.is_empty() {
        name.to_owned()
    } else {
        format!("{name}<{}>", args.join(", "))
    }
}

/// A type as written (enough of it to see a change).
fn ty(t: &Value) -> String {
    let Some((kind, body)) = t.as_object().and_then(|o| o.iter().next()) else {
        return "_".to_owned();
    };
    match kind.as_str() {
        "resolved_path" => path_of(body),
        "generic" | "primitive" => body.as_str().unwrap_or("_").to_owned(),
        "borrowed_ref" => {
            let lifetime = body["lifetime"]
                .as_str()
                .map_or(String::new(), |l| format!("{l} "));
            let mutable = if body["is_mutable"] == true {
                "mut "
            } else {
                ""
            };
            format!("&{lifetime}{mutable}{}", ty(&body["type"]))
        }
        "tuple" => {
            let parts: Vec<String> = body.as_array().into_iter().flatten().map(ty).collect();
            format!("({})", parts.join(", "))
        }
        "slice" => format!("[{}]", ty(body)),
        "array" => format!(
            "[{}; {}]",
            ty(&body["type"]),
            body["len"].as_str().unwrap_or("_")
        ),
        "impl_trait" | "dyn_trait" => {
            let bounds = if kind == "impl_trait" {
                body.as_array()
            } else {
                body["traits"].as_array()
            };
            let parts: Vec<String> = bounds
                .into_iter()
                .flatten()
                .filter_map(|b| {
                    let trait_ = b.get("trait_bound").map_or(b, |tb| tb);
                    let path = trait_.get("trait").unwrap_or(trait_);
                    path.get("path")
                        .map(|_| path_of(path))
                        .or(b.get("outlives").and_then(Value::as_str).map(str::to_owned))
                })
                .collect();
            let word = if kind == "impl_trait" { "impl" } else { "dyn" };
            format!("{word} {}", parts.join(" + "))
        }
        "raw_pointer" => format!("*{}", ty(&body["type"])),
        "qualified_path" => format!(
            "{}::{}",
            ty(&body["self_type"]),
            body["name"].as_str().unwrap_or("_")
        ),
        _ => kind.clone(),
    }
}

/// The listed API of one build, a line an item.
fn api(json: &Value) -> BTreeSet<String> {
    let index = json["index"].as_object().expect("an index");
    let root = index
        .get(&json["root"].to_string())
        .expect("the root")
        .clone();
    let mut lister = Lister {
        index,
        lines: BTreeSet::new(),
    };
    lister.module("runtime", &root);
    lister.lines
}

/// The file's text for these builds' APIs.
fn listing(apis: &[(&str, BTreeSet<String>)]) -> String {
    let mut text = String::from(
        "# runtime's public API, one item a line, for each build a user makes (rustdoc's JSON on\n\
         # the nightly toolchain). Written by\n\
         #   UPDATE_PUBLIC_API=1 cargo test -p harness --test all -- public_api\n\
         # and checked by the same test: a change here is a change to the product's API.\n",
    );
    for (name, lines) in apis {
        let (_, target, features) = BUILDS.iter().find(|b| b.0 == *name).expect("a build");
        let _ = writeln!(
            text,
            "\n[{name}] --features {features}{}",
            target.map_or(String::new(), |t| format!(" --target {t}"))
        );
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
    }
    text
}

#[test]
fn the_public_api_is_the_checked_list_and_docs_runtime_names_every_item() {
    let here = CargoOutput::of_running_executable().expect("tests run from a target directory");
    let target_dir = here.target_dir.join("public-api");
    nightly_with_wasm32();
    let apis: Vec<(&str, BTreeSet<String>)> = BUILDS
        .iter()
        .map(|(name, target, features)| (*name, api(&rustdoc_json(&target_dir, *target, features))))
        .collect();
    let text = listing(&apis);
    let file = repo_root().join("runtime/public-api.txt");
    if std::env::var_os(UPDATE).is_some() {
        std::fs::write(&file, &text).expect("write runtime/public-api.txt");
    }
    let listed = std::fs::read_to_string(&file).unwrap_or_default();
    if listed != text {
        let old: BTreeSet<&str> = listed.lines().collect();
        let new: BTreeSet<&str> = text.lines().collect();
        let mut diff = String::new();
        for line in old.difference(&new) {
            let _ = writeln!(diff, "- {line}");
        }
        for line in new.difference(&old) {
            let _ = writeln!(diff, "+ {line}");
        }
        panic!(
            "runtime's public API is not runtime/public-api.txt's:\n{diff}\nIf the change is \
             meant, write the list with `{UPDATE}=1 cargo test -p harness --test all -- \
             public_api`, name each new item on docs/runtime.md, and commit both"
        );
    }

    let page =
        std::fs::read_to_string(repo_root().join("docs/runtime.md")).expect("docs/runtime.md");
    let unnamed: BTreeSet<String> = apis
        .iter()
        .flat_map(|(_, lines)| lines.iter())
        .filter(|line| {
            !["impl ", "mod ", "variant ", "field "]
                .iter()
                .any(|kind| line.starts_with(kind))
        })
        .filter_map(|line| {
            let path = line
                .split(' ')
                .nth(1)?
                .split('(')
                .next()?
                .trim_end_matches(':');
            let name = path.rsplit("::").next()?;
            let named = [
                format!("`{name}`"),
                format!("::{name}`"),
                format!("{name}("),
                format!("{name}::"),
            ]
            .iter()
            .any(|form| page.contains(form.as_str()));
            (!named).then(|| path.to_owned())
        })
        .collect();
    assert!(
        unnamed.is_empty(),
        "docs/runtime.md does not name these public items (as `{{name}}`):\n{}",
        unnamed.into_iter().collect::<Vec<_>>().join("\n")
    );
}
