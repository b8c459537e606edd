//! Finding the workerd binary and its version.

use crate::world::process::child_command;
use std::path::{Path, PathBuf};

use crate::world::npm::{self, NpmError};
use crate::world::paths::{pinned_workerd_dir, repo_root};

/// The npm package that ships workerd for this platform.
pub const PLATFORM_PACKAGE: &str = "@cloudflare/workerd-linux-64";

/// Why no usable workerd was found.
#[derive(Debug, thiserror::Error)]
pub enum FindError {
    /// `WORKERD` names no executable: a typo would otherwise fall back silently.
    #[error("WORKERD={0} is not an executable file")]
    EnvNotExecutable(PathBuf),
    /// npm could not install workerd.
    #[error("{0}; or set WORKERD")]
    Npm(#[from] NpmError),
    /// The folder for a workerd release could not be made.
    #[error("could not make {dir}: {source}")]
    VersionDir {
        /// The folder.
        dir: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// The binary did not tell its version, so it cannot be checked against the pin.
    #[error("`{path} --version` failed: {detail}")]
    Version {
        /// The binary.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The pin (`package.json`) could not be read.
    #[error("could not read {path}: {detail}")]
    Pin {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// A workerd other than the pin, outside an edge run: results would not be the pin's.
    #[error(
        "workerd {found} ({path}) is not the pinned {pinned}; pass --edge (or HARNESS_EDGE=1) for an edge run \
         against another version"
    )]
    NotThePin {
        /// Its version.
        found: String,
        /// The pinned version.
        pinned: String,
        /// The binary.
        path: PathBuf,
    },
    /// The newest release could not be asked of npm.
    #[error("`npm view {PLATFORM_PACKAGE} version` failed: {0}")]
    Newest(String),
}

/// Which workerd a run uses. By default the pinned one; an edge run may use
/// any version.
#[derive(Debug, Clone, Default)]
pub struct WorkerdChoice {
    /// A binary to use (`--workerd PATH`, or the `WORKERD` variable).
    pub path: Option<PathBuf>,
    /// An npm release of `@cloudflare/workerd-linux-64` to install and use,
    /// such as `1.20261117.1` or `latest` (`--workerd-version`, or `WORKERD_VERSION`).
    pub npm_version: Option<String>,
    /// Whether a version other than the pin is allowed (`--edge`, or `HARNESS_EDGE=1`).
    pub edge: bool,
}

impl WorkerdChoice {
    /// The choice the environment makes: `WORKERD`, `WORKERD_VERSION`, `HARNESS_EDGE`.
    pub fn from_env() -> WorkerdChoice {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        WorkerdChoice {
            path: var("WORKERD").map(PathBuf::from),
            npm_version: var("WORKERD_VERSION").map(|v| v.to_string_lossy().into_owned()),
            edge: var("HARNESS_EDGE").is_some_and(|v| v != "0"),
        }
    }
}

/// A workerd binary and the version it reports.
#[derive(Debug, Clone)]
pub struct Workerd {
    /// The binary every process of the run starts.
    pub path: PathBuf,
    /// What `workerd --version` prints after `workerd `, such as `2026-11-17`.
    pub version: String,
    /// How it was found, for the first line the harness prints.
    pub source: &'static str,
}

/// Finds workerd: the chosen binary or npm version, else the pinned npm
/// folder, then `PATH`; when none has it, installs the pinned folder with
/// `npm ci`, saying so on stderr. A version other than the pin is refused
/// unless the choice is an edge run.
pub fn find_workerd(choice: &WorkerdChoice) -> Result<Workerd, FindError> {
    let (path, source) = locate(choice)?;
    let version = version_of(&path)?;
    let pinned = pinned_version(&pinned_workerd_dir())?;
    if version != pinned && !choice.edge {
        return Err(FindError::NotThePin {
            found: version,
            pinned,
            path,
        });
    }
    Ok(Workerd {
        path,
        version,
        source,
    })
}

fn locate(choice: &WorkerdChoice) -> Result<(PathBuf, &'static str), FindError> {
    if let Some(path) = &choice.path {
        return if path.is_file() {
            Ok((path.clone(), "--workerd / WORKERD"))
        } else {
            Err(FindError::EnvNotExecutable(path.clone()))
        };
    }
    if let Some(version) = &choice.npm_version {
        let version = if version == "latest" {
            newest_npm_version()?
        } else {
            version.clone()
        };
        let dir = repo_root().join("target/workerd-versions").join(&version);
        let binary = binary_in(&dir);
        if !binary.is_file() {
            install_version(&dir, &version)?;
        }
        return Ok((binary, "--workerd-version / WORKERD_VERSION"));
    }
    let pinned = binary_in(&pinned_workerd_dir());
    if pinned.is_file() {
        // Completes an install that lacks a package added to the pin since,
        // under the install lock, so no binary is run while it is written.
        install_pinned(&pinned_workerd_dir())?;
        return Ok((pinned, "tools/fixtures/workers"));
    }
    if let Ok(path) = which::which("workerd") {
        return Ok((path, "PATH"));
    }
    install_pinned(&pinned_workerd_dir())?;
    Ok((pinned, "tools/fixtures/workers (installed now)"))
}

/// The newest published release of workerd for this platform.
pub fn newest_npm_version() -> Result<String, FindError> {
    let output = child_command("npm")
        .args(["view", PLATFORM_PACKAGE, "version"])
        .output()
        .map_err(|e| FindError::Newest(e.to_string()))?;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if output.status.success() && !version.is_empty() {
        Ok(version)
    } else {
        Err(FindError::Newest(
            String::from_utf8_lossy(&output.stderr).into_owned(),
        ))
    }
}

/// Installs one npm release of workerd into `dir` (a folder of its own), saying so.
pub fn install_version(dir: &Path, npm_version: &str) -> Result<(), FindError> {
    eprintln!(
        "harness: installing {PLATFORM_PACKAGE}@{npm_version} into {}",
        dir.display()
    );
    std::fs::create_dir_all(dir).map_err(|source| FindError::VersionDir {
        dir: dir.to_owned(),
        source,
    })?;
    let package = format!("{PLATFORM_PACKAGE}@{npm_version}");
    Ok(npm::run(
        dir,
        &[
            "install",
            "--no-save",
            "--no-package-lock",
            "--prefix",
            &dir.to_string_lossy(),
            &package,
        ],
    )?)
}

/// Runs `npm ci --ignore-scripts` in the pinned folder unless workerd and
/// miniflare are both installed there, saying so. No install script is
/// needed: the workerd binary ships inside its platform package, and
/// miniflare (the reference core's worker files) is read as text.
pub fn install_pinned(dir: &Path) -> Result<(), FindError> {
    let workerd = binary_in(dir);
    let miniflare = dir.join("node_modules/miniflare/package.json");
    Ok(npm::ci_unless(
        dir,
        &[&workerd, &miniflare],
        "workerd is not installed",
        &["--ignore-scripts"],
    )?)
}

/// Where npm puts the workerd binary inside an npm folder.
pub fn binary_in(npm_dir: &Path) -> PathBuf {
    npm_dir
        .join("node_modules")
        .join(PLATFORM_PACKAGE)
        .join("bin/workerd")
}

/// The version a workerd binary reports.
pub fn version_of(path: &Path) -> Result<String, FindError> {
    let output = child_command(path)
        .arg("--version")
        .output()
        .map_err(|e| FindError::Version {
            path: path.to_owned(),
            detail: e.to_string(),
        })?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.trim()
        .strip_prefix("workerd ")
        .map(str::to_owned)
        .filter(|_| output.status.success())
        .ok_or_else(|| FindError::Version {
            path: path.to_owned(),
            detail: format!("unexpected output {:?}", text.trim()),
        })
}

/// The workerd version the npm folder pins, as workerd prints it: npm's
/// `1.20261117.1` is workerd's `2026-11-17`.
pub fn pinned_version(npm_dir: &Path) -> Result<String, FindError> {
    let npm_version = pinned_npm_version(npm_dir)?;
    npm_version_to_date(&npm_version).ok_or_else(|| FindError::Pin {
        path: npm_dir.join("package.json"),
        detail: format!("`{npm_version}` is not a workerd release version"),
    })
}

/// The npm release the folder's `package.json` pins, such as `1.20261117.1`.
pub fn pinned_npm_version(npm_dir: &Path) -> Result<String, FindError> {
    let manifest = npm_dir.join("package.json");
    let pin_error = |detail: String| FindError::Pin {
        path: manifest.clone(),
        detail,
    };
    let text = std::fs::read_to_string(&manifest).map_err(|e| pin_error(e.to_string()))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| pin_error(e.to_string()))?;
    json["dependencies"][PLATFORM_PACKAGE]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| pin_error(format!("no dependency on {PLATFORM_PACKAGE}")))
}

/// `1.20261117.1` -> `2026-11-17`.
pub fn npm_version_to_date(npm_version: &str) -> Option<String> {
    let date = npm_version.split('.').nth(1)?;
    if date.len() != 8 || !date.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(format!("{}-{}-{}", &date[..4], &date[4..6], &date[6..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npm_versions_map_to_workerd_dates() {
        assert_eq!(
            npm_version_to_date("1.20261117.1").as_deref(),
            Some("2026-11-17")
        );
        assert_eq!(npm_version_to_date("latest"), None);
    }

    #[test]
    fn the_pin_is_readable() {
        assert_eq!(
            pinned_version(&pinned_workerd_dir()).expect("pin"),
            "2026-11-17"
        );
    }
}
