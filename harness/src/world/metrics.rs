//! What a process says of the limiter's metrics at one moment, as the
//! harness reads it: series by name and labels ([`MetricReading`]). A
//! native instance serves the Prometheus text format (`GET /metrics`,
//! [`parse_prometheus`]); a Worker's emulated dataset gives its data points
//! (`world::workerd::data_points`), read into the same shape so one judge
//! sums both.
//!
//! The parser is the harness's own, a few dozen lines of the format's
//! text exposition (0.0.4), rather than the `prometheus-parse` crate: that
//! crate matches lines with regular expressions and skips a line it cannot
//! match without a word (and splits labels at every `,`, a route path's
//! included), where a judge that counts must fail on a scrape it read only
//! in part, naming the line ([`PrometheusError`]).

use std::collections::BTreeMap;

/// One series: its name and its labels.
pub type SeriesKey = (String, BTreeMap<String, String>);

/// One series' value at the moment it was read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeriesValue {
    /// Its value; a histogram's or summary's observations (its `_count`).
    pub value: f64,
    /// Whether it is a gauge: a value now, not a count since the process
    /// started, so a process gone before the end adds nothing to the totals.
    pub gauge: bool,
}

/// Every series one process had at one moment. A histogram (or summary) is
/// one series per label set, under its own name, valued at its
/// observations: its buckets, quantiles and sum are left out, so how an
/// exporter spreads a histogram makes no more series here.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricReading {
    /// The series, by name and labels.
    pub series: BTreeMap<SeriesKey, SeriesValue>,
}

impl MetricReading {
    /// Adds `other`'s series to these (summing a series both have); with
    /// `counts_only`, its gauges are left out.
    pub fn add(&mut self, other: &MetricReading, counts_only: bool) {
        for (key, value) in &other.series {
            if counts_only && value.gauge {
                continue;
            }
            self.series
                .entry(key.clone())
                .and_modify(|v| v.value += value.value)
                .or_insert(*value);
        }
    }

    /// How each series changed from `before` to this reading (a series
    /// `before` lacked counted from zero, one gone counted down to zero).
    pub fn change_since(&self, before: &MetricReading) -> BTreeMap<SeriesKey, f64> {
        let mut change: BTreeMap<SeriesKey, f64> = self
            .series
            .iter()
            .map(|(key, now)| {
                let then = before.series.get(key).map_or(0.0, |v| v.value);
                (key.clone(), now.value - then)
            })
            .collect();
        for (key, then) in &before.series {
            change.entry(key.clone()).or_insert(-then.value);
        }
        change
    }

    /// Each series' value.
    pub fn values(&self) -> BTreeMap<SeriesKey, f64> {
        self.series
            .iter()
            .map(|(key, v)| (key.clone(), v.value))
            .collect()
    }
}

/// A metrics text that is not the Prometheus text format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metrics text, line {line}: {problem}: `{text}`")]
pub struct PrometheusError {
    /// The line, from 1.
    pub line: usize,
    /// What is wrong with it.
    pub problem: &'static str,
    /// The line itself.
    pub text: String,
}

/// The family type a `# TYPE` line gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Counter,
    Gauge,
    /// Histograms and summaries: observed through `_count`.
    Observed,
    Untyped,
}

/// Reads the Prometheus text format: every sample under its family's
/// `# TYPE`; a histogram's or summary's `_count` as the family's series.
pub fn parse_prometheus(text: &str) -> Result<MetricReading, PrometheusError> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    let mut reading = MetricReading::default();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let error = |problem| PrometheusError {
            line: index + 1,
            problem,
            text: raw.to_owned(),
        };
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.split_whitespace();
            if words.next() == Some("TYPE") {
                let (Some(name), Some(kind)) = (words.next(), words.next()) else {
                    return Err(error("a TYPE line names a family and its type"));
                };
                let family = match kind {
                    "counter" => Family::Counter,
                    "gauge" => Family::Gauge,
                    "histogram" | "summary" => Family::Observed,
                    _ => Family::Untyped,
                };
                families.insert(name.to_owned(), family);
            }
            continue;
        }
        let (name, labels, value) = sample(line).map_err(error)?;
        let observed_family = ["_count", "_sum", "_bucket"].iter().find_map(|suffix| {
            let base = name.strip_suffix(suffix)?;
            (families.get(base) == Some(&Family::Observed)).then_some((base, *suffix))
        });
        let (name, family) = match observed_family {
            Some((base, "_count")) => (base.to_owned(), Family::Observed),
            Some(_) => continue,
            None => {
                let family = families.get(&name).copied().unwrap_or(Family::Untyped);
                // A summary's quantiles are under its own name.
                if family == Family::Observed {
                    continue;
                }
                (name, family)
            }
        };
        reading.series.insert(
            (name, labels),
            SeriesValue {
                value,
                gauge: family == Family::Gauge,
            },
        );
    }
    Ok(reading)
}

