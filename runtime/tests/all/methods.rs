//! Limits by method (issue 43): a route's limit counts the methods its
//! `methods` names (every method by default), `GET` counting `HEAD` too;
//! the description says where a list is wrong or two limits of one path
//! would count a request twice; the plan carries the methods and the
//! bindings stay one per (requests, window).

use crate::common::placed;
use runtime::config::Application;
use runtime::limiter::{Limiter, Now};
use runtime::{Bindings, GatePlan, Methods, Subject};

const T0: u64 = 1_800_000_000_000;

/// A Workers deployable counting in memory, with `routes` (TOML).
fn app(routes: &str) -> String {
    format!(
        "[connections.cache]\ndriver = \"redis\"\n\
         [rate_limits]\nstore = \"cache\"\n\
         [[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = true\n\
         declines = [\"rate_limits.counted_in_memory\"]\n\
         {routes}"
    )
}

/// The limiter of `routes`' application.
fn limiter(routes: &str) -> Limiter {
    let app = Application::from_toml(&app(routes)).expect("valid");
    Limiter::new(&app, "edge", 7).expect("edge")
}

/// One request decided in memory; the policies that refused it, by name.
fn refused_by(limiter: &mut Limiter, method: &str, path: &str) -> Vec<String> {
    let subject = Subject::of_request(None, Some("192.0.2.7"));
    let checks = limiter
        .checks(&subject, method, path)
        .expect("a short path");
    let pending = limiter.asks(checks, Now::one_clock(T0));
    let decision = limiter.conclude(pending, Now::one_clock(T0));
    decision
        .refusal
        .map(|r| r.policies.into_iter().map(|p| p.name).collect())
        .unwrap_or_default()
}

/// The methods a limit counts among a request's methods, every one a
/// limit can name, an extension method, and lower-case spellings.
const REQUEST_METHODS: [&str; 13] = [
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "PROPFIND",
    "post", "get", "head",
];

#[test]
fn a_limit_counts_its_methods_and_head_with_get_and_nothing_else() {
    for names in [
        &["POST"][..],
        &["GET"],
        &["HEAD"],
        &["PUT", "PATCH", "DELETE"],
        &["OPTIONS", "TRACE", "CONNECT"],
    ] {
        let methods = names
            .iter()
            .map(|n| Methods::named(n).expect("a method"))
            .reduce(Methods::and)
            .expect("one");
        for method in REQUEST_METHODS {
            let upper = method.to_ascii_uppercase();
            let expected =
                names.contains(&upper.as_str()) || (upper == "HEAD" && names.contains(&"GET"));
            assert_eq!(methods.counts(method), expected, "{names:?} {method}");
        }
        // Every method counts every request, an extension method's too.
        assert!(REQUEST_METHODS.iter().all(|m| Methods::ALL.counts(m)));
    }
}

#[test]
fn a_post_limit_refuses_the_posts_past_it_and_never_a_get() {
    for (requests, window) in [(1, 10), (3, 60), (5, 60)] {
        let mut limiter = limiter(&format!(
            "[[routes]]\npath = \"/login\"\n\
             rate_limit = {{ requests = {requests}, window = {window}, methods = [\"POST\"] }}\n"
        ));
        // The login page, reloaded past the limit: never refused by it.
        for _ in 0..requests + 5 {
            assert_eq!(
                refused_by(&mut limiter, "GET", "/login"),
                Vec::<String>::new()
            );
            assert_eq!(
                refused_by(&mut limiter, "HEAD", "/login"),
                Vec::<String>::new()
            );
        }
        // The form: its limit's POSTs, then a refusal naming the method.
        for n in 0..requests {
            assert_eq!(
                refused_by(&mut limiter, "POST", "/login/"),
                Vec::<String>::new(),
                "POST {n} of {requests}"
            );
        }
        assert_eq!(refused_by(&mut limiter, "POST", "/login"), ["POST /login"]);
        assert_eq!(refused_by(&mut limiter, "post", "/login"), ["POST /login"]);
        // Still no GET is refused.
        assert_eq!(
            refused_by(&mut limiter, "GET", "/login"),
            Vec::<String>::new()
        );
    }
}

