//! How the harness puts what went wrong into one line: an error with its
//! causes, and a long text cut short.

/// `error: cause: its cause`, the whole chain on one line.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

/// The first `chars` characters of `text`, with `…` when there was more.
pub fn shortened(text: &str, chars: usize) -> String {
    let mut s: String = text.chars().take(chars).collect();
    if s.len() < text.len() {
        s.push('…');
    }
    s
}
