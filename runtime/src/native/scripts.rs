//! The Lua scripts the Redis store runs, in one place (as limitador keeps
//! its own in `scripts.rs`), so the counting rule sent to Redis is read here
//! and nowhere else.

/// Counts one request against one limit, atomically, exactly as the
/// in-memory counter does (`crate::counter::WindowCounter`): within while the
/// window's count is below the limit, and a refused request is not counted.
///
/// - `KEYS[1]`: the window's key. It already names the window
///   (`floor(now / window)` on the instance's clock, see
///   [`crate::keys::redis_window`]), so Redis's own clock never decides a window.
/// - `ARGV[1]`: the limit's request count.
/// - `ARGV[2]`: milliseconds until the window ends: the key expires then.
///
/// Returns 1 when the request is within the limit (and was counted), 0 when
/// it is refused (and was not).
pub const COUNT_ONE: &str = r"
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if count >= tonumber(ARGV[1]) then
  return 0
end
redis.call('INCR', KEYS[1])
if count == 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
";