/// One sample line: `name{label="value",...} value [timestamp]`.
fn sample(line: &str) -> Result<(String, BTreeMap<String, String>, f64), &'static str> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .ok_or("a sample has a name and a value")?;
    let name = &line[..name_end];
    if name.is_empty() {
        return Err("a sample has a name");
    }
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices().peekable();
        let end = loop {
            while chars
                .peek()
                .is_some_and(|(_, c)| *c == ',' || c.is_whitespace())
            {
                chars.next();
            }
            match chars.peek() {
                None => return Err("its labels have no closing `}`"),
                Some((at, '}')) => break *at,
                Some(_) => {}
            }
            let mut label = String::new();
            for (_, c) in chars.by_ref() {
                if c == '=' {
                    break;
                }
                label.push(c);
            }
            if chars.next().map(|(_, c)| c) != Some('"') {
                return Err("a label's value is in double quotes");
            }
            let mut value = String::new();
            loop {
                match chars.next().map(|(_, c)| c) {
                    None => return Err("a label's value has no closing quote"),
                    Some('"') => break,
                    Some('\\') => match chars.next().map(|(_, c)| c) {
                        Some('n') => value.push('\n'),
                        Some(c) => value.push(c),
                        None => return Err("a label's value ends in `\\`"),
                    },
                    Some(c) => value.push(c),
                }
            }
            labels.insert(label.trim().to_owned(), value);
        };
        rest = &body[end + 1..];
    }
    let value = rest
        .split_whitespace()
        .next()
        .ok_or("a sample has a value")?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        other => other.parse().map_err(|_| "its value is not a number")?,
    };
    Ok((name.to_owned(), labels, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What metrics-exporter-prometheus 0.18 writes: a counter, a gauge, a
    /// histogram with buckets and a summary (its default for a histogram).
    const TEXT: &str = r#"# TYPE rate_limits_decisions_total counter
rate_limits_decisions_total{deployable="api",limit="address",outcome="passed"} 120
rate_limits_decisions_total{deployable="api",limit="address",outcome="refused"} 3

# TYPE rate_limits_store_state gauge
rate_limits_store_state{deployable="api",store="cache",state="asked"} 1
# TYPE rate_limits_store_round_trip_seconds histogram
rate_limits_store_round_trip_seconds_bucket{deployable="api",store="cache",le="0.005"} 118
rate_limits_store_round_trip_seconds_bucket{deployable="api",store="cache",le="+Inf"} 120
rate_limits_store_round_trip_seconds_sum{deployable="api",store="cache"} 0.25
rate_limits_store_round_trip_seconds_count{deployable="api",store="cache"} 120
# TYPE other_seconds summary
other_seconds{quantile="0.5"} 0.001
other_seconds_sum 0.5
other_seconds_count 7
untyped{path="a \"b\" \\ c\nd"} 2 1700000000000
"#;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn every_series_is_read_with_a_histogram_as_its_observations() {
        let reading = parse_prometheus(TEXT).expect("parses");
        let get = |name: &str, pairs: &[(&str, &str)]| {
            reading
                .series
                .get(&(name.to_owned(), labels(pairs)))
                .copied()
        };
        let refused = get(
            "rate_limits_decisions_total",
            &[
                ("deployable", "api"),
                ("limit", "address"),
                ("outcome", "refused"),
            ],
        )
        .expect("a counter");
        assert_eq!((refused.value, refused.gauge), (3.0, false));
        let asked = get(
            "rate_limits_store_state",
            &[
                ("deployable", "api"),
                ("store", "cache"),
                ("state", "asked"),
            ],
        )
        .expect("a gauge");
        assert_eq!((asked.value, asked.gauge), (1.0, true));
        let trips = get(
            "rate_limits_store_round_trip_seconds",
            &[("deployable", "api"), ("store", "cache")],
        )
        .expect("a histogram, by its count");
        assert_eq!(trips.value, 120.0);
        assert_eq!(get("other_seconds", &[]).map(|v| v.value), Some(7.0));
        assert_eq!(
            get("untyped", &[("path", "a \"b\" \\ c\nd")]).map(|v| v.value),
            Some(2.0)
        );
        // Two decisions, one state, one histogram, one summary, one untyped.
        assert_eq!(reading.series.len(), 6, "{:?}", reading.series.keys());
    }

    #[test]
    fn totals_and_changes_add_up_series_by_series() {
        let before = parse_prometheus(TEXT).expect("parses");
        let after = parse_prometheus(
            "# TYPE rate_limits_decisions_total counter\n\
             rate_limits_decisions_total{deployable=\"api\",limit=\"address\",outcome=\"refused\"} 10\n\
             # TYPE rate_limits_store_state gauge\n\
             rate_limits_store_state{deployable=\"api\",store=\"cache\",state=\"asked\"} 0\n",
        )
        .expect("parses");
        let change = after.change_since(&before);
        let refused = (
            "rate_limits_decisions_total".to_owned(),
            labels(&[
                ("deployable", "api"),
                ("limit", "address"),
                ("outcome", "refused"),
            ]),
        );
        assert_eq!(change[&refused], 7.0);
        let passed = (
            "rate_limits_decisions_total".to_owned(),
            labels(&[
                ("deployable", "api"),
                ("limit", "address"),
                ("outcome", "passed"),
            ]),
        );
        assert_eq!(change[&passed], -120.0);
        let mut total = MetricReading::default();
        total.add(&before, false);
        total.add(&after, true);
        assert_eq!(total.values()[&refused], 13.0);
        let asked = (
            "rate_limits_store_state".to_owned(),
            labels(&[
                ("deployable", "api"),
                ("store", "cache"),
                ("state", "asked"),
            ]),
        );
        assert_eq!(
            total.values()[&asked],
            1.0,
            "the second reading's gauge left out"
        );
    }

    #[test]
    fn a_text_that_is_not_the_format_names_its_line() {
        for (text, problem) in [
            ("a_total{x=\"1 2", "closing quote"),
            ("a_total{x=1} 2", "double quotes"),
            ("a_total{x=\"1\"", "closing `}`"),
            ("a_total x", "not a number"),
            ("a_total", "a name and a value"),
            ("# TYPE a_total", "names a family"),
        ] {
            let error = parse_prometheus(&format!("ok 1\n{text}\n")).expect_err(text);
            assert_eq!(error.line, 2, "{text}");
            assert!(error.to_string().contains(problem), "{text}: {error}");
        }
    }
}
