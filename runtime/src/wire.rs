//! How a request's asks cross into JavaScript on Workers and their answers
//! come back: the Rust side of `ask-bindings.js`, defined once.
//!
//! A [`Pending`] request's asks go to `askBindings` as numbers and one
//! string ([`AskList`]); the answers come back as one number, a base-8
//! digit per ask in the same order ([`answer`]), so no array crosses either
//! way (BENCHMARKS-log.md, "The cost of asking, third round"). The digits are
//! [`Code`]s, at most [`MAX_ASKS`] of them. The tests below run the script
//! itself in Node.js against this module: its `ANSWER` table and `MAX_ASKS`
//! must read as they are defined here, every kind of answer it gives must
//! decode to the answer it means, and every binding it asks must get the
//! key [`crate::keys`] built, however the key is spelled.

use crate::backend::{BackendAnswer, FallbackReason};
use crate::keys;
use crate::limiter::Pending;

/// The most backends asked at once: their codes fill a double's 53 bits
/// (`MAX_ASKS` in `ask-bindings.js`). A valid application asks at most two
/// (the subject's limit and the route's own); asks past these are counted
/// in memory, unasked.
pub(crate) const MAX_ASKS: usize = 17;

/// What `writeDataPoint` (in `ask-bindings.js`, its `POINT`) says of one
/// data point: written, the dataset is missing, or it threw.
pub(crate) const POINT_WRITTEN: u32 = 0;
/// See [`POINT_WRITTEN`].
pub(crate) const POINT_MISSING: u32 = 1;
/// See [`POINT_WRITTEN`].
pub(crate) const POINT_FAILED: u32 = 2;

/// The dataset's trouble a `writeDataPoint` code tells, as logged
/// (`missing`, `failed`); `None` for a point written.
pub(crate) fn point_trouble(code: u32) -> Option<&'static str> {
    match code {
        POINT_WRITTEN => None,
        POINT_MISSING => Some("missing"),
        POINT_FAILED => Some("failed"),
        // No other code is sent; one would still be no point written.
        _ => Some("failed"),
    }
}

const _: () = assert!(8u64.pow(MAX_ASKS as u32) <= 1 << f64::MANTISSA_DIGITS);

/// One answer as `ask-bindings.js` codes it (its `ANSWER` table): a base-8 digit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    /// `{ success: false }`.
    Refused = 0,
    /// `{ success: true }`.
    Within = 1,
    /// No binding of that name in `env`.
    Missing = 2,
    /// It threw, rejected, or answered something other than `{ success: boolean }`.
    Failed = 3,
    /// No answer before the deadline.
    TimedOut = 4,
}

impl Code {
    /// Every code, in the order of `ANSWER`.
    pub(crate) const VALUES: [Code; 5] = [
        Code::Refused,
        Code::Within,
        Code::Missing,
        Code::Failed,
        Code::TimedOut,
    ];

    /// Its name in `ANSWER`.
    #[cfg(test)]
    fn js_name(self) -> &'static str {
        match self {
            Code::Refused => "REFUSED",
            Code::Within => "WITHIN",
            Code::Missing => "MISSING",
            Code::Failed => "FAILED",
            Code::TimedOut => "TIMED_OUT",
        }
    }

    /// What the limiter reads in it.
    pub(crate) fn answer(self) -> BackendAnswer {
        match self {
            Code::Refused => BackendAnswer::Answered { success: false },
            Code::Within => BackendAnswer::Answered { success: true },
            Code::Missing => BackendAnswer::Unavailable(FallbackReason::Missing),
            Code::Failed => BackendAnswer::Unavailable(FallbackReason::Failed),
            Code::TimedOut => BackendAnswer::Unavailable(FallbackReason::TimedOut),
        }
    }

    /// The code of a digit; an unknown digit is a failure.
    fn of_digit(digit: u64) -> Code {
        Code::VALUES
            .into_iter()
            .find(|code| *code as u64 == digit)
            .unwrap_or(Code::Failed)
    }
}

/// The asks of a request as `askBindings` takes them: `asks` is
/// `[backend index, key length in UTF-16 units, ...]` and `keys` the keys one
/// after another (left out of its `Debug`).
#[derive(Default, PartialEq, Eq)]
pub(crate) struct AskList {
    /// Two numbers per ask: the backend's index, then its key's length.
    pub asks: Vec<u32>,
    /// Every ask's key, in order.
    pub keys: String,
}

