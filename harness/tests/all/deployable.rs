//! The Workers deployables as built for workerd: what their wasm-bindgen
//! glue imports from the platform.

use harness::world::wasm::{WorkerChoice, build_worker};

#[test]
fn the_counters_seed_comes_from_web_crypto_never_math_random() {
    for worker in WorkerChoice::ALL {
        let deployable = build_worker(worker).unwrap_or_else(|e| panic!("{worker:?}: {e}"));
        let glue = std::fs::read_to_string(&deployable.glue_js).expect("the glue");
        // The seed keys the in-memory counter's digest: a flooder who could
        // predict it could aim at chosen sketch counters.
        assert!(
            glue.contains("crypto.getRandomValues("),
            "{worker:?}: the glue never calls crypto.getRandomValues"
        );
        assert!(
            !glue.contains("Math.random"),
            "{worker:?}: the glue calls Math.random, which is no cryptographic source"
        );
    }
}
