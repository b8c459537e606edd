//! Each deployable: a unique name, the declines it may make, the store rules
//! of one that serves an API (it needs one it can count with), and where it
//! takes a request's client address from.

use std::collections::BTreeSet;
use std::ops::Range;

use toml::Spanned;

use super::Report;
use super::connections::{CLOUDFLARE_DRIVER, Connection, NamedStore, REDIS_DRIVER};
use crate::address::{AddressSource, CloudflarePeers, TrustedProxies};
use crate::config::raw::{RawClientAddress, RawDeployable, RawList};
use crate::config::{Code, Deployable, Target};

pub(super) fn validate_deployables(
    report: &mut Report<'_>,
    raw: &[Spanned<RawDeployable>],
    store: &NamedStore<'_>,
) -> Vec<Deployable> {
    let mut seen = BTreeSet::new();
    let mut deployables = Vec::new();
    for spanned in raw {
        let span = spanned.span();
        let d = spanned.get_ref();
        let name = &d.name;
        if !seen.insert(name.clone()) {
            report.add(
                Code::DeployableDuplicate,
                Some(span.clone()),
                format!("two deployables are named `{name}`; names must be unique"),
            );
        }
        let mut declines = Vec::new();
        for decline in &d.declines {
            match decline.get_ref().parse::<Code>() {
                Ok(code) if code.is_declinable() => declines.push(code),
                _ => report.add(
                    Code::DeclineUnknown,
                    Some(decline.span()),
                    format!(
                        "deployable `{name}` declines `{}`, which is no judgement call; the only \
                         one a deployable can decline is {}",
                        decline.get_ref(),
                        Code::CountedInMemory
                    ),
                ),
            }
        }
        if d.serves_api {
            check_api_store(report, name, d.target, &declines, store, span);
        }
        let client_address = address_source(report, name, d.target, d.client_address.as_ref());
        deployables.push(Deployable {
            name: name.clone(),
            target: d.target,
            serves_api: d.serves_api,
            declines,
            client_address,
            // `memory.rs` sets it from `memory_budget_mib`, once the routes are known.
            memory_budget: crate::counter::DEFAULT_MEMORY_BUDGET,
        });
    }
    deployables
}

/// A deployable's `client_address`: `"peer"` (a native deployable's default),
/// `"cloudflare"` (a Worker's only source), `{ cloudflare_via = [...] }`
/// (Cloudflare's header through a tunnel or a load balancer of its own), or
/// `{ trusted_proxies = [...] }`, each list's entry an address or a network
/// (`10.0.0.0/8`, `2001:db8::/32`).
fn address_source(
    report: &mut Report<'_>,
    name: &str,
    target: Target,
    raw: Option<&Spanned<RawClientAddress>>,
) -> AddressSource {
    let usage = "write \"peer\" (the socket's peer), \"cloudflare\" (`CF-Connecting-IP` from \
                 Cloudflare's addresses), `{ cloudflare_via = [\"127.0.0.1\"] }` (also from your \
                 tunnel or load balancer in front of the server) or \
                 `{ trusted_proxies = [\"10.0.0.0/8\"] }` (the client your proxies name in \
                 `X-Forwarded-For`)";
    let default = match target {
        Target::Native => AddressSource::Peer,
        Target::Workers => AddressSource::CloudflareHeader(CloudflarePeers::default()),
    };
    let Some(raw) = raw else {
        return default;
    };
    let source = match raw.get_ref() {
        RawClientAddress::Named(named) if named == "peer" => Some(AddressSource::Peer),
        RawClientAddress::Named(named) if named == "cloudflare" => {
            Some(AddressSource::CloudflareHeader(CloudflarePeers::default()))
        }
        RawClientAddress::Named(other) => {
            let message = format!("deployable `{name}` has client_address \"{other}\"; {usage}");
            report.add(Code::ClientAddressInvalid, Some(raw.span()), message);
            None
        }
        RawClientAddress::Other(what) => {
            let message =
                format!("deployable `{name}` has a client_address that is {what}; {usage}");
            report.add(Code::ClientAddressInvalid, Some(raw.span()), message);
            None
        }
        RawClientAddress::TrustedProxies(list) => {
            networks(report, name, "trusted_proxies", list, raw.span())
                .map(|networks| AddressSource::TrustedProxies(TrustedProxies::new(networks)))
        }
        RawClientAddress::CloudflareVia(list) => {
            networks(report, name, "cloudflare_via", list, raw.span())
                .map(|networks| AddressSource::CloudflareHeader(CloudflarePeers::new(networks)))
        }
    };
    match (target, source) {
        (Target::Native, Some(source)) => source,
        (Target::Workers, Some(AddressSource::CloudflareHeader(via)))
            if via == CloudflarePeers::default() =>
        {
            default
        }
        (_, None) => default,
        (Target::Workers, Some(other)) => {
            report.add(
                Code::ClientAddressInvalid,
                Some(raw.span()),
                format!(
                    "deployable `{name}` is built for Workers, where every request comes through \
                     Cloudflare and its client is `CF-Connecting-IP`; client_address `{}` is for \
                     a native deployable: remove it",
                    other.name()
                ),
            );
            default
        }
    }
}

