//! The address a request is counted under when no caller is signed in, and
//! where a native deployable takes it from.
//!
//! One IPv6 subscriber holds a whole /64 (2^64 addresses), so counting each
//! IPv6 address on its own limits nobody who has IPv6 and fills the
//! in-memory counter's table. As GitLab's per-IP limits, rama's
//! `ClientIpRateKey` and zebra's connection limits do, an IPv6 client is
//! counted by its /64, and an IPv4 client reaching us through an IPv6 form
//! (IPv4-mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`) by its IPv4 address.
//! The header is parsed, so every spelling of one address (case, leading
//! zeros in a group, `::` written out) reaches the same key.
//!
//! A native server's client is the socket's peer, `CF-Connecting-IP` from
//! Cloudflare's own addresses, or the client its trusted proxies name in
//! `X-Forwarded-For`
//! ([`AddressSource`], the deployable's `client_address`); deciding it is a
//! plain function here ([`AddressSource::resolve`]), the headers read
//! by the I/O layer.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use ipnet::IpNet;

/// The well-known NAT64 prefix, `64:ff9b::/96` (RFC 6052): its last 32 bits
/// are the IPv4 address behind the translator.
const NAT64_PREFIX: [u16; 6] = [0x64, 0xff9b, 0, 0, 0, 0];

/// What a request is counted under when no caller is signed in. It is a
/// key, so its `Debug` shows its kind and never the address.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
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
        value
            .map(str::as_bytes)
            .and_then(parse_ip)
            .map_or(ClientAddress::Unknown, ClientAddress::of_ip)
    }

    /// The client Cloudflare's two headers name: `CF-Connecting-IP`, or,
    /// where Cloudflare's Pseudo IPv4 has overwritten it with a Class E
    /// address ([`is_pseudo_ipv4`]), the real IPv6 address in
    /// `CF-Connecting-IPv6`, counted by its /64. A Worker reads the second
    /// header only when the first is such an address.
    #[doc(hidden)]
    pub fn from_cloudflare_headers(
        cf_connecting_ip: Option<&str>,
        cf_connecting_ipv6: Option<&str>,
    ) -> ClientAddress {
        ClientAddress::from_cloudflare_header_then(cf_connecting_ip, || {
            cf_connecting_ipv6.map(str::to_owned)
        })
    }

    /// [`ClientAddress::from_cloudflare_headers`], reading
    /// `CF-Connecting-IPv6` (`read_ipv6`) only when `CF-Connecting-IP` is a
    /// pseudo address, and parsing each header once: a Worker's header read
    /// crosses into JavaScript, on every request.
    pub fn from_cloudflare_header_then(
        cf_connecting_ip: Option<&str>,
        read_ipv6: impl FnOnce() -> Option<String>,
    ) -> ClientAddress {
        let Some(ip) = cf_connecting_ip.map(str::as_bytes).and_then(parse_ip) else {
            return ClientAddress::Unknown;
        };
        if is_pseudo_ipv4(ip)
            && let Some(real @ IpAddr::V6(_)) =
                read_ipv6().as_deref().map(str::as_bytes).and_then(parse_ip)
        {
            return ClientAddress::of_ip(real);
        }
        ClientAddress::of_ip(ip)
    }

    /// The client address of an IP address (a socket's peer, or one a
    /// trusted proxy named).
    pub fn of_ip(ip: IpAddr) -> ClientAddress {
        match ip {
            IpAddr::V4(v4) => ClientAddress::V4(v4),
            IpAddr::V6(v6) => ClientAddress::of_v6(v6),
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
    /// Appends the key's form to `out` (`203.0.113.7`, `2001:db8:1:2::/64`,
    /// nothing for [`ClientAddress::Unknown`]; never logged: it is a key): an
    /// IPv4 address digit by digit, since the formatting machinery costs the
    /// gate more per request than the rest of building its checks
    /// (BENCHMARKS-log.md, "The cost of asking, third round").
    #[doc(hidden)]
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
            ClientAddress::V6Network(network) => push_network_64(out, *network),
            ClientAddress::Unknown => {}
        }
    }
}

