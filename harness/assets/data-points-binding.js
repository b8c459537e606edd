// The harness's Workers Analytics Engine dataset binding for a real workerd
// (workerd has none of its own; miniflare emulates it as a wrapped binding
// too, analytics-engine.worker.js): the Worker's data points, kept so the
// harness can read what the dataset received.
//
// Load it as an internal extension module and expose it through a wrapped
// binding, under the name the Worker's plan gives (`data_points NAME`):
//
//   extensions = [ ( modules = [ ( name = "harness:data-points", internal = true,
//                                  esModule = embed "data-points-binding.js" ) ] ) ],
//   ...
//   bindings = [ ( name = "RATE_LIMIT_DATA_POINTS", wrapped = (
//       moduleName = "harness:data-points",
//       innerBindings = [
//         ( name = "dataset",   text = "rate_limits" ),  # the dataset's name
//         ( name = "behaviour", text = "recording" ),    # or "throwing"
//       ] ) ) ]
//
// "recording" keeps every point; "throwing" makes writeDataPoint throw, as
// a binding in trouble might. A missing dataset binding is left out of the
// config; this module plays no part in it.
//
// Points are kept in module scope (per isolate), by what they carry: each
// distinct (blobs, doubles, indexes) with how many times it was written and
// when first and last (ms since the epoch, the real clock), so a flood of
// requests keeps one entry per label set, and a point carrying a key keeps
// an entry per key, where the harness sees it.
// Harness-only method (never part of the real API), used by entry.js:
//   __harnessPoints()  {dataset, behaviour, written, thrown,
//                       points: [{blobs, doubles, indexes, count, first_ms, last_ms}]}

// JSON of [blobs, doubles, indexes] -> { count, first_ms, last_ms }
const points = new Map();
let written = 0;
let thrown = 0;

// A point's field as written, as an array (a missing one as []), so an odd
// point is kept as it came for the harness to judge.
function field(point, name) {
  const value = point?.[name];
  if (value === undefined) return [];
  return Array.isArray(value) ? Array.from(value, (v) => (typeof v === "number" ? v : String(v))) : [String(value)];
}

class Dataset {
  #dataset;
  #behaviour;

  constructor(env) {
    this.#dataset = String(env.dataset ?? "");
    this.#behaviour = String(env.behaviour ?? "recording");
    if (this.#behaviour !== "recording" && this.#behaviour !== "throwing") {
      throw new TypeError(`harness data points: unknown behaviour ${JSON.stringify(this.#behaviour)}`);
    }
  }

  // Synchronous, as Cloudflare's is: the Worker never awaits it.
  writeDataPoint(point) {
    if (this.#behaviour === "throwing") {
      thrown++;
      throw new Error("harness data points: writeDataPoint threw (behaviour=throwing)");
    }
    written++;
    const id = JSON.stringify([field(point, "blobs"), field(point, "doubles"), field(point, "indexes")]);
    const now = Date.now();
    const entry = points.get(id);
    if (entry === undefined) {
      points.set(id, { count: 1, first_ms: now, last_ms: now });
    } else {
      entry.count++;
      entry.last_ms = now;
    }
  }

  __harnessPoints() {
    const list = [];
    for (const [id, entry] of points) {
      const [blobs, doubles, indexes] = JSON.parse(id);
      list.push({ blobs, doubles, indexes, ...entry });
    }
    return { dataset: this.#dataset, behaviour: this.#behaviour, written, thrown, points: list };
  }
}

export default function makeDataset(env) {
  return new Dataset(env);
}
