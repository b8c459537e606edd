//! The Lua scripts the Redis store runs, in one place (as limitador keeps
//! its own in `scripts.rs`), so the counting rule sent to Redis is read here
//! and nowhere else.

/// Counts one request against each of its limits, atomically, exactly as
/// the in-memory counter does (`crate::counter::WindowCounter`): for each
/// limit, within while the window's count is below the limit, and a refused
/// request is not counted against that limit.
///
/// Redis's own clock (`TIME`) decides which window is running, as
/// go-redis/redis_rate does, so every instance counts a key in the same
/// window whatever its own clock says: an instance whose clock is behind,
/// ahead or stepped cannot open a window again. In a cluster one request's
/// keys share a hash tag, so the one master holding them decides. The script
/// writes (scripts are replicated by their effects, the default since Redis
/// 5 and the only way in 7), so `TIME` is allowed.
///
/// Each key holds its window (`w`, `floor(now / window)`) and the count in
/// it (`n`). A window only moves forward: a key whose window is ahead of
/// this server's clock (a failover to a master whose clock is behind) keeps
/// counting in it until it ends, so no clock going back resets a count. The
/// key expires when its window ends; the window it holds, not the expiry,
/// decides, so an expiry is only the memory given back.
///
/// All of a request's limits go in one call, so the call is one atomic step
/// wherever its keys are: while a Redis Cluster moves their slot (a
/// resharding), Redis answers a call whose keys are not all in one place
/// with ASK or TRYAGAIN before running any of it, so a call sent again is
/// never counted twice. (A pipeline of one call per limit could be half run
/// on the old master and then sent again whole to the new one.)
///
/// - `KEYS[i]`: limit `i`'s key ([`crate::keys::redis_key`]), which names
///   no window: the same key counts every window of it.
/// - `ARGV[1]`: milliseconds added to Redis's clock: the scenario clock's
///   offset in tests (`runtime::Clock::set_offset_ms`, with the `testing`
///   feature), so a scenario moves Redis's windows as it moves the gates';
///   always 0 in production.
/// - `ARGV[2i]`: limit `i`'s request count.
/// - `ARGV[2i + 1]`: limit `i`'s window in milliseconds.
///
/// Returns two numbers per key, in order: 1 when the request is within that
/// limit (and was counted), 0 when it is refused (and was not); then the
/// milliseconds left of that key's window on Redis's clock (at least 1).
pub const COUNT_ALL: &str = r"
if redis.replicate_commands then redis.replicate_commands() end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) + tonumber(ARGV[1])
local answers = {}
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[2 * i])
  local window = tonumber(ARGV[2 * i + 1])
  local running = math.floor(now / window)
  local held = redis.call('HMGET', key, 'w', 'n')
  local w = tonumber(held[1])
  local n = tonumber(held[2]) or 0
  if w == nil or w < running then
    w = running
    n = 0
  end
  local left = (w + 1) * window - now
  if n >= limit then
    answers[2 * i - 1] = 0
  else
    redis.call('HSET', key, 'w', string.format('%d', w), 'n', n + 1)
    redis.call('PEXPIRE', key, string.format('%d', left))
    answers[2 * i - 1] = 1
  end
  answers[2 * i] = left
end
return answers
";
