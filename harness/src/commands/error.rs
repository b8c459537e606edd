//! Why a command could not do its work: the command line prints it on
//! stderr and exits with status 2 (1 is for what a command exists to find:
//! a failed scenario, an invalid application).

use std::path::PathBuf;

use crate::commands::cloudflare::CloudflareError;
use crate::commands::preflight::PreflightError;
use crate::commands::suite::EnvironmentError;
use crate::commands::wrangler_file::WriteError;
use crate::world::workerd::find::FindError;
use crate::world::workerd::reference::ReferenceError;

/// Why a command stopped before its verdict.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// An application description could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Application {
        /// The description's path.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// A scenarios directory could not be listed.
    #[error("cannot read scenarios in {}: {source}", dir.display())]
    Scenarios {
        /// The directory.
        dir: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// The machine lacks what the selected scenarios need (native-fixture, redis-server).
    #[error("harness: cannot start: {0}")]
    Preflight(#[from] PreflightError),
    /// workerd, the counting core or the deployable could not be prepared.
    #[error("harness: cannot start: {0}")]
    Environment(#[from] EnvironmentError),
    /// A workerd release could not be found or installed.
    #[error("harness: {0}")]
    Workerd(#[from] FindError),
    /// Cloudflare's simulator could not be prepared.
    #[error("harness: {0}")]
    Reference(#[from] ReferenceError),
    /// No temporary directory for the newer workerd.
    #[error("harness: cannot make a temporary directory")]
    TempDir,
    /// The JUnit XML could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Junit {
        /// Where it was to go.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// The report page could not be made.
    #[error(transparent)]
    HtmlPage(#[from] crate::commands::html_report::HtmlError),
    /// The report page could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Html {
        /// Where it was to go.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// The edge-compatibility job's reports could not be written.
    #[error("cannot write the reports into {}: {source}", dir.display())]
    Reports {
        /// Where they were to go.
        dir: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// `check --plan` names a deployable that has no Workers plan.
    #[error("harness: {0}")]
    Plan(String),
    /// `check --plan` could not write a plan.
    #[error("cannot write {}: {source}", path.display())]
    PlanFile {
        /// The plan's file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// `wrangler --write` could not write its file.
    #[error("harness: {0}")]
    WranglerFile(#[from] WriteError),
    /// A run on Cloudflare could not be done, or was interrupted.
    #[error("harness: {0}")]
    Cloudflare(#[from] CloudflareError),
}
