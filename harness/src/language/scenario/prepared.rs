//! A scenario ready to run: what loading its file made of it.

use std::sync::Arc;

use super::source::ScenarioSource;

/// A scenario ready to run: defaults applied, references resolved, checked for sense.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// `FILE::NAME`, the trial's name.
    pub trial_name: String,
    /// Tagged slow: run only when asked for.
    pub ignored: bool,
    /// The application description, read from its file or inline.
    pub application_toml: String,
    /// The deployable the scenario runs.
    pub deployable: String,
    /// The scenario and its file, shared by trials so failures can point into it.
    pub scenario: Arc<ScenarioSource>,
}

impl Prepared {
    /// Whether its deployable is native: it runs as `native-fixture`
    /// processes and asks no Cloudflare binding, so no counting core plays
    /// a part (the differential check leaves it out).
    pub fn runs_natively(&self) -> bool {
        runtime::config::Application::from_toml(&self.application_toml).is_ok_and(|app| {
            app.deployable(&self.deployable)
                .is_some_and(|d| d.target == runtime::config::Target::Native)
        })
    }

    /// Whether it runs natively and counts in Redis: the harness starts a
    /// real `redis-server` (or a cluster of them) for it.
    pub fn counts_in_redis(&self) -> bool {
        runtime::config::Application::from_toml(&self.application_toml).is_ok_and(|app| {
            app.deployable(&self.deployable).is_some_and(|d| {
                d.target == runtime::config::Target::Native
                    && matches!(app.counting(d), runtime::config::Counting::Redis { .. })
            })
        })
    }
}
