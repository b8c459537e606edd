//! What one deployable's gate needs at request time, planned at build time:
//! how it counts, the backends it asks, and each limit with its backend. The
//! framework's build step validates the application description and writes
//! this plan ([`GatePlan::to_text`], `harness validate --plan`); a Worker builds
//! its gate from the text ([`GatePlan::from_text`]) with no TOML parser and
//! no validation code linked, in microseconds.
//!
//! The text form is a few lines, one field per space-separated word:
//!
//! ```text
//! rate-limits-plan 2
//! deployable edge
//! counting binding limits 1001
//! backend LIMITS_20_PER_10S
//! backend LIMITS_120_PER_60S
//! backend LIMITS_600_PER_60S
//! subjects 2 1
//! route 0 20 10 /api/search
//! shadow 1 2
//! data_points RATE_LIMIT_DATA_POINTS
//! ```
//!
//! `subjects` gives the backends of a signed-in caller's limit and of an
//! address's (`-` for none); a `route` line its backend, its requests, its
//! window in seconds, its path and, for a limit of some methods only, those
//! methods (`route 1 5 60 /login POST`; a Worker built before methods reads
//! such a line as an error at that line, never as a limit of every
//! method); a `shadow` line, when any limit is a shadow one, the policies
//! ([`crate::limiter::PolicyId`]: 0 a caller's, 1 an address's, then the
//! routes in their lines' order) that record what they would refuse
//! instead of refusing it; the last line, when the application
//! names a dataset (`rate_limits.data_points`), the binding the Worker
//! writes its data points through. A plan without it is the same plan as
//! before the line existed; a Worker built before reads one with it as an
//! error at that line, never as a plan without data points. A deployable
//! whose `memory_budget_mib` is not the default has a `memory_budget BYTES`
//! line after `subjects`, read the same way. A word escapes `\` as `\\`, a space as
//! `\s`, a tab as `\t`, a line feed as `\n` and a carriage return as `\r`, so
//! any name or path fits on its line.

use crate::backend::BackendId;
use crate::bindings::{Bindings, DATA_POINTS_BINDING};
use crate::config::{Application, Counting, Deployable};
use crate::counter::DEFAULT_MEMORY_BUDGET;
use crate::limits::{ADDRESS_LIMIT, CALLER_LIMIT, Limit, Methods};

/// The first line of every plan: the format and its version. A Worker built
/// against another version refuses the plan instead of misreading it.
const HEADER: &str = "rate-limits-plan 2";

/// The text binding a Worker reads its plan from: a Wrangler `vars` entry
/// (`harness wrangler --write` writes it), the upload's `plain_text`.
pub const PLAN_BINDING: &str = "PLAN";

/// A route's own limit, the methods it counts, and the backend that counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RouteLimit {
    pub(crate) path: String,
    pub(crate) limit: Limit,
    pub(crate) methods: Methods,
    /// Its name ([`Methods::limit_name`]): its policy's, and its keys' first part.
    pub(crate) name: String,
    pub(crate) backend: Option<BackendId>,
    /// Whether it records what it would refuse instead of refusing it.
    pub(crate) shadow: bool,
}

impl RouteLimit {
    pub(crate) fn new(
        path: String,
        limit: Limit,
        methods: Methods,
        backend: Option<BackendId>,
        shadow: bool,
    ) -> RouteLimit {
        RouteLimit {
            name: methods.limit_name(&path),
            path,
            limit,
            methods,
            backend,
            shadow,
        }
    }
}

/// The gate of one deployable, as [`crate::Limiter::from_plan`] builds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatePlan {
    pub(crate) deployable: String,
    pub(crate) counting: Counting,
    /// The backends it asks, by [`BackendId`]: the bindings in namespace order,
    /// or the one Redis connection.
    pub(crate) backends: Vec<String>,
    /// The backends of the built-in limits: a caller's, then an address's.
    pub(crate) subject_backends: [Option<BackendId>; 2],
    /// Whether the built-in limits are shadow ones: a caller's, then an address's.
    pub(crate) subject_shadow: [bool; 2],
    /// Each route's own limit, once per (path, limit) however often the description lists it.
    pub(crate) routes: Vec<RouteLimit>,
    /// The Workers Analytics Engine binding data points are written through, if any.
    pub(crate) data_points: Option<String>,
    /// The bytes its in-memory counting holds at most ([`Deployable::memory_budget`]).
    pub(crate) memory_budget: usize,
}

/// The error for a deployable that is not in the application.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the application has no deployable named `{0}`")]
pub struct UnknownDeployable(pub String);

