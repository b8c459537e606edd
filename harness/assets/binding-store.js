// The emulated binding's shared count: one workerd process of its own that
// every isolate's emulated binding asks, as Cloudflare's binding counts in a
// store every instance in a location can reach. Counting follows Cloudflare's
// local simulator: a fixed window aligned to the clock per (namespace,
// period, key); when the count has reached the limit the answer is
// {success: false} and nothing is counted; otherwise the call adds its delta
// (validated by ratelimit-binding.js, 1 unless the call set it).
const counters = new Map();

export default {
  async fetch(request) {
    const { namespace, period, limit, key, delta } = await request.json();
    const window = Math.floor(Date.now() / 1000 / period);
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
