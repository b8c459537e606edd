// The workerd benchmarks' stub of the Workers Analytics Engine dataset
// binding: loaded in place of the harness's emulated dataset
// (harness/assets/data-points-binding.js, same module name and wrapped
// binding), its writeDataPoint keeps nothing and only counts its calls, so
// the bench can tell the points were written. Closer to Cloudflare's write,
// which queues the point outside the isolate, than the emulation, which keys
// every point by its JSON in the isolate.
let written = 0;

class Stub {
  writeDataPoint() {
    written++;
  }

  // The emulation's harness-only method, as entry.js's GET /data_points reads it.
  __harnessPoints() {
    return { dataset: "stub", behaviour: "stub", written, points: [] };
  }
}

export default function makeDataset() {
  return new Stub();
}
