//! The limits an application counts, and who they are counted for.

use serde::{Deserialize, Serialize};

/// A number of requests allowed in a fixed window. Ordered by window and then
/// by requests, the order bindings are numbered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Limit {
    /// The window's length: windows are aligned to the clock (`floor(now / window)`).
    pub window_seconds: u32,
    /// How many requests a window lets through.
    pub requests: u32,
}

impl Limit {
    /// `requests` per `window_seconds`, in the order people say it (the
    /// fields are in the order limits sort by).
    pub const fn new(requests: u32, window_seconds: u32) -> Limit {
        Limit {
            window_seconds,
            requests,
        }
    }
}

/// A signed-in caller's limit: 600 requests a minute, counted by caller id.
pub const CALLER_LIMIT: Limit = Limit::new(600, 60);

/// Anyone else's limit: 120 requests a minute, counted by address.
pub const ADDRESS_LIMIT: Limit = Limit::new(120, 60);

/// The limits every application counts today.
pub(crate) const BUILT_IN_LIMITS: [Limit; 2] = [CALLER_LIMIT, ADDRESS_LIMIT];