impl std::fmt::Debug for AskList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AskList")
            .field("asks", &self.asks)
            .field("keys", &format_args!(".."))
            .finish()
    }
}

impl AskList {
    /// The first [`MAX_ASKS`] asks of `pending` (mutable only because an
    /// ask is also where its answer goes).
    pub(crate) fn of(pending: &mut Pending) -> AskList {
        let mut list = AskList {
            asks: Vec::with_capacity(2 * pending.checks().len().min(MAX_ASKS)),
            keys: String::with_capacity(pending.checks().iter().map(|c| c.key().len()).sum()),
        };
        for ask in pending.asks().take(MAX_ASKS) {
            list.asks
                .push(u32::try_from(ask.backend().index()).unwrap_or(u32::MAX));
            list.asks.push(keys::utf16_units(ask.key()));
            list.keys.push_str(ask.key());
        }
        list
    }
}

/// Answers the asks of `pending` that [`AskList::of`] sent, in the same
/// order, from `codes`: the digits `askBindings` packed (digit `i` times
/// `8^i`). A number that is no whole number of them fails every ask.
pub(crate) fn answer(pending: &mut Pending, codes: f64) {
    // Whole numbers up to 8^17 are exact in a double.
    let mut codes = if codes.is_finite() && codes >= 0.0 {
        codes as u64
    } else {
        u64::MAX
    };
    for ask in pending.asks().take(MAX_ASKS) {
        ask.answer(Code::of_digit(codes % 8).answer());
        codes /= 8;
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::process::{Command, Stdio};

    use serde_json::{Value, json};

    use super::*;
    use crate::backend::BackendId;
    use crate::config::{Application, Deployable, Route, Store, StoreDriver, Target};
    use crate::limiter::Limiter;
    use crate::limits::Limit;
    use crate::subject::Subject;

    const SCRIPT: &str = include_str!("ask-bindings.js");

    #[test]
    fn ask_bindings_js_says_answer_and_max_asks_as_defined_here() {
        let table = Code::VALUES
            .iter()
            .map(|code| format!("{}: {}", code.js_name(), *code as u8))
            .collect::<Vec<_>>()
            .join(", ");
        for line in [
            format!("const ANSWER = {{ {table} }};"),
            format!("export const MAX_ASKS = {MAX_ASKS};"),
        ] {
            assert!(
                SCRIPT.lines().any(|l| l == line),
                "runtime/src/ask-bindings.js must say `{line}`, as runtime/src/wire.rs defines it"
            );
        }
    }

    /// How each fake binding answers, and what the limiter must read in it.
    /// How a binding behaves, and the code it comes to. `unreadable`: its
    /// look-up in `env` throws (a getter), so it is never asked.
    const BEHAVIOURS: [(&str, Code); 8] = [
        ("within", Code::Within),
        ("refused", Code::Refused),
        ("missing", Code::Missing),
        ("throws", Code::Failed),
        ("rejects", Code::Failed),
        ("malformed", Code::Failed),
        ("hangs", Code::TimedOut),
        ("unreadable", Code::Failed),
    ];

    /// Runs `askBindings` of the real `ask-bindings.js` in Node.js once per
    /// case (`names`, `asks`, `keys` and each binding's behaviour), and
    /// returns per case the `[name, key]` each binding was asked with, in
    /// order, and what `resume` got.
    fn run_in_node(cases: &Value) -> Value {
        const DRIVER: &str = r#"
            import { readFileSync } from "node:fs";
            const source = readFileSync(process.argv[1], "utf8");
            const m = await import("data:text/javascript;base64," + Buffer.from(source).toString("base64"));
            const cases = JSON.parse(readFileSync(0, "utf8"));
            const results = [];
            for (const c of cases) {
              const seen = [];
              const env = {};
              for (const [name, behaviour] of Object.entries(c.behaviours)) {
                if (behaviour === "missing") continue;
                if (behaviour === "unreadable") {
                  Object.defineProperty(env, name, { get() { throw new Error("unreadable"); } });
                  continue;
                }
                env[name] = { limit(options) {
                  seen.push([name, options.key]);
                  switch (behaviour) {
                    case "within": return Promise.resolve({ success: true });
                    case "refused": return Promise.resolve({ success: false });
                    case "throws": throw new Error("thrown");
                    case "rejects": return Promise.reject(new Error("rejected"));
                    case "malformed": return Promise.resolve({ success: "yes" });
                    case "hangs": return new Promise(() => {});
                  }
                } };
              }
              const resume = (ticket, codes, settledAtMs) => ({ ticket, codes, settledAtMs });
              const resumed = await m.askBindings(env, m.bindingKeys(c.names), Uint32Array.from(c.asks),
                c.keys, 20, resume, 7);
              results.push({ seen, resumed, maxAsks: m.MAX_ASKS });
            }
            console.log(JSON.stringify(results));
        "#;
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/ask-bindings.js");
        let mut node = Command::new("node")
            .args(["--input-type=module", "-e", DRIVER, path])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("Node.js (`node` on PATH) runs ask-bindings.js in this test");
        node.stdin
            .take()
            .expect("stdin")
            .write_all(cases.to_string().as_bytes())
            .expect("cases written");
        let out = node.wait_with_output().expect("node ran");
        assert!(out.status.success(), "node failed: {:?}", out.status);
        serde_json::from_slice(&out.stdout).expect("one JSON line")
    }

    /// A Workers deployable counting through bindings, with `routes` own
    /// limits on `/api/ß😀` (built by hand: a checked description has at most one).
    fn workers_limiter(routes: u32) -> Limiter {
        let app = Application {
            name: None,
            store: Some(Store {
                connection: "limits".into(),
                driver: StoreDriver::CloudflareRateLimits { namespace: 1 },
            }),
            deployables: vec![Deployable {
                name: "edge".into(),
                target: Target::Workers,
                serves_api: true,
                declines: Vec::new(),
                client_address: crate::AddressSource::CloudflareHeader(Default::default()),
                memory_budget: crate::counter::DEFAULT_MEMORY_BUDGET,
            }],
            routes: (1..=routes)
                .map(|requests| Route {
                    // A path as `new URL()` gives it: percent-encoded (the
                    // caller's id brings the non-ASCII keys).
                    path: "/api/%C3%9F".into(),
                    rate_limit: Some(Limit::new(requests, 10)),
                    methods: crate::Methods::ALL,
                    shadow: false,
                })
                .collect(),
            data_points: None,
            built_in_shadow: [false, false],
        };
        Limiter::new(&app, "edge", 1).expect("edge")
    }

    /// One request asked through `ask-bindings.js`: its limiter, its
    /// pending asks, and how the binding of each backend index behaves.
    struct Case {
        limiter: Limiter,
        pending: Pending,
        behaviour: fn(usize) -> (&'static str, Code),
    }

    #[test]
    fn ask_bindings_js_asks_with_the_keys_built_here_and_its_answers_decode() {
        let case = |routes, caller, path, behaviour| {
            let mut limiter = workers_limiter(routes);
            let checks = limiter
                .checks(&Subject::of_request(Some(caller), None), "GET", path)
                .expect("a short path");
            let pending = limiter.asks(checks, crate::limiter::Now::one_clock(0));
            Case {
                limiter,
                pending,
                behaviour,
            }
        };
        let mut cases = [
            // 1 + 19 asks (17 go) of every behaviour, non-ASCII and astral
            // keys cut apart from one string.
            case(19, "ü😀 x", "/api/ß", |backend| {
                BEHAVIOURS[backend % BEHAVIOURS.len()]
            }),
            // One healthy ask alone: the whole string is its key.
            case(0, "😀", "/", |_| BEHAVIOURS[0]),
        ];
        let mut input = Vec::new();
        for case in &mut cases {
            let list = AskList::of(&mut case.pending);
            let names: Vec<&str> = case.limiter.backend_names().collect();
            let behaviours: serde_json::Map<String, Value> = (0..names.len())
                .map(|backend| {
                    (
                        names[backend].to_owned(),
                        json!((case.behaviour)(backend).0),
                    )
                })
                .collect();
            input.push(
                json!({ "names": names, "asks": list.asks, "keys": list.keys,
                "behaviours": behaviours }),
            );
        }
        let results = run_in_node(&Value::Array(input));

        let mut codes_seen = Vec::new();
        for (i, (case, result)) in cases
            .iter_mut()
            .zip(results.as_array().expect("results"))
            .enumerate()
        {
            assert_eq!(result["maxAsks"], MAX_ASKS);
            assert_eq!(result["resumed"]["ticket"], 7);
            let sent: Vec<(usize, String, Code)> = case
                .pending
                .asks()
                .take(MAX_ASKS)
                .map(|ask| {
                    let backend = ask.backend().index();
                    (backend, ask.key().to_owned(), (case.behaviour)(backend).1)
                })
                .collect();
            codes_seen.extend(sent.iter().map(|(_, _, code)| *code));
            let expected: Vec<(&str, &str)> = sent
                .iter()
                .filter(|(backend, _, _)| {
                    !matches!((case.behaviour)(*backend).0, "missing" | "unreadable")
                })
                .map(|(backend, key, _)| {
                    (
                        case.limiter.backend_name(BackendId::new(*backend)),
                        key.as_str(),
                    )
                })
                .collect();
            let seen: Vec<(String, String)> =
                serde_json::from_value(result["seen"].clone()).expect("[name, key] pairs");
            let seen: Vec<(&str, &str)> =
                seen.iter().map(|(n, k)| (n.as_str(), k.as_str())).collect();
            assert_eq!(
                seen, expected,
                "case {i}: each binding is asked with the key built here"
            );

            answer(
                &mut case.pending,
                result["resumed"]["codes"].as_f64().expect("codes"),
            );
            let troubled = sent
                .iter()
                .any(|(_, _, code)| matches!(code, Code::Failed | Code::TimedOut));
            let settled_at = result["resumed"]["settledAtMs"].as_f64().expect("a number");
            assert_eq!(
                settled_at >= 0.0,
                troubled,
                "case {i}: the clock is read iff a binding is troubled"
            );
            for (n, check) in case.pending.checks().iter().enumerate() {
                let backend = check.backend().expect("a binding").index();
                let expected = (n < MAX_ASKS).then(|| (case.behaviour)(backend).1.answer());
                assert_eq!(check.answer(), expected, "case {i}, check {n}");
            }
        }
        assert!(
            Code::VALUES.iter().all(|code| codes_seen.contains(code)),
            "every code is exercised: {codes_seen:?}"
        );
    }

    /// `writeDataPoint` of the real `ask-bindings.js` in Node.js: a point
    /// goes to the named dataset as `blobs: [limit, outcome, reason]` with
    /// the deployable as its index; a missing dataset, one whose
    /// `writeDataPoint` throws, and an `env` whose getter throws each give
    /// their code and throw nothing.
    #[test]
    fn a_data_point_is_written_as_blobs_and_trouble_is_a_code_never_a_throw() {
        const DRIVER: &str = r#"
            import { readFileSync } from "node:fs";
            const source = readFileSync(process.argv[1], "utf8");
            const m = await import("data:text/javascript;base64," + Buffer.from(source).toString("base64"));
            const written = [];
            const env = { POINTS: { writeDataPoint(point) { written.push(point); } },
                          THROWS: { writeDataPoint() { throw new Error("over quota"); } } };
            Object.defineProperty(env, "UNREADABLE", { get() { throw new Error("unreadable"); } });
            const codes = ["POINTS", "MISSING", "THROWS", "UNREADABLE"].map((b) =>
              m.writeDataPoint(env, b, "edge", "/api/search", "refused", "timed_out"));
            console.log(JSON.stringify({ codes, written }));
        "#;
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/ask-bindings.js");
        let out = Command::new("node")
            .args(["--input-type=module", "-e", DRIVER, path])
            .output()
            .expect("Node.js (`node` on PATH) runs ask-bindings.js in this test");
        assert!(out.status.success(), "node failed: {out:?}");
        let got: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
        assert_eq!(
            got["codes"],
            serde_json::json!([POINT_WRITTEN, POINT_MISSING, POINT_FAILED, POINT_FAILED])
        );
        let troubles: Vec<_> = [POINT_WRITTEN, POINT_MISSING, POINT_FAILED]
            .into_iter()
            .map(point_trouble)
            .collect();
        assert_eq!(troubles, [None, Some("missing"), Some("failed")]);
        assert_eq!(
            got["written"],
            serde_json::json!([{
                "blobs": ["/api/search", "refused", "timed_out"],
                "doubles": [1],
                "indexes": ["edge"],
            }])
        );
    }
}
