//! The differential check: one scenario observed on both counting cores
//! (the harness's own and Cloudflare's simulator, see [`crate::world::workerd::reference`])
//! must agree on what reached a binding and what came of it. Plain
//! functions, no I/O; `harness/tests/differential.rs` runs the scenarios.
//!
//! Compared, step by step: the status sequence of a sequential `send` (the
//! counts of each status for a concurrent one, whose order is not the
//! scenario's), the outcome of each raw `limit()` call, the keys that
//! reached each binding, and the diagnostics of an invalid application.
//! Differences by design are listed in `scenarios/differential.toml`, each
//! with a reason; a listed scenario whose cores agree is an unexpected
//! agreement and fails, so the list never rots.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use crate::engine::{Observation, RequestRecord};
pub use crate::judge::expected_failures::ListError;
use crate::judge::expected_failures::ListFile;
use crate::language::scenario::{DIFFERENTIAL_FILE, Prepared};

/// One thing the two cores disagree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// Such as `step 1 (send): statuses`.
    pub what: String,
    /// What the harness's core gave.
    pub harness: String,
    /// What Cloudflare's simulator gave.
    pub reference: String,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.what)?;
        writeln!(f, "   | harness's core: {}", self.harness)?;
        write!(f, "   | reference:      {}", self.reference)
    }
}

fn status_of(record: &RequestRecord) -> String {
    match &record.outcome {
        Ok(status) => status.to_string(),
        Err(_) => "lost".to_owned(),
    }
}

/// `120 x 200 then 429`: a step's statuses in request order, runs collapsed.
fn sequence(records: &[&RequestRecord]) -> String {
    let mut ordered: Vec<&&RequestRecord> = records.iter().collect();
    ordered.sort_by_key(|r| r.number);
    let mut runs: Vec<(usize, String)> = Vec::new();
    for status in ordered.into_iter().map(|r| status_of(r)) {
        match runs.last_mut() {
            Some((count, last)) if *last == status => *count += 1,
            _ => runs.push((1, status)),
        }
    }
    let parts: Vec<String> = runs.iter().map(|(n, s)| format!("{n} x {s}")).collect();
    parts.join(" then ")
}

/// `{200: 120, 429: 1}`: how many of each status, in any order.
fn counts(records: &[&RequestRecord]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for record in records {
        *counts.entry(status_of(record)).or_default() += 1;
    }
    format!("{counts:?}")
}

/// Everything the two observations of `prepared` disagree on.
pub fn compare(
    prepared: &Prepared,
    harness: &Observation,
    reference: &Observation,
) -> Vec<Difference> {
    let mut differences = Vec::new();
    let mut differ = |what: String, h: String, r: String| {
        if h != r {
            differences.push(Difference {
                what,
                harness: h,
                reference: r,
            });
        }
    };
    differ(
        "diagnostics".to_owned(),
        format!("{:?}", harness.diagnostics),
        format!("{:?}", reference.diagnostics),
    );
    let scenario = prepared.scenario.scenario.get_ref();
    for (index, step) in scenario.steps.iter().enumerate() {
        let step = step.get_ref();
        if let Some(send) = &step.send {
            let of = |o: &'_ Observation| -> Vec<RequestRecord> {
                o.requests
                    .iter()
                    .filter(|r| r.step == index)
                    .cloned()
                    .collect()
            };
            let (h, r) = (of(harness), of(reference));
            let (h, r): (Vec<&RequestRecord>, Vec<&RequestRecord>) =
                (h.iter().collect(), r.iter().collect());
            if send.concurrency == 1 {
                differ(
                    format!("step {} (send): statuses in order", index + 1),
                    sequence(&h),
                    sequence(&r),
                );
            } else {
                differ(
                    format!("step {} (send): statuses (concurrent)", index + 1),
                    counts(&h),
                    counts(&r),
                );
            }
        }
        if step.limit.is_some() {
            let of = |o: &Observation| {
                o.calls
                    .iter()
                    .find(|c| c.step == index)
                    .map_or_else(|| "not called".to_owned(), |c| c.outcome.to_string())
            };
            differ(
                format!("step {} (limit): outcome", index + 1),
                of(harness),
                of(reference),
            );
        }
    }
    differ(
        "keys that reached each binding".to_owned(),
        format!("{:?}", harness.binding_keys),
        format!("{:?}", reference.binding_keys),
    );
    differences
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    difference: Vec<Spanned<ListedDifference>>,
}

