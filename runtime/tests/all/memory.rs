//! The in-memory budget: a Workers deployable with any number of limited
//! routes stays within [`WORKERS_MEMORY_BUDGET`], by its bound and by what
//! it holds after a flood with its binding failing; a native deployable
//! sets its own (`memory_budget_mib`); the counter under a shared budget
//! keeps the flood guarantees at 1, 10, 100 and 1,000 routes of several
//! limit sizes and windows; and what cannot share the budget is refused at
//! its place.

use std::net::Ipv4Addr;

use crate::sweep::HOUR;
use runtime::ClientAddress;
use runtime::GatePlan;
use runtime::Subject;
use runtime::config::{Application, Code, Target};
use runtime::limiter::{BackendAnswer, FallbackReason};
use runtime::limiter::{Limiter, Now};
use runtime::unstable_for_tools::counter::{
    DEFAULT_MAX_KEYS, DEFAULT_MEMORY_BUDGET, MIN_ROUTE_FLOOD_KEYS, MemoryBound, ROUTE_FLOOD_KEYS,
    Verdict, WORKERS_MEMORY_BUDGET, WindowCounter,
};
use runtime::unstable_for_tools::limits::{ADDRESS_LIMIT, Limit};

const MIB: usize = 1 << 20;

/// Route `i`'s limit among `n`: requests from 1 to 70,000 (counters of 0,
/// 1, 2 and 4 bytes) and both windows Cloudflare's binding counts.
fn binding_limit(i: usize) -> Limit {
    const REQUESTS: [u32; 6] = [1, 5, 20, 300, 1_000, 70_000];
    Limit::new(
        REQUESTS[i % REQUESTS.len()],
        [10, 60][i / REQUESTS.len() % 2],
    )
}

/// A Workers deployable `edge` counting through Cloudflare's binding, with
/// `n` routes of [`binding_limit`]s.
fn workers_app(n: usize) -> String {
    let mut toml = String::from(
        "[connections.limits]\ndriver = \"cloudflare_rate_limits\"\nnamespace = 1001\n\
         [rate_limits]\nstore = \"limits\"\n\
         [[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = true\n",
    );
    for i in 0..n {
        let limit = binding_limit(i);
        toml.push_str(&format!(
            "[[routes]]\npath = \"/r/{i}\"\nrate_limit = {{ requests = {}, window = {} }}\n",
            limit.requests, limit.window_seconds
        ));
    }
    toml
}

fn address(i: u32) -> Subject {
    Subject::Address(ClientAddress::V4(Ipv4Addr::from(
        i.wrapping_mul(0x9E37_79B1),
    )))
}

/// One request, every binding asked failing: counted in memory.
fn request_binding_failing(limiter: &mut Limiter, subject: &Subject, path: &str, now: u64) {
    let checks = limiter
        .checks(subject, "GET", path)
        .expect("a path within the bound");
    let mut pending = limiter.asks(checks, Now::one_clock(now));
    for ask in pending.asks() {
        ask.answer(BackendAnswer::Unavailable(FallbackReason::Failed));
    }
    let _decision = limiter.conclude(pending, Now::one_clock(now));
}

/// The finding: 300 and 10,000 limited routes validated with a bound
/// of 155 MiB and 5 GB, and 300 held 153 MiB after 30,000 addresses. Now
/// both are bounded within a Worker's budget, and after 40,000 addresses
/// over all the routes (every route's sketch in use: the table fills at
/// 14,336 requests of two keys each) the counter holds no more.
fn a_workers_deployable_stays_within_its_budget(routes: usize) {
    let app = Application::from_toml(&workers_app(routes)).expect("valid");
    let mut limiter = Limiter::new(&app, "edge", 7).expect("edge");
    let bound = limiter.memory_bound_bytes();
    assert!(
        bound <= WORKERS_MEMORY_BUDGET,
        "{routes} routes: a bound of {bound} B, over {WORKERS_MEMORY_BUDGET} B"
    );
    for i in 0..40_000u32 {
        let path = format!("/r/{}", i as usize % routes);
        request_binding_failing(&mut limiter, &address(i), &path, HOUR + u64::from(i / 100));
    }
    let held = limiter.memory_bytes();
    assert!(
        held <= bound,
        "{routes} routes: {held} B held after the flood, over its bound of {bound} B"
    );
    assert!(
        held > bound - bound / 4,
        "{routes} routes: {held} B held of {bound} B: the flood reached the sketches"
    );
}

