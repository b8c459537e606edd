// In each isolate's workerd: the `fetcher` of Cloudflare's simulator client
// (miniflare's ratelimit.worker.js). miniflare binds it to its object entry
// with props {"MINIFLARE_NAMESPACE": namespace_id}; the count here lives in
// another process shared by every isolate, so this worker carries the
// namespace across as the entry's `MF-Namespace` header.
export default {
  async fetch(request, env, ctx) {
    const headers = new Headers(request.headers);
    headers.set("MF-Namespace", ctx.props.MINIFLARE_NAMESPACE);
    return env.STORE.fetch(new Request(request, { headers }));
  },
};
