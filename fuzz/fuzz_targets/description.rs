//! The application description reader: any text is a valid application or
//! diagnostics, never a panic; every diagnostic is placed in the text; a
//! valid one's deployables each make a limiter and a plan that reads back.

#![no_main]

use fuzz::assert_placed;
use libfuzzer_sys::fuzz_target;
use runtime::config::Application;
use runtime::{GatePlan, Limiter};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Application::from_toml(text) {
        Err(diagnostics) => {
            assert!(!diagnostics.0.is_empty(), "refused with no diagnostic");
            assert_placed(text, &diagnostics);
        }
        Ok(app) => {
            for deployable in &app.deployables {
                let plan = GatePlan::new(&app, &deployable.name).expect("its own deployable");
                if let Ok(written) = plan.to_text() {
                    let read = GatePlan::from_text(&written).expect("a written plan reads back");
                    assert_eq!(
                        read.to_text().ok(),
                        Some(written),
                        "a plan reads back as written"
                    );
                }
                Limiter::new(&app, &deployable.name, 1).expect("its own deployable");
            }
        }
    }
});
