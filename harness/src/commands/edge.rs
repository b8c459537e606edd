//! The nightly edge-compatibility comparison: the same scenarios on the
//! pinned workerd and on a newer one, and the drift between them, with what
//! the nightly's run on Cloudflare itself found beside them. The report is a
//! plain function of the runs.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::commands::cloudflare::report::CloudflareResults;
use crate::commands::report::{Counts, TrialOutcome};
use crate::judge::expected_failures::Verdict;

/// One side of the comparison.
#[derive(Debug, Clone)]
pub struct Side {
    /// `pinned` or `newest`.
    pub label: String,
    /// As `workerd --version` prints it; also the compatibility date the run used.
    pub workerd_version: String,
    /// The npm release, such as `1.20261117.1`.
    pub npm_version: String,
    /// How each trial went on it.
    pub outcomes: Vec<TrialOutcome>,
}

/// When a p99 change is worth reporting: both bounds must be passed.
#[derive(Debug, Clone, Copy)]
pub struct TimingThreshold {
    /// Relative change, in percent.
    pub percent: u64,
    /// Absolute change, in ms.
    pub ms: u64,
}

/// What changed from the pinned side to the newest.
#[derive(Debug, Clone, Default)]
pub struct Drift {
    /// Green on the pinned workerd, not on the newest.
    pub newly_failing: Vec<String>,
    /// Not green on the pinned workerd, green on the newest.
    pub newly_passing: Vec<String>,
    /// Scenario, pinned p99, newest p99.
    pub timing: Vec<(String, u64, u64)>,
}

impl Drift {
    /// The drift from `pinned` to `newest`, p99 changes counted past `threshold`.
    pub fn between(pinned: &Side, newest: &Side, threshold: TimingThreshold) -> Drift {
        let before: BTreeMap<&str, &TrialOutcome> = pinned
            .outcomes
            .iter()
            .map(|o| (o.name.as_str(), o))
            .collect();
        let mut drift = Drift::default();
        for after in &newest.outcomes {
            let Some(before) = before.get(after.name.as_str()) else {
                continue;
            };
            match (before.verdict.is_ok(), after.verdict.is_ok()) {
                (true, false) => drift.newly_failing.push(after.name.clone()),
                (false, true) => drift.newly_passing.push(after.name.clone()),
                _ => {}
            }
            if let (Some(a), Some(b)) = (before.p99_ms, after.p99_ms) {
                let change = a.abs_diff(b);
                if change >= threshold.ms && change * 100 >= a.max(1) * threshold.percent {
                    drift.timing.push((after.name.clone(), a, b));
                }
            }
        }
        drift
    }
}

/// The Markdown drift report.
pub fn markdown(pinned: &Side, newest: &Side, threshold: TimingThreshold) -> String {
    let drift = Drift::between(pinned, newest, threshold);
    let (a, b) = (Counts::of(&pinned.outcomes), Counts::of(&newest.outcomes));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Edge compatibility: workerd {} against the pinned {}\n",
        newest.workerd_version, pinned.workerd_version
    );
    let _ = writeln!(
        out,
        "Every scenario, the slow ones included, ran on both. Each run used its workerd's own release date as the \
         compatibility date.\n"
    );
    let _ = writeln!(out, "| | {} | {} |", pinned.label, newest.label);
    let _ = writeln!(out, "|---|---:|---:|");
    let _ = writeln!(
        out,
        "| workerd | {} (npm {}) | {} (npm {}) |",
        pinned.workerd_version, pinned.npm_version, newest.workerd_version, newest.npm_version
    );
    let _ = writeln!(out, "| passed | {} | {} |", a.passed, b.passed);
    let _ = writeln!(out, "| failed | {} | {} |", a.failed, b.failed);
    let _ = writeln!(
        out,
        "| expected failures | {} | {} |",
        a.expected_failures, b.expected_failures
    );
    let _ = writeln!(
        out,
        "| unexpected passes | {} | {} |",
        a.unexpected_passes, b.unexpected_passes
    );
    let verdict = if b.is_ok() {
        "no regression"
    } else {
        "REGRESSED"
    };
    let _ = writeln!(out, "\nVerdict for the newest workerd: **{verdict}**.\n");

    list(&mut out, "Newly failing", &drift.newly_failing);
    list(&mut out, "Newly passing", &drift.newly_passing);
    let unexpected: Vec<String> = newest
        .outcomes
        .iter()
        .filter_map(|o| match &o.verdict {
            Verdict::UnexpectedPass { reason } => {
                Some(format!("{} (listed because: {reason})", o.name))
            }
            _ => None,
        })
        .collect();
    list(
        &mut out,
        "Unexpected passes on the newest (remove their entries from expected-failures.toml)",
        &unexpected,
    );

    let _ = writeln!(
        out,
        "## Timing changes (p99 beyond {}% and {} ms): {}\n",
        threshold.percent,
        threshold.ms,
        drift.timing.len()
    );
    if !drift.timing.is_empty() {
        let _ = writeln!(
            out,
            "| scenario | {} p99 ms | {} p99 ms |",
            pinned.label, newest.label
        );
        let _ = writeln!(out, "|---|---:|---:|");
        for (name, before, after) in &drift.timing {
            let _ = writeln!(out, "| {name} | {before} | {after} |");
        }
        out.push('\n');
    }

    let failures: Vec<&TrialOutcome> = newest
        .outcomes
        .iter()
        .filter(|o| matches!(o.verdict, Verdict::Failed))
        .collect();
    if !failures.is_empty() {
        let _ = writeln!(out, "## Failures on the newest\n");
        for o in failures {
            let _ = writeln!(
                out,
                "<details><summary>{}</summary>\n\n```\n{}\n```\n</details>\n",
                o.name, o.message
            );
        }
    }
    out
}

