//! Where a native request's client address comes from: the deployable's
//! `client_address` (`"peer"`, `"cloudflare"`, `{ trusted_proxies = [...] }`)
//! with its diagnostics, the nginx-style walk of `X-Forwarded-For` through
//! trusted proxies, and what happens to a request whose address cannot be
//! known (one shared key and one `rate_limits.address_unknown` line per
//! process, or a 500 for a server that hands over no peer).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use crate::common::{Handler, Lines};
use runtime::config::{Application, Code};
use runtime::native::{NativeGate, NoPeerAddress, PeerAddr, RateLimitLayer};
use runtime::unstable_for_tools::address::{
    AddressHeaders, AddressSource, AddressUnknown, CLOUDFLARE_RANGES_FILE, CloudflarePeers,
    Resolved, TrustedProxies, cloudflare_ranges,
};
use runtime::{ClientAddress, Subject};
use tower_layer::Layer;
use tower_service::Service as _;

/// A native API counting in memory, its address from `client_address` (a
/// TOML value, or none for the default).
fn app(client_address: Option<&str>) -> String {
    let line = client_address.map_or(String::new(), |v| format!("client_address = {v}\n"));
    format!("[[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n{line}")
}

fn gate(client_address: Option<&str>) -> NativeGate {
    NativeGate::from_toml(&app(client_address), "api").expect("a valid application")
}

const PROXIES: &str = r#"{ trusted_proxies = ["10.0.0.0/8", "192.0.2.1", "2001:db8:ffff::/48"] }"#;

fn ip(text: &str) -> IpAddr {
    text.parse().expect("an address")
}

fn peer(text: &str) -> Option<SocketAddr> {
    Some(SocketAddr::new(ip(text), 40_000))
}

fn headers(pairs: &[(&str, &str)]) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    for (name, value) in pairs {
        headers.append(
            http::HeaderName::from_bytes(name.as_bytes()).expect("name"),
            value.parse().expect("value"),
        );
    }
    headers
}

fn address(text: &str) -> Subject {
    Subject::Address(ClientAddress::of_ip(ip(text)))
}

fn unknown() -> Subject {
    Subject::Address(ClientAddress::Unknown)
}