/// Why a plan has no text form, or a text is no plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The deployable counts in Redis: a native server, which reads its
    /// application description (its plan would carry the server's URL,
    /// password included).
    #[error(
        "deployable `{0}` counts in Redis: a native server builds its gate from the application \
         description; a plan is for Workers"
    )]
    CountsInRedis(String),
    /// The text does not start with this version's header.
    #[error(
        "not a rate-limit plan of this version (its first line must be `{HEADER}`): write it \
         again with this framework's `harness validate --plan`"
    )]
    Version,
    /// A line of the text is not what the format says.
    #[error("rate-limit plan, line {line}: {problem}")]
    Line {
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        problem: &'static str,
    },
}

impl GatePlan {
    /// The plan of `deployable` of a validated application.
    pub fn new(app: &Application, deployable: &str) -> Result<GatePlan, UnknownDeployable> {
        let deployable: &Deployable = app
            .deployable(deployable)
            .ok_or_else(|| UnknownDeployable(deployable.to_owned()))?;
        let counting = app.counting(deployable);
        let plan = Bindings::for_deployable(app, deployable);
        let backends: Vec<String> = match &counting {
            Counting::Redis { connection, .. } => vec![connection.clone()],
            Counting::Binding { .. } | Counting::InMemory | Counting::NoApi => {
                plan.bindings.iter().map(|b| b.name.clone()).collect()
            }
        };
        // A Redis backend is asked about every limit; a binding about its own.
        let backend_for = |limit: Limit| match &counting {
            Counting::Redis { .. } => Some(BackendId::new(0)),
            Counting::Binding { .. } | Counting::InMemory | Counting::NoApi => plan
                .bindings
                .iter()
                .position(|b| b.limit == limit)
                .map(BackendId::new),
        };
        // A route listed twice (`rate_limits.route_duplicate` in a checked
        // description) must not count one request twice under one key.
        let mut routes: Vec<RouteLimit> = Vec::new();
        for route in &app.routes {
            if let Some(limit) = route.rate_limit
                && !routes
                    .iter()
                    .any(|r| r.path == route.path && r.limit == limit && r.methods == route.methods)
            {
                routes.push(RouteLimit::new(
                    route.path.clone(),
                    limit,
                    route.methods,
                    backend_for(limit),
                    route.shadow,
                ));
            }
        }
        let subject_backends = [backend_for(CALLER_LIMIT), backend_for(ADDRESS_LIMIT)];
        Ok(GatePlan {
            deployable: deployable.name.clone(),
            counting,
            backends,
            subject_backends,
            subject_shadow: app.built_in_shadow,
            routes,
            data_points: app
                .data_points
                .as_ref()
                .map(|_| DATA_POINTS_BINDING.to_owned()),
            memory_budget: deployable.memory_budget,
        })
    }

    /// The plan of the Workers gate's warm-up ([`crate::workers`]): a
    /// deployable counting its one route and both built-in limits through
    /// one binding, `WARM_UP`, that no Worker has, and writing its data points
    /// through another, `WARM_UP_DATA_POINTS`. Built here rather than read
    /// from text, so a change to the text format cannot turn it off.
    #[cfg(any(target_arch = "wasm32", test))]
    pub(crate) fn warm_up() -> GatePlan {
        let backend = Some(BackendId::new(0));
        GatePlan {
            deployable: "warm-up".to_owned(),
            counting: Counting::Binding {
                connection: "warm-up".to_owned(),
                namespace: 1,
            },
            backends: vec!["WARM_UP".to_owned()],
            subject_backends: [backend, backend],
            subject_shadow: [false, false],
            routes: vec![RouteLimit::new(
                "/warm-up".to_owned(),
                Limit::new(1, 10),
                Methods::ALL,
                backend,
                false,
            )],
            data_points: Some("WARM_UP_DATA_POINTS".to_owned()),
            memory_budget: DEFAULT_MEMORY_BUDGET,
        }
    }

    /// The deployable this plan is for.
    pub fn deployable(&self) -> &str {
        &self.deployable
    }

    /// How the deployable counts.
    pub fn counting(&self) -> &Counting {
        &self.counting
    }

    /// The binding the Worker writes its data points through, if any.
    pub fn data_points(&self) -> Option<&str> {
        self.data_points.as_deref()
    }

    /// The most its in-memory counting holds, in bytes.
    pub fn memory_budget(&self) -> usize {
        self.memory_budget
    }