#[test]
fn limits_of_one_path_by_method_count_apart_even_when_they_are_equal() {
    let mut limiter = limiter(
        "[[routes]]\npath = \"/api/items/{id}\"\n\
         rate_limit = { requests = 2, window = 60, methods = [\"GET\"] }\n\
         [[routes]]\npath = \"/api/items/{item}\"\n\
         rate_limit = { requests = 2, window = 60, methods = [\"PUT\", \"DELETE\"] }\n",
    );
    let names: Vec<&str> = limiter.policy_names().collect();
    assert_eq!(
        names,
        [
            "caller",
            "address",
            "GET /api/items/{id}",
            "PUT,DELETE /api/items/{item}"
        ]
    );
    // A GET and a HEAD: the GET limit's two.
    assert!(refused_by(&mut limiter, "GET", "/api/items/1").is_empty());
    assert!(refused_by(&mut limiter, "HEAD", "/api/items/2").is_empty());
    // Its own count: the GETs spent none of it.
    assert!(refused_by(&mut limiter, "PUT", "/api/items/1").is_empty());
    assert!(refused_by(&mut limiter, "DELETE", "/api/items/1").is_empty());
    assert_eq!(
        refused_by(&mut limiter, "PUT", "/api/items/3"),
        ["PUT,DELETE /api/items/{item}"]
    );
    assert_eq!(
        refused_by(&mut limiter, "GET", "/api/items/3"),
        ["GET /api/items/{id}"]
    );
    // A POST is limited by neither.
    assert!(refused_by(&mut limiter, "POST", "/api/items/3").is_empty());
}

#[test]
fn a_limit_of_some_methods_has_keys_of_its_own() {
    let limiter = limiter(
        "[[routes]]\npath = \"/login\"\nrate_limit = { requests = 5, window = 60, methods = [\"POST\"] }\n\
         [[routes]]\npath = \"/api/search\"\nrate_limit = { requests = 5, window = 60 }\n",
    );
    let subject = Subject::of_request(None, Some("192.0.2.7"));
    let keys = |method: &str, path: &str| -> Vec<String> {
        limiter
            .checks(&subject, method, path)
            .expect("a short path")
            .iter()
            .map(|c| c.key().to_owned())
            .collect()
    };
    assert_eq!(
        keys("POST", "/login"),
        ["address:192.0.2.7", "POST /login|address:192.0.2.7"]
    );
    assert_eq!(keys("GET", "/login"), ["address:192.0.2.7"]);
    // A limit of every method keeps the keys it always had.
    for method in REQUEST_METHODS {
        assert_eq!(
            keys(method, "/api/search"),
            ["address:192.0.2.7", "/api/search|address:192.0.2.7"]
        );
    }
}

#[test]
fn methods_are_checked_each_at_its_place_all_at_once() {
    let source = app(
        "[[routes]]\npath = \"/a\"\nrate_limit = { requests = 5, window = 60, methods = [\"post\", \"FETCH\", 3] }\n\
         [[routes]]\npath = \"/b\"\nrate_limit = { requests = 5, window = 60, methods = \"POST\" }\n\
         [[routes]]\npath = \"/c\"\nrate_limit = { requests = 5, window = 60, methods = [] }\n\
         [[routes]]\npath = \"/d\"\nrate_limit = { requests = 5, window = 60, methods = [\"PUT\", \"PUT\"] }\n\
         [[routes]]\npath = \"/e\"\nrate_limit = { requests = 5, window = 60, methods = [\"GET\", \"HEAD\"] }\n\
         [[routes]]\npath = \"/f\"\nrate_limit = { requests = 0, window = 60, methods = [\"DELETE\", \"get\"] }\n",
    );
    let line = |path: &str| {
        1 + source
            .lines()
            .position(|l| l == format!("path = \"{path}\""))
            .expect("the route")
            + 1
    };
    let col = |path: &str, text: &str| {
        let l = source.lines().nth(line(path) - 1).expect("the line");
        1 + l.find(text).expect("the text")
    };
    let at = |path: &str, text: &str| {
        format!(
            "rate_limits.methods_invalid {}:{}",
            line(path),
            col(path, text)
        )
    };
    assert_eq!(
        placed(&source),
        [
            at("/a", "\"post\""),
            at("/a", "\"FETCH\""),
            at("/a", "3]"),
            at("/b", "\"POST\""),
            at("/c", "[]"),
            // The second `PUT`, the one listed again.
            at("/d", "\"PUT\"]"),
            at("/e", "\"HEAD\""),
            at("/f", "\"get\""),
            format!(
                "rate_limits.limit_invalid {}:{}",
                line("/f"),
                col("/f", "0,")
            ),
        ]
    );
    let messages: Vec<String> = Application::from_toml(&source)
        .expect_err("invalid")
        .0
        .into_iter()
        .map(|d| d.message)
        .collect();
    for (message, says) in messages.iter().zip([
        "write `POST`",
        "one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, CONNECT, TRACE",
        "each method is a string",
        "write `methods = [\"POST\"]`",
        "leave `methods` out to count every method",
        "list `PUT` twice",
        "`GET` counts `HEAD` already",
        "write `GET`",
    ]) {
        assert!(message.contains(says), "{message:?} should say {says:?}");
    }
}

