//! The Workers Analytics Engine dataset a Worker writes its data points
//! to, as the harness emulates it (`assets/data-points-binding.js`, a
//! wrapped binding, as miniflare emulates it; workerd has none of its own):
//! how it is configured under the binding the plan names
//! ([`EmulatedDataset`]), and what it received read into a
//! [`MetricReading`] whose series are `data_points` by label set
//! ([`read_points`]), each point's shape held to the interface.

use std::collections::BTreeMap;

use crate::language::scenario::{DataPointsBinding, MetricName};
use crate::world::metrics::{MetricReading, SeriesValue};

/// The emulated binding's module, embedded in each isolate's config.
pub const DATA_POINTS_JS: &str = include_str!("../../../assets/data-points-binding.js");

/// One isolate's emulated dataset binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmulatedDataset {
    /// The binding's name in the Worker's env (the plan's).
    pub binding: String,
    /// The dataset's name (the application's `data_points`).
    pub dataset: String,
    /// Recording, throwing, or missing (left out of the config).
    pub behaviour: DataPointsBinding,
}

/// What one isolate's dataset received, read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PointsRead {
    /// Its points as series: `data_points` by (limit, outcome, reason,
    /// deployable), valued at how many were written.
    pub reading: MetricReading,
    /// Points that are not `{ blobs: [limit, outcome, reason], doubles:
    /// [1], indexes: [deployable] }` with the interface's outcomes and
    /// reasons, each described (never part of `reading`).
    pub malformed: Vec<String>,
}

/// Why an isolate's answer to `GET /data_points` could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the dataset's points are not {{\"points\": [{{blobs, doubles, indexes, count}}, ...]}}: {0}"
)]
pub struct PointsUnreadable(pub String);

/// Reads an isolate's answer to `GET /data_points` (`assets/entry.js`): each
/// well-formed point is a `data_points` series of its labels; every other
/// is described in `malformed`.
pub fn read_points(
    answer: &serde_json::Value,
    deployable: &str,
) -> Result<PointsRead, PointsUnreadable> {
    let unreadable = || PointsUnreadable(answer.to_string());
    let points = answer["points"].as_array().ok_or_else(unreadable)?;
    let mut read = PointsRead::default();
    for point in points {
        let count = point["count"].as_u64().ok_or_else(unreadable)?;
        match labels_of(point, deployable) {
            Ok(labels) => {
                read.reading
                    .series
                    .entry((MetricName::DataPoints.series_name().to_owned(), labels))
                    .and_modify(|v| v.value += count as f64)
                    .or_insert(SeriesValue {
                        value: count as f64,
                        gauge: false,
                    });
            }
            Err(why) => {
                let shape = serde_json::json!({
                    "blobs": point["blobs"],
                    "doubles": point["doubles"],
                    "indexes": point["indexes"],
                });
                read.malformed.push(format!("{count} x {shape}: {why}"));
            }
        }
    }
    Ok(read)
}

/// A point's labels, or why it is not the interface's point.
fn labels_of(
    point: &serde_json::Value,
    deployable: &str,
) -> Result<BTreeMap<String, String>, String> {
    let strings = |name: &str| -> Option<Vec<&str>> {
        point[name]
            .as_array()?
            .iter()
            .map(serde_json::Value::as_str)
            .collect()
    };
    let blobs = strings("blobs").unwrap_or_default();
    let &[limit, outcome, reason] = blobs.as_slice() else {
        return Err("blobs are not [limit, outcome, reason]".to_owned());
    };
    if point["doubles"] != serde_json::json!([1]) {
        return Err("doubles are not [1]".to_owned());
    }
    if strings("indexes").as_deref() != Some(&[deployable]) {
        return Err(format!("indexes are not [\"{deployable}\"]"));
    }
    for (label, value) in [("outcome", outcome), ("reason", reason)] {
        let values = MetricName::DataPoints
            .label_values(label)
            .unwrap_or_default();
        if !values.contains(&value) {
            return Err(format!("its {label} is none of {}", values.join(", ")));
        }
    }
    Ok(BTreeMap::from([
        ("limit".to_owned(), limit.to_owned()),
        ("outcome".to_owned(), outcome.to_owned()),
        ("reason".to_owned(), reason.to_owned()),
        ("deployable".to_owned(), deployable.to_owned()),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_formed_points_are_series_and_the_others_are_named() {
        let answer = serde_json::json!({ "points": [
            { "blobs": ["address", "refused", "none"], "doubles": [1], "indexes": ["edge"], "count": 3 },
            { "blobs": ["/api/search", "passed", "cooling_off"], "doubles": [1], "indexes": ["edge"], "count": 2 },
            { "blobs": ["address", "refused"], "doubles": [1], "indexes": ["edge"], "count": 1 },
            { "blobs": ["address", "refused", "none"], "doubles": [2], "indexes": ["edge"], "count": 1 },
            { "blobs": ["address", "refused", "none"], "doubles": [1], "indexes": ["203.0.113.7"], "count": 1 },
            { "blobs": ["address", "denied", "none"], "doubles": [1], "indexes": ["edge"], "count": 1 },
        ]});
        let read = read_points(&answer, "edge").expect("readable");
        let values = read.reading.values();
        assert_eq!(values.len(), 2, "{values:?}");
        let refused = (
            "data_points".to_owned(),
            BTreeMap::from([
                ("deployable".to_owned(), "edge".to_owned()),
                ("limit".to_owned(), "address".to_owned()),
                ("outcome".to_owned(), "refused".to_owned()),
                ("reason".to_owned(), "none".to_owned()),
            ]),
        );
        assert_eq!(values[&refused], 3.0);
        let whys: Vec<&str> = read
            .malformed
            .iter()
            .map(|m| m.rsplit(": ").next().unwrap_or_default())
            .collect();
        assert_eq!(
            whys,
            [
                "blobs are not [limit, outcome, reason]",
                "doubles are not [1]",
                "indexes are not [\"edge\"]",
                "its outcome is none of passed, refused, shadow_refused"
            ]
        );
        assert!(read_points(&serde_json::json!({ "points": 3 }), "edge").is_err());
        let empty = read_points(
            &serde_json::json!({ "binding": null, "points": [] }),
            "edge",
        );
        assert_eq!(empty, Ok(PointsRead::default()));
    }
}