/// A scenario on which the cores differ by design.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListedDifference {
    /// The trial's name, `FILE::NAME`.
    pub scenario: String,
    /// Why the cores cannot agree: mandatory.
    pub reason: String,
}

/// The differences by design of one scenarios directory.
#[derive(Debug, Clone, Default)]
pub struct ListedDifferences {
    entries: Vec<ListedDifference>,
}

impl ListedDifferences {
    /// Reads `dir/differential.toml` (none is an empty list), checking that
    /// every entry has a reason and names one of `known_trials`.
    pub fn load(dir: &Path, known_trials: &[&str]) -> Result<ListedDifferences, ListError> {
        let Some((list, file)) = ListFile::read::<File>(dir.join(DIFFERENTIAL_FILE))? else {
            return Ok(ListedDifferences::default());
        };
        let error = |offset: usize, message: String| list.error(offset, message);
        let mut entries = Vec::new();
        for entry in file.difference {
            let at = entry.span().start;
            let entry = entry.into_inner();
            if entry.reason.trim().is_empty() {
                return Err(error(
                    at,
                    format!("the difference of `{}` has no reason", entry.scenario),
                ));
            }
            if !known_trials.contains(&entry.scenario.as_str()) {
                return Err(error(
                    at,
                    format!(
                        "`{}` is no scenario; remove or rename the entry",
                        entry.scenario
                    ),
                ));
            }
            entries.push(entry);
        }
        Ok(ListedDifferences { entries })
    }

    /// The verdict on a trial whose cores showed `differences`.
    pub fn verdict(&self, trial: &str, differences: Vec<Difference>) -> Agreement {
        let listed = self.entries.iter().find(|e| e.scenario == trial);
        match (listed, differences.is_empty()) {
            (None, true) => Agreement::Agree,
            (None, false) => Agreement::Differ(differences),
            (Some(e), false) => Agreement::DifferAsListed {
                reason: e.reason.clone(),
                differences,
            },
            (Some(e), true) => Agreement::UnexpectedAgreement {
                reason: e.reason.clone(),
            },
        }
    }
}

/// How a trial of the differential check ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Agreement {
    /// Both cores gave the same.
    Agree,
    /// They differ, and the scenario is not listed: a failure.
    Differ(Vec<Difference>),
    /// They differ, as listed.
    DifferAsListed {
        /// The list's reason.
        reason: String,
        /// What differed, shown though it passes.
        differences: Vec<Difference>,
    },
    /// Listed as differing, but they agree: the entry must go.
    UnexpectedAgreement {
        /// The list's reason, to say which entry.
        reason: String,
    },
}

impl Agreement {
    /// Whether the check is still green.
    pub fn is_ok(&self) -> bool {
        match self {
            Agreement::Agree | Agreement::DifferAsListed { .. } => true,
            Agreement::Differ(_) | Agreement::UnexpectedAgreement { .. } => false,
        }
    }
}

