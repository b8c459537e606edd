//! The Lua scripts the Redis store runs, in one place (as limitador keeps
//! its own in `scripts.rs`), so the counting rule sent to Redis is read here
//! and nowhere else.

/// Counts one request against each of its limits, atomically, exactly as
/// the in-memory counter does (`crate::counter::WindowCounter`): for each
/// limit, within while the window's count is below the limit, and a refused
/// request is not counted against that limit.
///
/// All of a request's limits go in one call, so the call is one atomic step
/// wherever its keys are: while a Redis Cluster moves their slot (a
/// resharding), Redis answers a call whose keys are not all in one place
/// with ASK or TRYAGAIN before running any of it, so a call sent again is
/// never counted twice. (A pipeline of one call per limit could be half run
/// on the old master and then sent again whole to the new one.)
///
/// - `KEYS[i]`: limit `i`'s window key. It already names the window
///   (`floor(now / window)` on the instance's clock, see
///   [`crate::keys::redis_window`]), so Redis's own clock never decides a window.
/// - `ARGV[2i - 1]`: limit `i`'s request count.
/// - `ARGV[2i]`: milliseconds until limit `i`'s window ends: its key expires then.
///
/// Returns one number per key: 1 when the request is within that limit (and
/// was counted), 0 when it is refused (and was not).
pub const COUNT_ALL: &str = r"
local within = {}
for i, key in ipairs(KEYS) do
  local count = tonumber(redis.call('GET', key) or '0')
  if count >= tonumber(ARGV[2 * i - 1]) then
    within[i] = 0
  else
    redis.call('INCR', key)
    if count == 0 then
      redis.call('PEXPIRE', key, ARGV[2 * i])
    end
    within[i] = 1
  end
end
return within
";
