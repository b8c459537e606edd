//! The application's `name`: what its Redis keys are named by
//! (`rl:NAME:...`, [`crate::keys::redis_key`]), so that two applications
//! pointed at one Redis (a managed one, shared by services) count apart
//! while one application's instances count together. Nothing else in the
//! description tells applications apart (two services may both have a
//! deployable `api` and identical routes), so a name is required where a
//! deployable counts in Redis, as Cloudflare's connection requires its
//! `namespace`. It is held to what a key and a log line read plainly: an
//! ASCII letter or digit, then letters, digits, `-`, `_` or `.`, at most
//! [`MAX_NAME_LEN`] in all (no `:`, `{` or `}`, which the key reserves).

use super::super::raw::RawApplication;
use super::connections::{Connection, NamedStore};
use super::{Code, Report};
use crate::config::{Deployable, Target};

/// The longest application name accepted.
pub(super) const MAX_NAME_LEN: usize = 64;

/// The application's name, or `None` when there is none or it is invalid
/// (reported at its place; a missing one only where a deployable counts in
/// Redis, reported at `rate_limits.store`).
pub(super) fn validate_name(
    report: &mut Report<'_>,
    raw: &RawApplication,
    store: &NamedStore<'_>,
    deployables: &[Deployable],
) -> Option<String> {
    let Some(value) = raw.name.as_ref() else {
        let counts_in_redis = matches!(
            store,
            NamedStore::Named {
                connection: Connection::Redis(_),
                ..
            }
        ) && deployables
            .iter()
            .any(|d| d.target == Target::Native && d.serves_api);
        let store_value = raw.rate_limits.as_ref().and_then(|r| r.store.as_ref());
        if let (true, Some(store_value)) = (counts_in_redis, store_value) {
            report.add(
                Code::ApplicationNameInvalid,
                Some(store_value.span()),
                "a native deployable counts in Redis, which other applications may share, and \
                 the application has no `name` to keep its keys apart: name it at the top of \
                 the description, such as `name = \"shop\"`"
                    .to_owned(),
            );
        }
        return None;
    };
    let problem = match value.get_ref() {
        toml::Value::String(name) if is_application_name(name) => return Some(name.clone()),
        toml::Value::String(name) if name.is_empty() => "is empty".to_owned(),
        toml::Value::String(name) if name.len() > MAX_NAME_LEN => {
            format!("is {} characters long, over {MAX_NAME_LEN}", name.len())
        }
        toml::Value::String(_) => "must start with an ASCII letter or digit and hold only \
                                   letters, digits, `-`, `_` and `.`"
            .to_owned(),
        other => format!("must be a string, not a {}", other.type_str()),
    };
    report.add(
        Code::ApplicationNameInvalid,
        Some(value.span()),
        format!("the application's `name` {problem} (its Redis keys are named by it)"),
    );
    None
}

/// Whether `name` is an application name this framework puts in its keys.
fn is_application_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.len() <= MAX_NAME_LEN
}
