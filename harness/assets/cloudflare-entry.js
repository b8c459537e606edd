// The Worker's entry module on Cloudflare itself (`harness cloudflare`): the
// production entry README.md describes, beside the same wasm-bindgen glue
// (deployable.js, its snippets/) and wasm (deployable_bg.wasm) the local run
// uses. The local run's entry.js adds the scenario clock and the harness's
// control channel to this; neither exists on Cloudflare, where the binding
// is the real one and the clock is Date.now().
import wasmModule from "./deployable_bg.wasm";
import { initSync, fetch as handle } from "./deployable.js";

initSync({ module: wasmModule });

export default {
  fetch: (request, env) => handle(request, env, Date.now()),
};