impl fmt::Display for Agreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, differences: &[Difference]| {
            differences
                .iter()
                .try_for_each(|d| writeln!(f, "differ: {d}"))
        };
        match self {
            Agreement::Agree => f.write_str("the harness's core and Cloudflare's simulator agree"),
            Agreement::Differ(differences) => {
                list(f, differences)?;
                write!(
                    f,
                    "the cores differ; if that is by design, list the scenario with its reason in scenarios/{DIFFERENTIAL_FILE}"
                )
            }
            Agreement::DifferAsListed {
                reason,
                differences,
            } => {
                list(f, differences)?;
                write!(f, "the cores differ, as listed: {reason}")
            }
            Agreement::UnexpectedAgreement { reason } => write!(
                f,
                "unexpected agreement: listed in scenarios/{DIFFERENTIAL_FILE} as differing ({reason}), but the cores agree; remove the entry"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::time::Duration;

    use super::*;
    use crate::engine::CallRecord;
    use crate::language::probe::CallOutcome;

    fn prepared(steps: &str) -> Prepared {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("d.toml");
        let text = format!("[[scenario]]\nname = \"s\"\napplication_inline = '''\n'''\n{steps}");
        std::fs::write(&path, text).expect("write");
        crate::language::scenario::load_file(&path, Path::new("d.toml"))
            .expect("loads")
            .remove(0)
    }

    fn request(step: usize, number: usize, status: u16) -> RequestRecord {
        RequestRecord {
            step,
            number,
            isolate: 0,
            outcome: Ok(status),
            headers: BTreeMap::new(),
            body: String::new(),
            latency: Duration::ZERO,
            sent: Duration::ZERO,
        }
    }

    fn observed(statuses: &[u16]) -> Observation {
        Observation {
            requests: statuses
                .iter()
                .enumerate()
                .map(|(i, s)| request(0, i + 1, *s))
                .collect(),
            ..Observation::default()
        }
    }

    #[test]
    fn a_sequential_send_compares_order_and_a_concurrent_one_counts() {
        let sequential = prepared("[[scenario.steps]]\nsend = { requests = 3 }\n");
        let a = observed(&[200, 429, 200]);
        let b = observed(&[200, 200, 429]);
        let differences = compare(&sequential, &a, &b);
        assert_eq!(differences.len(), 1, "{differences:?}");
        assert_eq!(differences[0].harness, "1 x 200 then 1 x 429 then 1 x 200");
        assert_eq!(differences[0].reference, "2 x 200 then 1 x 429");

        let concurrent = prepared("[[scenario.steps]]\nsend = { requests = 3, concurrency = 3 }\n");
        assert_eq!(compare(&concurrent, &a, &b), vec![]);
        let c = observed(&[200, 429, 429]);
        assert_eq!(compare(&concurrent, &a, &c).len(), 1);
    }

    #[test]
    fn keys_and_raw_calls_are_compared() {
        let scenario =
            prepared("[[scenario.steps]]\nlimit = { binding = \"B\", outcome = \"pending\" }\n");
        let mut a = Observation::default();
        let mut b = Observation::default();
        a.calls.push(CallRecord {
            step: 0,
            isolate: 0,
            outcome: CallOutcome::Rejects("RangeError: delta must be non-zero".into()),
        });
        b.calls.push(CallRecord {
            step: 0,
            isolate: 0,
            outcome: CallOutcome::Rejects("Error: bad rate limit options: [delta]".into()),
        });
        a.binding_keys
            .insert("B".into(), BTreeSet::from(["k".to_owned()]));
        b.binding_keys
            .insert("B".into(), BTreeSet::from(["k".to_owned()]));
        let differences = compare(&scenario, &a, &b);
        assert_eq!(differences.len(), 1, "{differences:?}");
        assert_eq!(differences[0].what, "step 1 (limit): outcome");
        b.binding_keys
            .insert("B".into(), BTreeSet::from(["other".to_owned()]));
        assert_eq!(compare(&scenario, &a, &b).len(), 2);
    }

    #[test]
    fn a_listed_difference_needs_a_reason_and_an_agreement_on_it_fails() {
        let dir = tempfile::tempdir().expect("temp dir");
        let write =
            |text: &str| std::fs::write(dir.path().join(DIFFERENTIAL_FILE), text).expect("write");
        write("[[difference]]\nscenario = \"a.toml::x\"\nreason = \"  \"\n");
        assert!(ListedDifferences::load(dir.path(), &["a.toml::x"]).is_err());
        write("[[difference]]\nscenario = \"gone.toml::x\"\nreason = \"r\"\n");
        let stale = ListedDifferences::load(dir.path(), &["a.toml::x"]).expect_err("stale");
        assert!(stale.message.contains("is no scenario"), "{stale}");
        write("[[difference]]\nscenario = \"a.toml::x\"\nreason = \"r\"\n");
        let list = ListedDifferences::load(dir.path(), &["a.toml::x"]).expect("loads");
        let one = vec![Difference {
            what: "w".into(),
            harness: "h".into(),
            reference: "r".into(),
        }];
        assert!(list.verdict("a.toml::x", one.clone()).is_ok());
        assert!(!list.verdict("a.toml::x", vec![]).is_ok());
        assert!(!list.verdict("b.toml::y", one).is_ok());
        assert_eq!(list.verdict("b.toml::y", vec![]), Agreement::Agree);
    }
}
