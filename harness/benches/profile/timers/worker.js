// What a deadline costs workerd: GET /api/VARIANT does K of one timer
// primitive per request, `/api/none` none (the baseline). Measured with
// instructions.sh (timers.sh runs every variant); (variant - none) / K is
// the cost of one, in instructions (BENCHMARKS-log.md, "Issue 10, fourth pass").
const K = 20;
const noop = () => {};

export default {
  fetch(request) {
    switch (new URL(request.url).pathname) {
      case "/api/settimeout": // armed, then cleared: the race the gate runs
        for (let i = 0; i < K; i++) clearTimeout(setTimeout(noop, 500));
        break;
      case "/api/noclear": // armed and left to be dropped with the request
        for (let i = 0; i < K; i++) setTimeout(noop, 500);
        break;
      case "/api/wait": // scheduler.wait: a promise, nothing to clear
        for (let i = 0; i < K; i++) scheduler.wait(500);
        break;
      case "/api/abort": // AbortSignal.timeout, no listener yet
        for (let i = 0; i < K; i++) AbortSignal.timeout(500);
        break;
      case "/api/abortlisten": // the same with the listener a race needs
        for (let i = 0; i < K; i++) AbortSignal.timeout(500).addEventListener("abort", noop);
        break;
      default:
        break;
    }
    return new Response("ok");
  },
};
