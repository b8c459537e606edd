//! The plan a build step writes for a Worker (`GatePlan::to_text`) gives the
//! gate the description gives: for every application of the scenario corpus
//! and every Workers deployable of each, the limiter built from the plan's
//! text decides every kind of request, with every kind of binding answer,
//! exactly as the limiter built from the description; any name or path
//! survives the text; and no text makes `from_text` panic.

use std::path::PathBuf;

use proptest::prelude::*;
use runtime::config::{Application, Counting, Deployable, Route, Store, StoreDriver, Target};
use runtime::gate_plan::{GatePlan, PlanError};
use runtime::limiter::{BackendAnswer, FallbackReason};
use runtime::limiter::{Decision, Limiter, Now};
use runtime::unstable_for_tools::limits::Limit;
use runtime::{Methods, Subject};

const T0: u64 = 1_800_000_000_000;

/// Every application description of `scenarios/apps/`, by file name.
fn corpus_apps() -> Vec<(String, Application)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/apps");
    let mut apps: Vec<(String, Application)> = std::fs::read_dir(&dir)
        .expect("scenarios/apps")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("readable");
            let app = Application::from_toml(&text).expect("the corpus's applications are valid");
            (path.display().to_string(), app)
        })
        .collect();
    apps.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(apps.len() >= 5, "{apps:?}");
    apps
}

