//! The engine's steps for native scenarios: starting the scenario's Redis
//! and its `native-fixture` instances, `set_redis`, and counting Redis's
//! script calls around a `send` whose expectations name `redis_calls`.

use super::{EngineError, Runner, SharedCount};
use crate::language::scenario::{RedisBehaviour, RedisCalls, SendRequests};
use crate::world::native::launch::NativeLaunch;
use crate::world::scenario_redis::ScenarioRedis;

impl Runner<'_> {
    /// Starts the scenario's Redis (when its deployable counts in Redis),
    /// then `count` native instances pointed at it, all at once.
    pub(super) async fn start_native(&mut self, count: usize) -> Result<(), EngineError> {
        let scenario = self.prepared.scenario.scenario.get_ref();
        if self.prepared.counts_in_redis() {
            let initial = scenario
                .redis_starts
                .as_ref()
                .map_or(RedisBehaviour::Healthy, |b| *b.get_ref());
            let tls = scenario.redis_tls.as_ref().map(|t| *t.get_ref());
            let redis = ScenarioRedis::start(scenario.redis, tls, initial).await?;
            self.shared_count = SharedCount::Redis(redis);
        }
        let (address, trusted_ca) = match &self.shared_count {
            SharedCount::Redis(redis) => (Some(redis.address()), redis.trusted_ca()),
            _ => (None, None),
        };
        let launch = NativeLaunch::new(
            &self.prepared.application_toml,
            &self.prepared.deployable,
            address.as_ref(),
            &self.token,
        )?
        .trusting(trusted_ca);
        let application = launch.application().to_owned();
        self.native = Some(launch);
        self.start_all(count, application).await
    }

    /// `set_redis`: does the behaviour to the scenario's real Redis.
    pub(super) async fn set_redis(
        &mut self,
        step: usize,
        behaviour: RedisBehaviour,
    ) -> Result<(), EngineError> {
        let SharedCount::Redis(redis) = &mut self.shared_count else {
            return Err(EngineError::NoRedis { step: step + 1 });
        };
        redis.apply(behaviour).await?;
        Ok(())
    }

    /// `send` (probing while the first `waiting` wait), and when
    /// `count_calls`, the script calls Redis ran meanwhile (`INFO
    /// commandstats` before and after).
    pub(super) async fn send_counting_redis_calls(
        &mut self,
        step: usize,
        send: &SendRequests,
        count_calls: bool,
        waiting: usize,
    ) -> Result<(), EngineError> {
        if !count_calls {
            return self.send(step, send, waiting).await;
        }
        let before = self.redis_calls(step).await?;
        self.send(step, send, waiting).await?;
        let after = self.redis_calls(step).await?;
        let delta = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
        self.observation.redis_calls.insert(
            step,
            RedisCalls {
                evalsha: delta(after.evalsha, before.evalsha),
                eval: delta(after.eval, before.eval),
            },
        );
        Ok(())
    }

    /// The script calls the scenario's Redis has run so far.
    async fn redis_calls(&self, step: usize) -> Result<RedisCalls, EngineError> {
        let SharedCount::Redis(redis) = &self.shared_count else {
            return Err(EngineError::NoRedis { step: step + 1 });
        };
        Ok(redis.calls().await?)
    }
}
