//! A route's limit meets every spelling of its path and every path its
//! template matches, decided in the sans-IO core the three gates share.

use proptest::prelude::*;
use runtime::Subject;
use runtime::config::{Application, Diagnostic};
use runtime::limiter::{Limiter, Now};
use runtime::routes::canonical;

const T0: u64 = 1_800_000_000_000;

/// A native deployable counting in memory, with `routes` (TOML).
fn limiter(routes: &str) -> Limiter {
    let app = Application::from_toml(&format!(
        "[[deployables]]\nname = \"edge\"\ntarget = \"native\"\nserves_api = true\n{routes}"
    ))
    .unwrap_or_else(|d| panic!("{d:?}"));
    Limiter::new(&app, "edge", 1).expect("edge")
}

fn anyone() -> Subject {
    Subject::of_request(None, Some("192.0.2.7"))
}

/// The keys `path`'s request is counted under, the subject's first.
fn keys(limiter: &Limiter, path: &str) -> Vec<String> {
    limiter
        .checks(&anyone(), "GET", path)
        .expect("a short path")
        .iter()
        .map(|check| check.key().to_owned())
        .collect()
}

/// Whether a request to `path` is refused, counting it.
fn refused(limiter: &mut Limiter, subject: &Subject, path: &str) -> bool {
    let checks = limiter.checks(subject, "GET", path).expect("a short path");
    let pending = limiter.asks(checks, Now::one_clock(T0));
    limiter
        .conclude(pending, Now::one_clock(T0))
        .refusal
        .is_some()
}

/// How many of `paths`, sent in turn by one subject, pass.
fn passed(limiter: &mut Limiter, paths: &[&str]) -> usize {
    let subject = anyone();
    paths
        .iter()
        .filter(|path| !refused(limiter, &subject, path))
        .count()
}

const LOGIN: &str =
    "[[routes]]\npath = \"/api/login\"\nrate_limit = { requests = 5, window = 60 }\n";

/// The spellings that got around a limit on `/api/login` when routes were
/// matched exactly, each a fresh count then: now all one.
#[test]
fn every_spelling_of_a_limited_path_shares_its_count() {
    let mut limiter = limiter(LOGIN);
    let spellings = [
        "/api/login/",
        "//api/login",
        "/api//login",
        "/api/./login",
        "/api/%6Cogin",
        "/api/%6cogin",
        "/api/x/../login",
        "/api\\login",
    ];
    let route_key = keys(&limiter, "/api/login")[1].clone();
    for spelling in spellings {
        assert_eq!(keys(&limiter, spelling)[1], route_key, "{spelling}");
    }
    // 5 a minute on the route: the first five spellings pass, the rest are refused.
    let passed = passed(&mut limiter, &spellings);
    assert_eq!(passed, 5);
    // Case is kept (a server may serve `/API/login` apart), and an escaped
    // slash is no slash: neither is the route.
    for other in ["/API/login", "/api%2Flogin", "/api/login%2F", "/api/logins"] {
        assert_eq!(keys(&limiter, other).len(), 1, "{other}");
    }
}

/// A segment of a path to spell: letters, digits, unreserved marks and a
/// few that stay escaped.
fn segment() -> impl Strategy<Value = String> {
    // Not starting as another router's parameter does (`:id`, `*`).
    "[a-zA-Z0-9._~-][a-zA-Z0-9._~:@!$&'()*+,;=-]{0,7}"
        .prop_filter("not a dot segment", |s| s != "." && s != "..")
}

/// One way a client may spell a segment: its unreserved characters escaped
/// at random, in either case of hex.
fn spell_segment(segment: &str, escapes: &[bool], upper: &[bool]) -> String {
    let mut out = String::new();
    for (i, c) in segment.chars().enumerate() {
        let unreserved = c.is_ascii_alphanumeric() || "-._~".contains(c);
        if unreserved && escapes[i % escapes.len()] {
            let hex = format!("{:02x}", c as u8);
            out.push('%');
            out.push_str(&if upper[i % upper.len()] {
                hex.to_uppercase()
            } else {
                hex
            });
        } else {
            out.push(c);
        }
    }
    out
}

