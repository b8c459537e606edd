// The floor of the binding path: a Worker whose fetch calls the binding once
// and answers, with no gate logic (no deadline race, no path or route, no
// 429). The bench writes it over the deployable config's entry.js, so the
// bindings and the in-isolate emulated binding are the gate's own.
export default {
  async fetch(request, env) {
    const key = `address:${request.headers.get("CF-Connecting-IP")}`;
    await env.LIMITS_120_PER_60S.limit({ key });
    return new Response("ok");
  },
};
