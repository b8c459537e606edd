//! The scenario file reader: any text is scenarios or one error at a place
//! in the file, never a panic; an inline application's diagnostics are
//! placed in its own text.

#![no_main]

use std::path::Path;

use fuzz::{assert_placed, is_in};
use harness::language::scenario::load_text;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // No application file is read: the base is a directory that is not there.
    match load_text(text, Path::new("/nonexistent/fuzz"), Path::new("fuzz.toml")) {
        Err(errors) => {
            assert!(!errors.0.is_empty(), "an error names at least one problem");
            for error in &errors.0 {
                assert_eq!(error.place.file, Path::new("fuzz.toml"));
                assert!(
                    is_in(text, error.place.location),
                    "{error} is outside the file"
                );
            }
        }
        Ok(prepared) => {
            for scenario in &prepared {
                if let Err(diagnostics) = &scenario.application {
                    assert_placed(&scenario.application_toml, diagnostics);
                }
            }
        }
    }
});
