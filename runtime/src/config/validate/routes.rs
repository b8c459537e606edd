//! Each route: a unique template (after [`routes`]'s normalisation) a
//! request's path can match and that keeps the keys unambiguous, and its
//! own limit, with every field checked and a window Cloudflare's binding
//! can count when the binding is the store.

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;

use super::Report;
use super::shadow::validate_route_shadow;
use crate::config::raw::{RawRoute, RawRouteLimit};
use crate::config::{BINDING_WINDOWS, Code, Location, Route};
use crate::limits::{Limit, Methods};
use crate::routes::{self, RouteTable};

pub(super) fn validate_routes(
    report: &mut Report<'_>,
    raw: &[Spanned<RawRoute>],
    binding_store: bool,
) -> Vec<Route> {
    // Each route's shape (its canonical template, parameters unnamed), and
    // the entries listed of it: where, as what, and the methods each limits.
    // Two spellings of one path are one route; two entries of it may limit
    // methods apart.
    let mut entries: BTreeMap<String, Vec<(usize, String, Methods)>> = BTreeMap::new();
    let mut routes = Vec::new();
    let mut valid: Vec<(usize, Range<usize>)> = Vec::new();
    for spanned in raw {
        let route = spanned.get_ref();
        let written = route.path.get_ref();
        let canonical = check_route_path(report, &route.path);
        let path = canonical.as_deref().unwrap_or(written);
        let methods = route
            .rate_limit
            .as_ref()
            .and_then(|limit| limit.get_ref().methods.as_ref())
            .map_or(Some(Methods::ALL), |methods| {
                route_methods(report, written, methods)
            });
        if let (Some(canonical), Some(methods)) = (&canonical, methods) {
            let listed = entries
                .entry(routes::template_shape(canonical))
                .or_default();
            if let Some((first, first_path, first_methods)) =
                listed.iter().find(|(_, _, m)| m.overlaps(methods))
            {
                let first_line = Location::of_offset(report.source, *first).line;
                let same = if first_path == canonical {
                    format!("`{first_path}`")
                } else {
                    format!("`{first_path}`, which meets the same paths")
                };
                let message = if methods.is_all() && first_methods.is_all() {
                    format!(
                        "route `{written}` is {same}, listed again (first at line {first_line}); \
                         every entry of a path counts each of its requests, so keep one \
                         `[[routes]]` per path"
                    )
                } else {
                    format!(
                        "route `{written}` limits {}, and {same} (line {first_line}) limits {}: \
                         a request of a method both count would be counted twice, so give each \
                         method of a path one entry (`GET` counts `HEAD` too)",
                        describe(methods),
                        describe(*first_methods)
                    )
                };
                report.add(Code::RouteDuplicate, Some(spanned.span()), message);
            } else {
                listed.push((spanned.span().start, canonical.clone(), methods));
            }
        }
        let rate_limit = route
            .rate_limit
            .as_ref()
            .and_then(|limit| route_limit(report, written, limit, binding_store));
        let shadow = route.rate_limit.as_ref().is_some_and(|limit| {
            validate_route_shadow(report, written, limit.get_ref().shadow.as_ref())
        });
        if canonical.is_some() {
            valid.push((routes.len(), spanned.span()));
        }
        routes.push(Route {
            path: path.to_owned(),
            rate_limit,
            methods: methods.unwrap_or(Methods::ALL),
            shadow,
        });
    }
    // What the gate's router would refuse of the valid templates, refused here.
    let (_, refused) = RouteTable::new(
        valid
            .iter()
            .map(|&(index, _)| (index, routes[index].path.as_str())),
    );
    for (index, why) in refused {
        let span = valid
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, s)| s.clone());
        report.add(
            Code::RoutePathInvalid,
            span,
            format!(
                "route `{}` cannot be matched beside the others: {why}",
                routes[index].path
            ),
        );
    }
    routes
}