#[test]
fn the_description_says_where_the_address_comes_from() {
    let source = |text: Option<&str>| {
        let app = Application::from_toml(&app(text)).expect("valid");
        app.deployable("api").expect("api").client_address.clone()
    };
    assert_eq!(
        source(None),
        AddressSource::Peer,
        "a native server's default"
    );
    assert_eq!(source(Some("\"peer\"")), AddressSource::Peer);
    assert_eq!(
        source(Some("\"cloudflare\"")),
        AddressSource::CloudflareHeader(CloudflarePeers::default())
    );
    assert_eq!(
        source(Some(r#"{ cloudflare_via = ["127.0.0.1"] }"#)),
        AddressSource::CloudflareHeader(CloudflarePeers::new(vec![
            "127.0.0.1/32".parse().expect("net")
        ]))
    );
    let AddressSource::TrustedProxies(proxies) = source(Some(PROXIES)) else {
        panic!("trusted proxies");
    };
    for trusted in [
        "10.1.2.3",
        "192.0.2.1",
        "2001:db8:ffff:1::9",
        "::ffff:10.9.9.9",
    ] {
        assert!(proxies.trusts(ip(trusted)), "{trusted}");
    }
    for untrusted in ["11.0.0.1", "192.0.2.2", "2001:db8:fffe::1", "127.0.0.1"] {
        assert!(!proxies.trusts(ip(untrusted)), "{untrusted}");
    }
    // A Worker's client is always CF-Connecting-IP.
    let workers = "[connections.limits]\ndriver = \"cloudflare_rate_limits\"\nnamespace = 1\n\
        [rate_limits]\nstore = \"limits\"\n\
        [[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = true\n";
    let app = Application::from_toml(workers).expect("valid");
    assert_eq!(
        app.deployable("edge").expect("edge").client_address,
        AddressSource::CloudflareHeader(CloudflarePeers::default())
    );
}

/// Each diagnostic of `source` as `code line:col`.
fn placed(source: &str) -> Vec<String> {
    let diagnostics = Application::from_toml(source).expect_err("invalid");
    diagnostics
        .0
        .iter()
        .map(|d| {
            let at = d.location.expect("every one has a place");
            format!("{} {}:{}", d.code, at.line, at.column)
        })
        .collect()
}

#[test]
fn bad_sources_and_networks_are_diagnostics_at_their_place_all_at_once() {
    let source = r#"
[[deployables]]
name = "a"
target = "native"
serves_api = true
client_address = "x-forwarded-for"

[[deployables]]
name = "b"
target = "native"
serves_api = true
client_address = { trusted_proxies = ["10.0.0.0/8", "10.0.0.300", 7, "10.1.0.0/8", "0.0.0.0/0", "::/0", "fe80::1/129"] }

[[deployables]]
name = "c"
target = "native"
serves_api = true
client_address = { trusted_proxies = [] }

[[deployables]]
name = "d"
target = "native"
serves_api = true
client_address = 42

[[deployables]]
name = "e"
target = "native"
serves_api = true
client_address = { proxies = ["10.0.0.0/8"] }

[[deployables]]
name = "f"
target = "workers"
serves_api = false
client_address = "peer"

[[deployables]]
name = "g"
target = "native"
serves_api = true
client_address = { trusted_proxies = ["0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/2"] }

[[deployables]]
name = "h"
target = "native"
serves_api = true
client_address = { cloudflare_via = ["::/1", "8000::/1"] }

[[deployables]]
name = "i"
target = "native"
serves_api = true
client_address = { cloudflare_via = ["10.0.0.1"], trusted_proxies = ["10.0.0.1"] }
"#;
    assert_eq!(
        placed(source),
        [
            "rate_limits.client_address_invalid 6:18",
            "rate_limits.client_address_invalid 12:53",
            "rate_limits.client_address_invalid 12:67",
            "rate_limits.client_address_invalid 12:70",
            "rate_limits.client_address_invalid 12:84",
            "rate_limits.client_address_invalid 12:97",
            "rate_limits.client_address_invalid 12:105",
            "rate_limits.client_address_invalid 18:18",
            "rate_limits.client_address_invalid 24:18",
            "rate_limits.client_address_invalid 30:18",
            "rate_limits.client_address_invalid 36:18",
            "rate_limits.client_address_invalid 42:18",
            "rate_limits.client_address_invalid 48:18",
            "rate_limits.client_address_invalid 54:18",
        ]
    );
    let messages: Vec<String> = Application::from_toml(source)
        .expect_err("invalid")
        .0
        .into_iter()
        .map(|d| d.message)
        .collect();
    let says = |i: usize, text: &str| {
        assert!(messages[i].contains(text), "message {i}: {}", messages[i]);
    };
    says(0, "write \"peer\"");
    says(
        1,
        "lists `10.0.0.300` in trusted_proxies, which is not an address",
    );
    says(2, "lists an entry of type integer in trusted_proxies");
    says(3, "bits set past its /8 prefix: write `10.0.0.0/8`");
    says(4, "every address");
    says(5, "every address");
    says(
        6,
        "`fe80::1/129` in trusted_proxies, which is not a network",
    );
    says(7, "trusts no peer");
    says(8, "an integer");
    says(9, "a table with `proxies`");
    says(10, "built for Workers");
    says(11, "together are every address (`0.0.0.0/0`)");
    says(
        12,
        "cloudflare_via that together are every address (`::/0`)",
    );
    says(13, "both `trusted_proxies` and `cloudflare_via`");
}

#[test]
fn a_bad_network_stops_the_gate_at_startup_with_its_place() {
    let source = app(Some(r#"{ trusted_proxies = ["10.0.0.0/33"] }"#));
    let error = NativeGate::from_toml(&source, "api").expect_err("refused at startup");
    let runtime::native::NativeGateError::Invalid(diagnostics) = error else {
        panic!("the description's diagnostics");
    };
    assert_eq!(diagnostics.codes(), [Code::ClientAddressInvalid]);
    let rendered = diagnostics.render("app.toml");
    assert!(
        rendered.starts_with("rate_limits.client_address_invalid: app.toml:5:39: "),
        "{rendered}"
    );
}

fn proxies(networks: &[&str]) -> TrustedProxies {
    TrustedProxies::new(
        networks
            .iter()
            .map(|n| n.parse().expect("a network"))
            .collect(),
    )
}

#[test]
fn through_trusted_proxies_the_client_is_the_rightmost_address_that_is_no_proxy() {
    use AddressUnknown::{ForwardedForInvalid, NoForwardedFor};
    let trusted = proxies(&["10.0.0.0/8", "2001:db8:ffff::/48"]);
    // (peer, X-Forwarded-For lines, the client)
    let cases: [(&str, &[&str], Result<&str, AddressUnknown>); 13] = [
        // From a proxy: what it says it saw.
        ("10.0.0.2", &["203.0.113.7"], Ok("203.0.113.7")),
        // Through two proxies, after entries the client wrote itself: only
        // what the proxies appended is read.
        (
            "10.0.0.2",
            &["198.51.100.66, 1.2.3.4, 203.0.113.7, 10.0.0.5"],
            Ok("203.0.113.7"),
        ),
        // Several header lines are one list, in order.
        (
            "10.0.0.2",
            &["198.51.100.66", "203.0.113.8", "10.0.0.5"],
            Ok("203.0.113.8"),
        ),
        // From a peer that is no proxy: the peer, whatever it wrote.
        ("198.51.100.9", &["203.0.113.7"], Ok("198.51.100.9")),
        // Ports and brackets as some load balancers write them; IPv6
        // proxies; an IPv4-mapped peer is its IPv4 address.
        ("10.0.0.2", &["203.0.113.7:41234"], Ok("203.0.113.7")),
        (
            "2001:db8:ffff::1",
            &["[2001:db8:1::7]:443"],
            Ok("2001:db8:1::7"),
        ),
        ("::ffff:10.0.0.2", &[" 203.0.113.9 "], Ok("203.0.113.9")),
        // Every entry a proxy: the leftmost, a caller inside the proxies' networks.
        ("10.0.0.2", &["10.0.0.7, 10.0.0.5"], Ok("10.0.0.7")),
        // A proxy that names nobody, or garbage where the client should be.
        ("10.0.0.2", &[], Err(NoForwardedFor)),
        ("10.0.0.2", &["", " , "], Err(NoForwardedFor)),
        (
            "10.0.0.2",
            &["203.0.113.7, unknown"],
            Err(ForwardedForInvalid),
        ),
        // Garbage the client wrote, left of the client, is never read.
        ("10.0.0.2", &["<script>, 203.0.113.7"], Ok("203.0.113.7")),
        ("10.0.0.2", &["unknown", "203.0.113.7"], Ok("203.0.113.7")),
    ];
    for (peer, lines, expected) in cases {
        let lines: Vec<&[u8]> = lines.iter().map(|line| line.as_bytes()).collect();
        assert_eq!(
            trusted.client(ip(peer), &lines),
            expected.map(ip),
            "from {peer} with {lines:?}"
        );
    }
}

#[test]
fn each_source_reads_only_what_it_trusts() {
    let forged = headers(&[
        ("CF-Connecting-IP", "203.0.113.1"),
        ("X-Forwarded-For", "203.0.113.2"),
    ]);
    // The peer: neither header.
    let direct = gate(None);
    assert_eq!(
        direct.subject(None, peer("192.0.2.10"), &forged),
        Ok(address("192.0.2.10"))
    );
    // Behind Cloudflare: its header only, and only from Cloudflare.
    let cloudflare = gate(Some("\"cloudflare\""));
    assert_eq!(
        cloudflare.subject(None, peer("162.158.0.9"), &forged),
        Ok(address("203.0.113.1"))
    );
    assert_eq!(
        cloudflare.subject(None, peer("192.0.2.10"), &forged),
        Ok(address("192.0.2.10")),
        "a forged CF-Connecting-IP from a peer that is not Cloudflare counts the peer"
    );
    // Trusted proxies: X-Forwarded-For only, and only from a proxy.
    let proxied = gate(Some(PROXIES));
    assert_eq!(
        proxied.subject(None, peer("10.0.0.2"), &forged),
        Ok(address("203.0.113.2"))
    );
    assert_eq!(
        proxied.subject(None, peer("198.51.100.3"), &forged),
        Ok(address("198.51.100.3")),
        "a spoofed chain from a peer that is no proxy counts the peer"
    );
    // An IPv6 client named by a proxy is counted by its /64.
    let v6 = headers(&[("X-Forwarded-For", "2001:db8:1:2::7")]);
    assert_eq!(
        proxied.subject(None, peer("10.0.0.2"), &v6),
        Ok(address("2001:db8:1:2:ffff::1"))
    );
    // A signed-in caller needs no address, whatever the source.
    for gate in [&direct, &cloudflare, &proxied] {
        assert_eq!(
            gate.subject(Some("caller-1"), None, &http::HeaderMap::new()),
            Ok(Subject::of_request(Some("caller-1"), None))
        );
    }
}

#[test]
fn an_address_that_cannot_be_known_shares_one_key_and_is_logged_once_without_a_key() {
    let (lines, _guard) = Lines::capture();
    let proxied = gate(Some(PROXIES));
    // A proxy that sent no X-Forwarded-For, then one naming garbage: both
    // share the one key of unknown addresses; the first is logged.
    assert_eq!(
        proxied.subject(None, peer("10.0.0.2"), &http::HeaderMap::new()),
        Ok(unknown())
    );
    let garbage = headers(&[("X-Forwarded-For", "203.0.113.50, not-an-address")]);
    assert_eq!(
        proxied.subject(None, peer("10.0.0.2"), &garbage),
        Ok(unknown())
    );
    let logged = lines.events("rate_limits.address_unknown");
    assert_eq!(logged.len(), 1, "one line per process: {logged:?}");
    assert_eq!(logged[0]["source"], "trusted_proxies");
    assert_eq!(logged[0]["reason"], "no_forwarded_for");
    // From Cloudflare, a request without the header: another process's line.
    let cloudflare = gate(Some("\"cloudflare\""));
    assert_eq!(
        cloudflare.subject(None, peer("104.16.0.2"), &http::HeaderMap::new()),
        Ok(unknown())
    );
    let logged = lines.events("rate_limits.address_unknown");
    assert_eq!(logged.len(), 2, "{logged:?}");
    assert_eq!(logged[1]["source"], "cloudflare");
    assert_eq!(logged[1]["reason"], "no_cf_connecting_ip");
    for key in ["10.0.0.2", "104.16.0.2", "203.0.113.50"] {
        assert!(
            !lines.text().contains(key),
            "a key in a log line: {}",
            lines.text()
        );
    }
}

#[test]
fn a_request_without_the_peer_its_source_needs_is_an_error_not_a_shared_count() {
    let (lines, _guard) = Lines::capture();
    // Behind Cloudflare too: the header is believed only from Cloudflare.
    let header = headers(&[("CF-Connecting-IP", "203.0.113.1")]);
    for source in [None, Some(PROXIES), Some("\"cloudflare\"")] {
        let gate = gate(source);
        assert_eq!(
            gate.subject(None, None, &header),
            Err(NoPeerAddress),
            "{source:?}"
        );
    }
    let logged = lines.events("rate_limits.address_unknown");
    assert_eq!(logged.len(), 3, "one per gate: {logged:?}");
    assert!(logged.iter().all(|l| l["reason"] == "no_peer_address"));
}

#[test]
fn cloudflare_s_ranges_are_kept_with_their_source_and_date_and_every_line_is_a_network() {
    assert!(
        CLOUDFLARE_RANGES_FILE.contains("https://www.cloudflare.com/ips-v4")
            && CLOUDFLARE_RANGES_FILE.contains("https://www.cloudflare.com/ips-v6"),
        "the file names its source"
    );
    let dated = CLOUDFLARE_RANGES_FILE.lines().any(|line| {
        line.starts_with('#')
            && line
                .split(|c: char| !(c.is_ascii_digit() || c == '-'))
                .any(|word| word.len() == 10 && word.as_bytes()[4] == b'-')
    });
    assert!(dated, "the file says when the ranges were read");
    let lines: Vec<&str> = CLOUDFLARE_RANGES_FILE
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect();
    for line in &lines {
        let network: ipnet::IpNet = line
            .parse()
            .unwrap_or_else(|_| panic!("`{line}` is no network"));
        assert_eq!(
            network.trunc(),
            network,
            "`{line}` has bits past its prefix"
        );
    }
    assert_eq!(cloudflare_ranges().len(), lines.len(), "every line is read");
    let v4 = cloudflare_ranges()
        .iter()
        .filter(|n| matches!(n, ipnet::IpNet::V4(_)))
        .count();
    assert_eq!((v4, cloudflare_ranges().len() - v4), (15, 7));
}

#[test]
fn a_forged_cf_connecting_ip_from_a_peer_that_is_not_cloudflare_counts_the_peer_logged_once() {
    let (lines, _guard) = Lines::capture();
    let cloudflare = gate(Some("\"cloudflare\""));
    let forged = |n: u8| headers(&[("CF-Connecting-IP", &format!("10.9.8.{n}"))]);
    // One peer writing a new address each time is one count, not many.
    for n in 0..5 {
        assert_eq!(
            cloudflare.subject(None, peer("198.51.100.66"), &forged(n)),
            Ok(address("198.51.100.66"))
        );
    }
    // Every published range is believed (its first and last address).
    for network in cloudflare_ranges() {
        for from in [network.network(), network.broadcast()] {
            assert_eq!(
                cloudflare.subject(None, Some(SocketAddr::new(from, 443)), &forged(1)),
                Ok(address("10.9.8.1")),
                "from {network}"
            );
        }
    }
    let logged = lines.events("rate_limits.peer_not_cloudflare");
    assert_eq!(logged.len(), 1, "once per process: {logged:?}");
    assert_eq!(logged[0]["source"], "cloudflare");
    assert_eq!(logged[0]["reason"], "peer_not_cloudflare");
    for key in ["198.51.100.66", "10.9.8."] {
        assert!(
            !lines.text().contains(key),
            "a key in a log line: {}",
            lines.text()
        );
    }
    // Through a tunnel (cloudflared on loopback) or a load balancer of its
    // own, the deployable names its relays; others are still the client.
    let tunnel = gate(Some(r#"{ cloudflare_via = ["127.0.0.1", "10.0.0.0/8"] }"#));
    assert_eq!(
        tunnel.subject(None, peer("127.0.0.1"), &forged(2)),
        Ok(address("10.9.8.2"))
    );
    assert_eq!(
        tunnel.subject(None, peer("10.1.2.3"), &forged(3)),
        Ok(address("10.9.8.3"))
    );
    assert_eq!(
        tunnel.subject(None, peer("173.245.48.1"), &forged(4)),
        Ok(address("10.9.8.4"))
    );
    assert_eq!(
        tunnel.subject(None, peer("198.51.100.66"), &forged(5)),
        Ok(address("198.51.100.66"))
    );
}

#[test]
fn under_pseudo_ipv4_the_real_client_is_cloudflare_s_ipv6_header_counted_by_its_64() {
    let source = AddressSource::CloudflareHeader(CloudflarePeers::default());
    let from = Some(ip("2606:4700::1"));
    let resolve = |v4: Option<&str>, v6: Option<&str>| {
        let headers = AddressHeaders {
            cf_connecting_ip: v4.map(str::as_bytes),
            cf_connecting_ipv6: v6.map(str::as_bytes),
            forwarded_for: &[],
        };
        source.resolve(from, &headers).map(Resolved::address)
    };
    let of = |text: &str| ClientAddress::of_ip(ip(text));
    // "Overwrite Headers": a Class E address, the real one beside it.
    assert_eq!(
        resolve(Some("240.16.0.1"), Some("2001:db8:1:2:3:4:5:6")),
        Ok(of("2001:db8:1:2::"))
    );
    assert_eq!(
        resolve(Some("255.1.2.3"), Some("[2001:db8:1:2::9]")),
        Ok(of("2001:db8:1:2::"))
    );
    // Two pseudo addresses of one /64 are one client.
    assert_eq!(
        resolve(Some("240.16.0.2"), Some("2001:db8:1:2:ffff::1")),
        resolve(Some("240.99.0.7"), Some("2001:db8:1:2::77"))
    );
    // Off, "Add Header", or an IPv6 header that is no IPv6 address: CF-Connecting-IP.
    assert_eq!(resolve(Some("2001:db8:9::1"), None), Ok(of("2001:db8:9::")));
    assert_eq!(
        resolve(Some("203.0.113.5"), Some("2001:db8:1:2::1")),
        Ok(of("203.0.113.5"))
    );
    assert_eq!(resolve(Some("240.16.0.1"), None), Ok(of("240.16.0.1")));
    assert_eq!(
        resolve(Some("240.16.0.1"), Some("203.0.113.5")),
        Ok(of("240.16.0.1"))
    );
    assert_eq!(
        resolve(None, Some("2001:db8:1:2::1")),
        Err(AddressUnknown::NoCloudflareHeader)
    );
    // A Worker's rule (it reads both headers from Cloudflare itself) is the
    // same rule: every case above, and an absent header as no address.
    for (v4, v6) in [
        (Some("240.16.0.1"), Some("2001:db8:1:2:3:4:5:6")),
        (Some("255.1.2.3"), Some("[2001:db8:1:2::9]")),
        (Some("240.99.0.7"), Some("2001:db8:1:2::77")),
        (Some("2001:db8:9::1"), None),
        (Some("203.0.113.5"), Some("2001:db8:1:2::1")),
        (Some("240.16.0.1"), None),
        (Some("240.16.0.1"), Some("203.0.113.5")),
        (Some("240.16.0.1"), Some("not an address\u{0}")),
        (Some("240.16.0.1"), Some("")),
    ] {
        assert_eq!(
            Ok(ClientAddress::from_cloudflare_headers(v4, v6)),
            resolve(v4, v6),
            "{v4:?} {v6:?}"
        );
    }
    assert_eq!(
        ClientAddress::from_cloudflare_headers(None, Some("2001:db8:1:2::1")),
        ClientAddress::Unknown
    );
    // A Worker reads the second header only for a pseudo address.
    let read = std::cell::Cell::new(0);
    let count = |v4| {
        ClientAddress::from_cloudflare_header_then(Some(v4), || {
            read.set(read.get() + 1);
            Some("2001:db8:1:2::1".to_owned())
        })
    };
    assert_eq!(
        count("203.0.113.5"),
        ClientAddress::of_ip(ip("203.0.113.5"))
    );
    assert_eq!(read.get(), 0);
    assert_eq!(
        count("240.16.0.1"),
        ClientAddress::of_ip(ip("2001:db8:1:2::"))
    );
    assert_eq!(read.get(), 1);
    // Through the gate, with the header named as Cloudflare names it.
    let cloudflare = gate(Some("\"cloudflare\""));
    let pseudo = headers(&[
        ("CF-Connecting-IP", "240.16.0.1"),
        ("CF-Connecting-IPv6", "2001:db8:1:2::1"),
    ]);
    assert_eq!(
        cloudflare.subject(None, peer("2606:4700::1"), &pseudo),
        Ok(address("2001:db8:1:2::"))
    );
}

#[test]
fn bytes_that_are_no_utf8_spoil_their_own_entry_of_x_forwarded_for_not_the_line() {
    let proxied = gate(Some(PROXIES));
    let line = |bytes: &[u8]| {
        let mut headers = http::HeaderMap::new();
        headers.append(
            "X-Forwarded-For",
            http::HeaderValue::from_bytes(bytes).expect("a header value"),
        );
        headers
    };
    // nginx's $proxy_add_x_forwarded_for appends the client's real address
    // to what the client wrote, on the same line.
    assert_eq!(
        proxied.subject(None, peer("10.0.0.2"), &line(b"\xff\xfe, 203.0.113.7")),
        Ok(address("203.0.113.7"))
    );
    assert_eq!(
        proxied.subject(
            None,
            peer("10.0.0.2"),
            &line(b"1.2.3.4, \xe9t\xe9, 203.0.113.8, 10.0.0.5")
        ),
        Ok(address("203.0.113.8"))
    );
    // Where the client should be, a bad entry is a bad entry.
    assert_eq!(
        proxied.subject(None, peer("10.0.0.2"), &line(b"203.0.113.9, \xff")),
        Ok(unknown())
    );
}

/// The address fuzz target's crash (`fuzz/fuzz_targets/address.rs`, CI on
/// 2026-12-07): a header holding `ress` was "found" in the headers' `Debug`,
/// in its name. What holds is stronger: the `Debug` depends only on which
/// headers are present and how many lines, whatever they hold (addresses,
/// words of the `Debug` itself, bytes that are not UTF-8).
#[test]
fn the_address_headers_debug_is_the_same_whatever_they_hold() {
    let values: [&'static [u8]; 8] = [
        b"203.0.113.7",
        b"2001:db8::77",
        b"ress",
        b"None",
        b"Some(\"..\")",
        b"AddressHeaders { forwarded_for_lines: 9 }",
        b"\xff\xfe, 5-OpyiEe",
        b"",
    ];
    let shown = |ip: Option<&[u8]>, ipv6: Option<&[u8]>, lines: &[&[u8]]| {
        format!(
            "{:?}",
            AddressHeaders {
                cf_connecting_ip: ip,
                cf_connecting_ipv6: ipv6,
                forwarded_for: lines,
            }
        )
    };
    for value in values {
        for lines in 0..3 {
            let held = vec![value; lines];
            let blank = vec![&b"x"[..]; lines];
            for (ip, ipv6) in [(true, true), (true, false), (false, true), (false, false)] {
                let pick = |present: bool, v: &'static [u8]| present.then_some(v);
                assert_eq!(
                    shown(pick(ip, value), pick(ipv6, value), &held),
                    shown(pick(ip, b"x"), pick(ipv6, b"x"), &blank),
                    "{:?}",
                    String::from_utf8_lossy(value)
                );
            }
        }
    }
    // The crash's input: `c0)` as the source, peer `1`, CF-Connecting-IP
    // `5-OpyiEe`, X-Forwarded-For `ress`.
    let shown_crash = shown(Some(b"5-OpyiEe"), Some(b""), &[b"ress"]);
    assert!(!shown_crash.contains("OpyiEe"), "{shown_crash}");
    assert_eq!(
        shown_crash,
        "AddressHeaders { cf_connecting_ip: Some(\"..\"), cf_connecting_ipv6: Some(\"..\"), \
         forwarded_for_lines: 1 }"
    );
}

fn request(peer: Option<SocketAddr>, forwarded_for: Option<&str>) -> http::Request<String> {
    let mut request = http::Request::new(String::new());
    *request.uri_mut() = "/api/items".parse().expect("uri");
    if let Some(peer) = peer {
        request.extensions_mut().insert(PeerAddr(peer));
    }
    if let Some(chain) = forwarded_for {
        request
            .headers_mut()
            .insert("X-Forwarded-For", chain.parse().expect("header"));
    }
    request
}

#[tokio::test]
async fn through_the_layer_clients_behind_a_proxy_count_apart_and_a_missing_peer_is_a_located_500()
{
    let (lines, _guard) = Lines::capture();
    let gate = Arc::new(gate(Some(PROXIES)));
    let built_at = line!() + 1;
    let mut service = RateLimitLayer::new(gate).layer(Handler::default());
    let statuses = |responses: &[http::Response<String>]| {
        responses
            .iter()
            .map(|r| r.status().as_u16())
            .collect::<Vec<_>>()
    };
    // Two clients behind one proxy: 120 each, not 120 between them.
    let mut first = Vec::new();
    let mut second = Vec::new();
    for _ in 0..121 {
        let proxy = peer("10.0.0.2");
        first.push(
            service
                .call(request(proxy, Some("203.0.113.7")))
                .await
                .expect("ok"),
        );
        second.push(
            service
                .call(request(proxy, Some("203.0.113.8")))
                .await
                .expect("ok"),
        );
    }
    assert_eq!(statuses(&first).iter().filter(|s| **s == 200).count(), 120);
    assert_eq!(statuses(&second).iter().filter(|s| **s == 200).count(), 120);
    assert_eq!(statuses(&first)[120], 429);
    // A server that handed over no peer: 500, and one line naming where the
    // layer was built, so the mistake is found at its first request.
    let response = service
        .call(request(None, Some("203.0.113.9")))
        .await
        .expect("ok");
    assert_eq!(response.status(), 500);
    let logged = lines.events("rate_limits.address_unknown");
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0]["reason"], "no_peer_address");
    let layer = logged[0]["layer"].as_str().expect("the layer's place");
    assert!(
        layer.starts_with(&format!("runtime/tests/all/client_address.rs:{built_at}:")),
        "{layer}"
    );
    assert!(!lines.text().contains("203.0.113"), "{}", lines.text());
}
