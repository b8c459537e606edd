//! Who a request is counted for: IPv6 by its /64, IPv4 however it is
//! written, one shared key for requests without an address, and no caller
//! without an id.

use runtime::config::Application;
use runtime::{Limiter, Subject};

/// The key of the built-in limit for a request with this `CF-Connecting-IP`.
fn key(header: Option<&str>) -> String {
    let app = Application::from_toml(
        "[connections.limits]\ndriver = \"cloudflare_rate_limits\"\nnamespace = 7\n\
         [rate_limits]\nstore = \"limits\"\n\
         [[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = true\n",
    )
    .expect("valid");
    let limiter = Limiter::new(&app, "edge", 1).expect("edge");
    let checks = limiter
        .checks(&Subject::of_request(None, header), "GET", "/api/items")
        .expect("a short path");
    checks[0].key().to_owned()
}

#[test]
fn ipv4_is_counted_as_it_is() {
    assert_eq!(key(Some("203.0.113.7")), "address:203.0.113.7");
    assert_eq!(key(Some(" 203.0.113.7 ")), "address:203.0.113.7");
}

#[test]
fn ipv6_is_counted_by_its_64() {
    assert_eq!(
        key(Some("2001:db8:1:2:aaaa:bbbb:cccc:dddd")),
        "address:2001:db8:1:2::/64"
    );
    assert_eq!(
        key(Some("2001:db8:1:2::1")),
        key(Some("2001:db8:1:2:ffff:ffff:ffff:ffff")),
        "one subscriber's /64 is one count"
    );
    assert_ne!(
        key(Some("2001:db8:1:2::1")),
        key(Some("2001:db8:1:3::1")),
        "the next /64 is another subscriber"
    );
    assert_eq!(key(Some("2001:db8::1")), "address:2001:db8::/64");
}

#[test]
fn any_spelling_of_an_address_reaches_the_same_key() {
    let canonical = key(Some("2001:db8:1:2::1"));
    for spelling in [
        "2001:DB8:1:2::1",
        "2001:0db8:0001:0002:0000:0000:0000:0001",
        "2001:db8:1:2:0:0:0:1",
        "[2001:db8:1:2::1]",
        "2001:db8:1:2::0.0.0.1",
    ] {
        assert_eq!(key(Some(spelling)), canonical, "{spelling}");
    }
}

#[test]
fn ipv4_mapped_and_nat64_are_counted_as_their_ipv4_address() {
    for spelling in [
        "::ffff:192.0.2.33",
        "::FFFF:192.0.2.33",
        "::ffff:c000:221",
        "0:0:0:0:0:ffff:c000:0221",
        "0000:0000:0000:0000:0000:FFFF:192.0.2.33",
        "64:ff9b::192.0.2.33",
        "64:ff9b::c000:221",
        "0064:FF9B:0:0:0:0:c000:0221",
    ] {
        assert_eq!(key(Some(spelling)), "address:192.0.2.33", "{spelling}");
    }
    assert_eq!(
        key(Some("64:ff9b:1::c000:221")),
        "address:64:ff9b:1::/64",
        "only the well-known /96 is NAT64"
    );
}

#[test]
fn absent_empty_or_garbage_headers_share_one_key() {
    let shared = key(None);
    assert_eq!(shared, "address:");
    for header in [
        "",
        "   ",
        "not an address",
        "203.0.113.7, 198.51.100.1",
        "2001:db8::1%eth0",
        "999.1.1.1",
    ] {
        assert_eq!(key(Some(header)), shared, "{header:?}");
    }
}

#[test]
fn an_empty_or_blank_caller_id_is_not_a_signed_in_caller() {
    for id in ["", " ", "\t\n"] {
        assert!(
            matches!(
                Subject::of_request(Some(id), Some("203.0.113.7")),
                Subject::Address(_)
            ),
            "{id:?}"
        );
    }
    assert_eq!(
        Subject::of_request(Some(" u1 "), None),
        Subject::Caller(" u1 ".into()),
        "a real id is kept as it is"
    );
}