#[test]
fn a_workers_deployable_with_300_routes_stays_within_its_budget() {
    a_workers_deployable_stays_within_its_budget(300);
}

#[test]
fn a_workers_deployable_with_10_000_routes_stays_within_its_budget() {
    a_workers_deployable_stays_within_its_budget(10_000);
}

/// Limit sets of one route count: every route with one limit, or limits of
/// every counter width across three windows.
fn limit_sets(n: usize) -> Vec<(&'static str, Vec<Limit>)> {
    let mixed = |i: usize| {
        const REQUESTS: [u32; 4] = [1, 20, 600, 70_000];
        Limit::new(REQUESTS[i % 4], [10, 60, 3600][i / 4 % 3])
    };
    vec![
        ("1 per 10 s", vec![Limit::new(1, 10); n]),
        ("20 per 60 s", vec![Limit::new(20, 60); n]),
        ("600 per 3600 s", vec![Limit::new(600, 3600); n]),
        ("mixed", (0..n).map(mixed).collect()),
        (
            "distinct",
            (0..n).map(|i| Limit::new(1 + 3 * i as u32, 60)).collect(),
        ),
    ]
}

/// One request for each of `keys` new keys on `limit` at `now`: how many refused.
fn refused(c: &mut WindowCounter, limit: Limit, prefix: &str, keys: usize, now: u64) -> usize {
    (0..keys)
        .filter(|i| c.hit(limit, &format!("{prefix}-{i}"), now) == Verdict::Exceeded)
        .count()
}

/// At 1, 10, 100 and 1,000 routes of several limits and windows, a counter
/// built within a Worker's budget: its bound is within it, and after every
/// route's sketch is in use it holds its bound's worth at most; a flood of
/// as many keys as a route's sketch is sized for on one route refuses at
/// most 1 % of new keys there and on another route; keys past the full
/// table are refused at their limit, never later, and a flooder that moves
/// back into the table keeps its count.
#[test]
fn a_shared_budget_keeps_the_flood_guarantees_at_any_number_of_routes() {
    for n in [1, 10, 100, 1_000] {
        for (what, routes) in limit_sets(n) {
            let at = format!("{n} routes of {what}");
            let mut c = WindowCounter::with_budget(1_000, &routes, WORKERS_MEMORY_BUDGET, 7);
            let bound = c.bound();
            assert!(bound.total() <= WORKERS_MEMORY_BUDGET, "{at}: {bound}");
            assert!(bound.fits(), "{at}: {bound}");
            let expected_keys = if n <= 10 {
                ROUTE_FLOOD_KEYS
            } else {
                MIN_ROUTE_FLOOD_KEYS
            };
            assert!(bound.route_keys >= expected_keys, "{at}: {bound}");

            // Fill the table, then flood the first route with as many keys
            // as its sketch is sized for (a sketch shared by n routes of one
            // limit: n times as many, so the flood is of one route's share).
            let now = HOUR + 1_000;
            for i in 0..1_000 {
                c.hit(ADDRESS_LIMIT, &format!("filler-{i}"), now);
            }
            let flooded = routes[0];
            let flood = bound.route_keys;
            refused(&mut c, flooded, "flood", flood, now);
            let same = refused(&mut c, flooded, "new", 2_000, now);
            assert!(
                same <= 20,
                "{at}: {same} of 2,000 new keys refused after the flood"
            );
            if let Some(&other) = routes.iter().find(|&&l| l != flooded) {
                let elsewhere = refused(&mut c, other, "elsewhere", 2_000, now);
                assert!(
                    elsewhere <= 20,
                    "{at}: {elsewhere} of 2,000 refused on {other:?}"
                );
            }

            // Heavy hitters past the full table: refused at their limit, at
            // most 1 in 20 of them early (a sketch only counts high).
            let heavy = routes.iter().copied().find(|l| l.requests <= 600);
            if let Some(limit) = heavy {
                let mut early = 0;
                for k in 0..20 {
                    let key = format!("heavy-{k}");
                    let through = (0..=limit.requests)
                        .filter(|_| c.hit(limit, &key, now) == Verdict::Within)
                        .count() as u32;
                    assert!(through <= limit.requests, "{at}: {through} let through");
                    early += u32::from(through < limit.requests);
                }
                assert!(
                    early <= 1,
                    "{at}: {early} of 20 heavy hitters refused early"
                );
            }

            // Every sketch in use: the counter holds its bound but the sweep's list.
            for &limit in &routes {
                c.hit(limit, "past the table", now);
                c.hit(limit, "past the table", now);
            }
            assert!(
                c.heap_bytes() <= bound.total() - bound.sweep,
                "{at}: holds {} B, bound {bound}",
                c.heap_bytes()
            );
            assert_eq!(c.bound(), bound, "{at}: nothing grew");
        }
    }
}

