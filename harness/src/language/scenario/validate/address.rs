//! A step's addresses are ones its deployable reads. The harness sends
//! `address` as `CF-Connecting-IP` and `forwarded_for` as `X-Forwarded-For`
//! whatever the deployable's `client_address`, and connects from `peer`: a
//! native deployable counting its peers sees every `address` as 127.0.0.1,
//! so a step meaning two clients would count one, and pass or fail by
//! accident. A value is read when putting another in its place changes the
//! client the deployable counts, and that is asked of the runtime itself (a
//! native gate's [`AddressSource::resolve`], a Worker's `CF-Connecting-IP`),
//! so the check follows the runtime's rules as they change. A step that
//! sends a value on purpose for the deployable not to believe says
//! `spoofed = true`; saying it where every value is read is refused too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Range;

use runtime::config::{Deployable, Target};
use runtime::limiter::ADDRESS_HEADER;
use runtime::unstable_for_tools::address::{
    AddressHeaders, AddressSource, AddressUnknown, CLOUDFLARE_IPV6_HEADER, ClientAddress,
    FORWARDED_FOR_HEADER, Resolved,
};

use crate::language::scenario::step::SendRequests;

/// Where the harness connects from when a step names no `peer`.
const DEFAULT_PEER: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// An address `distinct_addresses` sends (the harness's first): to every
/// source its addresses are alike.
const A_DISTINCT_ADDRESS: &str = "10.0.0.1";

/// Values put in a header's place to see whether it is read: none, and two
/// documentation addresses (RFC 5737), so that one differs from any value.
const OTHER_HEADER_VALUES: [Option<&str>; 3] = [None, Some("192.0.2.1"), Some("198.51.100.1")];

/// Peers put in the step's place likewise: loopback, and outside it (a
/// source may trust some networks and not others).
const OTHER_PEERS: [IpAddr; 3] = [
    IpAddr::V4(Ipv4Addr::LOCALHOST),
    IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
];

/// What one request of a step brings the deployable: the peer it connects
/// from and the address headers.
#[derive(Clone, Copy)]
struct Sent<'a> {
    peer: IpAddr,
    cloudflare: Option<&'a str>,
    cloudflare_ipv6: Option<&'a str>,
    forwarded_for: Option<&'a str>,
}

/// The client the deployable counts a request as, as the runtime decides it.
fn counted(d: &Deployable, sent: Sent<'_>) -> Result<ClientAddress, AddressUnknown> {
    match d.target {
        // A Worker counts `CF-Connecting-IP`, whoever connects
        // (`runtime::workers::subject_of`).
        Target::Workers => Ok(ClientAddress::from_cloudflare_headers(
            sent.cloudflare,
            sent.cloudflare_ipv6,
        )),
        Target::Native => {
            let forwarded_for = sent.forwarded_for.map(str::as_bytes);
            let headers = AddressHeaders {
                cf_connecting_ip: sent.cloudflare.map(str::as_bytes),
                cf_connecting_ipv6: sent.cloudflare_ipv6.map(str::as_bytes),
                forwarded_for: forwarded_for.as_slice(),
            };
            d.client_address
                .resolve(Some(sent.peer), &headers)
                .map(Resolved::address)
        }
    }
}

/// What the deployable reads, for the error to say what to send instead.
fn what_it_reads(d: &Deployable) -> &'static str {
    match (d.target, &d.client_address) {
        (Target::Workers, _) => {
            "a Workers deployable counts `CF-Connecting-IP` (`address`), whoever connects"
        }
        (Target::Native, AddressSource::Peer) => {
            "client_address = \"peer\": it counts the connecting peer (`peer`) and reads no header"
        }
        (Target::Native, AddressSource::CloudflareHeader(_)) => {
            "client_address = \"cloudflare\": it counts `CF-Connecting-IP` (`address`) from \
             a peer (`peer`) that is Cloudflare or one of its `cloudflare_via` relays, and \
             any other peer itself"
        }
        (Target::Native, AddressSource::TrustedProxies(_)) => {
            "client_address = { trusted_proxies = [...] }: it counts the connecting peer \
             (`peer`), or, when that peer is a trusted proxy, the client its \
             `X-Forwarded-For` names (`forwarded_for`)"
        }
    }
}

