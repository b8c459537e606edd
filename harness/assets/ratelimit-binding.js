// Harness emulation of Cloudflare's Rate Limiting binding, for a real workerd.
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
//         ( name = "store",     service = "binding-store" ), # optional, shared count
//       ] ) ) ]
//
// Every inner binding except `name` is optional: namespace defaults to the
// binding name, limit to 10, period to 60, behaviour to "healthy".
//
// Behaviours (initial value from `behaviour`, changeable at runtime with
// `env.LIMITER.__harnessSetBehaviour(b)`):
//   "healthy"       count like miniflare's simulator, resolve {success: boolean}
//   "throwing"      limit() throws synchronously
//   "rejecting"     limit() returns a rejected promise
//   "malformed"     limit() resolves to {ok: true} (no boolean `success`)
//   {"slow_ms": N}  the healthy answer, delivered after N ms (setTimeout)
//   "hanging"       limit() returns a promise that never settles
// A "missing" binding is modelled by leaving the binding out of the config;
// this module plays no part in it.
//
// With a `store` service binding, the count is kept there (binding-store.js),
// shared by every isolate that binds the same store, as the real binding's
// count is shared by a location's instances; without one, in this module.
//
// Counting follows miniflare: fixed windows aligned to the wall clock, window
// index = floor(Date.now() / 1000 / period); counters are per (namespace,
// period, key), so two bindings sharing a namespace id share counters. When the
// count is already >= limit the call answers {success: false} and does not
// count; otherwise it counts and answers {success: true}.
//
// Validation follows miniflare's client too: options must be an object whose
// only properties are `key`, `limit` and `period` (key defaults to "", limit
// and period to the configured ones); key must be a string, limit and period
// numbers, period 10 or 60. A violation rejects the returned promise with a
// plain Error carrying miniflare's message (e.g. "invalid rate limit options",
// "invalid key: 5", "unsupported period: 1"). `delta` is NOT supported because
// miniflare does not support it: {key, delta} rejects with
// "bad rate limit options: [delta]". The configured period is only checked at
// call time, as in miniflare.
//
// State lives in module scope, so it is per isolate (per workerd service) and
// shared by every Ratelimit instance of the same binding name in that isolate.
// Harness-only methods (never part of the real API), used by entry.js:
//   __harnessSetBehaviour(b)  validate and install a behaviour, returns it
//   __harnessStats()          {binding, namespace, limit, period, behaviour,
//                             calls, invalid, keys: {key: callCount}}; the
//                             keys are every string key that reached limit(),
//                             whatever the behaviour

const OPTION_KEYS = ["key", "limit", "period"];
const PERIODS = [10, 60];
const NAMED_BEHAVIOURS = ["healthy", "throwing", "rejecting", "malformed", "hanging"];

// binding name -> { behaviour, calls, invalid, keys: Map<string, number> }
const bindingStates = new Map();
// namespace id -> Map<`${period}:${key}`, { window, count }>
const namespaceCounters = new Map();

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

class Ratelimit {
  #name;
  #namespace;
  #limit;
  #period;
  #state;
  #store;

  constructor(env) {
    this.#store = env.store ?? null;
    this.#name = String(env.name ?? "RATE_LIMITER");
    this.#namespace = String(env.namespace ?? this.#name);
    this.#limit = env.limit ?? 10;
    this.#period = env.period ?? 60;
    let state = bindingStates.get(this.#name);
    if (state === undefined) {
      state = {
        behaviour: normaliseBehaviour(env.behaviour),
        calls: 0,
        invalid: 0,
        keys: new Map(),
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
    const behaviour = state.behaviour;
    switch (behaviour) {
      case "throwing":
        throw new Error("harness ratelimit: binding threw (behaviour=throwing)");
      case "rejecting":
        return Promise.reject(new Error("harness ratelimit: binding rejected (behaviour=rejecting)"));
      case "malformed":
        return Promise.resolve({ ok: true });
      case "hanging":
        return new Promise(() => {});
    }
    let outcome;
    try {
      outcome = this.#count(options);
    } catch (err) {
      state.invalid++;
      return Promise.reject(err);
    }
    if (typeof behaviour === "object") {
      return new Promise((resolve) => setTimeout(() => resolve(outcome), behaviour.slow_ms));
    }
    return Promise.resolve(outcome);
  }

  #count(options) {
    check(typeof options === "object" && options !== null, "invalid rate limit options");
    const extra = Object.keys(options).filter((k) => !OPTION_KEYS.includes(k));
    check(extra.length === 0, `bad rate limit options: [${extra.join(",")}]`);
    const { key = "", limit = this.#limit, period = this.#period } = options;
    check(typeof key === "string", `invalid key: ${key}`);
    check(typeof limit === "number", `limit must be a number: ${limit}`);
    check(typeof period === "number", `period must be a number: ${period}`);
    check(PERIODS.includes(period), `unsupported period: ${period}`);

    if (this.#store !== null) {
      const body = JSON.stringify({ namespace: this.#namespace, period, limit, key });
      return this.#store
        .fetch("http://binding-store/limit", { method: "POST", body })
        .then((response) => response.json());
    }
    const window = Math.floor(Date.now() / 1000 / period);
    const map = counters(this.#namespace);
    const id = `${period}:${key}`;
    let bucket = map.get(id);
    if (bucket === undefined || bucket.window !== window) {
      bucket = { window, count: 0 };
      map.set(id, bucket);
    }
    if (bucket.count >= limit) return { success: false };
    bucket.count++;
    return { success: true };
  }

  __harnessSetBehaviour(behaviour) {
    this.#state.behaviour = normaliseBehaviour(behaviour);
    return this.#state.behaviour;
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
    };
  }
}

export default function makeRatelimit(env) {
  return new Ratelimit(env);
}
