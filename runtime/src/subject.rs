//! Who a request is counted for: a signed-in caller, or anyone else by address.

use crate::address::ClientAddress;
use crate::limits::{ADDRESS_LIMIT, CALLER_LIMIT, Limit};

/// Who a request is counted for. Its key is [`crate::keys::subject`]; it is
/// a key, so its `Debug` shows its kind and never the id or the address.
#[derive(Clone, PartialEq, Eq)]
pub enum Subject {
    /// A signed-in caller, by the id the application's sign-in gave.
    Caller(String),
    /// Anyone else, by the address in [`crate::limiter::ADDRESS_HEADER`]
    /// (or a native server's socket peer): an IPv6 client by its /64.
    /// Requests without a usable address share one count.
    Address(ClientAddress),
}

impl Subject {
    /// The subject of a request: the caller if signed in (an id that is
    /// empty or only whitespace is no sign-in), else the address.
    pub fn of_request(caller_id: Option<&str>, connecting_ip: Option<&str>) -> Subject {
        Subject::signed_in(caller_id)
            .unwrap_or_else(|| Subject::Address(ClientAddress::from_header(connecting_ip)))
    }

    /// The signed-in caller, if there is one (an id that is empty or only
    /// whitespace is no sign-in): a request counted by caller needs no address.
    pub fn signed_in(caller_id: Option<&str>) -> Option<Subject> {
        caller_id
            .filter(|id| !id.trim().is_empty())
            .map(|id| Subject::Caller(id.to_owned()))
    }

    /// The built-in limit for this kind of subject.
    #[doc(hidden)]
    pub fn limit(&self) -> Limit {
        match self {
            Subject::Caller(_) => CALLER_LIMIT,
            Subject::Address(_) => ADDRESS_LIMIT,
        }
    }

    /// The built-in limit's name in the `RateLimit-Policy` header: `caller`
    /// or `address` (never a key).
    #[doc(hidden)]
    pub fn policy(&self) -> &'static str {
        match self {
            Subject::Caller(_) => Subject::POLICIES[0],
            Subject::Address(_) => Subject::POLICIES[1],
        }
    }

    /// The built-in limits' names in the `RateLimit-Policy` header: a
    /// caller's, then an address's.
    #[doc(hidden)]
    pub const POLICIES: [&'static str; 2] = ["caller", "address"];
}

impl std::fmt::Debug for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::Caller(_) => f.write_str("Subject::Caller(..)"),
            Subject::Address(address) => write!(f, "Subject::Address({address:?})"),
        }
    }
}

/// The signed-in caller of a request, as a request extension the
/// application's sign-in inserts before a gate's tower layer runs (the
/// native `RateLimitLayer`, or workers-rs's on Workers). It is a key, so its
/// `Debug` leaves the id out.
#[derive(Clone, PartialEq, Eq)]
pub struct CallerId(pub String);

impl std::fmt::Debug for CallerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallerId(..)")
    }
}
