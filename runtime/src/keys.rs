//! Every key a request is counted under, built here and nowhere else (as
//! limitador encodes its keys in one module), so the forms a store sees can
//! be read in one place:
//!
//! - a subject: `caller:ID`, or `address:IP` (an IPv6 client by its /64,
//!   `address:2001:db8:1:2::/64`; no usable address, `address:`); a caller
//!   id longer than [`MAX_CALLER_ID_BYTES`] by its 128-bit digest,
//!   `caller#:HEX`, so no key is longer than a route's path and 300 bytes;
//! - a route's own limit: `PATH|caller:ID` or `PATH|address:IP`, and for a
//!   limit of some methods only its name first (`POST /login|address:IP`),
//!   so two limits of one path count apart;
//! - in Redis: `rl:APP:{TAG}:REQUESTS/WINDOW:KEY`, one of the keys above
//!   counted for one limit of the application named `APP` (its description's
//!   `name`, so two applications on one Redis count apart), `TAG` a digest
//!   of the request's subject key so all its keys share one cluster slot.
//!   The key names no window: Redis's own clock decides which one is running
//!   (`crate::native::scripts::COUNT_ALL`).
//!
//! On Workers the keys of a request cross into JavaScript as one string, cut
//! by the lengths [`utf16_units`] gives (`ask-bindings.js` slices the
//! string by them); a test in `crate::wire` runs that script in Node.js and
//! checks it hands every binding the key built here, non-ASCII keys
//! included. No key is ever logged.

use crate::subject::Subject;

/// The longest caller id a key holds as written, in bytes. A longer one
/// (the application's sign-in gave it, so it is no client's choice alone)
/// is keyed by its SipHash-1-3 128-bit digest, `caller#:` and 32 hex
/// digits: what the counts are locked for, hashed and stored under stays
/// bounded, and two ids share a key only if their digests collide.
pub const MAX_CALLER_ID_BYTES: usize = 256;

/// The key of a subject's built-in limit: `caller:ID` or `address:IP`,
/// built without the formatting machinery (it runs on every request).
pub fn subject(subject: &Subject) -> String {
    match subject {
        Subject::Caller(id) if id.len() > MAX_CALLER_ID_BYTES => {
            use siphasher::sip128::Hasher128;
            use std::hash::Hasher;
            let mut hasher = siphasher::sip128::SipHasher13::new();
            hasher.write(id.as_bytes());
            let digest = hasher.finish128().as_u128();
            let mut key = String::with_capacity("caller#:".len() + 32);
            key.push_str("caller#:");
            const HEX: &[u8; 16] = b"0123456789abcdef";
            for shift in (0..32).rev() {
                key.push(char::from(HEX[(digest >> (shift * 4)) as usize & 0xf]));
            }
            key
        }
        Subject::Caller(id) => {
            let mut key = String::with_capacity("caller:".len() + id.len());
            key.push_str("caller:");
            key.push_str(id);
            key
        }
        Subject::Address(address) => {
            // The longest IPv4 key, so one allocation in the common case.
            let mut key = String::with_capacity("address:255.255.255.255".len());
            key.push_str("address:");
            address.push_key(&mut key);
            key
        }
    }
}

/// The key of a route's own limit: `NAME|SUBJECT_KEY`, its name its path
/// (`/login`) or for a limit of some methods those and its path (`POST
/// /login`, [`crate::Methods::limit_name`]), so a subject's count on one
/// route's limit is apart from its built-in count and from other limits'.
pub(crate) fn route(name: &str, subject_key: &str) -> String {
    let mut key = String::with_capacity(name.len() + 1 + subject_key.len());
    key.push_str(name);
    key.push('|');
    key.push_str(subject_key);
    key
}

/// The length of `key` in UTF-16 code units, as JavaScript's `length` and
/// `slice` count it: how `ask-bindings.js` cuts a request's keys apart.
#[cfg(any(target_arch = "wasm32", test))]
pub(crate) fn utf16_units(key: &str) -> u32 {
    let units = if key.is_ascii() {
        key.len()
    } else {
        key.encode_utf16().count()
    };
    u32::try_from(units).unwrap_or(u32::MAX)
}

