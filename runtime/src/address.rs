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

impl ClientAddress {
    /// Appends the key's form (as [`fmt::Display`] writes it) to `out`: an
    /// IPv4 address digit by digit, since the formatting machinery costs the
    /// gate more per request than the rest of building its checks
    /// (BENCHMARKS.md, "The cost of asking, third round").
    pub fn push_key(&self, out: &mut String) {
        match self {
            ClientAddress::V4(v4) => {
                for (i, octet) in v4.octets().into_iter().enumerate() {
                    if i > 0 {
                        out.push('.');
                    }
                    if octet >= 100 {
                        out.push(char::from(b'0' + octet / 100));
                    }
                    if octet >= 10 {
                        out.push(char::from(b'0' + octet / 10 % 10));
                    }
                    out.push(char::from(b'0' + octet % 10));
                }
            }
            ClientAddress::V6Network(network) => {
                use fmt::Write;
                // Writing to a String never fails.
                let _ = write!(out, "{network}/64");
            }
            ClientAddress::Unknown => {}
        }
    }
}

/// The key's form: `203.0.113.7`, `2001:db8:1:2::/64`, or the empty string
/// for [`ClientAddress::Unknown`]. Never logged: it is a key.
impl fmt::Display for ClientAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut key = String::new();
        self.push_key(&mut key);
        f.write_str(&key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ipv4_octet_is_written_as_std_writes_it() {
        for octet in 0..=255u8 {
            let v4 = Ipv4Addr::new(octet, 0, 10, octet);
            let mut key = String::new();
            ClientAddress::V4(v4).push_key(&mut key);
            assert_eq!(key, v4.to_string());
        }
    }

    #[test]
    fn an_ipv6_network_and_an_unknown_address_keep_their_forms() {
        let mut key = String::from("address:");
        ClientAddress::from_header(Some("2001:DB8:1:2:3:4:5:6")).push_key(&mut key);
        assert_eq!(key, "address:2001:db8:1:2::/64");
        assert_eq!(ClientAddress::Unknown.to_string(), "");
    }
}
