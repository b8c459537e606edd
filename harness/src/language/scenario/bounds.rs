//! The bounds a scenario file is held to (each the most a scenario may ask
//! of one machine), and the default of the counts it may leave out.

/// The most requests a scenario may send, all its `send` steps together
/// (and so any one of them, and any count a step's expectations state). A
/// scenario's record keeps every answer, status, headers and body, until it
/// is judged: this bounds that to some 100 MB, and the distinct addresses
/// (`10.x.y.z`, 2^24 of them) never repeat. The largest scenario here sends 601.
pub const MAX_REQUESTS: usize = 100_000;

/// The most requests a `send` may have in flight at once: each holds a
/// socket (and a file descriptor) of its own. The scenarios here use at most 6.
pub const MAX_CONCURRENCY: usize = 256;

/// The most isolates a scenario may run: each is a process of its own.
pub const MAX_ISOLATES: usize = 16;

/// The longest deadline a step may state: a minute.
pub const MAX_DEADLINE_MS: u64 = 60_000;

/// The default of a count a scenario may leave out (its isolates, a
/// `send`'s concurrency, a fallback line's lines per isolate): one.
pub(super) fn one() -> usize {
    1
}
