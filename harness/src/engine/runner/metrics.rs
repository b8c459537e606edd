//! The limiter's metrics as a scenario reads them: every process's, before
//! and after a `send` step that expects `metrics` (the step's change), and
//! each process's last as it is retired (the totals at the end). A native
//! instance serves its series (`GET /metrics`, the Prometheus text format);
//! a Worker's emulated dataset gives the points it received (`GET
//! /data_points`). Every text read is kept for the no-key check.

use super::{ControlRequest, EngineError, Isolate, Runner};
use crate::engine::observation::MetricsText;
use crate::world::metrics::{MetricReading, parse_prometheus};
use crate::world::workerd::data_points::read_points;

/// Which process a reading is of, and where it answers.
pub(super) struct MetricsSource {
    /// Its base URL.
    pub(super) url: String,
    /// A native instance (else a workerd isolate).
    pub(super) native: bool,
    /// As failures name it.
    pub(super) process: String,
}

impl Runner<'_> {
    /// Whether the scenario's processes have metrics to read: native
    /// instances always, Workers when the application names a dataset.
    pub(super) fn has_metrics(&self) -> bool {
        self.native.is_some() || self.dataset.is_some()
    }

    /// What one process says of its metrics now; `None` when it has none.
    pub(super) async fn read_metrics(
        &mut self,
        source: &MetricsSource,
    ) -> Result<Option<MetricReading>, EngineError> {
        if source.native {
            let text = self
                .control_text(
                    ControlRequest::ReadMetrics,
                    self.client.get(format!("{}/metrics", source.url)),
                )
                .await?;
            let reading = parse_prometheus(&text).map_err(|e| EngineError::Control {
                request: ControlRequest::ReadMetrics,
                detail: e.to_string(),
            })?;
            self.observation.metrics_texts.push(MetricsText {
                process: source.process.clone(),
                text,
            });
            return Ok(Some(reading));
        }
        if self.dataset.is_none() {
            return Ok(None);
        }
        let answer = self
            .control(
                ControlRequest::ReadDataPoints,
                self.client.get(format!("{}/data_points", source.url)),
            )
            .await?;
        let read =
            read_points(&answer, &self.prepared.deployable).map_err(|e| EngineError::Control {
                request: ControlRequest::ReadDataPoints,
                detail: e.to_string(),
            })?;
        self.observation.metrics_texts.push(MetricsText {
            process: source.process.clone(),
            text: answer.to_string(),
        });
        // A point is kept for as long as its isolate lives, so each reading
        // has every malformed one again: keep each once.
        for text in read.malformed {
            let malformed = MetricsText {
                process: source.process.clone(),
                text,
            };
            if !self.observation.malformed_points.contains(&malformed) {
                self.observation.malformed_points.push(malformed);
            }
        }
        Ok(Some(read.reading))
    }

    /// Every live process's metrics now, summed series by series.
    pub(super) async fn read_all_metrics(&mut self) -> Result<MetricReading, EngineError> {
        let sources: Vec<MetricsSource> = self
            .isolates
            .iter()
            .enumerate()
            .map(|(index, isolate)| self.source_of(index, isolate))
            .collect();
        let mut total = MetricReading::default();
        for source in &sources {
            if let Some(reading) = self.read_metrics(source).await? {
                total.add(&reading, false);
            }
        }
        Ok(total)
    }

    /// Where isolate `index`'s process answers, and how failures name it.
    pub(super) fn source_of(&self, index: usize, isolate: &Isolate) -> MetricsSource {
        let native = self.native.is_some();
        let name = if native {
            format!("native instance {index}")
        } else {
            format!("isolate {index}")
        };
        MetricsSource {
            url: isolate.process.url(),
            native,
            process: match isolate.generation {
                0 => name,
                n => format!("{name} after restart {n}"),
            },
        }
    }

    /// Adds a retired process's last reading to the totals at the end: all
    /// of it when the scenario ends, its counts alone when it is restarted
    /// mid-run (its gauges describe a process that is gone).
    pub(super) fn add_to_totals(&mut self, reading: &MetricReading, at_end: bool) {
        self.metrics_total
            .get_or_insert_with(MetricReading::default)
            .add(reading, !at_end);
    }
}
