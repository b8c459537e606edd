//! What can be done to a native scenario's Redis: at the start (`redis_starts`)
//! and mid-run (`set_redis`).

use crate::language::scenario::behaviour::RedisBehaviour;
use crate::language::scenario::model::{RedisKind, Scenario};

/// `redis_starts`: what a Redis can be from the start.
pub(super) fn validate_redis_start(s: &Scenario, behaviour: RedisBehaviour) -> Result<(), String> {
    match behaviour {
        RedisBehaviour::Restarted
        | RedisBehaviour::ScriptsFlushed
        | RedisBehaviour::FailedOver
        | RedisBehaviour::Migrating
        | RedisBehaviour::Resharded => Err(format!(
            "`{behaviour}` happens mid-run (`set_redis`); at the start write healthy, down, hanging, slow = {{ ms = N }} or missing"
        )),
        RedisBehaviour::Missing if s.redis == RedisKind::Cluster => {
            Err("a `missing` Redis has no servers: it is not a cluster".to_owned())
        }
        RedisBehaviour::Healthy
        | RedisBehaviour::Down
        | RedisBehaviour::Hanging
        | RedisBehaviour::Slow { .. }
        | RedisBehaviour::Missing => Ok(()),
    }
}

/// `set_redis`: what can be done to a Redis mid-run.
pub(super) fn validate_redis_change(s: &Scenario, behaviour: RedisBehaviour) -> Result<(), String> {
    let missing_from_start = s
        .redis_starts
        .as_ref()
        .is_some_and(|b| *b.get_ref() == RedisBehaviour::Missing);
    match behaviour {
        _ if missing_from_start => Err(
            "the Redis is `missing` (nothing listens at its URL), so nothing can be done to it"
                .to_owned(),
        ),
        RedisBehaviour::Missing => Err(
            "`missing` means nothing listens from the start (`redis_starts = \"missing\"`); mid-run, `down` kills the server".to_owned(),
        ),
        RedisBehaviour::Restarted if s.redis == RedisKind::Cluster => Err(
            "a cluster is not restarted (its slots would need assigning again); use a single server"
                .to_owned(),
        ),
        RedisBehaviour::FailedOver | RedisBehaviour::Migrating | RedisBehaviour::Resharded
            if s.redis != RedisKind::Cluster =>
        {
            Err(format!(
                "`{behaviour}` is done to a Redis Cluster (its masters, replicas and slots); write `redis = \"cluster\"`"
            ))
        }
        RedisBehaviour::Healthy
        | RedisBehaviour::Down
        | RedisBehaviour::Hanging
        | RedisBehaviour::Slow { .. }
        | RedisBehaviour::Restarted
        | RedisBehaviour::ScriptsFlushed
        | RedisBehaviour::FailedOver
        | RedisBehaviour::Migrating
        | RedisBehaviour::Resharded => Ok(()),
    }
}
