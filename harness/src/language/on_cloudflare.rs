//! What a scenario marked `on_cloudflare` sends and checks on Cloudflare
//! itself: each expectation's [`CloudflareCheck`] (its own mark, else the
//! scenario's for statuses and counts, else its kind's default), and for a
//! bounded one the limit it is bounded by and how much traffic that takes.
//! Plain functions of the scenario: the engine sends what they say, the
//! judge checks what they say, the report shows it.

use toml::Spanned;

use crate::language::cloudflare::{CloudflareCheck, SendChecksOnCloudflare};
use crate::language::scenario::{Action, Scenario, SendExpectations, SendRequests, parse_statuses};

/// A bounded status expectation: the passes it states before its first
/// refusal (the limit), and the multiple of them by which a refusal must come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// The requests the expectation lets through before its first 429.
    pub limit: usize,
    /// The first refusal comes after at most `limit * refusal_by` passes.
    pub refusal_by: u32,
}

impl Bound {
    /// The most passes before the first refusal that still hold.
    pub fn most_passes(self) -> usize {
        self.limit.saturating_mul(self.refusal_by as usize)
    }

    /// How many requests it takes to see the bound broken or kept: one
    /// past the most passes (the traffic stops at the first refusal).
    pub fn requests(self) -> usize {
        self.most_passes().saturating_add(1)
    }
}

/// How each expectation of one `send` is checked on Cloudflare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendChecks {
    /// The status sequence.
    pub statuses: CloudflareCheck,
    /// The status counts.
    pub counts: CloudflareCheck,
    /// `Retry-After` of every 429.
    pub retry_after: CloudflareCheck,
    /// The headers of every response.
    pub headers: CloudflareCheck,
    /// The body fields of every response.
    pub body: CloudflareCheck,
    /// The latency bounds.
    pub latency: CloudflareCheck,
}

/// One `send` step as Cloudflare runs it.
#[derive(Debug, Clone, Copy)]
pub struct SendOnCloudflare<'a> {
    /// The step's index (0-based).
    pub index: usize,
    /// Its requests, as written.
    pub send: &'a SendRequests,
    /// Its expectations, as written.
    pub expect: Option<&'a Spanned<SendExpectations>>,
    /// How each is checked there.
    pub checks: SendChecks,
    /// The passes its status expectation states before the first 429, if
    /// it states a refusal (bounded or not: the report shows it beside
    /// what Cloudflare let through).
    pub limit: Option<usize>,
    /// Set when a status expectation is bounded: the traffic then goes on
    /// until the first refusal, or [`Bound::requests`].
    pub bound: Option<Bound>,
}

impl SendOnCloudflare<'_> {
    /// How many requests the step sends at most on Cloudflare.
    pub fn requests(&self) -> usize {
        self.bound.map_or(self.send.requests, Bound::requests)
    }

    /// Whether the step stops at its first refusal (a bounded one does).
    pub fn stops_at_first_refusal(&self) -> bool {
        self.bound.is_some()
    }
}

/// Every `send` step of a scenario as Cloudflare runs it; empty for a
/// scenario without `on_cloudflare`.
pub fn sends(scenario: &Scenario) -> Vec<SendOnCloudflare<'_>> {
    let Some(mark) = scenario.on_cloudflare.as_ref().map(|m| *m.get_ref()) else {
        return Vec::new();
    };
    scenario
        .steps
        .iter()
        .enumerate()
        .filter_map(|(index, step)| match step.get_ref().action() {
            Ok(Action::Send { send, expect }) => {
                Some(send_on_cloudflare(index, send, expect, mark))
            }
            _ => None,
        })
        .collect()
}