/// The plan of `deployable` written as text and read back.
fn through_text(app: &Application, deployable: &str) -> GatePlan {
    let text = GatePlan::new(app, deployable)
        .expect("a deployable of the application")
        .to_text()
        .expect("a Workers plan");
    GatePlan::from_text(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The same request to both limiters, every asked binding answering
/// `answer` (`None`: no answer in time); both decisions.
fn both(
    limiters: &mut [Limiter; 2],
    subject: &Subject,
    path: &str,
    answer: Option<BackendAnswer>,
    now_ms: u64,
) -> [Decision; 2] {
    limiters.each_mut().map(|limiter| {
        let checks = limiter.checks(subject, "GET", path).expect("a short path");
        let mut pending = limiter.asks(checks, Now::one_clock(now_ms));
        if let Some(answer) = answer {
            for ask in pending.asks() {
                ask.answer(answer);
            }
        }
        limiter.conclude(pending, Now::one_clock(now_ms))
    })
}

#[test]
fn a_limiter_from_the_plans_text_decides_as_one_from_the_description() {
    let answers = [
        Some(BackendAnswer::Answered { success: true }),
        Some(BackendAnswer::Answered { success: false }),
        Some(BackendAnswer::Unavailable(FallbackReason::Missing)),
        Some(BackendAnswer::Unavailable(FallbackReason::Failed)),
        Some(BackendAnswer::Unavailable(FallbackReason::TimedOut)),
        None,
    ];
    let mut deployables_seen = 0;
    for (file, app) in corpus_apps() {
        let paths: Vec<String> = app
            .routes
            .iter()
            .map(|r| r.path.clone())
            .chain(["/api/items".to_owned(), "/".to_owned()])
            .collect();
        for deployable in app
            .deployables
            .iter()
            .filter(|d| d.target == Target::Workers)
        {
            deployables_seen += 1;
            let plan = through_text(&app, &deployable.name);
            assert_eq!(
                plan,
                GatePlan::new(&app, &deployable.name).expect("planned"),
                "{file}: {}",
                deployable.name
            );
            for answer in answers {
                let mut limiters = [
                    Limiter::new(&app, &deployable.name, 7).expect("from the description"),
                    Limiter::from_plan(through_text(&app, &deployable.name), 7),
                ];
                assert_eq!(limiters[0].counting(), limiters[1].counting());
                let subjects = [
                    Subject::of_request(Some("caller-1"), None),
                    Subject::of_request(None, Some("203.0.113.9")),
                    Subject::of_request(None, Some("2001:db8:1:2::7")),
                    Subject::of_request(None, None),
                ];
                // Past every limit (600 a minute is the largest), within one window.
                for n in 0..650u64 {
                    let subject = &subjects[(n % 4) as usize];
                    let path = &paths[(n % paths.len() as u64) as usize];
                    let [from_description, from_plan] =
                        both(&mut limiters, subject, path, answer, T0 + n);
                    assert_eq!(
                        from_plan, from_description,
                        "{file}: {}, request {n} to {path}, answers {answer:?}",
                        deployable.name
                    );
                }
            }
        }
    }
    assert!(deployables_seen >= 5, "{deployables_seen}");
}

#[test]
fn a_deployable_counting_in_redis_has_no_plan_text() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/apps");
    let text = std::fs::read_to_string(dir.join("native-redis.toml")).expect("readable");
    let app = Application::from_toml(&text).expect("valid");
    let redis = app
        .deployables
        .iter()
        .find(|d| matches!(app.counting(d), Counting::Redis { .. }))
        .expect("a deployable counting in Redis");
    let plan = GatePlan::new(&app, &redis.name).expect("planned");
    assert_eq!(
        plan.to_text(),
        Err(PlanError::CountsInRedis(redis.name.clone()))
    );
}

#[test]
fn a_text_that_is_no_plan_is_refused_with_its_line() {
    let good = "rate-limits-plan 2\ndeployable edge\ncounting binding limits 7\n\
                backend LIMITS_20_PER_10S\nbackend LIMITS_120_PER_60S\nsubjects - 1\n\
                route 0 20 10 /api/search\n";
    assert!(GatePlan::from_text(good).is_ok());
    let line = |n| {
        Err(PlanError::Line {
            line: n,
            problem: "",
        })
    };
    let cases: [(&str, Result<(), PlanError>); 13] = [
        ("", Err(PlanError::Version)),
        ("rate-limits-plan 1\n", Err(PlanError::Version)),
        // The store lines after `subjects`.
        (
            "rate-limits-plan 2\ndeployable e\ncounting no_api\nsubjects - -\nbackend X\n",
            line(5),
        ),
        (
            "rate-limits-plan 2\ndeployable e\ncounting redis cache\n",
            line(3),
        ),
        (
            "rate-limits-plan 2\ndeployable e\ncounting binding c x\n",
            line(3),
        ),
        (
            "rate-limits-plan 2\ndeployable e\ncounting in_memory\nsubjects 0 -\n",
            line(4),
        ),
        (
            "rate-limits-plan 2\ndeployable e\ncounting in_memory\nsubjects - -\nroute - 0 10 /a\n",
            line(5),
        ),
        ("rate-limits-plan 2\ndeployable e\ndeployable f\n", line(3)),
        // A route's methods: one word, of methods a limit names, each once.
        (
            "rate-limits-plan 2\ndeployable e\ncounting in_memory\nsubjects - -\nroute - 5 10 /a post\n",
            line(5),
        ),
        (
            "rate-limits-plan 2\ndeployable e\ncounting in_memory\nsubjects - -\nroute - 5 10 /a POST GET\n",
            line(5),
        ),
        (
            "rate-limits-plan 2\ndeployable e\ncounting in_memory\nsubjects - -\nroute - 5 10 /a POST,POST\n",
            line(5),
        ),
        (
            "rate-limits-plan 2\ndeployable e\ncounting in_memory\nsubjects - -\nroute - 5 10 /a \n",
            line(5),
        ),
        // Ends before its `subjects` line.
        (
            "rate-limits-plan 2\ndeployable e\ncounting in_memory\n",
            line(4),
        ),
    ];
    for (text, expected) in cases {
        let got = GatePlan::from_text(text).map(drop).map_err(|e| match e {
            PlanError::Line { line, .. } => PlanError::Line { line, problem: "" },
            other => other,
        });
        assert_eq!(got, expected, "{text:?}");
    }
    // Every error says where, and what to do about another version.
    let version = GatePlan::from_text("").expect_err("no plan").to_string();
    assert!(version.contains("harness validate --plan"), "{version}");
}

proptest! {
    #[test]
    fn any_name_and_path_survive_the_text(
        connection in "\\PC*",
        deployable in "\\PC*",
        paths in prop::collection::vec(("[ -~\\n\\r\\t\\\\ßü😀]*", 1u32..1000, prop::sample::select(vec![10u32, 60]), proptest::option::of(prop::sample::subsequence(Methods::NAMES.to_vec(), 1..=Methods::NAMES.len())), any::<bool>()), 0..4),
        data_points in proptest::option::of("[A-Za-z][A-Za-z0-9_]{0,63}"),
        built_in_shadow in any::<[bool; 2]>(),
    ) {
        let app = Application {
            name: None,
            store: Some(Store {
                connection: connection.clone(),
                driver: StoreDriver::CloudflareRateLimits { namespace: 1 },
            }),
            deployables: vec![Deployable {
                name: deployable.clone(),
                target: Target::Workers,
                serves_api: true,
                declines: Vec::new(),
                client_address: Default::default(),
                        memory_budget: runtime::unstable_for_tools::counter::DEFAULT_MEMORY_BUDGET,
}],
            // A validated description's paths: canonical templates.
            routes: paths
                .iter()
                .filter_map(|(path, requests, window, methods, shadow)| Some(Route {
                    path: runtime::routes::canonical_template(path).ok()?,
                    rate_limit: Some(Limit::new(*requests, *window)),
                    // Every method, or any non-empty set of those a limit can name.
                    methods: methods.as_ref().map_or(Methods::ALL, |names| {
                        names
                            .iter()
                            .filter_map(|name| Methods::named(name))
                            .fold(Methods::named(names[0]).expect("a name"), Methods::and)
                    }),
                    shadow: *shadow,
                }))
                .collect(),
            data_points,
            built_in_shadow,
        };
        let plan = GatePlan::new(&app, &deployable).expect("planned");
        let text = plan.to_text().expect("a Workers plan");
        prop_assert_eq!(GatePlan::from_text(&text), Ok(plan));
    }

    #[test]
    fn no_text_makes_reading_a_plan_panic(text in "(rate-limits-plan 2\n)?[ -~\n]{0,300}") {
        let _ = GatePlan::from_text(&text);
    }
}
