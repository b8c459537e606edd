// Asks every binding one request needs at once and races them against one
// deadline on the isolate's own timer, in JavaScript: wasm crosses into
// JavaScript once per request and awaits nothing itself; when a binding has
// to be waited for, this helper awaits it and calls back into wasm once with
// every answer (runtime/src/workers.rs; the cost is measured in BENCHMARKS.md).
//
// askBindings(env, names, asks, keys, deadlineMs, resume, ticket): ask i
// is the binding env[names[asks[2i]]] with the key made of the next
// asks[2i + 1] UTF-16 units of `keys` (the keys written one after another),
// at most MAX_ASKS asks; `names` comes from bindingKeys, once per gate. The
// answer codes (ANSWER below) travel packed in one number, code i times
// 8 ** i, so no array crosses back. When no binding was asked (all missing,
// or all threw) it returns resume(ticket, codes, -1), called at once; else
// the promise of resume(ticket, codes, settledAtMs), called once every asked
// binding answered or the deadline passed; settledAtMs is Date.now() then if
// a binding failed or timed out, else -1: the clock (a workerd API call) is
// read only when the time moves a cool-off. A binding that misses the
// deadline keeps TIMED_OUT; answers after the deadline are ignored.
//
// The other side of this seam is runtime/src/wire.rs: it defines ANSWER and
// MAX_ASKS (its tests check the two lines below say the same, and run this
// file in Node.js to check the keys each binding gets and how every kind of
// answer decodes), and runtime/src/keys.rs builds the keys.

const ANSWER = { REFUSED: 0, WITHIN: 1, MISSING: 2, FAILED: 3, TIMED_OUT: 4 };

// Codes are base-8 digits of a double: 17 fit its 53 bits exactly.
export const MAX_ASKS = 17;

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

// The binding names as property keys: a string decoded from wasm is not
// internalized, and looking one up in `env` then takes V8's slow path on
// every request; the keys of an object literal are internalized once here.
export function bindingKeys(names) {
  return names.map((name) => Object.keys({ [name]: 0 })[0]);
}

export function askBindings(env, names, asks, keys, deadlineMs, resume, ticket) {
  const count = Math.min(asks.length >> 1, MAX_ASKS);
  // The codes packed as they become known (code i times 8 ** i): an ask
  // waited for holds TIMED_OUT until its answer replaces it.
  let codes = 0;
  let troubled = false;
  // The answers to wait for: the first apart, the others (rare: a route's
  // own limit) as [scale, answer, ...], so one ask allocates no array.
  let first = null;
  let firstScale = 0;
  let others = null;
  let offset = 0;
  for (let i = 0, scale = 1; i < count; i++, scale *= 8) {
    const units = asks[2 * i + 1];
    const key = units === keys.length ? keys : keys.slice(offset, offset + units);
    offset += units;
    // The look-up is inside the try too: an `env` whose getter throws
    // (or no `env` at all) is a binding that failed, never a request lost.
    let answer;
    try {
      const binding = env[names[asks[2 * i]]];
      if (binding === undefined || binding === null) {
        codes += ANSWER.MISSING * scale;
        continue;
      }
      answer = binding.limit({ key });
    } catch {
      codes += ANSWER.FAILED * scale;
      troubled = true;
      continue;
    }
    codes += ANSWER.TIMED_OUT * scale;
    if (first === null) {
      first = answer;
      firstScale = scale;
    } else {
      (others ??= []).push(scale, answer);
    }
  }
  if (first === null) return resume(ticket, codes, -1);
  // The functions below are in parentheses: V8 compiles a parenthesised
  // function with the one around it (`warm_up` runs this one while the
  // Worker starts) instead of on its first call, a Worker's first request.
  return new Promise(((resolve, reject) => {
    let left = others === null ? 1 : 1 + (others.length >> 1);
    let done = false;
    const finish = (() => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      try {
        // A binding still unanswered timed out.
        resolve(resume(ticket, codes, troubled || left > 0 ? Date.now() : -1));
      } catch (error) {
        reject(error);
      }
    });
    const settle = ((scale, code) => {
      if (done) return;
      codes += (code - ANSWER.TIMED_OUT) * scale;
      if (code === ANSWER.FAILED) troubled = true;
      if (--left === 0) finish();
    });
    const timer = setTimeout(finish, deadlineMs);
    Promise.resolve(first).then(
      (value) => settle(firstScale, judge(value)),
      () => settle(firstScale, ANSWER.FAILED),
    );
    if (others === null) return;
    for (let p = 0; p < others.length; p += 2) {
      const scale = others[p];
      Promise.resolve(others[p + 1]).then(
        (value) => settle(scale, judge(value)),
        () => settle(scale, ANSWER.FAILED),
      );
    }
  }));
}

// Writes one data point to the Workers Analytics Engine dataset bound as
// env[binding] (runtime/src/workers.rs, DataPoints): a refusal, or a request
// counted in memory because its binding could not be asked. Every argument
// is a string made once per gate; nothing here is a key. writeDataPoint is
// not awaited (it returns nothing and writes in the background), and a
// dataset that is missing or throws costs the request nothing: the code says
// which (POINT), so the gate can log it once.
const POINT = { WRITTEN: 0, MISSING: 1, FAILED: 2 };

export function writeDataPoint(env, binding, deployable, limit, outcome, reason) {
  try {
    const dataset = env[binding];
    if (dataset === undefined || dataset === null) {
      return POINT.MISSING;
    }
    dataset.writeDataPoint({ blobs: [limit, outcome, reason], doubles: [1], indexes: [deployable] });
    return POINT.WRITTEN;
  } catch {
    return POINT.FAILED;
  }
}