/// Appends an IPv6 /64 network (its last four groups zero, as
/// [`ClientAddress::of_v6`] leaves them) as `Ipv6Addr`'s `Display` writes it
/// (RFC 5952: lower-case hex, the longest run of zero groups as `::`), then
/// `/64`. That run is always the trailing one (its four zero groups, and the
/// zeros just before them), which a shorter run in front cannot beat: so the
/// groups up to the last that is not zero, then `::`. Written here rather
/// than through the formatting machinery, which costs a Worker's wasm 1.5 KB
/// for this one use (BENCHMARKS.md, the wasm's size).
fn push_network_64(out: &mut String, network: Ipv6Addr) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let groups = network.segments();
    let written = groups[..4]
        .iter()
        .rposition(|&g| g != 0)
        .map_or(0, |last| last + 1);
    for (i, &group) in groups[..written].iter().enumerate() {
        if i > 0 {
            out.push(':');
        }
        let digits = (1..4).rev().find(|&d| group >> (4 * d) != 0).unwrap_or(0);
        for d in (0..=digits).rev() {
            out.push(char::from(HEX[usize::from((group >> (4 * d)) & 0xf)]));
        }
    }
    out.push_str("::/64");
}

impl fmt::Debug for ClientAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClientAddress::V4(_) => "ClientAddress::V4(..)",
            ClientAddress::V6Network(_) => "ClientAddress::V6Network(..)",
            ClientAddress::Unknown => "ClientAddress::Unknown",
        })
    }
}

/// The longest header value or `X-Forwarded-For` entry read as an address,
/// in bytes: the longest address (45 characters, an IPv6 address ending in
/// an IPv4 one), in brackets, with a port and room for whitespace. A longer
/// one is no address, found so from its length: a client's header costs a
/// decision no more than this, whatever its size.
pub const MAX_ADDRESS_BYTES: usize = 100;

/// The most `X-Forwarded-For` entries read, from the right: far more hops
/// than any deployable's proxies make. When every one read is a proxy, the
/// leftmost read is the client (as when the header holds no more).
pub const MAX_FORWARDED_HOPS: usize = 32;

/// An IP address written in a header: whitespace around it ignored, an IPv6
/// address in brackets or not. IPv4-mapped IPv6 addresses are read as IPv4.
/// Bytes that are not UTF-8, and more than [`MAX_ADDRESS_BYTES`], are no
/// address.
fn parse_ip(bytes: &[u8]) -> Option<IpAddr> {
    if bytes.len() > MAX_ADDRESS_BYTES {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?.trim();
    let bare = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    bare.parse::<IpAddr>().ok().map(|ip| ip.to_canonical())
}

/// An `X-Forwarded-For` entry: an address as [`parse_ip`] reads it, or with
/// a port after it (`203.0.113.7:41234`, `[2001:db8::1]:443`), as some load
/// balancers write the header.
fn parse_forwarded(entry: &[u8]) -> Option<IpAddr> {
    if entry.len() > MAX_ADDRESS_BYTES {
        return None;
    }
    parse_ip(entry).or_else(|| {
        let socket = std::str::from_utf8(entry)
            .ok()?
            .trim()
            .parse::<SocketAddr>()
            .ok()?;
        Some(socket.ip().to_canonical())
    })
}

/// The header a trusted proxy names the client in.
pub const FORWARDED_FOR_HEADER: &str = "X-Forwarded-For";

/// Where Cloudflare keeps a client's real IPv6 address when its Pseudo IPv4
/// setting is "Overwrite Headers": `CF-Connecting-IP` (and
/// `X-Forwarded-For`) then hold a Class E address (240.0.0.0/4) hashed from
/// it, which no real client has.
pub const CLOUDFLARE_IPV6_HEADER: &str = "CF-Connecting-IPv6";

/// Cloudflare's published ranges, with their source and date
/// (`runtime/data/cloudflare-ips.txt`): the peers a `"cloudflare"` source
/// believes about `CF-Connecting-IP`.
pub const CLOUDFLARE_RANGES_FILE: &str = include_str!("../data/cloudflare-ips.txt");

/// [`CLOUDFLARE_RANGES_FILE`]'s networks, parsed once per process. A line
/// that is no network is skipped here and refused by the test that reads
/// the file.
pub fn cloudflare_ranges() -> &'static [IpNet] {
    static RANGES: std::sync::OnceLock<Vec<IpNet>> = std::sync::OnceLock::new();
    RANGES.get_or_init(|| {
        CLOUDFLARE_RANGES_FILE
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .filter_map(|line| line.parse().ok())
            .collect()
    })
}