/// The drift report's section on the reference: every scenario's verdict on
/// the emulation's own counting core beside its verdict on Cloudflare's
/// simulator, both on the same workerd. Informative: the differential check
/// of `cargo test` is what gates; this shows the nightly state on the newest
/// workerd.
pub fn reference_markdown(emulation: &Side, reference: &Side) -> String {
    let mut out = String::new();
    let (e, r) = (
        Counts::of(&emulation.outcomes),
        Counts::of(&reference.outcomes),
    );
    let _ = writeln!(
        out,
        "## The reference: Cloudflare's simulator beside the emulation (workerd {})
",
        reference.workerd_version
    );
    let _ = writeln!(
        out,
        "The same scenarios with the emulated binding's counting core swapped for Cloudflare's simulator          (miniflare {}); the fault layer is the same.
",
        crate::world::workerd::reference::MINIFLARE_VERSION
    );
    let _ = writeln!(out, "| | {} | {} |", emulation.label, reference.label);
    let _ = writeln!(out, "|---|---:|---:|");
    let _ = writeln!(out, "| passed | {} | {} |", e.passed, r.passed);
    let _ = writeln!(out, "| failed | {} | {} |", e.failed, r.failed);
    let _ = writeln!(
        out,
        "| expected failures | {} | {} |",
        e.expected_failures, r.expected_failures
    );
    let _ = writeln!(
        out,
        "| unexpected passes | {} | {} |\n",
        e.unexpected_passes, r.unexpected_passes
    );
    let by_name: BTreeMap<&str, &TrialOutcome> = reference
        .outcomes
        .iter()
        .map(|o| (o.name.as_str(), o))
        .collect();
    let rows: Vec<(&str, &str, &str)> = emulation
        .outcomes
        .iter()
        .map(|o| {
            let theirs = by_name
                .get(o.name.as_str())
                .map_or("not run", |r| r.verdict.label());
            (o.name.as_str(), o.verdict.label(), theirs)
        })
        .collect();
    let differing: Vec<String> = rows
        .iter()
        .filter(|(_, a, b)| a != b)
        .map(|(name, a, b)| format!("{name}: {a} on the emulation, {b} on the reference"))
        .collect();
    list(&mut out, "Verdicts that differ", &differing);
    let _ = writeln!(
        out,
        "<details><summary>Every verdict</summary>\n\n| scenario | {} | {} |\n|---|---|---|",
        emulation.label, reference.label
    );
    for (name, a, b) in rows {
        let _ = writeln!(out, "| {name} | {a} | {b} |");
    }
    out.push_str("\n</details>\n");
    out
}

/// The drift report's section on Cloudflare itself: each scenario the
/// nightly ran there (`harness cloudflare`, its `results.json`) with its
/// verdicts on the pinned and newest workerd beside it, how it was checked
/// there and how many requests passed before the first 429. `None`: the
/// Cloudflare job did not run (no secrets) or wrote nothing.
pub fn cloudflare_markdown(
    pinned: &Side,
    newest: &Side,
    cloudflare: Result<&CloudflareResults, &str>,
) -> String {
    let mut out = String::from("## On Cloudflare itself\n\n");
    let results = match cloudflare {
        Ok(results) => results,
        Err(why) => {
            let _ = writeln!(
                out,
                "Not run: {why}. The Cloudflare job needs the repository secrets CLOUDFLARE_API_TOKEN and CLOUDFLARE_ACCOUNT_ID (it prints `skipped: no CLOUDFLARE_API_TOKEN` without them).\n"
            );
            return out;
        }
    };
    let _ = writeln!(
        out,
        "The scenarios marked `on_cloudflare`, each deployed as a Worker of its own with the real binding (scripts {}, namespace ids {}, {} s); the local verdicts on the workerd columns. Bounds are in scenarios/README.md.\n",
        results.scripts,
        results
            .namespace_ids
            .map_or("none".to_owned(), |(a, b)| format!("{a} to {b}")),
        results.seconds
    );
    let verdict = |side: &Side, name: &str| {
        side.outcomes
            .iter()
            .find(|o| o.name == name)
            .map_or("not run", |o| o.verdict.label())
            .to_owned()
    };
    let _ = writeln!(
        out,
        "| scenario | {} | {} | cloudflare | checked there | passed before 1st 429 / limit |\n|---|---|---|---|---|---|",
        pinned.label, newest.label
    );
    for s in &results.scenarios {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            s.name,
            verdict(pinned, &s.name),
            verdict(newest, &s.name),
            s.verdict,
            s.on_cloudflare,
            s.passed_before_first_429
        );
    }
    out.push('\n');
    for s in results.scenarios.iter().filter(|s| !s.message.is_empty()) {
        let _ = writeln!(
            out,
            "<details><summary>{} on Cloudflare</summary>\n\n```\n{}\n```\n</details>\n",
            s.name, s.message
        );
    }
    out
}

