//! One scenario on Cloudflare, start to end: upload its Worker, turn on its
//! workers.dev route, open its tail, wait until it answers, send its
//! traffic, read the tail, judge, and delete the tail and the script. Each
//! thing is noted in the run's [`Created`] before the request that creates
//! it, so whatever stops a scenario (an error, a panic, Ctrl-C) leaves it
//! for the run to delete.

use std::time::{Duration, Instant};

use super::run::ScenarioOnCloudflare;
use crate::engine::{InstanceKind, InstanceRecord, Observation};
use crate::judge::cloudflare::Judgement;
use crate::language::scenario::Prepared;
use crate::world::cloudflare::api::{Api, ApiError};
use crate::world::cloudflare::tail::Tail;
use crate::world::cloudflare::{Created, Resource, wait_until_answers, worker_url};

/// How long a run waits for Cloudflare: tests shorten these.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// How often a new Worker's URL is asked whether it answers...
    pub answer_every: Duration,
    /// ...and for how long at most.
    pub answer_within: Duration,
    /// After the traffic, the tail is read until it has an event for every
    /// request, or it is quiet this long...
    pub tail_quiet: Duration,
    /// ...or this long has passed.
    pub tail_most: Duration,
}

impl Default for Timing {
    /// A new workers.dev URL usually answers within seconds, but can take
    /// a minute or two to reach a location; the tail delivers within
    /// seconds, and samples under load (so not every event need come).
    fn default() -> Timing {
        Timing {
            answer_every: Duration::from_secs(1),
            answer_within: Duration::from_secs(180),
            tail_quiet: Duration::from_secs(5),
            tail_most: Duration::from_secs(30),
        }
    }
}

/// What judges a scenario's observation (the judge's own function, unless
/// a test swaps it).
pub type Judge = fn(&Prepared, &Observation) -> Judgement;

/// What every scenario of a run shares.
#[derive(Debug, Clone)]
pub struct Context {
    /// Cloudflare's API, with the run's token.
    pub api: Api,
    /// What the run has created and not yet deleted.
    pub created: Created,
    /// The client of the Worker's URL: no token, ever.
    pub worker_client: reqwest::Client,
    /// The account's workers.dev subdomain.
    pub subdomain: String,
    /// Where a script's workers.dev URL is.
    pub url_template: String,
    /// How long to wait for Cloudflare.
    pub timing: Timing,
    /// What judges each scenario.
    pub judge: Judge,
}

/// How one scenario went.
#[derive(Debug, Clone, Default)]
pub struct ScenarioRun {
    /// What it sent, what came back, what the tail delivered.
    pub observation: Observation,
    /// Why it could not run to the end, if it could not.
    pub error: Option<String>,
    /// The token was refused: the run stops.
    pub refused: Option<ApiError>,
    /// Its judgement, when it ran to the end.
    pub judgement: Option<Judgement>,
    /// How long its new Worker's URL took to answer.
    pub answered_after: Option<Duration>,
}

/// Runs one planned scenario and deletes what it created.
pub async fn run_scenario(context: &Context, planned: &ScenarioOnCloudflare) -> ScenarioRun {
    let epoch = Instant::now();
    let mut mine = Vec::new();
    let mut run = ScenarioRun::default();
    let done = deploy_and_send(context, planned, epoch, &mut mine, &mut run).await;
    match done {
        Ok(()) => run.judgement = Some((context.judge)(&planned.prepared, &run.observation)),
        Err(error) => {
            if let Failure::Api(refused @ ApiError::Refused { .. }) = &error {
                run.refused = Some(refused.clone());
            }
            run.error = Some(error.to_string());
        }
    }
    // What could not be deleted stays in `created`, for the run's last sweep.
    context.created.delete(&context.api, &mine).await;
    run
}

/// Why a scenario stopped.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    Tail(#[from] crate::world::cloudflare::tail::TailError),
    #[error(transparent)]
    NotAnswering(#[from] crate::world::cloudflare::NotAnswering),
    #[error(transparent)]
    Step(#[from] crate::engine::cloudflare::NotOnCloudflare),
}

async fn deploy_and_send(
    context: &Context,
    planned: &ScenarioOnCloudflare,
    epoch: Instant,
    mine: &mut Vec<Resource>,
    run: &mut ScenarioRun,
) -> Result<(), Failure> {
    let api = &context.api;
    let script = planned.script.as_str();
    let mut note = |resource: Resource| {
        context.created.add(resource.clone());
        mine.push(resource);
    };
    note(Resource::Script(script.to_owned()));
    api.upload(script, &planned.upload).await?;
    api.enable_subdomain(script).await?;
    let ticket = api.create_tail(script).await?;
    note(Resource::Tail {
        script: script.to_owned(),
        id: ticket.id.clone(),
    });
    let tail = Tail::connect(&ticket.url, epoch).await?;
    let url = worker_url(&context.url_template, script, &context.subdomain);
    let answered = wait_until_answers(
        &context.worker_client,
        &url,
        context.timing.answer_every,
        context.timing.answer_within,
    )
    .await;
    let sent = match answered {
        Ok(after) => {
            run.answered_after = Some(after);
            crate::engine::cloudflare::run_steps(
                &planned.prepared,
                &url,
                &context.worker_client,
                &mut run.observation,
                epoch,
            )
            .await
            .map_err(Failure::from)
        }
        Err(e) => Err(e.into()),
    };
    let api_requests = run
        .observation
        .requests
        .iter()
        .filter(|r| planned_path_is_api(&planned.prepared, r.step))
        .count();
    tail.settle(
        api_requests,
        |path| path.starts_with("/api/"),
        context.timing.tail_quiet,
        context.timing.tail_most,
    )
    .await;
    let record = tail.close().await;
    run.observation.sent_subjects.extend(record.addresses);
    let mut lines = record.lines;
    for problem in record.problems {
        lines.push(crate::world::process::LogLine {
            at: epoch.elapsed(),
            stream: crate::world::process::Stream::Stderr,
            text: format!("harness: {problem}"),
        });
    }
    run.observation.instances.push(InstanceRecord {
        kind: InstanceKind::CloudflareTail,
        isolate: 0,
        generation: 0,
        lines,
        served: !run.observation.requests.is_empty(),
    });
    run.observation.duration = epoch.elapsed();
    sent
}

/// Whether step `index` of the scenario sends to an `/api/` path (those
/// requests are the ones whose tail events the run waits for).
fn planned_path_is_api(prepared: &Prepared, index: usize) -> bool {
    prepared
        .scenario
        .scenario
        .get_ref()
        .steps
        .get(index)
        .and_then(|s| s.get_ref().send.as_ref())
        .is_some_and(|send| send.path.starts_with("/api/"))
}
