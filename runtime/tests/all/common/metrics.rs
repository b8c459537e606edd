//! The process's Prometheus recorder (runtime's `metrics` feature), and
//! scrapes of it read back. Installed once for the whole test binary: every
//! native gate built after it records there, so a test reads only the
//! series of its own deployable's name.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// The process's Prometheus recorder, installed once for this test binary:
/// every gate built after it records there, each under its deployable's name.
pub fn recorder() -> PrometheusHandle {
    static RECORDER: OnceLock<PrometheusHandle> = OnceLock::new();
    RECORDER
        .get_or_init(|| {
            PrometheusBuilder::new()
                .install_recorder()
                .expect("the test binary's only recorder")
        })
        .clone()
}

/// One sample of Prometheus's text format: its name, labels and value.
#[derive(Debug)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// The samples of a scrape (`# HELP` and `# TYPE` lines skipped). Label
/// values here never hold `,` or `"`, so a plain split reads them.
pub fn samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("a value");
            let (name, labels) = match series.split_once('{') {
                Some((name, labels)) => (name, labels.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split(',')
                .filter(|pair| !pair.is_empty())
                .map(|pair| {
                    let (key, value) = pair.split_once('=').expect("key=value");
                    (key.to_owned(), value.trim_matches('"').to_owned())
                })
                .collect();
            Sample {
                name: name.to_owned(),
                labels,
                value: value.parse().expect("a number"),
            }
        })
        .collect()
}

/// The sum of the samples of `name` whose labels include all of `labels`.
pub fn total(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
        .sum()
}
