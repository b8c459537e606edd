// The main module of the reference core's durable-object service. The
// simulator's RateLimiterObject (miniflare's ratelimit-object.worker.js,
// loaded unchanged from node_modules) reads the time with Date.now(); this
// module gives every Date.now() of its isolate the scenario clock, wall clock
// + an offset the harness sets with `POST /clock {"offset_ms": N}`, and
// re-exports the object, so its windows turn when the scenario's do.
import { RateLimiterObject } from "./ratelimit-object.worker.js";

const wallClock = Date.now.bind(Date);
let offsetMs = 0;
Date.now = () => wallClock() + offsetMs;

export { RateLimiterObject };

export default {
  async fetch(request) {
    const { offset_ms: offset } = await request.json();
    if (!Number.isSafeInteger(offset)) {
      return Response.json({ error: "offset_ms must be a whole number of ms" }, { status: 400 });
    }
    offsetMs = offset;
    return Response.json({ offset_ms: offsetMs, now_ms: Date.now() });
  },
};