    /// The plan's text form (see the module's documentation). A deployable
    /// counting in Redis has none: [`PlanError::CountsInRedis`].
    pub fn to_text(&self) -> Result<String, PlanError> {
        let mut text = String::with_capacity(128);
        text.push_str(HEADER);
        text.push('\n');
        let mut line = |words: &[&str]| {
            let escaped: Vec<String> = words.iter().map(|w| escape(w)).collect();
            text.push_str(&escaped.join(" "));
            text.push('\n');
        };
        line(&["deployable", &self.deployable]);
        match &self.counting {
            Counting::Binding {
                connection,
                namespace,
            } => line(&["counting", "binding", connection, &namespace.to_string()]),
            Counting::InMemory => line(&["counting", "in_memory"]),
            Counting::NoApi => line(&["counting", "no_api"]),
            Counting::Redis { .. } => {
                return Err(PlanError::CountsInRedis(self.deployable.clone()));
            }
        }
        for backend in &self.backends {
            line(&["backend", backend]);
        }
        let [caller, address] = self.subject_backends.map(backend_word);
        line(&["subjects", &caller, &address]);
        if self.memory_budget != DEFAULT_MEMORY_BUDGET {
            line(&["memory_budget", &self.memory_budget.to_string()]);
        }
        for route in &self.routes {
            let methods = route.methods.word();
            let (backend, requests, window) = (
                backend_word(route.backend),
                route.limit.requests.to_string(),
                route.limit.window_seconds.to_string(),
            );
            let mut words = vec!["route", &backend, &requests, &window, &route.path];
            words.extend(methods.as_deref());
            line(&words);
        }
        let shadow: Vec<String> = self
            .subject_shadow
            .iter()
            .chain(self.routes.iter().map(|r| &r.shadow))
            .enumerate()
            .filter(|(_, shadow)| **shadow)
            .map(|(policy, _)| policy.to_string())
            .collect();
        if !shadow.is_empty() {
            let mut words = vec!["shadow"];
            words.extend(shadow.iter().map(String::as_str));
            line(&words);
        }
        if let Some(binding) = &self.data_points {
            line(&["data_points", binding]);
        }
        Ok(text)
    }

    /// Reads a plan [`GatePlan::to_text`] wrote. Nothing in it is trusted
    /// blindly: a backend index out of range, a limit of 0 requests or seconds,
    /// or a line the format does not have is a [`PlanError`], never a panic.
    pub fn from_text(text: &str) -> Result<GatePlan, PlanError> {
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Err(PlanError::Version);
        }
        let mut plan = GatePlan {
            deployable: String::new(),
            counting: Counting::NoApi,
            backends: Vec::new(),
            subject_backends: [None, None],
            subject_shadow: [false, false],
            routes: Vec::new(),
            data_points: None,
            memory_budget: DEFAULT_MEMORY_BUDGET,
        };
        let (mut deployable, mut counting, mut subjects, mut budget) = (false, false, false, false);
        for (index, text) in lines.enumerate() {
            let at = |problem| PlanError::Line {
                line: index + 2,
                problem,
            };
            let words: Vec<String> = text.split(' ').map(unescape).collect();
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            match words.as_slice() {
                ["deployable", name] if !deployable => {
                    plan.deployable = (*name).to_owned();
                    deployable = true;
                }
                ["counting", mode @ ..] if !counting => {
                    plan.counting = match mode {
                        ["binding", connection, namespace] => Counting::Binding {
                            connection: (*connection).to_owned(),
                            namespace: namespace
                                .parse()
                                .map_err(|_| at("the namespace is no whole number"))?,
                        },
                        ["in_memory"] => Counting::InMemory,
                        ["no_api"] => Counting::NoApi,
                        _ => {
                            return Err(at(
                                "counting is `binding CONNECTION NAMESPACE`, `in_memory` or `no_api`",
                            ));
                        }
                    };
                    counting = true;
                }
                ["backend", name] if !subjects => plan.backends.push((*name).to_owned()),
                ["subjects", caller, address] if !subjects => {
                    let backends = plan.backends.len();
                    plan.subject_backends = [
                        read_backend(caller, backends).ok_or_else(|| at("no such backend"))?,
                        read_backend(address, backends).ok_or_else(|| at("no such backend"))?,
                    ];
                    subjects = true;
                }
                ["memory_budget", bytes] if subjects && !budget && plan.routes.is_empty() => {
                    plan.memory_budget = bytes
                        .parse::<usize>()
                        .ok()
                        .filter(|b| *b > 0)
                        .ok_or_else(|| at("the memory budget is no whole number of bytes"))?;
                    budget = true;
                }
                ["data_points", binding] if subjects && plan.data_points.is_none() => {
                    plan.data_points = Some((*binding).to_owned());
                }
                ["shadow", policies @ ..]
                    if subjects && !plan.has_shadow() && plan.data_points.is_none() =>
                {
                    mark_shadow(&mut plan, policies).map_err(at)?
                }
                ["route", backend, requests, window, path, methods @ ..]
                    if subjects
                        && !plan.has_shadow()
                        && plan.data_points.is_none()
                        && methods.len() <= 1 =>
                {
                    let route = read_route(
                        backend,
                        requests,
                        window,
                        path,
                        methods,
                        plan.backends.len(),
                    )
                    .map_err(at)?;
                    plan.routes.push(route);
                }
                _ => return Err(at("not a line of a plan here")),
            }
        }
        if !(deployable && counting && subjects) {
            return Err(PlanError::Line {
                line: text.lines().count() + 1,
                problem: "the plan ends before its `deployable`, `counting` and `subjects` lines",
            });
        }
        Ok(plan)
    }
}

