//! What can be done to a native scenario's Redis: at the start (`store`)
//! and mid-run (`set_store`).

use crate::language::scenario::behaviour::StoreBehaviour;
use crate::language::scenario::model::{RedisKind, Scenario};

/// `store`: what a Redis can be from the start.
pub(super) fn validate_store_at_start(
    s: &Scenario,
    behaviour: StoreBehaviour,
) -> Result<(), String> {
    match behaviour {
        StoreBehaviour::Restarted | StoreBehaviour::ScriptsFlushed => Err(format!(
            "`{behaviour}` happens mid-run (`set_store`); at the start write healthy, down, hanging, slow = {{ ms = N }} or missing"
        )),
        StoreBehaviour::Missing if s.redis == RedisKind::Cluster => {
            Err("a `missing` store has no servers: it is not a cluster".to_owned())
        }
        StoreBehaviour::Healthy
        | StoreBehaviour::Down
        | StoreBehaviour::Hanging
        | StoreBehaviour::Slow { .. }
        | StoreBehaviour::Missing => Ok(()),
    }
}

/// `set_store`: what can be done to a Redis mid-run.
pub(super) fn validate_store_change(s: &Scenario, behaviour: StoreBehaviour) -> Result<(), String> {
    let missing_from_start = s
        .store
        .as_ref()
        .is_some_and(|b| *b.get_ref() == StoreBehaviour::Missing);
    match behaviour {
        _ if missing_from_start => Err(
            "the store is `missing` (nothing listens at its URL), so nothing can be done to it"
                .to_owned(),
        ),
        StoreBehaviour::Missing => Err(
            "`missing` means nothing listens from the start (`store = \"missing\"`); mid-run, `down` kills the server".to_owned(),
        ),
        StoreBehaviour::Restarted if s.redis == RedisKind::Cluster => Err(
            "a cluster is not restarted (its slots would need assigning again); use a single server"
                .to_owned(),
        ),
        StoreBehaviour::Healthy
        | StoreBehaviour::Down
        | StoreBehaviour::Hanging
        | StoreBehaviour::Slow { .. }
        | StoreBehaviour::Restarted
        | StoreBehaviour::ScriptsFlushed => Ok(()),
    }
}
