// Asks every binding one request needs at once and races them against one
// deadline on the isolate's own timer, in JavaScript: the Rust side crosses
// into JavaScript once and awaits one promise per request, instead of
// building each options object through Reflect and awaiting a race per
// binding (runtime/src/workers.rs; the cost is measured in BENCHMARKS.md).
//
// askBindings(env, asks, deadlineMs): `asks` is [name0, key0, name1, key1, ...].
// Returns a Uint8Array with one code per binding, or a promise of it when a
// binding was asked: the codes are those of ANSWER below. A binding that
// misses the deadline keeps TIMED_OUT; answers after the deadline are ignored.

const ANSWER = { REFUSED: 0, WITHIN: 1, MISSING: 2, FAILED: 3, TIMED_OUT: 4 };

function judge(value) {
  try {
    if (value !== null && typeof value === "object" && typeof value.success === "boolean") {
      return value.success ? ANSWER.WITHIN : ANSWER.REFUSED;
    }
  } catch {
    // A getter that throws is a malformed answer.
  }
  return ANSWER.FAILED;
}

export function askBindings(env, asks, deadlineMs) {
  const codes = new Uint8Array(asks.length >> 1);
  const pending = [];
  for (let i = 0; i < codes.length; i++) {
    const binding = env[asks[2 * i]];
    if (binding === undefined || binding === null) {
      codes[i] = ANSWER.MISSING;
      continue;
    }
    try {
      pending.push([i, binding.limit({ key: asks[2 * i + 1] })]);
      codes[i] = ANSWER.TIMED_OUT;
    } catch {
      codes[i] = ANSWER.FAILED;
    }
  }
  if (pending.length === 0) return codes;
  return new Promise((resolve) => {
    let left = pending.length;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(codes);
    };
    const timer = setTimeout(finish, deadlineMs);
    for (const [i, answer] of pending) {
      Promise.resolve(answer).then(
        (value) => {
          if (done) return;
          codes[i] = judge(value);
          if (--left === 0) finish();
        },
        () => {
          if (done) return;
          codes[i] = ANSWER.FAILED;
          if (--left === 0) finish();
        },
      );
    }
  });
}

// answer.then(resume): Rust's continuation of a request whose bindings were
// asked, called once with the codes (wasm awaits no promise itself).
export function whenAnswered(answer, resume) {
  return answer.then(resume);
}