proptest! {
    /// Any path, spelt with escaped unreserved characters, repeated
    /// slashes, `.` and `x/..` segments and a trailing slash, meets the
    /// limit of its canonical form, under the one key.
    #[test]
    fn any_spelling_meets_the_limit_of_its_path(
        segments in prop::collection::vec(segment(), 1..5),
        escapes in prop::collection::vec(any::<bool>(), 1..6),
        upper in prop::collection::vec(any::<bool>(), 1..6),
        slashes in prop::collection::vec(1usize..4, 5),
        dots in prop::collection::vec(0u8..3, 5),
        trailing in any::<bool>(),
    ) {
        let path = format!("/{}", segments.join("/"));
        let limiter = limiter(&format!(
            "[[routes]]\npath = \"{}\"\nrate_limit = {{ requests = 5, window = 60 }}\n",
            path.replace('\\', "\\\\").replace('"', "\\\"")
        ));
        let mut spelt = String::new();
        for (i, segment) in segments.iter().enumerate() {
            spelt.push_str(&"/".repeat(slashes[i % slashes.len()]));
            match dots[i % dots.len()] {
                1 => spelt.push_str("./"),
                2 => spelt.push_str("elsewhere/../"),
                _ => {}
            }
            spelt.push_str(&spell_segment(segment, &escapes, &upper));
        }
        if trailing {
            spelt.push('/');
        }
        let canonical_keys = keys(&limiter, &path);
        prop_assert_eq!(canonical_keys.len(), 2, "the route meets its own path");
        prop_assert_eq!(keys(&limiter, &spelt), canonical_keys, "{}", spelt);
        prop_assert_eq!(canonical(&spelt), canonical(&path));
    }
}

const TEMPLATES: &str = "\
[[routes]]\npath = \"/api/users/{id}\"\nrate_limit = { requests = 3, window = 60 }\n\
[[routes]]\npath = \"/api/users/me\"\nrate_limit = { requests = 1, window = 60 }\n\
[[routes]]\npath = \"/api/files/{*rest}\"\nrate_limit = { requests = 2, window = 60 }\n";

/// `/api/users/{id}` is one count per subject whatever the id (matched
/// exactly, its limit met no path at all).
#[test]
fn a_template_counts_every_path_it_matches_as_one() {
    let mut limiter = limiter(TEMPLATES);
    assert_eq!(
        passed(
            &mut limiter,
            &[
                "/api/users/1",
                "/api/users/2",
                "/api/users/%33",
                "/api/users/4/"
            ]
        ),
        3
    );
    let key = keys(&limiter, "/api/users/42")[1].clone();
    assert!(key.starts_with("/api/users/{id}|address:"), "{key}");
    // Another subject has its own count.
    let other = Subject::of_request(None, Some("192.0.2.8"));
    assert!(!refused(&mut limiter, &other, "/api/users/9"));
    // A catch-all takes the rest of the path, however deep.
    assert_eq!(
        passed(
            &mut limiter,
            &["/api/files/a", "/api/files/a/b/c", "/api/files//x/./y"]
        ),
        2
    );
    // It needs a segment to take; and no template meets another path.
    for path in [
        "/api/files",
        "/api/files/",
        "/api/users",
        "/api/users/1/posts",
    ] {
        assert_eq!(keys(&limiter, path).len(), 1, "{path}");
    }
}