/// Where a native deployable takes a request's client address from: its
/// `client_address` in the application description (`"peer"` by default,
/// `"cloudflare"`, `{ cloudflare_via = [...] }`, or
/// `{ trusted_proxies = [...] }`). A Worker always reads `CF-Connecting-IP`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AddressSource {
    /// The socket's peer: the only source no client can forge on a server it
    /// reaches directly.
    #[default]
    Peer,
    /// `CF-Connecting-IP`, believed only from a peer that is Cloudflare (or
    /// one of the deployable's relays in front of it); from any other peer,
    /// the peer is the client: anyone reaching the server directly could
    /// write the header.
    CloudflareHeader(CloudflarePeers),
    /// The peer, unless it is one of these proxies: then the client its
    /// proxies name in `X-Forwarded-For` ([`TrustedProxies::client`]).
    TrustedProxies(TrustedProxies),
}

/// The peers a `"cloudflare"` source believes about `CF-Connecting-IP`:
/// Cloudflare's published ranges, and the deployable's own relays between
/// Cloudflare and it (`cloudflare_via`: `cloudflared` for a Cloudflare
/// Tunnel, a load balancer of its own), which pass Cloudflare's header on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CloudflarePeers {
    via: Vec<IpNet>,
}

impl CloudflarePeers {
    /// Cloudflare's ranges and the relays in `via`.
    pub fn new(via: Vec<IpNet>) -> CloudflarePeers {
        CloudflarePeers { via }
    }

    /// Whether `ip` is Cloudflare or one of the relays.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        cloudflare_ranges()
            .iter()
            .chain(&self.via)
            .any(|network| network.contains(&ip))
    }

    /// The client address a peer this trusts names: `CF-Connecting-IP`, or,
    /// where Cloudflare's Pseudo IPv4 has overwritten that with a Class E
    /// address, the real IPv6 address in `CF-Connecting-IPv6`.
    fn client(&self, headers: &AddressHeaders<'_>) -> Option<IpAddr> {
        let ip = headers.cf_connecting_ip.and_then(parse_ip)?;
        if is_pseudo_ipv4(ip)
            && let Some(real @ IpAddr::V6(_)) = headers.cf_connecting_ipv6.and_then(parse_ip)
        {
            return Some(real);
        }
        Some(ip)
    }
}

/// Whether `ip` is in 240.0.0.0/4, the Class E range Cloudflare's Pseudo
/// IPv4 ("Overwrite Headers") writes into `CF-Connecting-IP` in place of an
/// IPv6 client's address, moving the real one to `CF-Connecting-IPv6`. One
/// IPv6 client's addresses map to many pseudo addresses, so counting them
/// would give each address of its /64 a count of its own.
pub(crate) fn is_pseudo_ipv4(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V4(v4) if v4.octets()[0] >= 240)
}

/// The request headers a source may read, as the bytes they came as: a
/// header that is not UTF-8 is read as far as it can be, not dropped whole.
/// They hold addresses, which are keys: its `Debug` says which are present.
#[derive(Clone, Copy, Default)]
pub struct AddressHeaders<'a> {
    /// `CF-Connecting-IP`.
    pub cf_connecting_ip: Option<&'a [u8]>,
    /// `CF-Connecting-IPv6` ([`CLOUDFLARE_IPV6_HEADER`]).
    pub cf_connecting_ipv6: Option<&'a [u8]>,
    /// Every `X-Forwarded-For` line, in order.
    pub forwarded_for: &'a [&'a [u8]],
}

impl fmt::Debug for AddressHeaders<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AddressHeaders")
            .field("cf_connecting_ip", &self.cf_connecting_ip.map(|_| ".."))
            .field("cf_connecting_ipv6", &self.cf_connecting_ipv6.map(|_| ".."))
            .field("forwarded_for_lines", &self.forwarded_for.len())
            .finish()
    }
}

