//! What the checks' tests build their cases from: a scenario loaded as the
//! harness loads files, and records of requests and processes.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::engine::{InstanceKind, InstanceRecord, RequestRecord};
use crate::language::scenario::Prepared;
use crate::world::process::{LogLine, Stream};

/// The one scenario of `text`, loaded as the harness loads files.
pub(in crate::judge) fn prepared(text: &str) -> Prepared {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("s.toml");
    std::fs::write(&path, text).expect("write");
    let mut all = crate::language::scenario::load_file(&path, std::path::Path::new("s.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    all.remove(0)
}

/// A request answered `status` (a 429 with `Retry-After: 60`).
pub(in crate::judge) fn request(step: usize, number: usize, status: u16) -> RequestRecord {
    let mut headers = BTreeMap::new();
    if status == 429 {
        headers.insert("retry-after".to_owned(), "60".to_owned());
    }
    RequestRecord {
        step,
        number,
        isolate: 0,
        outcome: Ok(status),
        headers,
        body: r#"{"ok":true}"#.to_owned(),
        latency: Duration::from_millis(10),
        sent: Duration::ZERO,
    }
}

/// A workerd process's record that logged these lines and served traffic.
pub(in crate::judge) fn instance(lines: &[&str]) -> InstanceRecord {
    InstanceRecord {
        kind: InstanceKind::Workerd,
        isolate: 0,
        generation: 0,
        lines: lines
            .iter()
            .map(|text| LogLine {
                at: Duration::ZERO,
                stream: Stream::Stdout,
                text: (*text).to_owned(),
            })
            .collect(),
        served: true,
    }
}

/// A scenario's first lines: its name and an empty application (counted in memory).
pub(in crate::judge) const HEAD: &str = "[[scenario]]\nname = \"s\"\napplication_inline = ''\n";
