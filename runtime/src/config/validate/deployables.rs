//! Each deployable: a unique name, the declines it may make, the store rules
//! of one that serves an API (it needs one it can count with), and where it
//! takes a request's client address from.

use std::collections::BTreeSet;
use std::ops::Range;

use toml::Spanned;

use super::Report;
use super::connections::{CLOUDFLARE_DRIVER, Connection, NamedStore, REDIS_DRIVER};
use crate::address::{AddressSource, TrustedProxies};
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
        });
    }
    deployables
}

/// A deployable's `client_address`: `"peer"` (a native deployable's default),
/// `"cloudflare"` (a Worker's only source), or `{ trusted_proxies = [...] }`,
/// each entry an address or a network (`10.0.0.0/8`, `2001:db8::/32`).
fn address_source(
    report: &mut Report<'_>,
    name: &str,
    target: Target,
    raw: Option<&Spanned<RawClientAddress>>,
) -> AddressSource {
    let usage = "write \"peer\" (the socket's peer), \"cloudflare\" (`CF-Connecting-IP`, for a \
                 server reached only through Cloudflare) or `{ trusted_proxies = [\"10.0.0.0/8\"] }` \
                 (the client your proxies name in `X-Forwarded-For`)";
    let default = match target {
        Target::Native => AddressSource::Peer,
        Target::Workers => AddressSource::CloudflareHeader,
    };
    let Some(raw) = raw else {
        return default;
    };
    let source = match raw.get_ref() {
        RawClientAddress::Named(named) if named == "peer" => Some(AddressSource::Peer),
        RawClientAddress::Named(named) if named == "cloudflare" => {
            Some(AddressSource::CloudflareHeader)
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
        RawClientAddress::TrustedProxies(RawList::Other(what)) => {
            let message = format!(
                "deployable `{name}` has trusted_proxies that is {what}; it is a list of \
                 addresses and networks, such as [\"10.0.0.0/8\", \"192.0.2.7\"]"
            );
            report.add(Code::ClientAddressInvalid, Some(raw.span()), message);
            None
        }
        RawClientAddress::TrustedProxies(RawList::Items(items)) => {
            trusted_proxies(report, name, items, raw.span())
        }
    };
    match (target, source) {
        (Target::Native, Some(source)) => source,
        (Target::Workers, Some(AddressSource::CloudflareHeader)) | (_, None) => default,
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

/// The networks of `trusted_proxies`, every entry checked (each diagnostic
/// at its entry); `None` when any is invalid or there is none.
fn trusted_proxies(
    report: &mut Report<'_>,
    name: &str,
    items: &[Spanned<toml::Value>],
    span: Range<usize>,
) -> Option<AddressSource> {
    if items.is_empty() {
        report.add(
            Code::ClientAddressInvalid,
            Some(span),
            format!(
                "deployable `{name}` has an empty trusted_proxies, which trusts no proxy: list \
                 your proxies' addresses or networks, or write client_address = \"peer\""
            ),
        );
        return None;
    }
    let mut networks = Vec::new();
    let mut valid = true;
    for item in items {
        let parsed = match item.get_ref() {
            toml::Value::String(text) => network(text)
                .map_err(|why| format!("lists `{text}` in trusted_proxies, which {why}")),
            other => Err(format!(
                "lists an entry of type {} in trusted_proxies, where each entry is a string: an \
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
    valid.then(|| AddressSource::TrustedProxies(TrustedProxies::new(networks)))
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
        return Err("is every address: any client could then name itself in \
             X-Forwarded-For; list your proxies' own networks"
            .to_owned());
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