/// A flooder counted in a small shared sketch keeps its count when the
/// table has room again (a sketch sized for 1,000-odd keys, 1,000 routes).
#[test]
fn a_flooder_cannot_reset_its_count_through_a_small_shared_sketch() {
    let routes: Vec<Limit> = (0..1_000).map(|i| Limit::new(5 + i % 7, 10)).collect();
    let mut c = WindowCounter::with_budget(100, &routes, WORKERS_MEMORY_BUDGET, 7);
    assert!(
        c.bound().route_keys < ROUTE_FLOOD_KEYS / 10,
        "{}",
        c.bound()
    );
    for i in 0..100 {
        c.hit(Limit::new(1, 1), &format!("filler-{i}"), HOUR);
    }
    let limit = routes[3];
    let through = (0..=limit.requests)
        .filter(|_| c.hit(limit, "flooder", HOUR) == Verdict::Within)
        .count() as u32;
    assert_eq!(
        through, limit.requests,
        "counted in the sketch up to its limit"
    );
    // The fillers' 1-second windows end: the flooder gets a table entry
    // with the sketch's count, not a fresh one.
    assert_eq!(c.hit(limit, "flooder", HOUR + 1_000), Verdict::Exceeded);
    assert_eq!(c.tracked_keys(), 1);
}

/// A native deployable's `memory_budget_mib` is its counter's budget: the
/// plan carries it (through its text too), and the limiter's bound is within it.
#[test]
fn a_native_deployable_sets_its_budget() {
    for mib in [6, 16, 32, 100, 4_096] {
        let mut toml = format!(
            "[[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n\
             memory_budget_mib = {mib}\n"
        );
        for i in 0..100 {
            toml.push_str(&format!(
                "[[routes]]\npath = \"/r/{i}\"\nrate_limit = {{ requests = {}, window = 60 }}\n",
                1 + i
            ));
        }
        let app = Application::from_toml(&toml).expect("valid");
        let api = app.deployable("api").expect("api");
        assert_eq!(api.target, Target::Native);
        assert_eq!(api.memory_budget, mib * MIB);
        let plan = GatePlan::new(&app, "api").expect("api");
        let text = plan.to_text().expect("in memory");
        // The default budget is written as no line at all, as before the line existed.
        assert_eq!(
            text.contains(&format!("\nmemory_budget {}\n", mib * MIB)),
            mib * MIB != DEFAULT_MEMORY_BUDGET,
            "{text}"
        );
        let read = GatePlan::from_text(&text).expect("read back");
        assert_eq!(read, plan);
        assert_eq!(read.memory_budget(), mib * MIB);
        let limiter = Limiter::from_plan(read, 7);
        let bound = limiter.memory_bound_bytes();
        assert!(bound <= mib * MIB, "{mib} MiB: bound {bound} B");
    }
    let without = Application::from_toml(
        "[[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n",
    )
    .expect("valid");
    assert_eq!(
        without.deployable("api").expect("api").memory_budget,
        DEFAULT_MEMORY_BUDGET
    );
}

fn diagnostics(source: &str) -> Vec<(Code, String, String)> {
    Application::from_toml(source)
        .expect_err("invalid")
        .0
        .into_iter()
        .map(|d| {
            (
                d.code,
                d.location.map(|l| l.to_string()).unwrap_or_default(),
                d.message,
            )
        })
        .collect()
}

