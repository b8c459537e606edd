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
// or all threw) it returns that number; else it returns the promise of
// resume(ticket, codes, settledAtMs), called once every asked binding
// answered or the deadline passed; settledAtMs is Date.now() then if a
// binding failed or timed out, else -1: the clock (a workerd API call) is
// read only when the time moves a cool-off. A binding that misses the deadline keeps TIMED_OUT;
// answers after the deadline are ignored.

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

function pack(codes) {
  let packed = 0;
  let scale = 1;
  for (const code of codes) {
    packed += code * scale;
    scale *= 8;
  }
  return packed;
}

// The binding names as property keys: a string decoded from wasm is not
// internalized, and looking one up in `env` then takes V8's slow path on
// every request; the keys of an object literal are internalized once here.
export function bindingKeys(names) {
  return names.map((name) => Object.keys({ [name]: 0 })[0]);
}

export function askBindings(env, names, asks, keys, deadlineMs, resume, ticket) {
  const codes = new Array(Math.min(asks.length >> 1, MAX_ASKS));
  const pending = [];
  let offset = 0;
  for (let i = 0; i < codes.length; i++) {
    const units = asks[2 * i + 1];
    const key = units === keys.length ? keys : keys.slice(offset, offset + units);
    offset += units;
    const binding = env[names[asks[2 * i]]];
    if (binding === undefined || binding === null) {
      codes[i] = ANSWER.MISSING;
      continue;
    }
    try {
      pending.push(i, binding.limit({ key }));
      codes[i] = ANSWER.TIMED_OUT;
    } catch {
      codes[i] = ANSWER.FAILED;
    }
  }
  if (pending.length === 0) return pack(codes);
  return new Promise((resolve, reject) => {
    let left = pending.length >> 1;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      try {
        let troubled = false;
        for (const code of codes) if (code === ANSWER.FAILED || code === ANSWER.TIMED_OUT) troubled = true;
        resolve(resume(ticket, pack(codes), troubled ? Date.now() : -1));
      } catch (error) {
        reject(error);
      }
    };
    const timer = setTimeout(finish, deadlineMs);
    for (let p = 0; p < pending.length; p += 2) {
      const i = pending[p];
      Promise.resolve(pending[p + 1]).then(
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
