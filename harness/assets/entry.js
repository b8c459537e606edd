// The Worker's entry module, generated configs load it beside the
// wasm-bindgen glue (deployable.js) and the wasm (deployable_bg.wasm) of
// any of the Rust Workers (harness/src/world/wasm.rs): each exports
// fetch(request, env[, ctx]), its gate reading Date.now() itself, and
// set_clock_offset_ms(offset, env), which shifts that gate's clock by the
// scenario clock's offset.
//
// Production traffic goes straight to the Rust deployable. Requests carrying
// the harness's control header (its random token is the HARNESS_CONTROL_TOKEN
// text binding) change the emulated bindings' behaviour or read what reached
// them, so a scenario can change a binding mid-run without restarting workerd:
//
//   POST /bindings  {"NAME": behaviour, ...}  behaviour: "missing" hides the
//                   binding from the deployable; anything else shows it and is
//                   passed to the emulated binding's __harnessSetBehaviour.
//   GET  /bindings  {"NAME": stats, ...} for every binding in the config
//                   (ratelimit-binding.js's __harnessStats: counts, keys and
//                   the deployable's calls, timed).
//   POST /limit     {"binding": NAME, "options"?: any, "pending_after_ms": N}
//                   one raw limit() call (no argument when `options` is absent),
//                   answered as {"settled": "resolved", "value"} |
//                   {"settled": "rejected"|"threw", "error": {name, message}} |
//                   {"settled": "pending"} (not settled after N ms) |
//                   {"settled": "missing"} (hidden from the deployable).
//   POST /clock     {"offset_ms": N}: from now on the deployable's clock is
//                   Date.now() + N (the scenario clock; 0 until set), and so
//                   is that of the emulated bindings counting here. The
//                   gate's clock takes the offset only in a build with
//                   runtime's `testing` feature; timers (the 500 ms
//                   deadline) stay real.
//   GET  /data_points  what the emulated dataset binding received
//                   (data-points-binding.js's __harnessPoints()), named by
//                   the HARNESS_DATA_POINTS text binding; {"points": []} when
//                   the config has none (no dataset, or a missing binding).
import wasmModule from "./deployable_bg.wasm";
import * as deployable from "./deployable.js";

deployable.initSync({ module: wasmModule });

const CONTROL_HEADER = "x-harness-control";
let hidden = null;
let clockOffsetMs = 0;


function bindingNames(env) {
  return JSON.parse(env.HARNESS_BINDINGS);
}

function hiddenSet(env) {
  if (hidden === null) hidden = new Set(JSON.parse(env.HARNESS_HIDDEN));
  return hidden;
}

function visibleEnv(env) {
  const hide = hiddenSet(env);
  if (hide.size === 0) return env;
  return new Proxy(env, { get: (target, key) => (hide.has(key) ? undefined : target[key]) });
}

function errorFields(error) {
  return { name: error?.name ?? typeof error, message: error?.message ?? String(error) };
}

async function rawLimit(request, env) {
  const { binding, options, pending_after_ms: pendingAfter } = await request.json();
  if (!bindingNames(env).includes(binding) || env[binding] === undefined) {
    return Response.json({ error: `binding ${binding} is not in this config` }, { status: 400 });
  }
  if (hiddenSet(env).has(binding)) return Response.json({ settled: "missing" });
  let promise;
  try {
    // The harness's call, not the deployable's: left out of the binding's call log.
    promise = options === undefined ? env[binding].__harnessRawLimit() : env[binding].__harnessRawLimit(options);
  } catch (error) {
    return Response.json({ settled: "threw", error: errorFields(error) });
  }
  let timer;
  const pending = new Promise((resolve) => {
    timer = setTimeout(() => resolve({ settled: "pending" }), pendingAfter);
  });
  const settled = Promise.resolve(promise).then(
    (value) => ({ settled: "resolved", value }),
    (error) => ({ settled: "rejected", error: errorFields(error) }),
  );
  const answer = await Promise.race([settled, pending]);
  clearTimeout(timer);
  return Response.json(answer);
}

async function setClock(request, env) {
  const { offset_ms: offset } = await request.json();
  if (!Number.isSafeInteger(offset) || offset < 0) {
    return Response.json({ error: `offset_ms must be a whole number of ms >= 0, not ${offset}` }, { status: 400 });
  }
  clockOffsetMs = offset;
  deployable.set_clock_offset_ms(offset, env);
  // An emulated binding counting in this isolate (no store) reads the same clock.
  for (const name of bindingNames(env)) env[name]?.__harnessSetClock(offset);
  return Response.json({ offset_ms: clockOffsetMs });
}

function dataPoints(env) {
  const name = env.HARNESS_DATA_POINTS;
  const dataset = name === undefined ? undefined : env[name];
  if (dataset === undefined) return Response.json({ binding: name ?? null, points: [] });
  return Response.json({ binding: name, ...dataset.__harnessPoints() });
}

async function control(request, env) {
  const path = new URL(request.url).pathname;
  if (path === "/data_points" && request.method === "GET") return dataPoints(env);
  if (path === "/clock" && request.method === "POST") return setClock(request, env);
  if (path === "/limit" && request.method === "POST") return rawLimit(request, env);
  const hide = hiddenSet(env);
  const names = bindingNames(env);
  if (request.method === "POST") {
    const wanted = await request.json();
    for (const [name, behaviour] of Object.entries(wanted)) {
      if (!names.includes(name) || env[name] === undefined) {
        return Response.json({ error: `binding ${name} is not in this config` }, { status: 400 });
      }
      if (behaviour === "missing") {
        hide.add(name);
      } else {
        hide.delete(name);
        env[name].__harnessSetBehaviour(behaviour);
      }
    }
  }
  const stats = {};
  for (const name of names) {
    if (env[name] !== undefined) stats[name] = { ...env[name].__harnessStats(), hidden: hide.has(name) };
  }
  return Response.json(stats);
}

export default {
  async fetch(request, env, ctx) {
    const token = request.headers.get(CONTROL_HEADER);
    if (token !== null && token === env.HARNESS_CONTROL_TOKEN) return control(request, env);
    return deployable.fetch(request, visibleEnv(env), ctx);
  },
};
