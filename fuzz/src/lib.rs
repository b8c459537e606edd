//! What the fuzz targets check beyond "no panic": shared by the targets in
//! `fuzz_targets/`.

use runtime::config::{Code, Diagnostics, Location};

/// Whether `at` is a place in `text`: a line it has, a column on that line
/// (one past its last character, where an error at the end is placed).
pub fn is_in(text: &str, at: Location) -> bool {
    let line = if text.is_empty() {
        Some("")
    } else {
        // `lines()` drops a last empty line; a place after a final newline is on it.
        text.split('\n').nth(at.line.wrapping_sub(1))
    };
    line.is_some_and(|line| at.column >= 1 && at.column <= line.chars().count() + 1)
}

/// Asserts that every diagnostic of `text` is placed, in `text`, and that
/// the TOML reader's key limit is placed at a key: a place is what makes a
/// diagnostic usable, and the reader gives that one none of its own.
pub fn assert_placed(text: &str, diagnostics: &Diagnostics) {
    for d in &diagnostics.0 {
        let at = d
            .location
            .unwrap_or_else(|| panic!("{} has no place: {}", d.code, d.message));
        assert!(is_in(text, at), "{}:{at} is outside the text", d.code);
        if d.code == Code::InvalidToml && d.message == "recursion limit" {
            let offset = offset_of(text, at);
            let next = text[offset..].chars().next();
            assert!(
                next.is_some_and(|c| !c.is_whitespace() && c != '.' && c != '='),
                "`recursion limit` placed at {at}, on no key part"
            );
        }
    }
}

/// The byte offset of a place in `text` ([`is_in`] it).
pub fn offset_of(text: &str, at: Location) -> usize {
    let line_start: usize = text
        .split('\n')
        .take(at.line - 1)
        .map(|line| line.len() + 1)
        .sum();
    let column: usize = text[line_start..]
        .chars()
        .take(at.column - 1)
        .map(char::len_utf8)
        .sum();
    line_start + column
}
