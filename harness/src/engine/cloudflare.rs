//! Runs one scenario's steps against its Worker on Cloudflare itself and
//! records what it observed. There is no scenario clock there: window steps
//! wait for the real boundary, as `clock = "wall"` does here. The edge sets
//! `CF-Connecting-IP`, so no address is sent (requests come from the
//! runner's own); a caller is sent as here. A bounded step sends until its
//! first refusal, or one past the most passes its bound allows
//! ([`crate::language::on_cloudflare`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use super::clock;
use super::observation::{Observation, RequestRecord, StepRecord};
use super::runner::{CALLER_HEADER, WALL_MARGIN, answer, wall_ms};
use crate::language::on_cloudflare::{self, SendOnCloudflare};
use crate::language::scenario::{Action, Prepared, Step};

/// A step Cloudflare cannot run (the scenario file's check refuses these first).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("step {step}: {what} cannot run on Cloudflare")]
pub struct NotOnCloudflare {
    /// The step (1-based).
    pub step: usize,
    /// What it asks.
    pub what: &'static str,
}

/// Runs `prepared`'s steps against the Worker at `url` with `client`. What
/// was sent and answered is in `observation`, even when a step could not
/// run: each request's send time and each step's times since `epoch` (the
/// scenario's start, as its tail's lines are timed), and on the clock,
/// which there is the wall clock, in ms since the minute the first step
/// began in (where its windows begin), so the report page draws its
/// timeline as a local run's.
pub async fn run_steps(
    prepared: &Prepared,
    url: &str,
    client: &reqwest::Client,
    observation: &mut Observation,
    epoch: Instant,
) -> Result<(), NotOnCloudflare> {
    let scenario = prepared.scenario.scenario.get_ref();
    let sends = on_cloudflare::sends(scenario);
    let origin = clock::minute_of(wall_ms());
    for (index, step) in scenario.steps.iter().enumerate() {
        let started = epoch.elapsed();
        let clock_started_ms = wall_ms().saturating_sub(origin);
        run_step(
            index,
            step.get_ref(),
            &sends,
            url,
            client,
            observation,
            epoch,
        )
        .await?;
        observation.steps.push(StepRecord {
            index,
            started,
            ended: epoch.elapsed(),
            clock_started_ms,
            clock_ended_ms: wall_ms().saturating_sub(origin),
        });
    }
    Ok(())
}

/// Runs step `index`, `step`, of a scenario whose sends are `sends`.
async fn run_step(
    index: usize,
    step: &Step,
    sends: &[SendOnCloudflare<'_>],
    url: &str,
    client: &reqwest::Client,
    observation: &mut Observation,
    epoch: Instant,
) -> Result<(), NotOnCloudflare> {
    let not_here = |what| NotOnCloudflare {
        step: index + 1,
        what,
    };
    match step.action() {
        Ok(Action::Send { .. }) => {
            let send = sends
                .iter()
                .find(|s| s.index == index)
                .ok_or(not_here("a send of a scenario without `on_cloudflare`"))?;
            send_requests(send, url, client, observation, epoch).await;
        }
        Ok(Action::WaitForWindow(seconds)) => {
            sleep_ms(clock::to_next_boundary(
                wall_ms(),
                u64::from(seconds) * 1000,
            ))
            .await;
        }
        Ok(Action::WaitForRoom(room)) => {
            sleep_ms(clock::to_room(
                wall_ms(),
                u64::from(room.window) * 1000,
                u64::from(room.seconds) * 1000,
            ))
            .await;
        }
        Ok(Action::SleepMs(ms)) => tokio::time::sleep(Duration::from_millis(ms)).await,
        Ok(Action::SetBindings(_)) => return Err(not_here("`set_bindings`")),
        Ok(Action::SetRedis(_)) => return Err(not_here("`set_redis`")),
        Ok(Action::AdvanceClock(_)) => return Err(not_here("`advance_clock`")),
        Ok(Action::RestartIsolate(_)) => return Err(not_here("`restart_isolate`")),
        Ok(Action::StepWallClock(_)) => return Err(not_here("`step_wall_clock`")),
        Ok(Action::Limit(_)) => return Err(not_here("`limit`")),
        Err(_) => return Err(not_here("a step that is no step")),
    }
    Ok(())
}

/// Sleeps past a real window boundary `ms` away (nothing when 0).
async fn sleep_ms(ms: u64) {
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms) + WALL_MARGIN).await;
    }
}

/// One `send`: its requests to the Worker, `concurrency` at a time, every
/// answer recorded; a bounded one stops starting requests at its first 429.
async fn send_requests(
    step: &SendOnCloudflare<'_>,
    url: &str,
    client: &reqwest::Client,
    observation: &mut Observation,
    epoch: Instant,
) {
    let send = step.send;
    if let Some(caller) = &send.caller {
        observation.sent_subjects.insert(caller.clone());
    }
    if let Some(address) = &send.address {
        // Not sent (the edge sets the address), but never to be logged either.
        observation.sent_subjects.insert(address.get_ref().clone());
    }
    let semaphore = Arc::new(Semaphore::new(send.concurrency));
    let refused = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::with_capacity(step.requests());
    for number in 1..=step.requests() {
        let Ok(permit) = semaphore.clone().acquire_owned().await else {
            break;
        };
        if step.stops_at_first_refusal() && refused.load(Ordering::SeqCst) {
            break;
        }
        let mut request = client.get(format!("{url}{}", send.path));
        if let Some(caller) = &send.caller {
            request = request.header(CALLER_HEADER, caller);
        }
        for (name, value) in &send.headers {
            request = request.header(name, value);
        }
        if !send.chain().is_empty() {
            // Sent as written; Cloudflare appends to it, and the Worker reads
            // CF-Connecting-IP only.
            let chain = send.chain().join(", ");
            request = request.header(
                runtime::unstable_for_tools::address::FORWARDED_FOR_HEADER,
                chain,
            );
        }
        let refused = refused.clone();
        tasks.push(tokio::spawn(async move {
            let started = Instant::now();
            let record = answer(request.send().await).await;
            if record.0 == Ok(429) {
                refused.store(true, Ordering::SeqCst);
            }
            drop(permit);
            let sent = started.saturating_duration_since(epoch);
            (number, record, started.elapsed(), sent)
        }));
        if send.spacing_ms > 0 && number < step.requests() {
            tokio::time::sleep(Duration::from_millis(send.spacing_ms)).await;
        }
    }
    for task in tasks {
        if let Ok((number, (outcome, headers, body), latency, sent)) = task.await {
            observation.requests.push(RequestRecord {
                step: step.index,
                number,
                isolate: 0,
                outcome,
                headers,
                body,
                latency,
                sent,
            });
        }
    }
}
