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

/// The HTTP methods a route's limit counts: every method (the default), or
/// those its `methods` names, so `/login` can be limited for its form's
/// `POST` without counting the page's `GET`. A limit naming `GET` counts
/// `HEAD` too: a `HEAD` is a `GET` without its body (RFC 9110, 9.3.2), and
/// routers answer it with the `GET` handler (axum's `get`), so a `GET`
/// limit that let `HEAD` through would be bypassed by it. A request's
/// method is matched ASCII case-insensitively (a router that takes `post`
/// for `POST` is not bypassed: counting more than it serves is safe), and
/// one no limit can name (an extension method such as `PROPFIND`) is
/// counted by the limits of every method alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Methods(u16);

impl Methods {
    /// The methods a limit can name (RFC 9110's and `PATCH`, RFC 5789), in
    /// the order a limit's name lists them.
    pub const NAMES: [&'static str; 9] = [
        "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE",
    ];

    /// Every method, extension methods included: a limit that names none.
    pub const ALL: Methods = Methods(u16::MAX);

    const GET: u16 = 1;
    const HEAD: u16 = 1 << 1;

    /// The one method `name` is, written as [`Methods::NAMES`] writes it
    /// (methods are case-sensitive, RFC 9110 9.1); `None` for any other.
    pub fn named(name: &str) -> Option<Methods> {
        let place = Methods::NAMES.iter().position(|n| *n == name)?;
        Some(Methods(1 << place))
    }

    /// These methods and `other`'s.
    pub const fn and(self, other: Methods) -> Methods {
        Methods(self.0 | other.0)
    }

    /// Whether this is every method (a limit that names none).
    pub(crate) const fn is_all(self) -> bool {
        self.0 == Methods::ALL.0
    }

    /// The methods counted, `HEAD` with `GET`.
    const fn counted(self) -> u16 {
        if self.0 & Methods::GET != 0 {
            self.0 | Methods::HEAD
        } else {
            self.0
        }
    }

    /// Whether a limit of these methods counts a request whose method is
    /// `method`, as the server read it.
    pub fn counts(self, method: &str) -> bool {
        if self.is_all() {
            return true;
        }
        Methods::NAMES
            .iter()
            .position(|n| n.eq_ignore_ascii_case(method))
            .is_some_and(|place| self.counted() & (1 << place) != 0)
    }

    /// Whether a request of some method is counted by both: two limits of
    /// one path that overlap would count it twice.
    pub const fn overlaps(self, other: Methods) -> bool {
        self.counted() & other.counted() != 0
    }

    /// The methods named, in [`Methods::NAMES`] order (none for every method).
    pub(crate) fn names(self) -> impl Iterator<Item = &'static str> {
        let bits = if self.is_all() { 0 } else { self.0 };
        Methods::NAMES
            .into_iter()
            .enumerate()
            .filter(move |(place, _)| bits & (1 << place) != 0)
            .map(|(_, name)| name)
    }

    /// The methods as a limit's name and its plan write them, `GET,POST`;
    /// `None` for every method.
    pub(crate) fn word(self) -> Option<String> {
        (!self.is_all()).then(|| self.names().collect::<Vec<_>>().join(","))
    }

    /// The methods a [`Methods::word`] names; `None` for a word that is no
    /// such list.
    pub(crate) fn of_word(word: &str) -> Option<Methods> {
        let mut methods = Methods(0);
        for name in word.split(',') {
            let one = Methods::named(name)?;
            if methods.0 & one.0 != 0 {
                return None;
            }
            methods = methods.and(one);
        }
        Some(methods)
    }

    /// The name of a route's limit of these methods on `path`: the path
    /// for every method, `POST /login` for a limit of some (a path starts
    /// with `/`, so no name of one spelling is another's). The
    /// `RateLimit-Policy` header, the metrics and the route's keys name the
    /// limit by it, so two limits of one path count apart.
    pub fn limit_name(self, path: &str) -> String {
        match self.word() {
            None => path.to_owned(),
            Some(word) => format!("{word} {path}"),
        }
    }
}