fn send_on_cloudflare<'a>(
    index: usize,
    send: &'a SendRequests,
    expect: Option<&'a Spanned<SendExpectations>>,
    mark: CloudflareCheck,
) -> SendOnCloudflare<'a> {
    let written = expect.map(Spanned::get_ref);
    let own: SendChecksOnCloudflare = written
        .and_then(|e| e.on_cloudflare.as_ref())
        .map(|m| *m.get_ref())
        .unwrap_or_default();
    let statuses_limit = written
        .and_then(|e| e.statuses.as_ref())
        .and_then(|s| limit_of_statuses(s.get_ref()));
    let counts_limit = written
        .and_then(|e| e.counts.as_ref())
        .and_then(|c| limit_of_counts(c.get_ref()));
    // A bounded mark where the expectation states no refusal after passes
    // has nothing to bound: it is checked as written.
    let effective = |check: CloudflareCheck, limit: Option<usize>| match (check, limit) {
        (CloudflareCheck::Bounded { .. }, None) => CloudflareCheck::Exact,
        (check, _) => check,
    };
    let statuses = effective(own.statuses.unwrap_or(mark), statuses_limit);
    let counts = effective(own.counts.unwrap_or(mark), counts_limit);
    let bound = [(statuses, statuses_limit), (counts, counts_limit)]
        .into_iter()
        .find_map(|(check, limit)| match (check, limit) {
            (CloudflareCheck::Bounded { refusal_by }, Some(limit)) => {
                Some(Bound { limit, refusal_by })
            }
            _ => None,
        });
    SendOnCloudflare {
        index,
        send,
        expect,
        checks: SendChecks {
            statuses,
            counts,
            retry_after: own.retry_after.unwrap_or(CloudflareCheck::Exact),
            headers: own.headers.unwrap_or(CloudflareCheck::Exact),
            body: own.body.unwrap_or(CloudflareCheck::Exact),
            latency: own.latency.unwrap_or(CloudflareCheck::NotChecked),
        },
        limit: statuses_limit.or(counts_limit),
        bound,
    }
}

/// `120 x 200 then 429...`: 120. `None` when the sequence does not start
/// with passes followed by a refusal.
fn limit_of_statuses(statuses: &str) -> Option<usize> {
    let runs = parse_statuses(statuses).ok()?;
    match runs.as_slice() {
        [first, second, ..] if first.status == 200 && second.status == 429 => {
            first.count.filter(|n| *n > 0)
        }
        _ => None,
    }
}

/// `{ 200 = 600, 429 = 1 }`: 600. `None` unless the counts are passes and
/// at least one refusal, and nothing else.
fn limit_of_counts(counts: &std::collections::BTreeMap<String, usize>) -> Option<usize> {
    let passes = counts.get("200").copied().filter(|n| *n > 0)?;
    let refusals = counts.get("429").copied().unwrap_or(0);
    (refusals > 0 && counts.len() == 2).then_some(passes)
}

/// How the report names what a scenario checks on Cloudflare: `exact`, or
/// its bounds (`bounded x3`, `bounded x3, x10`), from its steps' checks.
pub fn label(scenario: &Scenario) -> String {
    let mut multiples: Vec<u32> = sends(scenario)
        .iter()
        .filter_map(|s| s.bound.map(|b| b.refusal_by))
        .collect();
    multiples.sort_unstable();
    multiples.dedup();
    if multiples.is_empty() {
        return CloudflareCheck::Exact.label();
    }
    let listed: Vec<String> = multiples.iter().map(|m| format!("x{m}")).collect();
    format!("bounded {}", listed.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_come_from_passes_followed_by_a_refusal() {
        assert_eq!(limit_of_statuses("120 x 200 then 429"), Some(120));
        assert_eq!(limit_of_statuses("3 x 200 then * x 429"), Some(3));
        assert_eq!(limit_of_statuses("20 x 200"), None);
        assert_eq!(limit_of_statuses("429"), None);
        assert_eq!(limit_of_statuses("2 x 404 then 429"), None);
        let counts = |pairs: &[(&str, usize)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), *v))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        assert_eq!(
            limit_of_counts(&counts(&[("200", 600), ("429", 1)])),
            Some(600)
        );
        assert_eq!(limit_of_counts(&counts(&[("200", 121)])), None);
        assert_eq!(
            limit_of_counts(&counts(&[("200", 1), ("429", 1), ("500", 1)])),
            None
        );
    }

    #[test]
    fn a_bound_sends_one_past_its_most_passes() {
        let bound = Bound {
            limit: 120,
            refusal_by: 3,
        };
        assert_eq!((bound.most_passes(), bound.requests()), (360, 361));
    }
}