/// The hash tag of a request's Redis keys: a digest of its subject's key,
/// so all of them land in one cluster slot and no key needs braces escaped.
/// The digest only places keys; it never decides a count.
#[cfg(feature = "redis")]
pub fn redis_tag(subject_key: &str) -> String {
    use std::hash::Hasher;
    let mut hasher = siphasher::sip::SipHasher13::new();
    hasher.write(subject_key.as_bytes());
    format!("{:016x}", hasher.finish())
}

/// The Redis key counting `key` for `limit` in the application named
/// `application`: `rl:APP:{TAG}:REQUESTS/WINDOW:KEY`. It names no window:
/// the script reads the running one off Redis's own clock, so no
/// instance's clock decides a window (`crate::native::scripts::COUNT_ALL`).
/// The name has no `:`, `{` or `}` (the description's rule), so a key
/// names one application and the tag is the key's hash tag.
#[cfg(feature = "redis")]
pub fn redis_key(application: &str, tag: &str, limit: crate::Limit, key: &str) -> String {
    format!(
        "rl:{application}:{{{tag}}}:{}/{}:{key}",
        limit.requests, limit.window_seconds
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subject_and_route_keys() {
        let caller = subject(&Subject::of_request(Some("u1"), None));
        assert_eq!(caller, "caller:u1");
        let address = subject(&Subject::of_request(None, Some("2001:DB8:1:2:3:4:5:6")));
        assert_eq!(address, "address:2001:db8:1:2::/64");
        assert_eq!(subject(&Subject::of_request(None, None)), "address:");
        assert_eq!(route("/api/search", &caller), "/api/search|caller:u1");
    }

    #[test]
    fn a_path_holding_the_separator_could_share_a_key_which_is_why_none_may() {
        // Two keys that would be one: route `/a|caller:b` for caller `c`, and
        // route `/a` for caller `b|caller:c`. The description refuses the
        // first (`rate_limits.route_path_invalid`).
        let one = route(
            "/a|caller:b",
            &subject(&Subject::of_request(Some("c"), None)),
        );
        let other = route(
            "/a",
            &subject(&Subject::of_request(Some("b|caller:c"), None)),
        );
        assert_eq!(one, other);
    }

    proptest::proptest! {
        /// With no `|` in a path (the description's rule), a route key names
        /// exactly one (path, subject), whatever the caller id holds, and
        /// never equals a subject's own key.
        #[test]
        fn keys_of_valid_paths_are_unambiguous(
            paths in proptest::collection::vec("/[^|]{0,6}", 2),
            ids in proptest::collection::vec("[a-c|:/]{1,6}", 2),
            addresses in proptest::collection::vec(proptest::option::of("[0-9a-f:.]{0,8}"), 2),
        ) {
            let subjects: Vec<Subject> = ids
                .iter()
                .zip(&addresses)
                .map(|(id, address)| match address {
                    Some(address) => Subject::of_request(None, Some(address)),
                    None => Subject::of_request(Some(id), None),
                })
                .collect();
            let key = |i: usize| route(&paths[i], &subject(&subjects[i]));
            let same = paths[0] == paths[1] && subject(&subjects[0]) == subject(&subjects[1]);
            proptest::prop_assert_eq!(key(0) == key(1), same);
            proptest::prop_assert!(subjects.iter().all(|s| subject(s) != key(0)));
        }
    }

    #[test]
    fn utf16_units_count_as_javascript_does() {
        assert_eq!(utf16_units("caller:u1"), 9);
        // é is one unit (two bytes), 😀 two (a surrogate pair; four bytes).
        assert_eq!(utf16_units("é😀"), 3);
    }

    #[cfg(feature = "redis")]
    #[test]
    fn a_redis_key_names_its_application_its_limit_and_its_requests_tag() {
        let limit = crate::Limit::new(120, 60);
        let tag = redis_tag("address:192.0.2.1");
        assert_eq!(tag.len(), 16);
        let key = redis_key("shop", &tag, limit, "address:192.0.2.1");
        assert_eq!(key, format!("rl:shop:{{{tag}}}:120/60:address:192.0.2.1"));
        assert_ne!(key, redis_key("blog", &tag, limit, "address:192.0.2.1"));
    }
}
