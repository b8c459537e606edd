// The emulated binding's shared count: one workerd process of its own that
// every isolate's emulated binding asks, as Cloudflare's binding counts in a
// store every instance in a location can reach. Counting follows Cloudflare's
// local simulator: a fixed window aligned to the clock per (namespace,
// period, key); when the count has reached the limit the answer is
// {success: false} and nothing is counted; otherwise the call adds its delta
// (validated by ratelimit-binding.js, 1 unless the call set it).
//
// One process serves a whole run (harness/src/world/workerd/store.rs): every
// scenario counts in a scope of its own, with its own counters and its own
// clock, so no scenario sees another's counts or time.
//
//   POST /limit   {scope, namespace, period, limit, key, delta} -> {success}
//   POST /clock   {scope, offset_ms: N}: the scope's clock becomes
//                 Date.now() + N, the scenario clock every isolate of the
//                 scenario reads too (0 until set, so a wall-clock scenario
//                 counts on Date.now()).
//   POST /forget  {scope}: drops the scope (its scenario has ended).
const scopes = new Map();

function scopeOf(name) {
  if (typeof name !== "string" || name === "") {
    throw new TypeError(`scope must be a non-empty string, not ${JSON.stringify(name)}`);
  }
  let scope = scopes.get(name);
  if (scope === undefined) {
    scope = { clockOffsetMs: 0, counters: new Map() };
    scopes.set(name, scope);
  }
  return scope;
}

function setClock(scope, offset) {
  if (!Number.isSafeInteger(offset) || offset < 0) {
    return Response.json({ error: `offset_ms must be a whole number of ms >= 0, not ${offset}` }, { status: 400 });
  }
  scope.clockOffsetMs = offset;
  return Response.json({ offset_ms: offset });
}

function limit(scope, { namespace, period, limit, key, delta }) {
  const window = Math.floor((Date.now() + scope.clockOffsetMs) / 1000 / period);
  const id = `${namespace}\u0000${period}\u0000${key}`;
  let bucket = scope.counters.get(id);
  if (bucket === undefined || bucket.window !== window) {
    bucket = { window, count: 0 };
    scope.counters.set(id, bucket);
  }
  if (bucket.count >= limit) return Response.json({ success: false });
  bucket.count += delta;
  return Response.json({ success: true });
}

export default {
  async fetch(request) {
    const body = await request.json();
    const path = new URL(request.url).pathname;
    let scope;
    try {
      scope = scopeOf(body.scope);
    } catch (error) {
      return Response.json({ error: error.message }, { status: 400 });
    }
    switch (path) {
      case "/limit":
        return limit(scope, body);
      case "/clock":
        return setClock(scope, body.offset_ms);
      case "/forget":
        scopes.delete(body.scope);
        return Response.json({ forgotten: body.scope });
    }
    return Response.json({ error: `no such path: ${path}` }, { status: 404 });
  },
};
