//! The address sources: whatever the headers hold and whoever the peer is,
//! resolving the client never panics; the peer source, and a peer no source
//! trusts, count the peer; and a key holds an address's canonical form and
//! nothing else a header carried (nor does a `Debug` show one).

#![no_main]

use std::net::IpAddr;

use ipnet::IpNet;
use libfuzzer_sys::fuzz_target;
use runtime::unstable_for_tools::address::{
    AddressHeaders, AddressSource, ClientAddress, CloudflarePeers, MAX_ADDRESS_BYTES, Resolved,
    TrustedProxies,
};

/// The input, one field a line, so the seeds are readable (`seeds/address`):
/// the source (`peer`, `cloudflare`, anything else for trusted proxies),
/// the peer (none when it is no address), the networks the source trusts
/// (comma-separated), `CF-Connecting-IP`, `CF-Connecting-IPv6` (each absent
/// when its line is `-`), then every `X-Forwarded-For` line. Header lines
/// are bytes, not necessarily UTF-8, as a server receives them.
struct Input<'a> {
    source: &'a [u8],
    peer: Option<IpAddr>,
    networks: Vec<IpNet>,
    cf_connecting_ip: Option<&'a [u8]>,
    cf_connecting_ipv6: Option<&'a [u8]>,
    forwarded_for: Vec<&'a [u8]>,
}

impl<'a> Input<'a> {
    fn read(data: &'a [u8]) -> Input<'a> {
        let mut lines = data.split(|&b| b == b'\n');
        let mut next = || lines.next().unwrap_or_default();
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        let header = |bytes: &'a [u8]| (bytes != b"-").then_some(bytes);
        let source = next();
        let peer = text(next()).parse().ok();
        let networks = text(next())
            .split(',')
            .filter_map(|n| n.trim().parse().ok())
            .collect();
        let cf_connecting_ip = header(next());
        let cf_connecting_ipv6 = header(next());
        Input {
            source,
            peer,
            networks,
            cf_connecting_ip,
            cf_connecting_ipv6,
            forwarded_for: lines.collect(),
        }
    }
}

/// Asserts that `address`'s key is an address as written canonically (an
/// IPv4 address, an IPv6 /64), or empty for an unknown one.
fn assert_key_is_an_address(address: ClientAddress) {
    let mut key = String::new();
    address.push_key(&mut key);
    let debug = format!("{address:?}");
    assert!(
        [
            "ClientAddress::V4(..)",
            "ClientAddress::V6Network(..)",
            "ClientAddress::Unknown"
        ]
        .contains(&debug.as_str())
    );
    match address {
        ClientAddress::Unknown => assert_eq!(key, ""),
        ClientAddress::V4(v4) => assert_eq!(key, v4.to_string()),
        ClientAddress::V6Network(v6) => {
            assert_eq!(u128::from(v6) & u128::from(u64::MAX), 0, "not a /64");
            assert_eq!(key, format!("{v6}/64"));
            assert!(
                v6.to_ipv4_mapped().is_none(),
                "an IPv4 client counted by a /64"
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let input = Input::read(data);
    let networks = input.networks.clone();
    let source = match input.source {
        b"peer" => AddressSource::Peer,
        b"cloudflare" => AddressSource::CloudflareHeader(CloudflarePeers::new(networks)),
        _ => AddressSource::TrustedProxies(TrustedProxies::new(networks)),
    };
    let headers = AddressHeaders {
        cf_connecting_ip: input.cf_connecting_ip,
        cf_connecting_ipv6: input.cf_connecting_ipv6,
        forwarded_for: &input.forwarded_for,
    };
    // The headers' `Debug` is what it would be were each value `x`: it shows
    // which are present and how many lines, never what they hold. (Not a
    // search for each value in it: `ress` or `None` are in its field names.)
    let placeholder = |value: Option<&[u8]>| value.map(|_| &b"x"[..]);
    let lines = vec![&b"x"[..]; input.forwarded_for.len()];
    let shape = AddressHeaders {
        cf_connecting_ip: placeholder(input.cf_connecting_ip),
        cf_connecting_ipv6: placeholder(input.cf_connecting_ipv6),
        forwarded_for: &lines,
    };
    assert_eq!(format!("{headers:?}"), format!("{shape:?}"));
    let peer = input.peer;
    let resolved = source.resolve(peer, &headers);
    if let Ok(resolved) = resolved {
        assert_key_is_an_address(resolved.address());
        let peer = ClientAddress::of_ip(peer.expect("resolved with a peer"));
        match (&source, resolved) {
            (AddressSource::Peer, _) => assert_eq!(resolved, Resolved::Address(peer)),
            (AddressSource::CloudflareHeader(peers), _) if !peers.trusts(peer_ip(&input)) => {
                assert_eq!(resolved, Resolved::PeerNotCloudflare(peer));
            }
            (AddressSource::TrustedProxies(proxies), _) if !proxies.trusts(peer_ip(&input)) => {
                assert_eq!(resolved, Resolved::Address(peer));
            }
            _ => {}
        }
    }

    // A Worker's reading of Cloudflare's headers.
    let ip = input.cf_connecting_ip.map(String::from_utf8_lossy);
    let ipv6 = input.cf_connecting_ipv6.map(String::from_utf8_lossy);
    let address = ClientAddress::from_cloudflare_headers(ip.as_deref(), ipv6.as_deref());
    assert_key_is_an_address(address);
    let header = ClientAddress::from_header(ip.as_deref());
    assert_key_is_an_address(header);
    // Whitespace around a value changes nothing while the value stays
    // within the bytes read as an address; past them it is no address.
    if let Some(ip) = &ip {
        let padded = format!(" \t{ip} ");
        let expected = if padded.len() <= MAX_ADDRESS_BYTES {
            header
        } else {
            ClientAddress::Unknown
        };
        assert_eq!(ClientAddress::from_header(Some(&padded)), expected, "{ip:?}");
    }
});

fn peer_ip(input: &Input<'_>) -> IpAddr {
    input.peer.expect("resolved with a peer")
}