/// The networks of a list of peers to trust (`trusted_proxies`,
/// `cloudflare_via`), every entry checked (each diagnostic at its entry);
/// `None` when any is invalid, there is none, or together they are every
/// address of a family (`0.0.0.0/1` with `128.0.0.0/1` trusts everyone as
/// much as `0.0.0.0/0`).
fn networks(
    report: &mut Report<'_>,
    name: &str,
    field: &str,
    list: &RawList,
    span: Range<usize>,
) -> Option<Vec<ipnet::IpNet>> {
    let items = match list {
        RawList::Items(items) => items,
        RawList::Other(what) => {
            report.add(
                Code::ClientAddressInvalid,
                Some(span),
                format!(
                    "deployable `{name}` has {field} that is {what}; it is a list of \
                     addresses and networks, such as [\"10.0.0.0/8\", \"192.0.2.7\"]"
                ),
            );
            return None;
        }
    };
    if items.is_empty() {
        report.add(
            Code::ClientAddressInvalid,
            Some(span),
            format!(
                "deployable `{name}` has an empty {field}, which trusts no peer: list \
                 their addresses or networks, or write client_address = \"peer\""
            ),
        );
        return None;
    }
    let mut networks = Vec::new();
    let mut valid = true;
    for item in items {
        let parsed = match item.get_ref() {
            toml::Value::String(text) => {
                network(text).map_err(|why| format!("lists `{text}` in {field}, which {why}"))
            }
            other => Err(format!(
                "lists an entry of type {} in {field}, where each entry is a string: an \
                 address or a network such as \"10.0.0.0/8\"",
                other.type_str()
            )),
        };
        match parsed {
            Ok(network) => networks.push(network),
            Err(why) => {
                valid = false;
                report.add(
                    Code::ClientAddressInvalid,
                    Some(item.span()),
                    format!("deployable `{name}` {why}"),
                );
            }
        }
    }
    if !valid {
        return None;
    }
    if let Some(everyone) = ipnet::IpNet::aggregate(&networks)
        .into_iter()
        .find(|network| network.prefix_len() == 0)
    {
        report.add(
            Code::ClientAddressInvalid,
            Some(span),
            format!(
                "deployable `{name}` has {field} that together are every address (`{everyone}`): \
                 any client could then name itself; list your own peers' networks"
            ),
        );
        return None;
    }
    Some(networks)
}

/// One trusted proxy: an address (its /32 or /128) or a network written
/// with no bits set past its prefix; a network of every address is refused,
/// since then any client could name itself in `X-Forwarded-For`. The error
/// says what is wrong with it.
fn network(text: &str) -> Result<ipnet::IpNet, String> {
    let example = "write an address such as 10.0.0.7 or a network such as 10.0.0.0/8";
    let network = if text.contains('/') {
        text.parse::<ipnet::IpNet>()
            .map_err(|_| format!("is not a network: {example}"))?
    } else {
        let ip = text
            .parse::<std::net::IpAddr>()
            .map_err(|_| format!("is not an address: {example}"))?;
        ipnet::IpNet::from(ip)
    };
    if network.prefix_len() == 0 {
        return Err(
            "is every address: any client could then name itself; list your \
             own peers' networks"
                .to_owned(),
        );
    }
    if network.trunc() != network {
        return Err(format!(
            "has bits set past its /{} prefix: write `{}`",
            network.prefix_len(),
            network.trunc()
        ));
    }
    Ok(network)
}

/// The store rules of a deployable that serves an API.
fn check_api_store(
    report: &mut Report<'_>,
    name: &str,
    target: Target,
    declines: &[Code],
    store: &NamedStore<'_>,
    span: Range<usize>,
) {
    match (target, store) {
        (Target::Workers, NamedStore::Absent) => report.add(
            Code::StoreRequired,
            Some(span),
            format!(
                "deployable `{name}` is built for Workers and serves an API, so its rate \
                 limits need a store every instance can reach: set `rate_limits.store` to a \
                 connection with driver {CLOUDFLARE_DRIVER} (or {REDIS_DRIVER})"
            ),
        ),
        (
            Target::Native,
            NamedStore::Named {
                name: store,
                connection: Connection::Cloudflare { .. },
            },
        ) => report.add(
            Code::TargetUnsupported,
            Some(span),
            format!(
                "deployable `{name}` is native and serves an API, but the store \
                 `{store}` is Cloudflare's binding, which runs only on Workers; \
                 use a Redis connection as the store for a native deployable"
            ),
        ),
        (
            Target::Workers,
            NamedStore::Named {
                name: store,
                connection: Connection::Redis(_),
            },
        ) if !declines.contains(&Code::CountedInMemory) => report.add(
            Code::CountedInMemory,
            Some(span),
            format!(
                "deployable `{name}` is built for Workers and serves an API with the \
                 Redis store `{store}`, which counts in each instance's own memory \
                 until Redis's driver comes with caches, and Workers' instances share no \
                 memory. Either make the store a connection with driver \
                 {CLOUDFLARE_DRIVER} (Cloudflare's binding), or keep Redis by adding \
                 the decline line `declines = [\"{}\"]` to this deployable",
                Code::CountedInMemory
            ),
        ),
        (Target::Workers, NamedStore::Named { .. } | NamedStore::Invalid)
        | (Target::Native, NamedStore::Absent | NamedStore::Invalid)
        | (
            Target::Native,
            NamedStore::Named {
                connection: Connection::Redis(_) | Connection::Other(_),
                ..
            },
        ) => {}
    }
}
