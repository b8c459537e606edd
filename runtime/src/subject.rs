//! Who a request is counted for: a signed-in caller, or anyone else by address.

use crate::address::ClientAddress;
use crate::limits::{ADDRESS_LIMIT, CALLER_LIMIT, Limit};

/// Who a request is counted for. Its key is [`crate::keys::subject`].
#[derive(Debug, Clone, PartialEq, Eq)]
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
        match caller_id {
            Some(id) if !id.trim().is_empty() => Subject::Caller(id.to_owned()),
            _ => Subject::Address(ClientAddress::from_header(connecting_ip)),
        }
    }

    /// The built-in limit for this kind of subject.
    pub fn limit(&self) -> Limit {
        match self {
            Subject::Caller(_) => CALLER_LIMIT,
            Subject::Address(_) => ADDRESS_LIMIT,
        }
    }

    /// The built-in limit's name in the `RateLimit-Policy` header: `caller`
    /// or `address` (never a key).
    pub fn policy(&self) -> &'static str {
        match self {
            Subject::Caller(_) => "caller",
            Subject::Address(_) => "address",
        }
    }
}