#[test]
fn one_path_and_method_limited_twice_is_reported_at_the_second_entry() {
    let cases: [(&str, &str, bool); 9] = [
        // (the first entry's methods, the second's, whether they overlap)
        ("", "", true),
        ("", "methods = [\"POST\"]", true),
        ("methods = [\"POST\"]", "", true),
        ("methods = [\"POST\"]", "methods = [\"POST\"]", true),
        ("methods = [\"GET\"]", "methods = [\"HEAD\"]", true),
        (
            "methods = [\"PUT\", \"DELETE\"]",
            "methods = [\"PATCH\", \"DELETE\"]",
            true,
        ),
        ("methods = [\"POST\"]", "methods = [\"GET\"]", false),
        (
            "methods = [\"HEAD\"]",
            "methods = [\"POST\", \"PUT\"]",
            false,
        ),
        (
            "methods = [\"GET\", \"OPTIONS\"]",
            "methods = [\"DELETE\", \"TRACE\"]",
            false,
        ),
    ];
    let field = |methods: &str| {
        if methods.is_empty() {
            String::new()
        } else {
            format!(", {methods}")
        }
    };
    for (first, second, overlap) in cases {
        let (first, second) = (field(first), field(second));
        // Two spellings of one template, as the router takes them.
        let source = app(&format!(
            "[[routes]]\npath = \"/api/users/{{id}}\"\nrate_limit = {{ requests = 5, window = 60{first} }}\n\
             [[routes]]\npath = \"/api/users/{{user}}/\"\nrate_limit = {{ requests = 9, window = 10{second} }}\n"
        ));
        let lines: Vec<&str> = source.lines().collect();
        let second_line = 1 + lines
            .iter()
            .rposition(|l| *l == "[[routes]]")
            .expect("the second entry");
        let expected: Vec<String> = if overlap {
            vec![format!("rate_limits.route_duplicate {second_line}:1")]
        } else {
            Vec::new()
        };
        assert_eq!(placed(&source), expected, "{first:?} / {second:?}");
        if overlap {
            let message = &Application::from_toml(&source).expect_err("invalid").0[0].message;
            let first_line = second_line - 3;
            assert!(message.contains(&format!("line {first_line}")), "{message}");
        }
    }
}

#[test]
fn the_plan_carries_the_methods_and_the_bindings_stay_one_per_limit() {
    let source = "[connections.limits]\ndriver = \"cloudflare_rate_limits\"\nnamespace = 1001\n\
         [rate_limits]\nstore = \"limits\"\n\
         [[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = true\n\
         [[routes]]\npath = \"/login\"\nrate_limit = { requests = 5, window = 60, methods = [\"POST\"] }\n\
         [[routes]]\npath = \"/login\"\nrate_limit = { requests = 5, window = 60, methods = [\"GET\"] }\n\
         [[routes]]\npath = \"/api/search\"\nrate_limit = { requests = 5, window = 60 }\n";
    let app = Application::from_toml(source).expect("valid");
    let edge = app.deployable("edge").expect("edge");
    let names: Vec<String> = Bindings::for_deployable(&app, edge)
        .bindings
        .iter()
        .map(|b| b.name.clone())
        .collect();
    assert_eq!(
        names,
        [
            "LIMITS_5_PER_60S",
            "LIMITS_120_PER_60S",
            "LIMITS_600_PER_60S"
        ]
    );
    let plan = GatePlan::new(&app, "edge").expect("planned");
    let text = plan.to_text().expect("a Workers plan");
    assert!(text.contains("route 0 5 60 /login POST\n"), "{text}");
    assert!(text.contains("route 0 5 60 /login GET\n"), "{text}");
    assert!(text.contains("route 0 5 60 /api/search\n"), "{text}");
    assert_eq!(GatePlan::from_text(&text), Ok(plan.clone()));
    // The Worker's limiter, built from the text, counts by method too.
    let mut limiter = Limiter::from_plan(GatePlan::from_text(&text).expect("read"), 1);
    let subject = Subject::of_request(None, Some("192.0.2.9"));
    let checks = limiter.checks(&subject, "POST", "/login").expect("short");
    let names: Vec<&str> = checks
        .iter()
        .map(|c| limiter.policy_name(c.policy()))
        .collect();
    assert_eq!(names, ["address", "POST /login"]);
    let asked = checks[1].backend().map(|b| limiter.backend_name(b));
    assert_eq!(asked, Some("LIMITS_5_PER_60S"));
    let pending = limiter.asks(checks, Now::one_clock(T0));
    let _ = limiter.conclude(pending, Now::one_clock(T0));
}
