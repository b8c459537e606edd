//! What a run's scenarios need of this machine beyond workerd and the wasm
//! deployable, had before the first scenario starts: `native-fixture`
//! (built when missing or stale) for native scenarios, and `redis-server`
//! (installed where the harness can) for those counting in Redis. A machine
//! that lacks one gets one line naming what to run, never a failure per
//! scenario; and a build does not compete with running scenarios for the
//! cores their timing checks share.

use super::suite::Trial;
use crate::world::native::{NativeError, fixture_path};
use crate::world::redis::{RedisError, redis_server};

/// Why the run cannot start.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// `native-fixture` could not be built.
    #[error("{count} native scenario(s) need native-fixture: {source}")]
    Fixture {
        /// How many selected scenarios run natively.
        count: usize,
        /// Why it could not be built.
        source: NativeError,
    },
    /// `redis-server` is missing and could not be installed.
    #[error("{count} scenario(s) count in Redis, and {source}")]
    Redis {
        /// How many selected scenarios count in Redis.
        count: usize,
        /// Why it is not there.
        source: RedisError,
    },
}

/// Has what `trials` need (see the module's doc), or says why not.
pub fn prepare_machine(trials: &[&Trial]) -> Result<(), PreflightError> {
    let scenarios = || {
        trials.iter().filter_map(|trial| match trial {
            Trial::Scenario(prepared) => Some(prepared),
            Trial::Malformed { .. } => None,
        })
    };
    let native = scenarios().filter(|p| p.runs_natively()).count();
    let redis = scenarios().filter(|p| p.counts_in_redis()).count();
    if redis > 0 {
        redis_server().map_err(|source| PreflightError::Redis {
            count: redis,
            source,
        })?;
    }
    if native > 0 {
        fixture_path().map_err(|source| PreflightError::Fixture {
            count: native,
            source,
        })?;
    }
    Ok(())
}