#[test]
fn a_budget_that_is_no_whole_number_of_mib_or_too_large_is_refused_at_its_place() {
    let native = "[[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n";
    for (value, says) in [
        ("0", "below 1"),
        ("-5", "below 1"),
        ("65537", "over the 65536 MiB"),
        ("\"32 MiB\"", "is a string"),
        ("1.5", "is a float"),
    ] {
        let d = diagnostics(&format!("{native}memory_budget_mib = {value}\n"));
        assert_eq!(d.len(), 1, "{value}: {d:?}");
        let (code, at, message) = &d[0];
        assert_eq!(*code, Code::MemoryBudgetInvalid, "{value}");
        assert_eq!(at, "5:21", "{value}");
        assert!(message.contains(says), "{value}: {message}");
    }
    // On Workers, at most the Workers' 32 MiB.
    let workers = workers_app(0).replace(
        "serves_api = true\n",
        "serves_api = true\nmemory_budget_mib = 33\n",
    );
    let d = diagnostics(&workers);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].0, Code::MemoryBudgetInvalid);
    assert_eq!(d[0].1, "10:21");
    assert!(
        d[0].2.contains("over the 32 MiB allowed on Workers"),
        "{}",
        d[0].2
    );
    let lower = workers_app(3).replace(
        "serves_api = true\n",
        "serves_api = true\nmemory_budget_mib = 12\n",
    );
    let app = Application::from_toml(&lower).expect("valid");
    let limiter = Limiter::new(&app, "edge", 7).expect("edge");
    assert!(limiter.memory_bound_bytes() <= 12 * MIB);
}

/// More routes than can share a budget with each route's sketch sized for
/// [`MIN_ROUTE_FLOOD_KEYS`]: refused at the setting (or the deployable),
/// naming the budget and the least that fits.
#[test]
fn routes_that_cannot_share_the_budget_are_refused_at_their_deployable() {
    // 20,000 routes of one limit on Workers: 1.75 B of filter a key, so 32
    // MiB holds fewer than 20 million keys.
    let d = diagnostics(&workers_app(0).replace(
        "[[deployables]]",
        &format!(
            "{}[[deployables]]",
            (0..20_000)
                .map(|i| format!(
                    "[[routes]]\npath = \"/r/{i}\"\nrate_limit = {{ requests = 20, window = 10 }}\n"
                ))
                .collect::<String>()
        ),
    ));
    assert_eq!(d.len(), 1, "{:?}", &d[..d.len().min(3)]);
    let (code, at, message) = &d[0];
    assert_eq!(*code, Code::MemoryOverBudget);
    assert_eq!(at, "60006:1", "the deployable's table");
    assert!(message.contains("within 32 MiB (33554432 B)"), "{message}");
    assert!(message.contains("20000 limited routes"), "{message}");
    assert!(message.contains("at least 1000 keys"), "{message}");

    // Natively, at the setting, saying what to set it to.
    let mut native = String::from(
        "[[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n\
         memory_budget_mib = 5\n",
    );
    for i in 0..300 {
        native.push_str(&format!(
            "[[routes]]\npath = \"/r/{i}\"\nrate_limit = {{ requests = {}, window = 60 }}\n",
            1 + i
        ));
    }
    let d = diagnostics(&native);
    assert_eq!(d.len(), 1, "{d:?}");
    let (code, at, message) = &d[0];
    assert_eq!(*code, Code::MemoryOverBudget);
    assert_eq!(at, "5:21");
    let least = MemoryBound::least_budget(
        DEFAULT_MAX_KEYS,
        &(0..300).map(|i| Limit::new(1 + i, 60)).collect::<Vec<_>>(),
    );
    assert!(
        message.contains(&format!("memory_budget_mib = {}", least.div_ceil(MIB))),
        "{message}"
    );
    // That figure is enough.
    let raised = native.replace(
        "memory_budget_mib = 5",
        &format!("memory_budget_mib = {}", least.div_ceil(MIB)),
    );
    Application::from_toml(&raised).expect("the figure it names fits");
    // A deployable serving no API counts nothing, whatever its routes.
    let no_api = native.replace("serves_api = true", "serves_api = false");
    Application::from_toml(&no_api).expect("nothing counted, nothing to fit");
}
