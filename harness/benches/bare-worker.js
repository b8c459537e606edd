// The baseline of the workerd benchmarks: a Worker that only answers 200.
export default {
  fetch() {
    return new Response("ok");
  },
};
