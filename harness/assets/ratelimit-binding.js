// The harness's Rate Limiting binding for a real workerd: a fault layer
// (missing, throwing, rejecting, malformed, slow, hanging) around a counting
// core, which is either the harness's own (below, counting in count-server.js)
// or Cloudflare's simulator (miniflare's ratelimit.worker.js, wired by the
// harness as the inner wrapped binding `core`).
//
// Load it as an internal extension module and expose it through a wrapped
// binding:
//
//   extensions = [ ( modules = [ ( name = "harness:ratelimit", internal = true,
//                                  esModule = embed "ratelimit-binding.js" ) ] ) ],
//   ...
//   bindings = [ ( name = "LIMITER", wrapped = (
//       moduleName = "harness:ratelimit",
//       innerBindings = [
//         ( name = "name",      text = "LIMITER" ),     # binding name; keys the shared state
//         ( name = "namespace", text = "1001" ),        # namespace_id; keys the counters
//         ( name = "limit",     json = "3" ),           # requests allowed per window
//         ( name = "period",    json = "60" ),          # window length in seconds (10 or 60)
//         ( name = "behaviour", json = "\"healthy\"" ), # optional, initial behaviour
//         # the counting core, at most one of:
//         ( name = "store",     service = "count-server" ), # the harness's core, shared
//         ( name = "scope",     text = "scenario-1" ),       # with `store`: the scenario's scope in it
//         ( name = "core",      wrapped = ( moduleName = "cloudflare-internal:ratelimit:module",
//                                           innerBindings = [ fetcher, limit, period ] ) ),
//       ] ) ) ]
//
// Every inner binding except `name` is optional: namespace defaults to the
// binding name, limit to 10, period to 60, behaviour to "healthy"; with
// neither `store` nor `core` the harness's core counts in this module.
//
// Behaviours (initial value from `behaviour`, changeable at runtime with
// `env.LIMITER.__harnessSetBehaviour(b)`) are the fault layer, the same for
// either core:
//   "healthy"       ask the core, resolve with its answer
//   "throwing"      limit() throws synchronously
//   "rejecting"     limit() returns a rejected promise
//   "malformed"     limit() resolves to {ok: true} (no boolean `success`)
//   {"slow_ms": N}  the core's answer, delivered after N ms (setTimeout)
//   "hanging"       limit() returns a promise that never settles
// A "missing" binding is modelled by leaving the binding out of the config
// (or hiding it, entry.js); this module plays no part in it.
//
// The harness's core follows the pinned simulator (miniflare
// 5.20261117.0-beta, dist/src/workers/ratelimit/*.js), and the differential
// check (harness/tests/differential.rs) runs every scenario on both cores:
// - validation, in the simulator's order and with its messages; a violation
//   rejects the returned promise: options must be an object ("invalid rate
//   limit options") whose only properties are key, limit, period and delta
//   ("bad rate limit options: [x,y]"); key defaults to "", limit and period to
//   the configured ones, delta to 1; key must be a string ("invalid key: 5"),
//   limit and period numbers ("limit must be a number: x"), period 10 or 60
//   ("unsupported period: 30"). delta is converted like a WebIDL unsigned
//   long: TypeError "The value cannot be converted because it is not an
//   integer." (not finite), "...because it is negative and this API expects a
//   positive number." (< 0), "Value out of range. Must be less than or equal
//   to 4294967295." (too big); truncated, and RangeError "delta must be
//   non-zero" when that leaves 0.
// - counting: fixed windows aligned to the clock, window index =
//   floor(now_ms / (period * 1000)); counters per (namespace, period, key).
//   When the count is already >= limit the call answers {success: false} and
//   does not count; otherwise it adds delta and answers {success: true}.
//
// State lives in module scope, so it is per isolate (per workerd service) and
// shared by every Ratelimit instance of the same binding name in that isolate.
// Harness-only methods (never part of the real API), used by entry.js:
//   __harnessSetBehaviour(b)  validate and install a behaviour, returns it
//   __harnessSetClock(ms)     the scenario clock's offset for a core with no
//                             store (every binding of the isolate shares it)
//   __harnessStats()          {binding, namespace, limit, period, behaviour,
//                             calls, invalid, keys: {key: callCount}, log,
//                             log_dropped}; the keys are every string key
//                             that reached limit(), whatever the behaviour;
//                             `invalid` counts the calls the core rejected;
//                             `log` is the deployable's calls in order, each
//                             [Date.now() at the call, outcome, ms until it
//                             settled or null], outcome one of "answered"
//                             (a boolean `success`), "malformed" (resolved
//                             without one), "rejected", "threw" or "pending"
//                             (not settled yet): no key. The report page
//                             draws each binding's cool-off and probe from
//                             it. It keeps the first LOG_MAX calls;
//                             `log_dropped` counts the rest.
//   __harnessRawLimit(o)      limit(o) as entry.js's raw `limit` step calls
//                             it: counted and keyed as any call, left out of
//                             `log` (the harness's call, not the deployable's)

