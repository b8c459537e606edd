//! Floods of distinct keys through the limiter's public API, counting in
//! memory: every limit size and window length keeps its promises past a full
//! table, a flood on one path leaves the other routes alone, and (proptest)
//! the decisions are those of an exact count.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use crate::sweep::{HOUR, WINDOWS, every_limit, step};
use proptest::prelude::*;
use runtime::ClientAddress;
use runtime::Subject;
use runtime::config::Application;
use runtime::limiter::{Limiter, Now, Refusal};
use runtime::unstable_for_tools::counter::DEFAULT_MAX_KEYS;
use runtime::unstable_for_tools::limits::Limit;

/// A path no route limits: only the built-in limit counts it.
const ELSEWHERE: &str = "/elsewhere";

fn route_path(limit: Limit) -> String {
    format!("/r/{}-per-{}s", limit.requests, limit.window_seconds)
}

/// A route for every limit x window, and `/login` at 5 per 60 s.
fn routes() -> Vec<(String, Limit)> {
    let mut routes: Vec<(String, Limit)> = every_limit()
        .into_iter()
        .map(|limit| (route_path(limit), limit))
        .collect();
    routes.push(("/login".to_owned(), Limit::new(5, 60)));
    routes
}

/// A native deployable with no store, so every check is counted in memory.
fn limiter(routes: &[(String, Limit)]) -> Limiter {
    let mut toml =
        String::from("[[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n");
    for (path, limit) in routes {
        toml.push_str(&format!(
            "[[routes]]\npath = \"{path}\"\nrate_limit = {{ requests = {}, window = {} }}\n",
            limit.requests, limit.window_seconds
        ));
    }
    let app = Application::from_toml(&toml).expect("valid");
    Limiter::new(&app, "api", 7).expect("the deployable exists")
}

fn address(i: u32) -> Subject {
    Subject::Address(ClientAddress::V4(Ipv4Addr::from(i)))
}

fn request(limiter: &mut Limiter, subject: &Subject, path: &str, now: u64) -> Option<Refusal> {
    let checks = limiter.checks(subject, "GET", path).expect("a short path");
    let now = Now::one_clock(now);
    let pending = limiter.asks(checks, now);
    limiter.conclude(pending, now).refusal
}

/// Whether the limit named `policy` refused the request.
fn refused_by(refusal: &Option<Refusal>, policy: &str) -> bool {
    refusal
        .as_ref()
        .is_some_and(|r| r.policies.iter().any(|p| p.name == policy))
}

/// One request from each of `n` addresses from `first` on, at `now`; how many were refused.
fn new_users(limiter: &mut Limiter, first: u32, n: u32, path: &str, now: u64) -> u32 {
    (first..first + n)
        .filter(|&i| request(limiter, &address(i), path, now).is_some())
        .count() as u32
}

/// More distinct addresses than the exact table holds, one request each on a path no route limits.
const FILL: u32 = DEFAULT_MAX_KEYS as u32 + 1_000;

#[test]
fn every_limit_and_window_counts_exactly_past_a_full_table() {
    let routes = routes();
    let mut limiter = limiter(&routes);
    new_users(&mut limiter, 0, FILL, ELSEWHERE, HOUR + 1_000);
    // One over-limit client per route, counted in that route's sketch.
    let heavy = |n: usize| address(0x0A00_0000 + n as u32);
    for (n, (path, limit)) in routes.iter().enumerate() {
        let through = (0..2 * limit.requests)
            .find(|_| refused_by(&request(&mut limiter, &heavy(n), path, HOUR + 1_000), path))
            .unwrap_or(2 * limit.requests);
        assert_eq!(
            through, limit.requests,
            "{path}: let through exactly its limit"
        );
    }
    // Three window lengths at once: each route refuses until its window ends
    // and not after, however the table fills and empties meanwhile (the
    // 60-second entries that fill it end at 60 s, and the hour's keys move
    // from their sketch into the table then).
    for window in WINDOWS {
        let end = HOUR + u64::from(window) * 1_000;
        for (n, (path, limit)) in routes.iter().enumerate() {
            if limit.window_seconds >= window {
                let refusal = request(&mut limiter, &heavy(n), path, end - 1);
                assert!(
                    refused_by(&refusal, path),
                    "{path} refuses until {window} s"
                );
            }
            if limit.window_seconds == window {
                let refusal = request(&mut limiter, &heavy(n), path, end);
                assert!(
                    !refused_by(&refusal, path),
                    "{path} lets through again at {window} s"
                );
            }
        }
    }
}

