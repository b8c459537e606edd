// The reference core's process: its socket's worker. Counting requests go to
// Cloudflare's simulator exactly as miniflare routes them (its
// object-entry.worker.js, service `ratelimit:ns:entry`, which picks the
// RateLimiterObject named by the `MF-Namespace` header that
// forward.js adds). `POST /clock {"offset_ms": N}` sets the scenario clock
// of the isolate the RateLimiterObject runs in (see clock.js).
export default {
  async fetch(request, env) {
    if (new URL(request.url).pathname === "/clock") return env.CLOCK.fetch(request);
    return env.ENTRY.fetch(request);
  },
};
