//! A scenario ready to run: what loading its file made of it, with its
//! application description validated once. Whatever runs, plans or checks
//! the scenario reads the application from here; nothing parses the
//! description again.

use std::sync::Arc;

use runtime::config::{Application, Counting, Deployable, Diagnostics, Target};

use super::source::ScenarioSource;

/// A scenario ready to run: defaults applied, references resolved, its
/// application validated, checked for sense.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// `FILE::NAME`, the trial's name.
    pub trial_name: String,
    /// Tagged slow: run only when asked for.
    pub ignored: bool,
    /// The application description as written, read from its file or
    /// inline: a native instance reads this text, and a run on Cloudflare
    /// sets its namespace in it.
    pub application_toml: String,
    /// That description validated, once, as the file was loaded: the
    /// application, or every diagnostic of one that does not validate (a
    /// scenario may expect them; running any other reports them).
    pub application: Result<Application, Diagnostics>,
    /// The deployable the scenario runs.
    pub deployable: String,
    /// The scenario and its file, shared by trials so failures can point into it.
    pub scenario: Arc<ScenarioSource>,
}

impl Prepared {
    /// The application and the deployable the scenario runs, as the
    /// description has them: `None` when it does not validate or has no
    /// deployable of that name (running the scenario reports which).
    pub fn described(&self) -> Option<(&Application, &Deployable)> {
        let app = self.application.as_ref().ok()?;
        Some((app, app.deployable(&self.deployable)?))
    }

    /// Whether its deployable is native: it runs as `native-fixture`
    /// processes and asks no Cloudflare binding, so no counting core plays
    /// a part (the differential check leaves it out).
    pub fn runs_natively(&self) -> bool {
        self.described()
            .is_some_and(|(_, d)| d.target == Target::Native)
    }

    /// The Workers Analytics Engine dataset its application writes data
    /// points to (`[rate_limits] data_points`), if it names one: only then
    /// does a Worker's plan bind one, and can a scenario expect its points.
    pub fn data_points_dataset(&self) -> Option<&str> {
        self.application.as_ref().ok()?.data_points.as_deref()
    }

    /// Whether it runs natively and counts in Redis: the harness starts a
    /// real `redis-server` (or a cluster of them) for it.
    pub fn counts_in_redis(&self) -> bool {
        self.described().is_some_and(|(app, d)| {
            d.target == Target::Native && matches!(app.counting(d), Counting::Redis { .. })
        })
    }
}
