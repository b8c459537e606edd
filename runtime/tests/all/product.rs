//! runtime's own tests build the product as users build it: no harness
//! hook (the `testing` feature) is on, neither under `cargo test -p
//! runtime` (runtime's dev-dependency on itself names only the native
//! features) nor under `cargo test --workspace`, where cargo unifies the
//! features every native member asks of `runtime` (only the wasm32 Worker
//! fixtures ask for `testing`).

/// The features this build of `runtime` has, as its manifest names them.
fn enabled_features() -> Vec<&'static str> {
    [
        ("native", cfg!(feature = "native")),
        ("redis", cfg!(feature = "redis")),
        ("axum", cfg!(feature = "axum")),
        ("metrics", cfg!(feature = "metrics")),
        ("testing", cfg!(feature = "testing")),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect()
}

#[test]
fn the_tests_build_every_native_feature_and_no_harness_hook() {
    assert_eq!(
        enabled_features(),
        ["native", "redis", "axum", "metrics"],
        "runtime's tests are built with the product's native features and without `testing`"
    );
}