/// A route's path is a template ([`routes`]) matched against a request's
/// canonical path, and is the first part of its keys (`PATH|caller:ID`):
/// it starts with `/`, and holds no `|` (the keys' separator: with it,
/// `/a|caller:b` for caller `c` and `/a` for caller `b|caller:c` would
/// share one key), nor what a request's path never holds (a query or
/// fragment, spaces, anything not percent-encoded), so that it can match;
/// its parameters are in the syntax the router reads. Its canonical
/// template, when it is valid.
fn check_route_path(report: &mut Report<'_>, path: &Spanned<String>) -> Option<String> {
    let text = path.get_ref();
    let why = if !text.starts_with('/') {
        Some(format!(
            "does not start with `/`, so no request's path can match it: write `/{text}`"
        ))
    } else if text.contains('|') {
        Some(
            "holds `|`, which the rate-limit keys reserve (a route's key is `PATH|SUBJECT`): \
             a path with it could share a key with another route's subject"
                .to_owned(),
        )
    } else if let Some(c) = text.chars().find(|c| matches!(c, '?' | '#')) {
        Some(format!(
            "holds `{c}`, which starts a URL's query or fragment: a request's path never holds \
             it, so the route could never match"
        ))
    } else if text.chars().any(|c| !c.is_ascii_graphic()) {
        let mut encoded = String::with_capacity(text.len());
        for c in text.chars() {
            if c.is_ascii_graphic() {
                encoded.push(c);
            } else {
                for byte in c.encode_utf8(&mut [0; 4]).bytes() {
                    encoded.push_str(&format!("%{byte:02X}"));
                }
            }
        }
        Some(format!(
            "holds a space, a control character or a non-ASCII character, which a request's \
             path holds percent-encoded: write `{encoded}`"
        ))
    } else {
        None
    };
    let canonical = match why {
        Some(why) => Err(why),
        None => routes::canonical_template(text).map_err(|error| error.to_string()),
    };
    match canonical {
        Ok(canonical) => Some(canonical),
        Err(why) => {
            report.add(
                Code::RoutePathInvalid,
                Some(path.span()),
                format!("route `{}` {why}", text.escape_debug()),
            );
            None
        }
    }
}

/// A route's own limit, each of its fields checked whatever the other's state.
fn route_limit(
    report: &mut Report<'_>,
    path: &str,
    limit: &Spanned<RawRouteLimit>,
    binding_store: bool,
) -> Option<Limit> {
    let RawRouteLimit {
        requests, window, ..
    } = limit.get_ref();
    let requests = route_limit_field(report, path, "requests", requests, limit.span());
    let window = route_limit_field(report, path, "window", window, limit.span());
    if let (Some(window), Some(span)) = (window, window_span(limit))
        && binding_store
        && !BINDING_WINDOWS.contains(&window)
    {
        report.add(
            Code::WindowUnsupported,
            Some(span),
            format!(
                "route `{path}` has a rate_limit window of {window} s, but the store is \
                 Cloudflare's binding, which counts windows of 10 or 60 seconds only"
            ),
        );
        return None;
    }
    Some(Limit {
        requests: requests?,
        window_seconds: window?,
    })
}

fn window_span(limit: &Spanned<RawRouteLimit>) -> Option<Range<usize>> {
    limit.get_ref().window.as_ref().map(Spanned::span)
}

/// A route limit's field as a whole number from 1 to `u32::MAX`, or a
/// diagnostic: `rate_limits.limit_invalid`, or for a window that is no
/// whole number at all, `rate_limits.window_unsupported`.
fn route_limit_field(
    report: &mut Report<'_>,
    path: &str,
    field: &str,
    value: &Option<Spanned<toml::Value>>,
    limit_span: Range<usize>,
) -> Option<u32> {
    let Some(value) = value else {
        report.add(
            Code::LimitInvalid,
            Some(limit_span),
            format!("route `{path}` has a rate_limit without `{field}`"),
        );
        return None;
    };
    let range = format!("a whole number from 1 to {}", u32::MAX);
    match value.get_ref() {
        toml::Value::Integer(n) => match u32::try_from(*n) {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                report.add(
                    Code::LimitInvalid,
                    Some(value.span()),
                    format!("route `{path}` has rate_limit {field} = {n}; it must be {range}"),
                );
                None
            }
        },
        other => {
            let code = if field == "window" {
                Code::WindowUnsupported
            } else {
                Code::LimitInvalid
            };
            let hint = whole_number_in(other)
                .map(|n| format!(": write `{field} = {n}`"))
                .unwrap_or_default();
            report.add(
                code,
                Some(value.span()),
                format!(
                    "route `{path}` has rate_limit {field} = {other}, a {}; it must be {range}{hint}",
                    other.type_str()
                ),
            );
            None
        }
    }
}

