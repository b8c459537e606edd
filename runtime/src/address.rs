//! The address a request is counted under when no caller is signed in.
//!
//! One IPv6 subscriber holds a whole /64 (2^64 addresses), so counting each
//! IPv6 address on its own limits nobody who has IPv6 and fills the
//! in-memory counter's table. As GitLab's per-IP limits, rama's
//! `ClientIpRateKey` and zebra's connection limits do, an IPv6 client is
//! counted by its /64, and an IPv4 client reaching us through an IPv6 form
//! (IPv4-mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`) by its IPv4 address.
//! The header is parsed, so every spelling of one address (case, leading
//! zeros in a group, `::` written out) reaches the same key.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The well-known NAT64 prefix, `64:ff9b::/96` (RFC 6052): its last 32 bits
/// are the IPv4 address behind the translator.
const NAT64_PREFIX: [u16; 6] = [0x64, 0xff9b, 0, 0, 0, 0];

/// What a request is counted under when no caller is signed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientAddress {
    /// An IPv4 client, however its address was written.
    V4(Ipv4Addr),
    /// An IPv6 client's /64: the address with its last 64 bits cleared.
    V6Network(Ipv6Addr),
    /// A request whose header is absent, empty or not an address. All such
    /// requests share this one count.
    Unknown,
}

impl ClientAddress {
    /// The client address of a `CF-Connecting-IP` header value (`None` when
    /// the header is absent). Whitespace around it and brackets around an
    /// IPv6 address are ignored; anything that is not an IP address is
    /// [`ClientAddress::Unknown`].
    pub fn from_header(value: Option<&str>) -> ClientAddress {
        let Some(text) = value.map(str::trim) else {
            return ClientAddress::Unknown;
        };
        let text = text
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .unwrap_or(text);
        match text.parse::<IpAddr>() {
            Ok(IpAddr::V4(v4)) => ClientAddress::V4(v4),
            Ok(IpAddr::V6(v6)) => ClientAddress::of_v6(v6),
            Err(_) => ClientAddress::Unknown,
        }
    }

    /// An IPv6 address as counted: IPv4-mapped and NAT64 as their IPv4
    /// address, anything else by its /64.
    fn of_v6(v6: Ipv6Addr) -> ClientAddress {
        if let Some(v4) = v6.to_ipv4_mapped() {
            return ClientAddress::V4(v4);
        }
        let segments = v6.segments();
        if segments[..6] == NAT64_PREFIX {
            let [.., a, b, c, d] = v6.octets();
            return ClientAddress::V4(Ipv4Addr::new(a, b, c, d));
        }
        let network = u128::from(v6) & !u128::from(u64::MAX);
        ClientAddress::V6Network(Ipv6Addr::from(network))
    }
}

/// The key's form: `203.0.113.7`, `2001:db8:1:2::/64`, or the empty string
/// for [`ClientAddress::Unknown`]. Never logged: it is a key.
impl fmt::Display for ClientAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientAddress::V4(v4) => write!(f, "{v4}"),
            ClientAddress::V6Network(network) => write!(f, "{network}/64"),
            ClientAddress::Unknown => Ok(()),
        }
    }
}
