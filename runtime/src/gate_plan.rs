//! What one deployable's gate needs at request time, planned at build time:
//! how it counts, the stores it asks, and each limit with its store. The
//! framework's build step validates the application description and writes
//! this plan ([`GatePlan::to_text`], `harness check --plan`); a Worker builds
//! its gate from the text ([`GatePlan::from_text`]) with no TOML parser and
//! no validation code linked, in microseconds.
//!
//! The text form is a few lines, one field per space-separated word:
//!
//! ```text
//! rate-limits-plan 1
//! deployable edge
//! counting binding limits 1001
//! store LIMITS_20_PER_10S
//! store LIMITS_120_PER_60S
//! store LIMITS_600_PER_60S
//! subjects 2 1
//! route 0 20 10 /api/search
//! ```
//!
//! `subjects` gives the stores of a signed-in caller's limit and of an
//! address's (`-` for none); a `route` line its store, its requests, its
//! window in seconds and its path. A word escapes `\` as `\\`, a space as
//! `\s`, a tab as `\t`, a line feed as `\n` and a carriage return as `\r`, so
//! any name or path fits on its line.

use crate::config::{Application, Counting, Deployable};
use crate::limits::{ADDRESS_LIMIT, CALLER_LIMIT, Limit};
use crate::plan::BindingPlan;
use crate::store::StoreId;

/// The first line of every plan: the format and its version. A Worker built
/// against another version refuses the plan instead of misreading it.
const HEADER: &str = "rate-limits-plan 1";

/// A route's own limit, and the store that counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RouteLimit {
    pub(crate) path: String,
    pub(crate) limit: Limit,
    pub(crate) store: Option<StoreId>,
}

/// The gate of one deployable, as [`crate::Limiter::from_plan`] builds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatePlan {
    pub(crate) deployable: String,
    pub(crate) counting: Counting,
    /// The stores it asks, by [`StoreId`]: the bindings in namespace order,
    /// or the one Redis connection.
    pub(crate) stores: Vec<String>,
    /// The stores of the built-in limits: a caller's, then an address's.
    pub(crate) subject_stores: [Option<StoreId>; 2],
    /// Each route's own limit, once per (path, limit) however often the description lists it.
    pub(crate) routes: Vec<RouteLimit>,
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
         again with this framework's `harness check --plan`"
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
        let plan = BindingPlan::for_deployable(app, deployable);
        let stores: Vec<String> = match &counting {
            Counting::Redis { connection, .. } => vec![connection.clone()],
            Counting::Binding { .. } | Counting::InMemory | Counting::NoApi => {
                plan.bindings.iter().map(|b| b.name.clone()).collect()
            }
        };
        // A Redis store is asked about every limit; a binding about its own.
        let store_for = |limit: Limit| match &counting {
            Counting::Redis { .. } => Some(StoreId::new(0)),
            Counting::Binding { .. } | Counting::InMemory | Counting::NoApi => plan
                .bindings
                .iter()
                .position(|b| b.limit == limit)
                .map(StoreId::new),
        };
        // A route listed twice (`rate_limits.route_duplicate` in a checked
        // description) must not count one request twice under one key.
        let mut routes: Vec<RouteLimit> = Vec::new();
        for route in &app.routes {
            if let Some(limit) = route.rate_limit
                && !routes
                    .iter()
                    .any(|r| r.path == route.path && r.limit == limit)
            {
                routes.push(RouteLimit {
                    path: route.path.clone(),
                    limit,
                    store: store_for(limit),
                });
            }
        }
        let subject_stores = [store_for(CALLER_LIMIT), store_for(ADDRESS_LIMIT)];
        Ok(GatePlan {
            deployable: deployable.name.clone(),
            counting,
            stores,
            subject_stores,
            routes,
        })
    }

    /// The deployable this plan is for.
    pub fn deployable(&self) -> &str {
        &self.deployable
    }

    /// How the deployable counts.
    pub fn counting(&self) -> &Counting {
        &self.counting
    }

    /// The plan's text form (see the module's documentation). A deployable
    /// counting in Redis has none: [`PlanError::CountsInRedis`].
    pub fn to_text(&self) -> Result<String, PlanError> {
        let mut text = String::with_capacity(128);
        let mut line = |words: &[&str]| {
            let escaped: Vec<String> = words.iter().map(|w| escape(w)).collect();
            text.push_str(&escaped.join(" "));
            text.push('\n');
        };
        line(&["rate-limits-plan", "1"]);
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
        for store in &self.stores {
            line(&["store", store]);
        }
        let [caller, address] = self.subject_stores.map(store_word);
        line(&["subjects", &caller, &address]);
        for route in &self.routes {
            line(&[
                "route",
                &store_word(route.store),
                &route.limit.requests.to_string(),
                &route.limit.window_seconds.to_string(),
                &route.path,
            ]);
        }
        Ok(text)
    }

    /// Reads a plan [`GatePlan::to_text`] wrote. Nothing in it is trusted
    /// blindly: a store index out of range, a limit of 0 requests or seconds,
    /// or a line the format does not have is a [`PlanError`], never a panic.
    pub fn from_text(text: &str) -> Result<GatePlan, PlanError> {
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Err(PlanError::Version);
        }
        let mut plan = GatePlan {
            deployable: String::new(),
            counting: Counting::NoApi,
            stores: Vec::new(),
            subject_stores: [None, None],
            routes: Vec::new(),
        };
        let (mut deployable, mut counting, mut subjects) = (false, false, false);
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
                ["store", name] if !subjects => plan.stores.push((*name).to_owned()),
                ["subjects", caller, address] if !subjects => {
                    let stores = plan.stores.len();
                    plan.subject_stores = [
                        read_store(caller, stores).ok_or_else(|| at("no such store"))?,
                        read_store(address, stores).ok_or_else(|| at("no such store"))?,
                    ];
                    subjects = true;
                }
                ["route", store, requests, window, path] if subjects => {
                    let count = |word: &str| word.parse::<u32>().ok().filter(|n| *n > 0);
                    let (Some(requests), Some(window)) = (count(requests), count(window)) else {
                        return Err(at(
                            "a limit is a whole number of requests and seconds, each at least 1",
                        ));
                    };
                    plan.routes.push(RouteLimit {
                        path: (*path).to_owned(),
                        limit: Limit::new(requests, window),
                        store: read_store(store, plan.stores.len())
                            .ok_or_else(|| at("no such store"))?,
                    });
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

/// A store as a plan writes it: its index, or `-` for none.
fn store_word(store: Option<StoreId>) -> String {
    store.map_or_else(|| "-".to_owned(), |s| s.index().to_string())
}

/// The store a plan's word names among `stores`: `Some(None)` for `-`,
/// `None` for anything else that is not an index below `stores`.
fn read_store(word: &str, stores: usize) -> Option<Option<StoreId>> {
    if word == "-" {
        return Some(None);
    }
    let index: usize = word.parse().ok()?;
    (index < stores).then(|| Some(StoreId::new(index)))
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