/// The whole number a float or string plainly means (`20.0`, `"60"`), for the hint.
fn whole_number_in(value: &toml::Value) -> Option<u32> {
    match value {
        toml::Value::Float(f) if f.fract() == 0.0 && *f >= 1.0 && *f <= f64::from(u32::MAX) => {
            Some(*f as u32)
        }
        toml::Value::String(s) => s.trim().parse().ok().filter(|n| *n >= 1),
        _ => None,
    }
}

/// Methods as a message names them: `every method`, or `POST` or `GET, POST`.
fn describe(methods: Methods) -> String {
    if methods.is_all() {
        return "every method".to_owned();
    }
    methods.names().collect::<Vec<_>>().join(", ")
}

/// A route limit's `methods`: a list of the methods it counts, each one
/// [`Methods::NAMES`] has, as written there, once, and `HEAD` not beside
/// `GET` (which counts it). Every problem of the list is reported, each at
/// its place; `None` when there was one.
fn route_methods(
    report: &mut Report<'_>,
    path: &str,
    methods: &Spanned<toml::Value>,
) -> Option<Methods> {
    let known = Methods::NAMES.join(", ");
    let toml::Value::Array(items) = methods.get_ref() else {
        let other = methods.get_ref();
        let hint = match other {
            toml::Value::String(name) => format!(": write `methods = [\"{name}\"]`"),
            _ => String::new(),
        };
        report.add(
            Code::MethodsInvalid,
            Some(methods.span()),
            format!(
                "route `{path}` has rate_limit methods = {other}, a {}; it must be a list of \
                 HTTP methods, such as `methods = [\"POST\"]`{hint}",
                other.type_str()
            ),
        );
        return None;
    };
    if items.is_empty() {
        report.add(
            Code::MethodsInvalid,
            Some(methods.span()),
            format!(
                "route `{path}` has rate_limit methods = [], which counts no request: name the \
                 methods it counts, or leave `methods` out to count every method"
            ),
        );
        return None;
    }
    // toml's `Value` keeps no places inside an array: each item is found
    // again in the source after the last one found (an item spelt another
    // way, `'POST'`, is placed at the list).
    let mut from = methods.span().start;
    let mut counted: Option<Methods> = None;
    let mut valid = true;
    for item in items {
        let written = item.to_string();
        let found = report
            .source
            .get(from..methods.span().end)
            .and_then(|rest| rest.find(&written));
        let at = match found {
            Some(offset) => {
                from += offset + written.len();
                from - written.len()
            }
            None => methods.span().start,
        };
        let span = Some(at..at + 1);
        let problem = match item {
            toml::Value::String(name) => match Methods::named(name) {
                Some(one) => {
                    let listed =
                        |method: &str| counted.is_some_and(|c| c.names().any(|n| n == method));
                    if listed(name) {
                        Some(format!("list `{name}` twice"))
                    } else if (name == "HEAD" && listed("GET")) || (name == "GET" && listed("HEAD"))
                    {
                        Some(
                            "list both `GET` and `HEAD`: `GET` counts `HEAD` already (a HEAD is a \
                             GET without its body), so drop `HEAD`"
                                .to_owned(),
                        )
                    } else {
                        counted = Some(counted.map_or(one, |c| c.and(one)));
                        None
                    }
                }
                None => {
                    let upper = name.to_ascii_uppercase();
                    Some(if Methods::named(&upper).is_some() {
                        format!(
                            "name `{name}`: methods are case-sensitive (RFC 9110), so write `{upper}`"
                        )
                    } else {
                        format!(
                            "name `{}`, which is no method a limit can name: one of {known}",
                            name.escape_debug()
                        )
                    })
                }
            },
            other => Some(format!(
                "list {other}, a {}: each method is a string, such as `\"POST\"`",
                other.type_str()
            )),
        };
        if let Some(problem) = problem {
            valid = false;
            report.add(
                Code::MethodsInvalid,
                span,
                format!("route `{path}` has a rate_limit whose methods {problem}"),
            );
        }
    }
    counted.filter(|_| valid)
}
