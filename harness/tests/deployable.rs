//! The Workers deployable as built for workerd: what its wasm-bindgen glue
//! imports from the platform.

use harness::world::wasm::build_deployable;

#[test]
fn the_counters_seed_comes_from_web_crypto_never_math_random() {
    let deployable = build_deployable().unwrap_or_else(|e| panic!("{e}"));
    let glue = std::fs::read_to_string(&deployable.glue_js).expect("the glue");
    // The seed keys the in-memory counter's digest: a flooder who could
    // predict it could aim at chosen sketch counters.
    assert!(
        glue.contains("crypto.getRandomValues("),
        "the glue never calls crypto.getRandomValues"
    );
    assert!(
        !glue.contains("Math.random"),
        "the glue calls Math.random, which is no cryptographic source"
    );
}