const OPTION_KEYS = ["key", "limit", "period", "delta"];
const PERIODS = [10, 60];
const MAX_UINT32 = 4294967295;
const NAMED_BEHAVIOURS = ["healthy", "throwing", "rejecting", "malformed", "hanging"];

// binding name -> { behaviour, calls, invalid, keys: Map<string, number>,
//                   log: [[at, outcome, settledAfter]], logDropped }
const bindingStates = new Map();
// The most calls a binding's log keeps in one isolate: far more than any
// scenario makes, and a bound for a long load run.
const LOG_MAX = 10000;
// namespace id -> Map<`${period}:${key}`, { window, count }>, for a core with no store
const namespaceCounters = new Map();
// The scenario clock of a core with no store: Date.now() + this (entry.js sets
// it with __harnessSetClock when the harness moves the clock; 0 until then).
let clockOffsetMs = 0;

function normaliseBehaviour(value) {
  if (value === undefined || value === null) return "healthy";
  if (typeof value === "string" && NAMED_BEHAVIOURS.includes(value)) return value;
  if (typeof value === "object" && !Array.isArray(value)) {
    const props = Object.keys(value);
    const ms = value.slow_ms;
    if (props.length === 1 && Number.isInteger(ms) && ms >= 0) return { slow_ms: ms };
  }
  throw new TypeError(`harness ratelimit: unknown behaviour ${JSON.stringify(value)}`);
}

function counters(namespace) {
  let map = namespaceCounters.get(namespace);
  if (map === undefined) {
    map = new Map();
    namespaceCounters.set(namespace, map);
  }
  return map;
}

function check(ok, message) {
  if (!ok) throw new Error(message);
}

// The simulator's conversion of `delta` (a WebIDL unsigned long that must not be 0).
function toDelta(delta) {
  const value = +delta;
  if (!Number.isFinite(value)) {
    throw new TypeError("The value cannot be converted because it is not an integer.");
  }
  if (value < 0) {
    throw new TypeError(
      "The value cannot be converted because it is negative and this API expects a positive number.",
    );
  }
  if (value > MAX_UINT32) {
    throw new TypeError(`Value out of range. Must be less than or equal to ${MAX_UINT32}.`);
  }
  const truncated = Math.trunc(value);
  if (truncated === 0) throw new RangeError("delta must be non-zero");
  return truncated;
}

// The harness's own counting core: the simulator's validation, then a count
// in the shared store (or in this module without one).
class HarnessCore {
  #namespace;
  #limit;
  #period;
  #store;
  #scope;

  constructor(namespace, limit, period, store, scope) {
    this.#namespace = namespace;
    this.#limit = limit;
    this.#period = period;
    this.#store = store;
    this.#scope = scope;
  }

