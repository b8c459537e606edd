//! One `send` step as its checks see it: the step, and what was recorded of it.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::engine::{LoadProbe, RequestRecord};
use crate::language::scenario::{RedisCalls, SendRequests};
use crate::world::metrics::SeriesKey;

/// One `send` step as its checks see it: its requests' records, in order of arrival.
pub(in crate::judge) struct SendStep<'a> {
    /// 0-based.
    pub(in crate::judge) index: usize,
    pub(in crate::judge) span: Range<usize>,
    pub(in crate::judge) send: &'a SendRequests,
    pub(in crate::judge) records: Vec<&'a RequestRecord>,
    /// The script calls Redis ran during the step, when its expectations count them.
    pub(in crate::judge) redis_calls: Option<RedisCalls>,
    /// How the metrics changed during the step, when its expectations name them.
    pub(in crate::judge) metrics: Option<&'a BTreeMap<SeriesKey, f64>>,
    /// The load probes sent while its first requests waited (for a `deadline`).
    pub(in crate::judge) load_probes: &'a [LoadProbe],
}

impl SendStep<'_> {
    pub(in crate::judge) fn context(&self, number: usize) -> String {
        format!("step {} (send), request {number}", self.index + 1)
    }

    pub(in crate::judge) fn step_context(&self) -> String {
        format!("step {} (send)", self.index + 1)
    }
}
