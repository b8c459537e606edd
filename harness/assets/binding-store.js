// The emulated binding's shared count: one workerd process of its own that
// every isolate's emulated binding asks, as Cloudflare's binding counts in a
// store every instance in a location can reach. Counting follows Cloudflare's
// local simulator: a fixed window aligned to the clock per (namespace,
// period, key); when the count has reached the limit the answer is
// {success: false} and nothing is counted; otherwise the call adds its delta
// (validated by ratelimit-binding.js, 1 unless the call set it).
//
//   POST /limit  {namespace, period, limit, key, delta} -> {success}
//   POST /clock  {"offset_ms": N}: the store's clock becomes Date.now() + N,
//                the scenario clock every isolate of the scenario reads too
//                (0 until set, so a wall-clock scenario counts on Date.now()).
const counters = new Map();
let clockOffsetMs = 0;

function setClock(offset) {
  if (!Number.isSafeInteger(offset) || offset < 0) {
    return Response.json({ error: `offset_ms must be a whole number of ms >= 0, not ${offset}` }, { status: 400 });
  }
  clockOffsetMs = offset;
  return Response.json({ offset_ms: clockOffsetMs });
}

export default {
  async fetch(request) {
    const body = await request.json();
    if (new URL(request.url).pathname === "/clock") return setClock(body.offset_ms);
    const { namespace, period, limit, key, delta } = body;
    const window = Math.floor((Date.now() + clockOffsetMs) / 1000 / period);
    const id = `${namespace}\u0000${period}\u0000${key}`;
    let bucket = counters.get(id);
    if (bucket === undefined || bucket.window !== window) {
      bucket = { window, count: 0 };
      counters.set(id, bucket);
    }
    if (bucket.count >= limit) return Response.json({ success: false });
    bucket.count += delta;
    return Response.json({ success: true });
  },
};
