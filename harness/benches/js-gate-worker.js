// The JavaScript baseline of the binding path: a plain Worker that does what
// the Rust gate does for `GET /api/items` with a healthy binding, by hand:
// the address from CF-Connecting-IP, one `limit({ key })` on the same
// in-isolate emulated binding raced against its own 500 ms deadline, and a
// JSON answer (200, or 429 with Retry-After). It counts nothing in memory and
// logs nothing: with a healthy binding the Rust gate does neither either.
// The bench writes it over the deployable config's entry.js, so the
// bindings, the extension module and everything else are the same.
const DEADLINE_MS = 500;

export default {
  async fetch(request, env) {
    const path = new URL(request.url).pathname;
    if (!path.startsWith("/api/")) return Response.json({ error: "not_found" }, { status: 404 });
    const key = `address:${(request.headers.get("CF-Connecting-IP") ?? "").trim()}`;
    let timer;
    const deadline = new Promise((resolve) => {
      timer = setTimeout(() => resolve(null), DEADLINE_MS);
    });
    let answer = null;
    try {
      answer = await Promise.race([env.LIMITS_120_PER_60S.limit({ key }), deadline]);
    } catch {
      answer = null;
    }
    clearTimeout(timer);
    if (answer !== null && answer.success === false) {
      return Response.json(
        { error: "rate_limited", retry_after: 60 },
        { status: 429, headers: { "Retry-After": "60" } },
      );
    }
    return Response.json({ ok: true });
  },
};