  // The answer: the object itself when it is known at once (no store),
  // else a promise of it (asked of the store). A validation error is thrown
  // here; Ratelimit.limit turns it into a rejection, so a caller sees what
  // the simulator's async method gives (a rejected promise, never a throw)
  // without the promises an async method costs on every healthy call.
  answer(options) {
    check(typeof options === "object" && options !== null, "invalid rate limit options");
    const names = Object.keys(options);
    for (let i = 0; i < names.length; i++) {
      if (!OPTION_KEYS.includes(names[i])) {
        const extra = names.filter((k) => !OPTION_KEYS.includes(k));
        check(false, `bad rate limit options: [${extra.join(",")}]`);
      }
    }
    const { key = "", limit = this.#limit, period = this.#period, delta = 1 } = options;
    check(typeof key === "string", `invalid key: ${key}`);
    check(typeof limit === "number", `limit must be a number: ${limit}`);
    check(typeof period === "number", `period must be a number: ${period}`);
    check(PERIODS.includes(period), `unsupported period: ${period}`);
    const weight = toDelta(delta);

    if (this.#store !== null) return this.#askStore(key, limit, period, weight);
    const window = Math.floor((Date.now() + clockOffsetMs) / (period * 1000));
    const map = counters(this.#namespace);
    const id = `${period}:${key}`;
    let bucket = map.get(id);
    if (bucket === undefined || bucket.window !== window) {
      bucket = { window, count: 0 };
      map.set(id, bucket);
    }
    if (bucket.count >= limit) return { success: false };
    bucket.count += weight;
    return { success: true };
  }

  async #askStore(key, limit, period, weight) {
    const body = JSON.stringify({
      scope: this.#scope,
      namespace: this.#namespace,
      period,
      limit,
      key,
      delta: weight,
    });
    const response = await this.#store.fetch("http://count-server/limit", { method: "POST", body });
    return response.json();
  }
}

// Resolves or rejects as `promise` did, `ms` later.
function delayed(promise, ms) {
  const settled = promise.then(
    (value) => ({ value }),
    (error) => ({ error }),
  );
  return new Promise((resolve, reject) => {
    setTimeout(() => {
      settled.then((s) => ("error" in s ? reject(s.error) : resolve(s.value)));
    }, ms);
  });
}

// A new entry of `state`'s call log, "pending" until it settles; null
// once the log is full.
function logged(state) {
  if (state.log.length >= LOG_MAX) {
    state.logDropped++;
    return null;
  }
  const entry = [Date.now(), "pending", null];
  state.log.push(entry);
  return entry;
}

// `promise`, its settling noted in `entry` (when there is one): how it
// settled and how long after the call.
function watched(entry, promise) {
  if (entry === null) return promise;
  promise.then(
    (value) => {
      entry[1] = typeof value?.success === "boolean" ? "answered" : "malformed";
      entry[2] = Date.now() - entry[0];
    },
    () => {
      entry[1] = "rejected";
      entry[2] = Date.now() - entry[0];
    },
  );
  return promise;
}

class Ratelimit {
  #name;
  #namespace;
  #limit;
  #period;
  #state;
  #core;
  #raw = false;

  constructor(env) {
    this.#name = String(env.name ?? "RATE_LIMITER");
    this.#namespace = String(env.namespace ?? this.#name);
    this.#limit = env.limit ?? 10;
    this.#period = env.period ?? 60;
    this.#core =
      env.core ??
      new HarnessCore(this.#namespace, this.#limit, this.#period, env.store ?? null, String(env.scope ?? ""));
    let state = bindingStates.get(this.#name);
    if (state === undefined) {
      state = {
        behaviour: normaliseBehaviour(env.behaviour),
        calls: 0,
        invalid: 0,
        keys: new Map(),
        log: [],
        logDropped: 0,
      };
      bindingStates.set(this.#name, state);
    }
    this.#state = state;
  }

  // Not `async`: the "throwing" behaviour must throw synchronously.
  limit(options) {
    const state = this.#state;
    state.calls++;
    if (options !== null && typeof options === "object" && typeof options.key === "string") {
      state.keys.set(options.key, (state.keys.get(options.key) ?? 0) + 1);
    }
    const entry = this.#raw ? null : logged(state);
    const behaviour = state.behaviour;
    switch (behaviour) {
      case "throwing":
        if (entry !== null) entry[1] = "threw";
        throw new Error("harness ratelimit: binding threw (behaviour=throwing)");
      case "rejecting":
        return watched(entry, Promise.reject(new Error("harness ratelimit: binding rejected (behaviour=rejecting)")));
      case "malformed":
        return watched(entry, Promise.resolve({ ok: true }));
      case "hanging":
        return new Promise(() => {});
    }
    const outcome = this.#ask(options, state);
    return watched(entry, typeof behaviour === "object" ? delayed(outcome, behaviour.slow_ms) : outcome);
  }

  // limit(), left out of the log: the raw `limit` step's call.
  __harnessRawLimit(...args) {
    this.#raw = true;
    try {
      return this.limit(...args);
    } finally {
      this.#raw = false;
    }
  }

  // The core's answer as a promise; a validation error is a rejection, never
  // a throw (both cores behave as the simulator's async method), counted in
  // `invalid`, as is any other rejection of the core.
  #ask(options, state) {
    const core = this.#core;
    if (core instanceof HarnessCore) {
      let answer;
      try {
        answer = core.answer(options);
      } catch (error) {
        state.invalid++;
        return Promise.reject(error);
      }
      if (!(answer instanceof Promise)) return Promise.resolve(answer);
      return answer.catch((error) => {
        state.invalid++;
        throw error;
      });
    }
    return Promise.resolve()
      .then(() => core.limit(options))
      .catch((error) => {
        state.invalid++;
        throw error;
      });
  }

  __harnessSetBehaviour(behaviour) {
    this.#state.behaviour = normaliseBehaviour(behaviour);
    return this.#state.behaviour;
  }

  // The scenario clock's offset for a core with no store (module-wide: one
  // clock per isolate); a store keeps its own clock for the scenario.
  __harnessSetClock(offsetMs) {
    if (!Number.isSafeInteger(offsetMs) || offsetMs < 0) {
      throw new TypeError(`harness ratelimit: clock offset must be a whole number of ms >= 0, not ${offsetMs}`);
    }
    clockOffsetMs = offsetMs;
    return clockOffsetMs;
  }

  __harnessStats() {
    const s = this.#state;
    return {
      binding: this.#name,
      namespace: this.#namespace,
      limit: this.#limit,
      period: this.#period,
      behaviour: s.behaviour,
      calls: s.calls,
      invalid: s.invalid,
      keys: Object.fromEntries(s.keys),
      log: s.log,
      log_dropped: s.logDropped,
    };
  }
}

export default function makeRatelimit(env) {
  return new Ratelimit(env);
}
