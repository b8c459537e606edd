//! What a scenario asks of its deployable, the deployable can do: Redis
//! steps and expectations belong to a native deployable counting in Redis,
//! Cloudflare bindings to a Workers one, and the addresses a step sends are
//! ones it reads ([`super::address`]).

use std::collections::BTreeMap;

use runtime::config::{Application, Counting, Deployable, Target};

use super::address::validate_addresses;
use crate::language::scenario::behaviour::{ALL_BINDINGS, RedisBehaviour};
use crate::language::scenario::model::RedisKind;
use crate::language::scenario::prepared::Prepared;
use crate::language::scenario::source::ScenarioError;
use crate::language::scenario::step::Action;

/// The validations that need the application: Redis steps and expectations
/// belong to a native deployable counting in Redis, and Cloudflare bindings
/// to a Workers one. An application that does not validate, or lacks the
/// deployable, is reported when the scenario runs.
pub(super) fn validate_for_deployable(prepared: &Prepared) -> Result<(), ScenarioError> {
    let Some((app, d)) = prepared.described() else {
        return Ok(());
    };
    let (source, deployable) = (&prepared.scenario, &prepared.deployable);
    let s = source.scenario.get_ref();
    let native = d.target == Target::Native;
    let redis = matches!(app.counting(d), Counting::Redis { .. });
    let no_redis = format!(
        "is for a native deployable counting in Redis, and `{deployable}` {}",
        if native {
            "does not count in Redis (its store is not a Redis connection, or it serves no API)"
        } else {
            "is a Workers deployable"
        }
    );
    let no_bindings = format!(
        "is for a Workers deployable's Cloudflare bindings; `{deployable}` is native (its store is Redis: use `redis_starts`, `set_redis`, `redis_calls`)"
    );
    let whole = source.scenario.span();
    if !redis {
        if let Some(starts) = &s.redis_starts {
            return Err(source.error(starts.span(), format!("`redis_starts` {no_redis}")));
        }
        if s.redis != RedisKind::Server {
            return Err(source.error(whole, format!("`redis` {no_redis}")));
        }
        if let Some(tls) = &s.redis_tls {
            return Err(source.error(tls.span(), format!("`redis_tls` {no_redis}")));
        }
    }
    if let Some(tls) = &s.redis_tls {
        let missing = s
            .redis_starts
            .as_ref()
            .is_some_and(|b| *b.get_ref() == RedisBehaviour::Missing);
        if missing {
            return Err(source.error(
                tls.span(),
                "`redis_tls` needs a server to speak TLS, and `redis_starts = \"missing\"` has none",
            ));
        }
    }
    if native && let Some(bindings) = &s.bindings {
        return Err(source.error(bindings.span(), format!("`bindings` {no_bindings}")));
    }
    if let Some(keys) = s
        .expect
        .as_ref()
        .and_then(|e| e.get_ref().binding_keys.as_ref())
    {
        if native {
            return Err(source.error(keys.span(), format!("`binding_keys` {no_bindings}")));
        }
        validate_binding_keys(keys.get_ref(), app, d).map_err(|m| source.error(keys.span(), m))?;
    }
    for step in &s.steps {
        let what = match step.get_ref().action() {
            Ok(Action::Send { send, .. }) if !native && send.peer.is_some() => Some(format!(
                "`peer` is the socket peer a native instance sees; `{deployable}` is a Workers \
                 deployable, whose peer is Cloudflare's edge and whose client is \
                 `CF-Connecting-IP` (`address`)"
            )),
            Ok(Action::SetRedis(_)) if !redis => Some(format!("`set_redis` {no_redis}")),
            Ok(Action::StepWallClock(_)) if !native => Some(format!(
                "`step_wall_clock` steps a native instance's wall clock; `{deployable}` is a \
                 Workers deployable, whose one clock (`Date.now()`) never goes back within an isolate"
            )),
            Ok(Action::SetBindings(_)) if native => Some(format!("`set_bindings` {no_bindings}")),
            Ok(Action::Limit(_)) if native => Some(format!("`limit` {no_bindings}")),
            Ok(Action::Send {
                expect: Some(expect),
                ..
            }) if !redis => {
                if let Some(calls) = &expect.get_ref().redis_calls {
                    return Err(source.error(calls.span(), format!("`redis_calls` {no_redis}")));
                }
                None
            }
            _ => None,
        };
        if let Some(message) = what {
            return Err(source.error(step.span(), message));
        }
        if let Ok(Action::Send { send, .. }) = step.get_ref().action() {
            validate_addresses(send, deployable, d)
                .map_err(|(span, m)| source.error(span.unwrap_or_else(|| step.span()), m))?;
        }
    }
    Ok(())
}

/// `binding_keys` names the plan's bindings (a typo would expect nothing of
/// a binding that does not exist), and `*` only says that the others saw no key.
fn validate_binding_keys(
    keys: &BTreeMap<String, Vec<String>>,
    app: &Application,
    deployable: &Deployable,
) -> Result<(), String> {
    let plan = runtime::bindings::Bindings::for_deployable(app, deployable);
    let known: Vec<&str> = plan.bindings.iter().map(|b| b.name.as_str()).collect();
    for (name, wanted) in keys {
        if name == ALL_BINDINGS {
            if !wanted.is_empty() {
                return Err(
                    "`\"*\"` stands for every binding not named, and says only that they saw no key: write `\"*\" = []`".to_owned(),
                );
            }
        } else if !known.contains(&name.as_str()) {
            return Err(format!(
                "`{name}` is not one of the deployable's bindings: [{}]",
                known.join(", ")
            ));
        }
    }
    Ok(())
}
