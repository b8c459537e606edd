//! Whether something cargo built is older than what it was built from, and
//! where the running harness was built: the harness builds what it runs
//! (the wasm deployable, `native-fixture`) when it is missing or stale, and
//! asks cargo nothing when no file the last build read has changed.

use crate::world::process::child_command;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use crate::world::paths::repo_root;

/// Files a build reads that cargo's dep-info does not list: the manifests
/// (profiles, features, dependencies) and the lockfile.
pub const MANIFESTS: [&str; 8] = [
    "Cargo.toml",
    "Cargo.lock",
    "runtime/Cargo.toml",
    "harness/Cargo.toml",
    "harness/workers/wasm-bindgen/Cargo.toml",
    "harness/workers/workers-rs/Cargo.toml",
    "harness/workers/axum/Cargo.toml",
    "harness/bench-native/Cargo.toml",
];

/// Whether every file the build of `artifact` read is older than
/// `built_at`: the sources its dep-info (`dep_info`, cargo's Makefile-style
/// `.d` file beside it) lists, and [`MANIFESTS`]. Then cargo would find
/// nothing to do. Anything missing or unreadable says no.
pub fn up_to_date(artifact: &Path, dep_info: &Path, built_at: SystemTime) -> bool {
    if !artifact.is_file() {
        return false;
    }
    let Ok(dep_info) = std::fs::read_to_string(dep_info) else {
        return false;
    };
    let Some(sources) = dep_info_sources(&dep_info, artifact) else {
        return false;
    };
    let root = repo_root();
    let manifests = MANIFESTS.iter().map(|m| root.join(m));
    sources
        .into_iter()
        .chain(manifests)
        .all(|source| modified(&source).is_some_and(|at| at <= built_at))
}

/// When a file was last modified, if it exists.
pub fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Whether `source` changed after `derived` was made (or either is missing).
pub fn is_newer(source: &Path, derived: &Path) -> bool {
    match (modified(source), modified(derived)) {
        (Some(s), Some(d)) => s > d,
        _ => true,
    }
}

/// The files a Makefile-style dep-info file lists for the rule whose target
/// is `artifact` (matched by file name: cargo writes the absolute path it
/// built at, which a symlinked directory may spell otherwise), a space in a
/// name escaped as `\ `; `None` when it has no such rule.
pub fn dep_info_sources(dep_info: &str, artifact: &Path) -> Option<Vec<PathBuf>> {
    let name = artifact.file_name()?.to_string_lossy();
    let rule = dep_info.lines().find_map(|line| {
        let (target, rule) = split_rule(line)?;
        (Path::new(&target).file_name()?.to_string_lossy() == name).then_some(rule)
    })?;
    Some(words(rule).into_iter().map(PathBuf::from).collect())
}

/// A `target: sources` line split at its first unescaped colon.
fn split_rule(line: &str) -> Option<(String, &str)> {
    let mut escaped = false;
    for (at, c) in line.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            ':' if !escaped => {
                let target = words(&line[..at]).into_iter().next()?;
                return Some((target, &line[at + 1..]));
            }
            _ => escaped = false,
        }
    }
    None
}

/// Whitespace-separated words, `\x` standing for `x`.
fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => word.extend(chars.next()),
            ' ' | '\t' => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// Where the running executable was built: its target directory, the
/// profile's output folder in it (`debug`, `release`, `bench-native`), and
/// the target triple when it was built for one. A binary built beside it
/// with [`CargoOutput::build_command`] shares its profile and directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CargoOutput {
    /// The target directory (`target/`, or `CARGO_TARGET_DIR`).
    pub target_dir: PathBuf,
    /// Where the profile's binaries go (`target/debug`).
    pub profile_dir: PathBuf,
    /// The profile, as `--profile` takes it (`dev` for `debug`).
    pub profile: String,
    /// `--target`, when the executable was built for a named triple.
    pub triple: Option<String>,
}

impl CargoOutput {
    /// Where the running executable was built: `target/PROFILE/harness`, or
    /// a test or bench in `target/PROFILE/deps/`.
    pub fn of_running_executable() -> Option<CargoOutput> {
        Self::of_executable(&std::env::current_exe().ok()?)
    }

    /// Where the executable at `exe` was built (see [`Self::of_running_executable`]).
    pub fn of_executable(exe: &Path) -> Option<CargoOutput> {
        let mut dir = exe.parent()?;
        if dir.file_name()? == "deps" {
            dir = dir.parent()?;
        }
        let profile_dir = dir.to_owned();
        let folder = profile_dir.file_name()?.to_string_lossy().into_owned();
        let above = profile_dir.parent()?;
        // cargo marks the target directory itself with CACHEDIR.TAG (when it
        // made the directory) and keeps its rustc cache there (always); a
        // folder between it and the profile's is a target triple's.
        let is_target_dir = ["CACHEDIR.TAG", ".rustc_info.json"]
            .iter()
            .any(|mark| above.join(mark).is_file());
        let (target_dir, triple) = if is_target_dir {
            (above.to_owned(), None)
        } else {
            let triple = above.file_name()?.to_string_lossy().into_owned();
            (above.parent()?.to_owned(), Some(triple))
        };
        let profile = match folder.as_str() {
            "debug" => "dev".to_owned(),
            other => other.to_owned(),
        };
        Some(CargoOutput {
            target_dir,
            profile_dir,
            profile,
            triple,
        })
    }