/// Why a request's client address cannot be known (logged once per process
/// as `rate_limits.address_unknown`, with no address in it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressUnknown {
    /// The server handed over no socket peer (a wiring mistake: see
    /// `runtime::native::RateLimitLayer`).
    NoPeer,
    /// A trusted proxy sent no `X-Forwarded-For`.
    NoForwardedFor,
    /// The `X-Forwarded-For` entry that names the client is not an address.
    ForwardedForInvalid,
    /// From Cloudflare, the request has no `CF-Connecting-IP`, or one that
    /// is not an address.
    NoCloudflareHeader,
}

impl AddressUnknown {
    /// The event's name, which operators search for: written once per
    /// process, with the source and the reason, never an address.
    pub const EVENT: &'static str = "rate_limits.address_unknown";

    /// Every reason.
    pub const VALUES: [AddressUnknown; 4] = [
        AddressUnknown::NoPeer,
        AddressUnknown::NoForwardedFor,
        AddressUnknown::ForwardedForInvalid,
        AddressUnknown::NoCloudflareHeader,
    ];

    /// The reason as logged.
    pub fn as_str(self) -> &'static str {
        match self {
            AddressUnknown::NoPeer => "no_peer_address",
            AddressUnknown::NoForwardedFor => "no_forwarded_for",
            AddressUnknown::ForwardedForInvalid => "forwarded_for_invalid",
            AddressUnknown::NoCloudflareHeader => "no_cf_connecting_ip",
        }
    }
}

/// The address a source found for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolved {
    /// Read where the source trusts it.
    Address(ClientAddress),
    /// A `"cloudflare"` source's request from a peer that is neither
    /// Cloudflare nor a relay of the deployable: the peer is counted, since
    /// anyone reaching the server directly can write `CF-Connecting-IP`
    /// (logged once per process as [`Resolved::PEER_NOT_CLOUDFLARE`], never
    /// with an address: a firewall that lets only Cloudflare in, or a
    /// `cloudflare_via` for a tunnel, is missing).
    PeerNotCloudflare(ClientAddress),
}

impl Resolved {
    /// The event a request from a peer that is not Cloudflare is logged as.
    pub const PEER_NOT_CLOUDFLARE: &'static str = "rate_limits.peer_not_cloudflare";

    /// The address counted.
    pub fn address(self) -> ClientAddress {
        match self {
            Resolved::Address(address) | Resolved::PeerNotCloudflare(address) => address,
        }
    }
}

impl AddressSource {
    /// The source's name as the description writes it and logs name it:
    /// `peer`, `cloudflare` or `trusted_proxies`.
    #[doc(hidden)]
    pub fn name(&self) -> &'static str {
        match self {
            AddressSource::Peer => "peer",
            AddressSource::CloudflareHeader(_) => "cloudflare",
            AddressSource::TrustedProxies(_) => "trusted_proxies",
        }
    }

    /// The client address of a request from `peer` (`None` when the server
    /// handed over none) with these `headers`. Each source reads only what
    /// it trusts: the peer source reads no header, the Cloudflare source
    /// only Cloudflare's and only from Cloudflare, the proxies source only
    /// `X-Forwarded-For` and only from a trusted peer. Every source needs
    /// the peer.
    #[doc(hidden)]
    pub fn resolve(
        &self,
        peer: Option<IpAddr>,
        headers: &AddressHeaders<'_>,
    ) -> Result<Resolved, AddressUnknown> {
        let peer = peer.ok_or(AddressUnknown::NoPeer)?.to_canonical();
        let ip = match self {
            AddressSource::Peer => peer,
            AddressSource::CloudflareHeader(peers) if !peers.trusts(peer) => {
                return Ok(Resolved::PeerNotCloudflare(ClientAddress::of_ip(peer)));
            }
            AddressSource::CloudflareHeader(peers) => peers
                .client(headers)
                .ok_or(AddressUnknown::NoCloudflareHeader)?,
            AddressSource::TrustedProxies(proxies) => {
                proxies.client(peer, headers.forwarded_for)?
            }
        };
        Ok(Resolved::Address(ClientAddress::of_ip(ip)))
    }
}

/// The networks of a deployable's own proxies (load balancers, ingresses):
/// only a peer in them is believed about `X-Forwarded-For`, and each entry
/// in them is a hop to skip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedProxies {
    networks: Vec<IpNet>,
}

