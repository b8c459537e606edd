//! The path canonicaliser: whatever a client sends, its canonical path is
//! found without a panic, is its own canonical form (then borrowed, not
//! copied, unless it holds an escape), holds nothing left to normalise, and grows at most by escaping.
//! A route template's canonical form is its own too.

#![no_main]

use std::borrow::Cow;

use libfuzzer_sys::fuzz_target;
use runtime::routes::{canonical, canonical_template};

fuzz_target!(|data: &[u8]| {
    let path = String::from_utf8_lossy(data);
    let once = canonical(&path);
    assert!(once.starts_with('/'), "{path:?} -> {once:?}");
    assert!(once.len() <= 3 * path.len() + 1, "{path:?} -> {once:?}");
    let twice = canonical(&once);
    // A path holding an escape is looked at again (copied); any other is borrowed.
    assert!(
        once.contains('%') || matches!(twice, Cow::Borrowed(_)),
        "{path:?} -> {once:?} is not seen as canonical"
    );
    assert_eq!(twice, once, "{path:?}");
    if once != "/" {
        assert!(!once.ends_with('/'), "{path:?} -> {once:?}");
        for segment in once[1..].split('/') {
            assert!(
                !matches!(segment, "" | "." | ".."),
                "{path:?} -> {once:?} keeps a segment to remove"
            );
        }
    }
    let bytes = once.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        assert!(
            b > 0x20 && b < 0x7f && !b"\"#<>?`{}\\".contains(&b),
            "{path:?} -> {once:?} holds a byte `new URL()` escapes"
        );
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3);
            assert!(
                hex.is_some_and(|h| h
                    .iter()
                    .all(|c| c.is_ascii_digit() || (b'A'..=b'F').contains(c))),
                "{path:?} -> {once:?}: a `%` that starts no upper-case escape"
            );
        }
    }
    if let Ok(template) = canonical_template(&path) {
        assert_eq!(
            canonical_template(&template).as_deref(),
            Ok(template.as_str()),
            "{path:?}"
        );
    }
});