#[test]
fn a_flood_on_one_path_leaves_the_other_routes_alone() {
    let routes = routes();
    // The strictest route, flooded: five other routes share its window length.
    let mut limiter = limiter(&routes);
    let flooded = route_path(Limit::new(1, 10));
    new_users(&mut limiter, 0, 100_000, &flooded, HOUR + 1_000);
    for (n, (path, _)) in routes
        .iter()
        .enumerate()
        .filter(|(_, (p, _))| *p != flooded)
    {
        let refused = new_users(
            &mut limiter,
            0x0B00_0000 + 1_000 * n as u32,
            1_000,
            path,
            HOUR + 2_000,
        );
        assert_eq!(
            refused, 0,
            "{path}: new users refused after a flood on {flooded}"
        );
    }
    // The case: a million addresses (here 100,000) on a path with
    // no route of its own, then `/login`.
    let mut limiter = self::limiter(&routes);
    new_users(&mut limiter, 0, 100_000, ELSEWHERE, HOUR + 1_000);
    let refused = new_users(&mut limiter, 0x0C00_0000, 1_000, "/login", HOUR + 2_000);
    assert_eq!(
        refused, 0,
        "/login: new users refused after a flood elsewhere"
    );
}

#[test]
fn a_client_is_counted_in_its_own_minute_beside_ten_second_and_hour_routes() {
    // 200,000 addresses fill the table through routes of 10 s and 3600 s
    // (and the built-in 60 s); a client then sends 120 in its minute.
    let routes = [
        ("/api/search".to_owned(), Limit::new(20, 10)),
        ("/api/report".to_owned(), Limit::new(5, 3600)),
    ];
    let mut limiter = limiter(&routes);
    for i in 0..200_000u32 {
        let path = &routes[i as usize % 2].0;
        request(
            &mut limiter,
            &address(i),
            path,
            HOUR + 1_000 + u64::from(i) / 10,
        );
    }
    let client = address(0x0D00_0000);
    let at = HOUR + 30_000;
    let through = (0..120)
        .filter(|_| request(&mut limiter, &client, ELSEWHERE, at).is_none())
        .count();
    assert_eq!(through, 120, "every request within the limit let through");
    assert!(refused_by(
        &request(&mut limiter, &client, ELSEWHERE, HOUR + 59_999),
        "address"
    ));
    assert!(request(&mut limiter, &client, ELSEWHERE, HOUR + 60_000).is_none());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    /// After a flood fills the table, a few clients on routes of three
    /// window lengths get exactly the decisions of an exact count, as their
    /// keys go through the sketches and back into the table.
    #[test]
    fn decides_like_an_exact_count_after_a_flood(
        ops in proptest::collection::vec((0usize..10, 0u32..6, step()), 1..300),
    ) {
        let routes: Vec<(String, Limit)> = [(1, 10), (2, 10), (5, 60), (2, 3600), (20, 3600)]
            .map(|(r, w)| (format!("/r{r}-{w}"), Limit::new(r, w)))
            .into_iter()
            .collect();
        let mut limiter = limiter(&routes);
        new_users(&mut limiter, 0, FILL, ELSEWHERE, HOUR);
        let paths: Vec<&str> = routes.iter().map(|(p, _)| p.as_str()).chain([ELSEWHERE]).collect();
        let mut exact: HashMap<(String, u64), u32> = HashMap::new();
        let mut now = HOUR;
        for (path, client, step) in ops {
            now += step;
            let path = paths[path % paths.len()];
            let subject = address(0x0E00_0000 + client);
            let checks = limiter.checks(&subject, "GET", path).expect("a short path");
            // The subject's built-in limit first, then the path's route, if any.
            let policies = [subject.policy(), path];
            let mut expected = Vec::new();
            for (check, policy) in checks.iter().zip(policies) {
                let window = now / (u64::from(check.limit().window_seconds) * 1_000);
                let count = exact.entry((check.key().to_owned(), window)).or_default();
                if *count < check.limit().requests {
                    *count += 1;
                } else {
                    expected.push(policy.to_owned());
                }
            }
            let pending = limiter.asks(checks, Now::one_clock(now));
            let refusal = limiter.conclude(pending, Now::one_clock(now)).refusal;
            let refused: Vec<String> = refusal.map(|r| r.policies.into_iter().map(|p| p.name).collect()).unwrap_or_default();
            prop_assert_eq!(refused, expected, "{} from client {} at {} ms", path, client, now - HOUR);
        }
    }
}