/// Where several routes match, the most specific counts, as the router
/// would serve it: static over parameter over catch-all. A path the router
/// serves with another route than its canonical form meets counts on both.
#[test]
fn the_most_specific_route_counts_and_no_other() {
    let limiter = limiter(&format!(
        "{TEMPLATES}[[routes]]\npath = \"/api/{{*rest}}\"\nrate_limit = {{ requests = 9, window = 60 }}\n"
    ));
    for (path, routes) in [
        ("/api/users/me", &["/api/users/me"][..]),
        ("/api/users/42", &["/api/users/{id}"]),
        ("/api/files/x", &["/api/files/{*rest}"]),
        ("/api/users/42/posts", &["/api/{*rest}"]),
        ("/api/search", &["/api/{*rest}"]),
        // axum serves it with the catch-all (no static route has the
        // trailing slash, no parameter takes `me/`); its canonical form is
        // the static route.
        ("/api/users/me/", &["/api/users/me", "/api/{*rest}"]),
    ] {
        let keys = keys(&limiter, path);
        assert_eq!(keys.len(), 1 + routes.len(), "{path}: {keys:?}");
        for (key, route) in keys[1..].iter().zip(routes) {
            assert!(key.starts_with(&format!("{route}|")), "{path}: {keys:?}");
        }
    }
}

fn diagnostics(routes: &str) -> Vec<Diagnostic> {
    let source = format!(
        "[[deployables]]\nname = \"edge\"\ntarget = \"native\"\nserves_api = true\n{routes}"
    );
    match Application::from_toml(&source) {
        Ok(_) => Vec::new(),
        Err(d) => d.0,
    }
}

#[test]
fn another_router_s_syntax_is_invalid_at_its_place_naming_the_form_to_write() {
    let route = |path: &str| {
        format!("[[routes]]\npath = \"{path}\"\nrate_limit = {{ requests = 3, window = 60 }}\n")
    };
    for (path, says) in [
        ("/api/users/:id", "write `{id}`"),
        ("/api/files/*", "write `{*rest}` as the last segment"),
        ("/api/files/*path", "write `{*path}`"),
        ("/api/{id}.json", "a parameter is a whole segment"),
        (
            "/api/{*rest}/more",
            "a catch-all takes the rest of the path",
        ),
    ] {
        let d = diagnostics(&route(path));
        assert_eq!(d.len(), 1, "{path}: {d:?}");
        assert_eq!(
            d[0].code.as_str(),
            "rate_limits.route_path_invalid",
            "{path}"
        );
        assert!(d[0].message.contains(says), "{path}: {}", d[0].message);
        // At the path's value, line 6.
        let at = d[0].location.expect("located");
        assert_eq!((at.line, at.column), (6, 8), "{path}");
    }
    // A colon inside a segment is a literal (Google's `things:batchGet`).
    assert!(diagnostics(&route("/v1/things:batchGet")).is_empty());
}

#[test]
fn two_routes_that_meet_the_same_paths_are_a_duplicate() {
    for (first, second) in [
        ("/api/login", "/api/login/"),
        ("/api/login", "//api/%6Cogin"),
        ("/api/users/{id}", "/api/users/{user}"),
        ("/api/users/{id}", "/api/./users/{id}/"),
        ("/api/files/{*rest}", "/api/files/{*path}"),
    ] {
        let d = diagnostics(&format!(
            "[[routes]]\npath = \"{first}\"\nrate_limit = {{ requests = 3, window = 60 }}\n\
             [[routes]]\npath = \"{second}\"\nrate_limit = {{ requests = 3, window = 60 }}\n"
        ));
        assert_eq!(d.len(), 1, "{first} {second}: {d:?}");
        assert_eq!(d[0].code.as_str(), "rate_limits.route_duplicate");
        assert!(d[0].message.contains("first at line 5"), "{}", d[0].message);
    }
    // A parameter and a literal at one place are two routes.
    assert!(
        diagnostics(
            "[[routes]]\npath = \"/api/users/{id}\"\nrate_limit = { requests = 3, window = 60 }\n\
             [[routes]]\npath = \"/api/users/me\"\nrate_limit = { requests = 3, window = 60 }\n"
        )
        .is_empty()
    );
}