/// A plan's `route BACKEND REQUESTS WINDOW PATH [METHODS]` line's limit
/// (enforced: a `shadow` line, read after, marks it), or what is wrong with it.
fn read_route(
    backend: &str,
    requests: &str,
    window: &str,
    path: &str,
    methods: &[&str],
    backends: usize,
) -> Result<RouteLimit, &'static str> {
    let methods = match methods {
        [word] => Methods::of_word(word)
            .ok_or("a route's methods are no list of methods a limit can name")?,
        _ => Methods::ALL,
    };
    let count = |word: &str| word.parse::<u32>().ok().filter(|n| *n > 0);
    let (Some(requests), Some(window)) = (count(requests), count(window)) else {
        return Err("a limit is a whole number of requests and seconds, each at least 1");
    };
    let path = crate::routes::canonical_template(path)
        .map_err(|_| "a route's path is no template the gate can match")?;
    Ok(RouteLimit::new(
        path,
        Limit::new(requests, window),
        methods,
        read_backend(backend, backends).ok_or("no such backend")?,
        false,
    ))
}

impl GatePlan {
    /// Whether any of its limits is a shadow one (its `shadow` line is read).
    fn has_shadow(&self) -> bool {
        self.subject_shadow.contains(&true) || self.routes.iter().any(|r| r.shadow)
    }
}

/// Marks the policies a plan's `shadow` line names (0 a caller's limit, 1
/// an address's, then its routes), or says what is wrong with the line.
fn mark_shadow(plan: &mut GatePlan, policies: &[&str]) -> Result<(), &'static str> {
    if policies.is_empty() {
        return Err("a shadow line names no policy");
    }
    for policy in policies {
        let policy: usize = policy
            .parse()
            .map_err(|_| "a shadow policy is no whole number")?;
        match policy.checked_sub(plan.subject_shadow.len()) {
            None => plan.subject_shadow[policy] = true,
            Some(route) => plan.routes.get_mut(route).ok_or("no such policy")?.shadow = true,
        }
    }
    Ok(())
}

/// A backend as a plan writes it: its index, or `-` for none.
fn backend_word(backend: Option<BackendId>) -> String {
    backend.map_or_else(|| "-".to_owned(), |s| s.index().to_string())
}

/// The backend a plan's word names among `backends`: `Some(None)` for `-`,
/// `None` for anything else that is not an index below `backends`.
fn read_backend(word: &str, backends: usize) -> Option<Option<BackendId>> {
    if word == "-" {
        return Some(None);
    }
    let index: usize = word.parse().ok()?;
    (index < backends).then(|| Some(BackendId::new(index)))
}

/// A word with the characters the format uses escaped.
fn escape(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    for c in word.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            ' ' => out.push_str("\\s"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

/// The word [`escape`] made (an unknown escape stands for its character).
fn unescape(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut chars = word.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('s') => out.push(' '),
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Limiter, Subject};

    /// The Workers gate's warm-up (wasm32 only) runs on this plan: it must
    /// be a plan the format can carry, and every check it makes must ask
    /// the binding, or the warm-up would not run the asking path at all.
    #[test]
    fn the_warm_up_plan_asks_its_binding_for_every_subject_and_its_route() {
        let plan = GatePlan::warm_up();
        let text = plan.to_text().expect("a Workers plan");
        assert_eq!(GatePlan::from_text(&text), Ok(plan.clone()), "{text}");
        let limiter = Limiter::from_plan(plan, 0);
        assert_eq!(limiter.backend_names().collect::<Vec<_>>(), ["WARM_UP"]);
        for subject in [
            Subject::of_request(None, Some("192.0.2.1")),
            Subject::of_request(None, Some("2001:db8::1")),
            Subject::of_request(Some("warm-up"), None),
        ] {
            let checks = limiter
                .checks(&subject, "GET", "/warm-up")
                .expect("a short path");
            assert_eq!(
                checks.len(),
                2,
                "{subject:?}: its built-in limit and the route's"
            );
            for check in &checks {
                assert_eq!(check.backend(), Some(BackendId::new(0)), "{subject:?}");
            }
        }
    }

    #[test]
    fn escaped_words_come_back_as_they_were() {
        for word in [
            "",
            "plain",
            "a b",
            "tab\there",
            "line\nfeed",
            "cr\r",
            "back\\slash\\s",
            "ß😀",
        ] {
            let escaped = escape(word);
            assert!(!escaped.contains([' ', '\n', '\r', '\t']), "{escaped:?}");
            assert_eq!(unescape(&escaped), word);
        }
    }
}
