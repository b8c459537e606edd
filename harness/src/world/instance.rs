//! The processes a scenario's traffic goes to, one per isolate: a workerd
//! running the Workers deployable, or a `native-fixture` process running a
//! native one ([`crate::world::native`]). The engine drives both the same way:
//! traffic round-robin, the clock through `POST /clock`, logs kept per process.

use std::process::ExitStatus;

use crate::world::native::NativeProcess;
use crate::world::process::{LogLine, LogUnfinished, stderr_text};
use crate::world::workerd::WorkerdProcess;

/// One isolate's process.
pub enum Instance {
    /// A workerd serving the Workers deployable.
    Workerd(WorkerdProcess),
    /// A native instance (`native-fixture`).
    Native(NativeProcess),
}

impl Instance {
    /// Its base URL.
    pub fn url(&self) -> String {
        match self {
            Instance::Workerd(p) => p.url(),
            Instance::Native(p) => p.url(),
        }
    }

    /// How it exited, if it has.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        match self {
            Instance::Workerd(p) => p.exited(),
            Instance::Native(p) => p.exited(),
        }
    }

    /// Everything it wrote on stderr, for a crash report.
    pub fn stderr(&self) -> String {
        match self {
            Instance::Workerd(p) => stderr_text(&p.log),
            Instance::Native(p) => p.stderr(),
        }
    }

    /// Whether it has emulated Cloudflare bindings to read stats from.
    pub fn has_bindings(&self) -> bool {
        match self {
            Instance::Workerd(_) => true,
            Instance::Native(_) => false,
        }
    }

    /// Kills it, waits for it to go, then reads what it wrote to the end.
    pub async fn stop(self) -> Result<Vec<LogLine>, LogUnfinished> {
        match self {
            Instance::Workerd(p) => p.stop().await,
            Instance::Native(p) => p.stop().await,
        }
    }
}