fn list(out: &mut String, title: &str, names: &[String]) {
    let _ = writeln!(out, "## {title}: {}\n", names.len());
    for name in names {
        let _ = writeln!(out, "- {name}");
    }
    if !names.is_empty() {
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn outcome(name: &str, verdict: Verdict, p99: u64) -> TrialOutcome {
        TrialOutcome {
            name: name.into(),
            passed: matches!(verdict, Verdict::Passed | Verdict::UnexpectedPass { .. }),
            verdict,
            message: "why".into(),
            requests: 1,
            p50_ms: Some(p99),
            p99_ms: Some(p99),
            duration: Duration::ZERO,
            trace: crate::commands::trace::Trace::default(),
        }
    }

    fn side(label: &str, outcomes: Vec<TrialOutcome>) -> Side {
        Side {
            label: label.into(),
            workerd_version: "2026-11-17".into(),
            npm_version: "1.20261117.1".into(),
            outcomes,
        }
    }

    #[test]
    fn drift_lists_what_changed() {
        let pinned = side(
            "pinned",
            vec![
                outcome("a", Verdict::Passed, 10),
                outcome("b", Verdict::Failed, 10),
                outcome("c", Verdict::Passed, 100),
                outcome("d", Verdict::Passed, 100),
            ],
        );
        let newest = side(
            "newest",
            vec![
                outcome("a", Verdict::Failed, 10),
                outcome("b", Verdict::Passed, 10),
                outcome("c", Verdict::Passed, 300),
                outcome("d", Verdict::UnexpectedPass { reason: "r".into() }, 110),
            ],
        );
        let threshold = TimingThreshold {
            percent: 50,
            ms: 25,
        };
        let drift = Drift::between(&pinned, &newest, threshold);
        assert_eq!(drift.newly_failing, ["a", "d"]);
        assert_eq!(drift.newly_passing, ["b"]);
        assert_eq!(drift.timing, [("c".to_owned(), 100, 300)]);
        let text = markdown(&pinned, &newest, threshold);
        assert!(text.contains("| failed | 1 | 1 |"), "{text}");
        assert!(text.contains("| unexpected passes | 0 | 1 |"), "{text}");
        assert!(text.contains("**REGRESSED**"), "{text}");
        assert!(text.contains("- d (listed because: r)"), "{text}");
    }

    #[test]
    fn cloudflare_s_verdicts_and_figures_stand_beside_the_workerd_columns() {
        use crate::commands::cloudflare::report::ScenarioResult;
        let pinned = side("pinned", vec![outcome("a", Verdict::Passed, 10)]);
        let newest = side("newest", vec![outcome("a", Verdict::Failed, 10)]);
        let results = CloudflareResults {
            scripts: "harness-ratelimits-abc123-N".into(),
            namespace_ids: Some((900_001, 900_003)),
            seconds: 95,
            scenarios: vec![ScenarioResult {
                name: "a".into(),
                verdict: "FAIL".into(),
                on_cloudflare: "bounded x3".into(),
                passed_before_first_429: "step 1: no 429 in 361".into(),
                requests: 361,
                seconds: 40.0,
                answered_after_seconds: Some(4.5),
                message: "error: no refusal by 3 x the limit".into(),
            }],
        };
        let text = cloudflare_markdown(&pinned, &newest, Ok(&results));
        assert!(
            text.contains("| a | pass | FAIL | FAIL | bounded x3 | step 1: no 429 in 361 |"),
            "{text}"
        );
        assert!(text.contains("namespace ids 900001 to 900003"), "{text}");
        assert!(text.contains("no refusal by 3 x the limit"), "{text}");
        let skipped = cloudflare_markdown(&pinned, &newest, Err("no results.json"));
        assert!(skipped.contains("Not run: no results.json"), "{skipped}");
    }

    #[test]
    fn the_reference_verdicts_stand_beside_the_emulation() {
        let emulation = side(
            "emulation",
            vec![
                outcome("a", Verdict::Passed, 10),
                outcome("b", Verdict::Passed, 10),
            ],
        );
        let reference = side(
            "reference",
            vec![
                outcome("a", Verdict::Passed, 10),
                outcome("b", Verdict::Failed, 10),
            ],
        );
        let text = reference_markdown(&emulation, &reference);
        assert!(text.contains("| failed | 0 | 1 |"), "{text}");
        assert!(text.contains("## Verdicts that differ: 1"), "{text}");
        assert!(
            text.contains("- b: pass on the emulation, FAIL on the reference"),
            "{text}"
        );
        assert!(text.contains("| a | pass | pass |"), "{text}");
    }
}
