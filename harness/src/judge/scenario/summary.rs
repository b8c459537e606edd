//! The short forms a report shows of a run: a step's statuses run-length
//! encoded, and its latencies.

use crate::engine::{Observation, RequestRecord};
use crate::judge::stats::percentile;

pub(in crate::judge) fn status_text(record: &RequestRecord) -> String {
    match &record.outcome {
        Ok(status) => status.to_string(),
        Err(_) => "no response".to_owned(),
    }
}

/// `120 x 200 then 1 x 429`: the statuses of a step in order, run-length encoded.
pub fn summarise(records: &[&RequestRecord]) -> String {
    let mut sorted: Vec<&&RequestRecord> = records.iter().collect();
    sorted.sort_by_key(|r| r.number);
    let mut runs: Vec<(usize, String)> = Vec::new();
    for r in sorted {
        let status = status_text(r);
        match runs.last_mut() {
            Some((n, s)) if *s == status => *n += 1,
            _ => runs.push((1, status)),
        }
    }
    runs.iter()
        .map(|(n, s)| format!("{n} x {s}"))
        .collect::<Vec<_>>()
        .join(" then ")
}

/// `min/p50/p99/max` of sorted ms values.
pub fn latency_summary(sorted: &[u64]) -> String {
    let get = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
    format!(
        "min {} / p50 {} / p99 {} / max {} ms",
        get(sorted.first().copied()),
        get(percentile(sorted, 50)),
        get(percentile(sorted, 99)),
        get(sorted.last().copied())
    )
}

/// Latencies of every request of a run, sorted, in ms.
pub fn latencies(observation: &Observation) -> Vec<u64> {
    let mut ms: Vec<u64> = observation
        .requests
        .iter()
        .map(|r| r.latency.as_millis() as u64)
        .collect();
    ms.sort_unstable();
    ms
}
