//! How loaded the machine is while a step's requests wait for a deadline:
//! requests that cannot wait (`GET` [`PROBE_PATH`], a 404 that counts
//! nothing and logs nothing) sent to the same process every
//! [`PROBE_INTERVAL`], each timed from when it was due. A wait overrun by
//! load is overrun alike in these, even when the load came and went while
//! the requests waited, where the step's later requests never see it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::observation::LoadProbe;

/// The path probed: no deployable serves it, so it is answered at once
/// with a 404 that counts nothing, asks no store and logs nothing.
pub const PROBE_PATH: &str = "/harness/load-probe";

/// How often a probe is due while requests wait: a stall this long or
/// longer is seen by at least one probe.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(25);

/// The most probes of one step: the waiting requests time out after
/// [`super::REQUEST_TIMEOUT`], so this is never reached.
const MOST_PROBES: usize = 1000;

/// Probes `base` every [`PROBE_INTERVAL`] from now until `waiting` (the
/// requests still waiting, counted down as they are answered) is zero; each
/// probe's delay runs from when it was due, so a harness too loaded to send
/// it on time is measured too.
pub async fn probe_while_waiting(
    client: reqwest::Client,
    base: String,
    waiting: Arc<AtomicUsize>,
) -> Vec<LoadProbe> {
    let start = Instant::now();
    let url = format!("{base}{PROBE_PATH}");
    let mut probes = Vec::new();
    let mut due = start;
    while waiting.load(Ordering::SeqCst) > 0 && probes.len() < MOST_PROBES {
        let request = client.get(&url);
        probes.push(tokio::spawn(async move {
            // The answer is a 404; a failed probe counts as late as it failed.
            let _ = request.send().await.map(drop);
            LoadProbe {
                due: due - start,
                delay: due.elapsed(),
            }
        }));
        due += PROBE_INTERVAL;
        tokio::time::sleep_until(due.into()).await;
    }
    let mut done = Vec::with_capacity(probes.len());
    for probe in probes {
        if let Ok(probe) = probe.await {
            done.push(probe);
        }
    }
    done
}
