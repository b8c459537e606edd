//! The route matcher, through the limiter's public decision: a request's
//! path is counted under the limit of the route axum 0.8's router (matchit,
//! on the path as sent) hands it to, however it is spelt (counting it under
//! more routes is safe; under fewer is a bypass), and under every limit its
//! canonical spelling is counted under.

#![no_main]

use std::collections::BTreeSet;

use libfuzzer_sys::fuzz_target;
use runtime::Subject;
use runtime::config::Application;
use runtime::limiter::Limiter;
use runtime::routes::canonical;

/// Templates of each kind the router tells apart: static, parameter,
/// catch-all, a static beside a parameter, a parameter in the middle.
const TEMPLATES: [&str; 7] = [
    "/api/login",
    "/api/search/{q}",
    "/api/files/{*path}",
    "/api/users/me",
    "/api/users/{id}",
    "/api/users/{id}/posts",
    "/api/{*rest}",
];

/// The route templates a request to `path` is counted under; `None` for a
/// path longer than the gate reads, which it refuses (414) unserved.
fn counted(limiter: &Limiter, path: &str) -> Option<BTreeSet<String>> {
    let subject = Subject::of_request(None, Some("192.0.2.7"));
    let checks = limiter.checks(&subject, "GET", path).ok()?;
    Some(
        checks
            .iter()
            .skip(1)
            .map(|check| limiter.policy_name(check.policy()).to_owned())
            .collect(),
    )
}

fuzz_target!(|data: &[u8]| {
    let Some((&mask, path)) = data.split_first() else {
        return;
    };
    let templates: Vec<&str> = TEMPLATES
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, t)| *t)
        .collect();
    let routes: String = templates
        .iter()
        .map(|t| {
            format!("[[routes]]\npath = \"{t}\"\nrate_limit = {{ requests = 5, window = 60 }}\n")
        })
        .collect();
    let app = Application::from_toml(&format!(
        "[[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n{routes}"
    ))
    .expect("the templates are valid");
    let limiter = Limiter::new(&app, "api", 1).expect("api");
    let path = String::from_utf8_lossy(path);

    // A path past the bound is refused whole: no handler serves it.
    let Some(spelt) = counted(&limiter, &path) else {
        return;
    };
    let Some(canon) = counted(&limiter, &canonical(&path)) else {
        return;
    };
    assert!(
        canon.is_subset(&spelt),
        "{path:?} is counted under {spelt:?}, its canonical form under {canon:?}"
    );

    // What the router does with it: only a path a request can carry reaches it.
    let Ok(uri) = path.parse::<http::Uri>() else {
        return;
    };
    if uri.path() != path || uri.query().is_some() {
        return;
    }
    let mut router = matchit::Router::new();
    for template in &templates {
        router
            .insert(*template, *template)
            .expect("axum takes the template");
    }
    if let Ok(matched) = router.at(&path) {
        assert!(
            spelt.contains(*matched.value),
            "{path:?} reaches {}'s handler but is counted under {spelt:?}",
            matched.value
        );
    }
});