    /// `cargo build` of one binary of `package` into this profile and
    /// directory, run from the repository. The outer build's `RUSTFLAGS`
    /// stay, so cargo reuses what that build compiled.
    pub fn build_command(&self, package: &str, bin: &str) -> Command {
        let mut command = child_command(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        command
            .args(["build", "--quiet", "-p", package, "--bin", bin, "--profile"])
            .arg(&self.profile)
            .arg("--target-dir")
            .arg(&self.target_dir)
            .current_dir(repo_root())
            .env_remove("CARGO_TARGET_DIR");
        if let Some(triple) = &self.triple {
            command.args(["--target", triple]);
        }
        command
    }

    /// The command [`Self::build_command`] runs, as a person would type it.
    pub fn shown(&self, package: &str, bin: &str) -> String {
        let profile = match self.profile.as_str() {
            "dev" => String::new(),
            "release" => " --release".to_owned(),
            other => format!(" --profile {other}"),
        };
        format!("cargo build -p {package} --bin {bin}{profile}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::time::Duration;

    #[test]
    fn dep_info_lists_the_artifacts_sources_with_escaped_spaces() {
        let dep_info =
            "/t/a.wasm: /src/lib.rs /src/my\\ file.rs\n\n/src/lib.rs:\n\n/src/my\\ file.rs:\n";
        assert_eq!(
            dep_info_sources(dep_info, Path::new("/t/a.wasm")),
            Some(vec![
                PathBuf::from("/src/lib.rs"),
                PathBuf::from("/src/my file.rs")
            ])
        );
        // The same file through another spelling of its folder.
        assert_eq!(
            dep_info_sources(dep_info, Path::new("/link/to/t/a.wasm")).map(|s| s.len()),
            Some(2)
        );
        assert_eq!(dep_info_sources(dep_info, Path::new("/t/b.wasm")), None);
    }

    fn set_time(path: &Path, time: SystemTime) {
        let file = File::options()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .expect("open");
        file.set_modified(time).expect("mtime");
    }

    #[test]
    fn a_source_changed_after_the_build_makes_it_stale() {
        let dir = tempfile::tempdir().expect("tempdir");
        let source = dir.path().join("lib.rs");
        let artifact = dir.path().join("native-fixture");
        let dep_info = dir.path().join("native-fixture.d");
        let now = SystemTime::now();
        set_time(&source, now - Duration::from_secs(100));
        set_time(&artifact, now);
        std::fs::write(
            &dep_info,
            format!("{}: {}\n", artifact.display(), source.display()),
        )
        .expect("dep-info");
        // The manifests are the repository's: older than an artifact made now.
        let fresh = up_to_date(&artifact, &dep_info, now);
        set_time(&source, now + Duration::from_secs(100));
        let edited = up_to_date(&artifact, &dep_info, now);
        set_time(&source, now - Duration::from_secs(100));
        std::fs::remove_file(&dep_info).expect("rm dep-info");
        let no_dep_info = up_to_date(&artifact, &dep_info, now);
        std::fs::write(
            &dep_info,
            format!("{}: {}\n", artifact.display(), source.display()),
        )
        .expect("dep-info");
        std::fs::remove_file(&artifact).expect("rm artifact");
        let missing = up_to_date(&artifact, &dep_info, now);
        assert_eq!(
            (fresh, edited, no_dep_info, missing),
            (true, false, false, false)
        );
    }

    #[test]
    fn the_profile_and_directory_come_from_where_the_executable_sits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("target");
        std::fs::create_dir_all(target.join("debug/deps")).expect("mkdir");
        std::fs::create_dir_all(target.join("x86_64-unknown-linux-gnu/release")).expect("mkdir");
        std::fs::create_dir_all(target.join("bench-native/deps")).expect("mkdir");
        std::fs::write(target.join("CACHEDIR.TAG"), "").expect("tag");
        let of = |exe: &str| CargoOutput::of_executable(&target.join(exe)).expect("an output");

        let harness = of("debug/harness");
        assert_eq!(
            (
                harness.profile.as_str(),
                &harness.target_dir,
                &harness.triple
            ),
            ("dev", &target, &None)
        );
        assert_eq!(
            harness.shown("harness", "native-fixture"),
            "cargo build -p harness --bin native-fixture"
        );
        let test = of("debug/deps/scenarios-0123");
        assert_eq!(test.profile_dir, target.join("debug"));
        let bench = of("bench-native/deps/native-0123");
        assert_eq!(bench.profile, "bench-native");
        assert_eq!(
            bench.shown("harness", "native-fixture"),
            "cargo build -p harness --bin native-fixture --profile bench-native"
        );
        let cross = of("x86_64-unknown-linux-gnu/release/harness");
        assert_eq!(
            (
                cross.profile.as_str(),
                &cross.target_dir,
                cross.triple.as_deref()
            ),
            ("release", &target, Some("x86_64-unknown-linux-gnu"))
        );
        let args: Vec<String> = cross
            .build_command("harness", "native-fixture")
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(
            args.windows(2)
                .any(|w| w == ["--target", "x86_64-unknown-linux-gnu"]),
            "{args:?}"
        );
        assert!(
            args.windows(2).any(|w| w == ["--profile", "release"]),
            "{args:?}"
        );
        // A target directory made before cargo ran has no CACHEDIR.TAG, and
        // is known by cargo's rustc cache.
        std::fs::remove_file(target.join("CACHEDIR.TAG")).expect("rm tag");
        std::fs::write(target.join(".rustc_info.json"), "{}").expect("rustc cache");
        let made_by_hand = of("debug/harness");
        assert_eq!(
            (&made_by_hand.target_dir, &made_by_hand.triple),
            (&target, &None)
        );
    }
}
