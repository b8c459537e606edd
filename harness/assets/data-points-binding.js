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
// distinct (blobs, doubles, indexes) with how many times it was written, so
// a flood of requests keeps one entry per label set, and a point carrying a
// key keeps an entry per key, where the harness sees it.
// Harness-only method (never part of the real API), used by entry.js:
//   __harnessPoints()  {dataset, behaviour, written,
//                       points: [{blobs, doubles, indexes, count}]}

// JSON of [blobs, doubles, indexes] -> how many times it was written
const points = new Map();
let written = 0;

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
      throw new Error("harness data points: writeDataPoint threw (behaviour=throwing)");
    }
    written++;
    const id = JSON.stringify([field(point, "blobs"), field(point, "doubles"), field(point, "indexes")]);
    points.set(id, (points.get(id) ?? 0) + 1);
  }

  __harnessPoints() {
    const list = [];
    for (const [id, count] of points) {
      const [blobs, doubles, indexes] = JSON.parse(id);
      list.push({ blobs, doubles, indexes, count });
    }
    return { dataset: this.#dataset, behaviour: this.#behaviour, written, points: list };
  }
}

export default function makeDataset(env) {
  return new Dataset(env);
}
