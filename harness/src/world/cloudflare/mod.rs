//! Cloudflare itself, for `harness cloudflare`: its API ([`api`], with the
//! retry decisions in [`retry`] and the upload's bytes in [`upload`]), the
//! credentials it takes ([`credentials`]), a Worker's tail ([`tail`]), its
//! `workers.dev` URL, and what a run has created there, so every exit can
//! delete it ([`Created`]).

pub mod api;
pub mod credentials;
pub mod retry;
pub mod tail;
pub mod upload;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use api::{Api, ApiError};

/// Where a script's `workers.dev` URL is: a template with `{script}` and
/// `{subdomain}` in it, for a proxy or a test's fake Worker; by default
/// [`WORKERS_DEV`].
pub const WORKER_URL_VARIABLE: &str = "HARNESS_WORKERS_DEV_URL";
/// A script's URL on Cloudflare.
pub const WORKERS_DEV: &str = "https://{script}.{subdomain}.workers.dev";

/// The URL of `script` on the account's `subdomain`, from `template`.
pub fn worker_url(template: &str, script: &str, subdomain: &str) -> String {
    template
        .replace("{script}", script)
        .replace("{subdomain}", subdomain)
        .trim_end_matches('/')
        .to_owned()
}

/// [`WORKER_URL_VARIABLE`] when set, else [`WORKERS_DEV`].
pub fn worker_url_template_from_env() -> String {
    std::env::var(WORKER_URL_VARIABLE)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| WORKERS_DEV.to_owned())
}

/// The Worker's URL did not answer in time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{url}/health did not answer 200 within {waited:?} (last: {last})")]
pub struct NotAnswering {
    /// The Worker's URL.
    pub url: String,
    /// How long it was asked.
    pub waited: Duration,
    /// Its last answer, or why none came.
    pub last: String,
}

/// Waits until `url`'s `/health` answers 200 (a new Worker takes a while
/// to reach every location), asking every `every`, for at most `most`;
/// gives how long it took.
pub async fn wait_until_answers(
    client: &reqwest::Client,
    url: &str,
    every: Duration,
    most: Duration,
) -> Result<Duration, NotAnswering> {
    let started = Instant::now();
    loop {
        let last = match client.get(format!("{url}/health")).send().await {
            Ok(response) if response.status().is_success() => return Ok(started.elapsed()),
            Ok(response) => response.status().to_string(),
            Err(e) => e.without_url().to_string(),
        };
        if started.elapsed() + every > most {
            return Err(NotAnswering {
                url: url.to_owned(),
                waited: started.elapsed(),
                last,
            });
        }
        tokio::time::sleep(every).await;
    }
}

/// Something a run created on Cloudflare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    /// A Worker script, by name.
    Script(String),
    /// A tail on a script.
    Tail {
        /// The script.
        script: String,
        /// The tail's id.
        id: String,
    },
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Resource::Script(name) => write!(f, "script {name}"),
            Resource::Tail { script, id } => write!(f, "tail {id} of {script}"),
        }
    }
}

/// What a run has created and not yet deleted, shared by everything that
/// creates or deletes, so whichever way the run ends (done, failed, a
/// panic, Ctrl-C) the rest is deleted from here.
#[derive(Debug, Clone, Default)]
pub struct Created(Arc<Mutex<Vec<Resource>>>);

impl Created {
    fn list(&self) -> std::sync::MutexGuard<'_, Vec<Resource>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Noted before the request that creates it, so a request that created
    /// it and then failed leaves nothing behind.
    pub fn add(&self, resource: Resource) {
        self.list().push(resource);
    }

    /// How many are still listed.
    pub fn len(&self) -> usize {
        self.list().len()
    }

    /// Whether everything is deleted.
    pub fn is_empty(&self) -> bool {
        self.list().is_empty()
    }

    /// Deletes `resources` that are still listed (tails before scripts) and
    /// forgets each one deleted; gives those that could not be.
    pub async fn delete(&self, api: &Api, resources: &[Resource]) -> Vec<(Resource, ApiError)> {
        let mut ordered: Vec<Resource> = resources
            .iter()
            .filter(|r| self.list().contains(r))
            .cloned()
            .collect();
        ordered.sort_by_key(|r| matches!(r, Resource::Script(_)));
        let mut failed = Vec::new();
        for resource in ordered {
            let done = match &resource {
                Resource::Script(name) => api.delete_script(name).await,
                Resource::Tail { script, id } => api.delete_tail(script, id).await,
            };
            match done {
                Ok(()) => self.list().retain(|r| r != &resource),
                Err(e) => failed.push((resource, e)),
            }
        }
        failed
    }

    /// Deletes everything still listed.
    pub async fn delete_all(&self, api: &Api) -> Vec<(Resource, ApiError)> {
        let all = self.list().clone();
        self.delete(api, &all).await
    }
}