/// The client as the error names it: its key's form (an IPv6 client's /64).
fn describe(client: Result<ClientAddress, AddressUnknown>) -> String {
    match client {
        Ok(ClientAddress::Unknown) | Err(_) => {
            "the one count of addresses that cannot be known".to_owned()
        }
        Ok(known) => {
            let mut text = String::new();
            known.push_key(&mut text);
            text
        }
    }
}

/// The value of a header the step writes in `headers`, if any.
fn raw_header<'a>(send: &'a SendRequests, name: &str) -> Option<&'a str> {
    send.headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Every `address`, `distinct_addresses`, `forwarded_for` and `peer` of a
/// `send` is read by deployable `name`, unless the step says `spoofed =
/// true`, which then must be so for one of them. The error's span is `None`
/// for the whole step.
pub(super) fn validate_addresses(
    send: &SendRequests,
    name: &str,
    d: &Deployable,
) -> Result<(), (Option<Range<usize>>, String)> {
    // A bad `peer` is refused, at its place, before this.
    let Ok(peer) = send.peer_address() else {
        return Ok(());
    };
    let chain = send.chain().join(", ");
    let sent = Sent {
        peer: peer.map_or(DEFAULT_PEER, IpAddr::V4),
        cloudflare: match (&send.address, send.distinct_addresses) {
            (Some(address), _) => Some(address.get_ref().as_str()),
            (None, true) => Some(A_DISTINCT_ADDRESS),
            (None, false) => raw_header(send, ADDRESS_HEADER),
        },
        cloudflare_ipv6: raw_header(send, CLOUDFLARE_IPV6_HEADER),
        forwarded_for: if chain.is_empty() {
            raw_header(send, FORWARDED_FOR_HEADER)
        } else {
            Some(chain.as_str())
        },
    };
    let actual = counted(d, sent);
    let changes = |variants: &[Sent<'_>]| {
        variants
            .iter()
            .any(|variant| counted(d, *variant) != actual)
    };
    // Read when another value in its place changes the client counted.
    let address_read = changes(&OTHER_HEADER_VALUES.map(|other| Sent {
        cloudflare: other,
        ..sent
    }));
    let chain_read = changes(&OTHER_HEADER_VALUES.map(|other| Sent {
        forwarded_for: other,
        ..sent
    }));
    let peer_read = changes(&OTHER_PEERS.map(|other| Sent {
        peer: other,
        ..sent
    }));

    let mut unread: Vec<(Option<Range<usize>>, String)> = Vec::new();
    if !address_read {
        if let Some(address) = &send.address {
            unread.push((
                Some(address.span()),
                format!(
                    "`address` {} is sent as {ADDRESS_HEADER}, which deployable `{name}` does not read",
                    address.get_ref()
                ),
            ));
        } else if send.distinct_addresses {
            unread.push((
                None,
                format!(
                    "`distinct_addresses` sends each request's address as {ADDRESS_HEADER}, which deployable `{name}` does not read"
                ),
            ));
        }
    }
    if let Some(forwarded_for) = send
        .forwarded_for
        .as_ref()
        .filter(|_| !chain_read && !chain.is_empty())
    {
        unread.push((
            Some(forwarded_for.span()),
            format!(
                "`forwarded_for` is sent as {FORWARDED_FOR_HEADER}, which deployable `{name}` does not read from peer {}",
                sent.peer
            ),
        ));
    }
    if !peer_read && let Some(peer) = &send.peer {
        unread.push((
            Some(peer.span()),
            format!(
                "`peer` {} is where the harness connects from, which deployable `{name}` does not read",
                peer.get_ref()
            ),
        ));
    }
    let reads = what_it_reads(d);
    match (unread.into_iter().next(), &send.spoofed) {
        (Some((span, what)), _) if !send.spoofs() => Err((
            span,
            format!(
                "{what} ({reads}), so it counts this step's client as {}: send what it reads \
                 instead, or say `spoofed = true` if the step sends it on purpose, for the \
                 deployable not to believe",
                describe(actual)
            ),
        )),
        (None, Some(spoofed)) if send.spoofs() => Err((
            Some(spoofed.span()),
            format!(
                "`spoofed = true`, but deployable `{name}` reads every address this step sends \
                 ({reads}): remove it, or send the value it must not believe"
            ),
        )),
        _ => Ok(()),
    }
}