impl TrustedProxies {
    /// The proxies in `networks` (a single address is a /32 or /128).
    pub fn new(networks: Vec<IpNet>) -> TrustedProxies {
        TrustedProxies { networks }
    }

    /// Whether `ip` is one of the proxies.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.networks.iter().any(|network| network.contains(&ip))
    }

    /// The client of a request from `peer`, as nginx's `real_ip_recursive on`
    /// with `set_real_ip_from` finds it: a peer that is no proxy is the
    /// client, whatever it wrote in `X-Forwarded-For`; from a proxy, the
    /// rightmost entry of `X-Forwarded-For` that is no proxy (every entry to
    /// its right was written by a proxy, each naming who connected to it;
    /// entries to its left were written by the client and are never read).
    /// When every entry is a proxy, the leftmost (as nginx): a caller inside
    /// the proxies' own networks.
    ///
    /// `forwarded_for` holds the header's lines in order, as bytes (several
    /// lines are one list; bytes that are not UTF-8 spoil only the entry
    /// they are in). A proxy that sent no entry, or an entry that is no
    /// address where the client should be, leaves the client unknown.
    ///
    /// However long the header, at most [`MAX_FORWARDED_HOPS`] entries
    /// (empty ones included) of at most [`MAX_ADDRESS_BYTES`] are read: an
    /// entry found longer is no address, found so without reading it whole.
    pub fn client(&self, peer: IpAddr, forwarded_for: &[&[u8]]) -> Result<IpAddr, AddressUnknown> {
        let peer = peer.to_canonical();
        if !self.trusts(peer) {
            return Ok(peer);
        }
        let mut leftmost = None;
        let entries = forwarded_for
            .iter()
            .rev()
            .flat_map(|line| EntriesFromRight { rest: Some(line) })
            .take(MAX_FORWARDED_HOPS);
        for entry in entries {
            if entry.len() > MAX_ADDRESS_BYTES {
                return Err(AddressUnknown::ForwardedForInvalid);
            }
            if entry.trim_ascii().is_empty() {
                continue;
            }
            let ip = parse_forwarded(entry).ok_or(AddressUnknown::ForwardedForInvalid)?;
            if !self.trusts(ip) {
                return Ok(ip);
            }
            leftmost = Some(ip);
        }
        leftmost.ok_or(AddressUnknown::NoForwardedFor)
    }
}

/// The comma-separated entries of one `X-Forwarded-For` line, from the
/// right, each looked for no further back than [`MAX_ADDRESS_BYTES`] and a
/// comma: an entry longer than that is the last, the rest of the line
/// (longer than an address, so no address), unread.
struct EntriesFromRight<'a> {
    rest: Option<&'a [u8]>,
}

impl<'a> Iterator for EntriesFromRight<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let rest = self.rest?;
        let from = rest.len().saturating_sub(MAX_ADDRESS_BYTES + 1);
        match rest[from..].iter().rposition(|&byte| byte == b',') {
            Some(comma) => {
                let comma = from + comma;
                self.rest = Some(&rest[..comma]);
                Some(&rest[comma + 1..])
            }
            None => {
                self.rest = None;
                Some(rest)
            }
        }
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

    /// Every /64 is written as `Ipv6Addr`'s `Display` writes it: each
    /// group 0, 1 to 4 hex digits or `ffff`, at each of the four places.
    #[test]
    fn every_ipv6_network_is_written_as_std_writes_it() {
        let values = [0u16, 1, 0xa, 0x10, 0xdb8, 0x2001, 0xffff];
        for a in values {
            for b in values {
                for c in values {
                    for d in values {
                        let network = Ipv6Addr::new(a, b, c, d, 0, 0, 0, 0);
                        let mut key = String::new();
                        push_network_64(&mut key, network);
                        assert_eq!(key, format!("{network}/64"));
                    }
                }
            }
        }
    }

    #[test]
    fn an_ipv6_network_and_an_unknown_address_keep_their_forms() {
        let mut key = String::from("address:");
        ClientAddress::from_header(Some("2001:DB8:1:2:3:4:5:6")).push_key(&mut key);
        assert_eq!(key, "address:2001:db8:1:2::/64");
        let mut unknown = String::new();
        ClientAddress::Unknown.push_key(&mut unknown);
        assert_eq!(unknown, "");
    }
}
