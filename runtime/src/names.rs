//! What a connection's Cloudflare bindings are called (`LIMITS_120_PER_60S`):
//! the one rule [`crate::plan`] names bindings by, [`crate::config`] checks
//! a connection's name against, and `wrangler --write` tells this
//! connection's Wrangler entries from everyone else's by.

use crate::limits::Limit;

/// `LIMITS_120_PER_60S` for connection `limits` and 120 requests per 60 s.
pub fn binding_name(connection: &str, limit: Limit) -> String {
    format!(
        "{}_{}_PER_{}S",
        binding_prefix(connection),
        limit.requests,
        limit.window_seconds
    )
}

/// The part of a binding name taken from the connection's name: ASCII
/// letters and digits upper-cased, anything else `_`.
pub(crate) fn binding_prefix(connection: &str) -> String {
    connection
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Whether `name` is one of the binding names [`binding_name`] gives
/// `connection` (`LIMITS_<requests>_PER_<window>S`), so a Wrangler file's
/// entries for this connection can be told from everyone else's.
pub fn is_binding_name_of(connection: &str, name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    name.strip_prefix(&binding_prefix(connection))
        .and_then(|rest| rest.strip_prefix('_'))
        .and_then(|rest| rest.strip_suffix('S'))
        .and_then(|rest| rest.split_once("_PER_"))
        .is_some_and(|(requests, window)| digits(requests) && digits(window))
}
