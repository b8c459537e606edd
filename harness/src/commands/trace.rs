//! What the report page draws of one scenario, taken from what its run
//! observed: each step, request and fallback line on the scenario clock,
//! the window lengths of the limits its deployable counts, and each
//! binding's cool-off and probe as its calls show them. Only statuses,
//! times, steps, binding names and isolate indexes are kept: no address,
//! caller, path or header a request carried, so no key can reach the page.

use std::collections::BTreeMap;
use std::time::Duration;

use runtime::config::Counting;

use crate::engine::{BindingCall, Observation, RequestRecord, StepRecord, Trouble};
use crate::judge::scenario::{fallback_line, shadow_refusal_line};
use crate::language::scenario::{Action, Prepared, Scenario, expand_statuses, parse_statuses};
use crate::world::native::STORE_STATE_EVENT;

/// One scenario's run as the report page draws it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// Where the scenario is written, `file:line:col`.
    pub place: Option<String>,
    /// How many isolates (or native instances) it ran: a lane each.
    pub isolates: usize,
    /// What its lanes are: workerd isolates, native instances, or the
    /// Worker on Cloudflare.
    pub lanes: Lanes,
    /// The window lengths, in seconds, of the limits its deployable counts
    /// (the built-in caller and address limits and the routes' own), each
    /// once, shortest first; none when it counts nothing. The timeline
    /// draws these windows' boundaries, not a fixed 10 s and 60 s.
    pub windows: Vec<u32>,
    /// Its steps, in order.
    pub steps: Vec<TraceStep>,
    /// Its requests, in the order their answers were collected.
    pub requests: Vec<TraceRequest>,
    /// The fallback lines its processes logged.
    pub fallbacks: Vec<TraceFallback>,
    /// The `rate_limits.shadow_refusal` lines its processes logged: where
    /// each shadow limit first would have refused, in each lane.
    pub shadow_refusals: Vec<TraceShadowRefusal>,
    /// Each binding's cool-offs, as its calls show them ([`cool_offs`]).
    pub cool_offs: Vec<TraceCoolOff>,
}

/// What a [`Trace`]'s lanes are, which says how each is named.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Lanes {
    /// workerd isolates: `isolate 0`, `isolate 1`...
    #[default]
    Isolates,
    /// `native-fixture` processes: `instance 0`...
    NativeInstances,
    /// The Worker on Cloudflare: one lane, as its tail does not tell
    /// isolates apart.
    Cloudflare,
}

impl Lanes {
    /// How the page names lane `index`.
    pub fn name(self, index: usize) -> String {
        match self {
            Lanes::Isolates => format!("isolate {index}"),
            Lanes::NativeInstances => format!("instance {index}"),
            Lanes::Cloudflare => "Cloudflare".to_owned(),
        }
    }
}

/// What kind of step a [`TraceStep`] is: the page marks each kind its own way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// `send`: its requests are the marks.
    Send,
    /// `set_bindings`, `set_redis` or `step_wall_clock` (one instance's
    /// wall clock, not the scenario's): a behaviour change, a labelled marker.
    Behaviour,
    /// `wait_for_window`, `wait_for_room`, `advance_clock`: the clock moved.
    Clock,
    /// `sleep_ms`: real time passed.
    Sleep,
    /// `restart_isolate`, `limit`: something else happened.
    Other,
}

/// One step on the scenario clock.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceStep {
    /// 1-based, as failures name it.
    pub number: usize,
    /// Its kind.
    pub kind: StepKind,
    /// What it did, in the scenario's words (no key: a `send` says how many).
    pub label: String,
    /// The scenario clock when it began, ms since the minute it started in.
    pub clock_started_ms: f64,
    /// The scenario clock when it ended.
    pub clock_ended_ms: f64,
    /// How much real time it took, in ms.
    pub real_ms: f64,
    /// Whether an expectation about it failed: the page marks it.
    pub failed: bool,
}

/// One request on the scenario clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceRequest {
    /// The isolate (0-based) it was sent to.
    pub isolate: usize,
    /// Its status; none when no response came.
    pub status: Option<u16>,
    /// When it was sent, on the scenario clock (ms since its minute began).
    pub sent_ms: f64,
    /// How long it took, in ms.
    pub latency_ms: f64,
    /// Whether its status is not the one its step's `statuses` expected
    /// for it: the page marks it.
    pub differs: bool,
}

/// One fallback line, on the scenario clock.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceFallback {
    /// The isolate (0-based) whose process wrote it.
    pub isolate: usize,
    /// When it was written, on the scenario clock (ms since its minute
    /// began); before the first step, at the first step's time.
    pub clock_ms: f64,
    /// The binding or store connection that failed.
    pub binding: String,
    /// `missing`, `failed` or `timed_out`.
    pub reason: String,
}

/// A shadow limit's first would-be refusal in one lane, on the scenario clock.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceShadowRefusal {
    /// The isolate (0-based) whose process wrote it.
    pub isolate: usize,
    /// When it was written, on the scenario clock (ms since its minute began).
    pub clock_ms: f64,
    /// The limit's policy name (`caller`, `address`, a route's template).
    pub limit: String,
}

/// One binding left alone by one lane's deployable after a troubled call,
/// on the scenario clock, and the call that probed it.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceCoolOff {
    /// The isolate (0-based).
    pub isolate: usize,
    /// The binding.
    pub binding: String,
    /// What the call that started it did: `threw`, `rejected`,
    /// `answered malformed`, `no answer in time`.
    pub trouble: &'static str,
    /// When the trouble was seen (ms on the scenario clock).
    pub started_ms: f64,
    /// When it ended: at the probe, or (no probe) at the last answer the
    /// isolate gave without asking the binding.
    pub ended_ms: f64,
    /// The call that probed the binding, if one came.
    pub probe: Option<TraceProbe>,
}

/// The call that probed a binding after its cool-off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceProbe {
    /// When (ms on the scenario clock).
    pub clock_ms: f64,
    /// Whether the binding answered it in time (the isolate asks it again),
    /// or was troubled again (a new cool-off).
    pub answered: bool,
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

impl Trace {
    /// The trace of `prepared`'s run, which observed `observation`.
    pub fn of(prepared: &Prepared, observation: &Observation) -> Trace {
        let lanes = if prepared.runs_natively() {
            Lanes::NativeInstances
        } else {
            Lanes::Isolates
        };
        let isolates = prepared.scenario.scenario.get_ref().isolates;
        Trace::with_lanes(prepared, observation, lanes, isolates)
    }

    /// The trace of `prepared`'s run on Cloudflare itself
    /// ([`crate::engine::cloudflare`]), which observed `observation`: one
    /// lane, its requests and the tail's lines.
    pub fn on_cloudflare(prepared: &Prepared, observation: &Observation) -> Trace {
        Trace::with_lanes(prepared, observation, Lanes::Cloudflare, 1)
    }

    fn with_lanes(
        prepared: &Prepared,
        observation: &Observation,
        lanes: Lanes,
        isolates: usize,
    ) -> Trace {
        let scenario = prepared.scenario.scenario.get_ref();
        let place = prepared
            .scenario
            .place(prepared.scenario.scenario.span())
            .to_string();
        let described: Vec<(StepKind, String)> = observation
            .steps
            .iter()
            .map(|record| {
                scenario
                    .steps
                    .get(record.index)
                    .and_then(|step| step.get_ref().action().ok())
                    .map_or((StepKind::Other, "step".to_owned()), |a| describe(&a))
            })
            .collect();
        let clock = Clock::of(&observation.steps, &described);
        let steps = observation
            .steps
            .iter()
            .zip(described)
            .zip(&clock.spans)
            .map(|((record, (kind, label)), span)| TraceStep {
                number: record.index + 1,
                kind,
                label,
                clock_started_ms: span.clock_started,
                clock_ended_ms: span.clock_ended,
                real_ms: ms(span.ended.saturating_sub(span.started)),
                failed: false,
            })
            .collect();
        let wanted = expected_statuses(scenario);
        let requests = observation
            .requests
            .iter()
            .map(|r| {
                let status = r.outcome.as_ref().ok().copied();
                let expected = wanted
                    .get(&r.step)
                    .and_then(|statuses| statuses.get(r.number.checked_sub(1)?));
                TraceRequest {
                    isolate: r.isolate,
                    status,
                    sent_ms: clock.at(r.sent),
                    latency_ms: ms(r.latency),
                    differs: expected.is_some_and(|e| status != Some(*e)),
                }
            })
            .collect();
        let fallbacks = observation
            .instances
            .iter()
            .flat_map(|instance| {
                instance.lines.iter().filter_map(|line| {
                    let fallback = fallback_line(&line.text)?.ok()?;
                    Some(TraceFallback {
                        isolate: instance.isolate,
                        clock_ms: clock.at(line.at),
                        binding: fallback.binding,
                        reason: fallback.reason,
                    })
                })
            })
            .collect();
        let shadow_refusals = shadow_refusals(observation, &clock);
        let native = native_cool_offs(observation, &clock);
        let cool_offs = cool_offs(&observation.binding_calls, &observation.requests)
            .into_iter()
            .map(|c| TraceCoolOff {
                isolate: c.call.isolate,
                binding: c.call.binding.clone(),
                trouble: c.trouble.label(),
                started_ms: clock.at_call(c.started),
                ended_ms: clock.at_call(c.ended),
                probe: c.probe.map(|p| TraceProbe {
                    clock_ms: clock.at_call(p.at),
                    answered: p.outcome.trouble().is_none(),
                }),
            })
            .chain(native)
            .collect();
        Trace {
            place: Some(place),
            isolates,
            lanes,
            windows: windows(prepared),
            steps,
            requests,
            fallbacks,
            shadow_refusals,
            cool_offs,
        }
    }
}

impl Trace {
    /// Marks the steps (1-based) that an expectation failed about.
    pub fn mark_failed_steps(&mut self, numbers: impl IntoIterator<Item = usize>) {
        for number in numbers {
            for step in self.steps.iter_mut().filter(|s| s.number == number) {
                step.failed = true;
            }
        }
    }
}

/// Each `send` step's expected status for each of its requests (by step
/// index, then request number less one), where it writes `statuses`.
fn expected_statuses(scenario: &Scenario) -> BTreeMap<usize, Vec<u16>> {
    scenario
        .steps
        .iter()
        .enumerate()
        .filter_map(|(index, step)| {
            let Ok(Action::Send {
                send,
                expect: Some(expect),
            }) = step.get_ref().action()
            else {
                return None;
            };
            let statuses = expect.get_ref().statuses.as_ref()?;
            let runs = parse_statuses(statuses.get_ref()).ok()?;
            Some((index, expand_statuses(&runs, send.requests).ok()?))
        })
        .collect()
}

/// A native instance's cool-offs, as its store's state lines show them
/// ([`STORE_STATE_EVENT`]): each `cooling_off` up to the instance's next
/// state line (its probe began then, or ended, when no other request ended
/// while it was under way), or, with no later line, up to the last answer
/// the instance gave after it. The probe's outcome is the first later line
/// that is not `probing`: answered when it says `asked`, troubled when it
/// says `cooling_off` again and a new cool-off begins.
/// The `rate_limits.shadow_refusal` lines every process wrote, on the scenario clock.
fn shadow_refusals(observation: &Observation, clock: &Clock) -> Vec<TraceShadowRefusal> {
    observation
        .instances
        .iter()
        .flat_map(|instance| {
            instance.lines.iter().filter_map(|line| {
                Some(TraceShadowRefusal {
                    isolate: instance.isolate,
                    clock_ms: clock.at(line.at),
                    limit: shadow_refusal_line(&line.text)?,
                })
            })
        })
        .collect()
}

fn native_cool_offs(observation: &Observation, clock: &Clock) -> Vec<TraceCoolOff> {
    let mut out = Vec::new();
    for instance in &observation.instances {
        let states: Vec<(Duration, String, String)> = instance
            .lines
            .iter()
            .filter_map(|line| {
                let event: serde_json::Value = serde_json::from_str(&line.text).ok()?;
                (event.get("event")?.as_str()? == STORE_STATE_EVENT).then_some(())?;
                let field = |name: &str| event.get(name)?.as_str().map(str::to_owned);
                Some((line.at, field("store")?, field("state")?))
            })
            .collect();
        let last_answer = observation
            .requests
            .iter()
            .filter(|r| r.isolate == instance.isolate)
            .map(|r| r.sent + r.latency)
            .max();
        for (index, (at, store, state)) in states.iter().enumerate() {
            if state != "cooling_off" {
                continue;
            }
            let mut later = states[index + 1..].iter().filter(|(_, s, _)| s == store);
            let next = later.clone().next();
            let ended = next.map_or_else(|| last_answer.unwrap_or(*at).max(*at), |(t, _, _)| *t);
            let outcome = later.find(|(_, _, state)| state != "probing");
            out.push(TraceCoolOff {
                isolate: instance.isolate,
                binding: store.clone(),
                trouble: "could not be asked",
                started_ms: clock.at(*at),
                ended_ms: clock.at(ended),
                probe: outcome.map(|(t, _, outcome)| TraceProbe {
                    clock_ms: clock.at(*t),
                    answered: outcome == "asked",
                }),
            });
        }
    }
    out
}

/// A cool-off as the run observed it, on the harness's clock.
#[derive(Debug, Clone, PartialEq)]
struct CoolOff<'a> {
    /// The troubled call that started it.
    call: &'a BindingCall,
    trouble: Trouble,
    started: Duration,
    ended: Duration,
    /// The next call of that binding from that process.
    probe: Option<&'a BindingCall>,
}

/// The cool-offs `calls` and `requests` show, per process and binding: a
/// troubled call ([`crate::engine::BindingOutcome::trouble`]) after which
/// the process answered at least one request without calling the binding,
/// up to its next call of it (the probe) or the last such answer. It
/// starts when the trouble could be seen: at a throw, at a rejection or a
/// malformed answer, and for no answer in time when the first request in
/// flight at the call was answered (the gate stopped waiting). Only what
/// the run observed: where a second request was in flight, a call it made
/// before the trouble was seen starts no cool-off of its own, as nothing
/// was answered in between.
fn cool_offs<'a>(calls: &'a [BindingCall], requests: &[RequestRecord]) -> Vec<CoolOff<'a>> {
    let mut by_backend: std::collections::BTreeMap<(usize, usize, &str), Vec<&BindingCall>> =
        Default::default();
    for call in calls {
        by_backend
            .entry((call.isolate, call.generation, call.binding.as_str()))
            .or_default()
            .push(call);
    }
    // Calls are timed to the ms; a request sent within one of a call may be
    // the one that made it.
    let tick = Duration::from_millis(1);
    let mut out = Vec::new();
    for ((isolate, _, _), mut mine) in by_backend {
        mine.sort_by_key(|c| c.at);
        let answers: Vec<(Duration, Duration)> = requests
            .iter()
            .filter(|r| r.isolate == isolate)
            .map(|r| (r.sent, r.sent + r.latency))
            .collect();
        for (index, call) in mine.iter().enumerate() {
            let Some(trouble) = call.outcome.trouble() else {
                continue;
            };
            let started = match call.outcome.settled_after() {
                Some(after) if trouble != Trouble::NoAnswerInTime => call.at + after,
                _ => answers
                    .iter()
                    .filter(|(sent, end)| *sent <= call.at + tick && *end >= call.at)
                    .map(|(_, end)| *end)
                    .min()
                    .unwrap_or(call.at),
            };
            let probe = mine.get(index + 1).copied();
            let unasked = answers
                .iter()
                .filter(|(sent, end)| *sent >= started && probe.is_none_or(|p| *end <= p.at))
                .map(|(_, end)| *end)
                .max();
            let Some(last_unasked) = unasked else {
                continue;
            };
            out.push(CoolOff {
                call,
                trouble,
                started,
                ended: probe.map_or(last_unasked, |p| p.at).max(started),
                probe,
            });
        }
    }
    out
}

/// The window lengths (seconds) of the limits `prepared`'s deployable
/// counts, each once, shortest first: every limit of its application (the
/// built-in ones and the routes' own, which every deployable serving the
/// API counts, [`runtime::GatePlan`]); none for a deployable that serves no
/// API or a description that does not validate.
pub fn windows(prepared: &Prepared) -> Vec<u32> {
    let Some((app, deployable)) = prepared.described() else {
        return Vec::new();
    };
    if matches!(app.counting(deployable), Counting::NoApi) {
        return Vec::new();
    }
    let mut windows: Vec<u32> = app.limits().iter().map(|l| l.window_seconds).collect();
    windows.sort_unstable();
    windows.dedup();
    windows
}

/// The scenario clock of a run, read from its steps: the first step's
/// reading plus the real time since (to the microsecond, where the
/// processes' clock readings are whole ms) plus every jump of the clock
/// before (a clock step moves it at its end).
#[derive(Debug, Default)]
struct Clock {
    spans: Vec<Span>,
}

/// One step on the harness's clock and on the scenario clock.
#[derive(Debug, Clone, Copy)]
struct Span {
    /// Whether it is a `send`, the steps a deployable calls its bindings in.
    send: bool,
    started: Duration,
    ended: Duration,
    clock_started: f64,
    /// After its jump, if it moved the clock.
    clock_ended: f64,
}

impl Clock {
    fn of(steps: &[StepRecord], kinds: &[(StepKind, String)]) -> Clock {
        let Some(first) = steps.first() else {
            return Clock::default();
        };
        let mut jumps = 0.0;
        let spans = steps
            .iter()
            .zip(kinds)
            .map(|(step, (kind, _))| {
                let real = ms(step.ended.saturating_sub(step.started));
                let clock_started = first.clock_started_ms as f64
                    + ms(step.started.saturating_sub(first.started))
                    + jumps;
                if *kind == StepKind::Clock {
                    let moved = step.clock_ended_ms.saturating_sub(step.clock_started_ms) as f64;
                    jumps += (moved - real).round().max(0.0);
                }
                Span {
                    send: *kind == StepKind::Send,
                    started: step.started,
                    ended: step.ended,
                    clock_started,
                    clock_ended: first.clock_started_ms as f64
                        + ms(step.ended.saturating_sub(first.started))
                        + jumps,
                }
            })
            .collect();
        Clock { spans }
    }

    /// The scenario clock at `at`, the time of a binding's call or one read
    /// from calls: a deployable calls its bindings while a `send`'s requests
    /// are in flight, and calls are timed to the ms, so one that seems to
    /// fall outside every `send` (the ms before one that began just after a
    /// clock step, which would put it before the jump) is placed at the
    /// nearest `send`'s edge.
    fn at_call(&self, at: Duration) -> f64 {
        let nearest = self
            .spans
            .iter()
            .filter(|s| s.send)
            .map(|s| (s, s.started.saturating_sub(at) + at.saturating_sub(s.ended)))
            .min_by_key(|(_, distance)| *distance);
        match nearest {
            Some((span, distance)) if !distance.is_zero() => {
                self.at(at.clamp(span.started, span.ended))
            }
            _ => self.at(at),
        }
    }

    /// The scenario clock at `at` (since the scenario started); before the
    /// first step, the first step's start.
    fn at(&self, at: Duration) -> f64 {
        let Some(first) = self.spans.first() else {
            return 0.0;
        };
        let Some(span) = self.spans.iter().rev().find(|s| s.started <= at) else {
            return first.clock_started;
        };
        if at < span.ended {
            span.clock_started + ms(at.saturating_sub(span.started))
        } else {
            span.clock_ended + ms(at.saturating_sub(span.ended))
        }
    }
}

/// A step's kind and label. A `send` is told by how many requests it sent
/// (its addresses and callers are keys), a `limit` by its binding.
fn describe(action: &Action<'_>) -> (StepKind, String) {
    match action {
        Action::Send { send, .. } => (
            StepKind::Send,
            format!(
                "send {} request{}",
                send.requests,
                if send.requests == 1 { "" } else { "s" }
            ),
        ),
        Action::SetBindings(changes) => {
            let changes: Vec<String> = changes
                .iter()
                .map(|(b, to)| format!("{b} = {to}"))
                .collect();
            (
                StepKind::Behaviour,
                format!("set_bindings {}", changes.join(", ")),
            )
        }
        Action::SetRedis(behaviour) => (StepKind::Behaviour, format!("set_redis {behaviour}")),
        Action::WaitForWindow(seconds) => (StepKind::Clock, format!("wait_for_window {seconds} s")),
        Action::WaitForRoom(room) => (
            StepKind::Clock,
            format!("wait_for_room {} s in {} s", room.seconds, room.window),
        ),
        Action::AdvanceClock(seconds) => (StepKind::Clock, format!("advance_clock {seconds} s")),
        Action::StepWallClock(step) => (
            StepKind::Behaviour,
            format!("step_wall_clock {} ms (isolate {})", step.ms, step.isolate),
        ),
        Action::RestartIsolate(isolate) => (StepKind::Other, format!("restart_isolate {isolate}")),
        Action::SleepMs(ms) => (StepKind::Sleep, format!("sleep_ms {ms}")),
        Action::Limit(call) => (StepKind::Other, format!("limit {}", call.binding)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(index: usize, started: u64, ended: u64, clock: (u64, u64)) -> StepRecord {
        StepRecord {
            index,
            started: Duration::from_millis(started),
            ended: Duration::from_millis(ended),
            clock_started_ms: clock.0,
            clock_ended_ms: clock.1,
        }
    }

    /// A native instance's state lines: a cool-off up to a failed probe,
    /// a second up to its probe's start (`probing`: another request ended
    /// meanwhile), which answered, a third never probed (up to the last
    /// answer), and the registration's `asked` no cool-off at all.
    #[test]
    fn a_native_instances_state_lines_are_its_cool_offs_and_probes() {
        use crate::engine::{InstanceKind, InstanceRecord, RequestRecord};
        use crate::world::process::{LogLine, Stream};
        let line = |ms: u64, state: &str| LogLine {
            at: Duration::from_millis(ms),
            stream: Stream::Stderr,
            text: format!(r#"{{"event":"{STORE_STATE_EVENT}","store":"cache","state":"{state}"}}"#),
        };
        let lines = vec![
            line(1, "asked"),
            line(100, "cooling_off"),
            line(10_100, "cooling_off"),
            line(20_000, "probing"),
            line(20_100, "asked"),
            line(20_200, "cooling_off"),
        ];
        let observation = Observation {
            instances: vec![InstanceRecord {
                kind: InstanceKind::Native,
                isolate: 0,
                generation: 0,
                lines,
                served: true,
            }],
            requests: vec![RequestRecord {
                step: 0,
                number: 1,
                isolate: 0,
                outcome: Ok(200),
                headers: Default::default(),
                body: String::new(),
                latency: Duration::from_millis(5),
                sent: Duration::from_millis(20_300),
            }],
            steps: vec![step(0, 0, 30_000, (0, 30_000))],
            ..Observation::default()
        };
        let clock = Clock::of(&observation.steps, &[(StepKind::Send, String::new())]);
        let found: Vec<(f64, f64, Option<bool>)> = native_cool_offs(&observation, &clock)
            .iter()
            .map(|c| (c.started_ms, c.ended_ms, c.probe.map(|p| p.answered)))
            .collect();
        assert_eq!(
            found,
            [
                (100.0, 10_100.0, Some(false)),
                (10_100.0, 20_000.0, Some(true)),
                (20_200.0, 20_305.0, None),
            ]
        );
    }

    #[test]
    fn a_time_is_read_on_the_clock_of_the_step_it_fell_in() {
        // A send from 100 to 300 ms, then an advance_clock of 5 s (at 300 to 310 ms).
        let steps = [
            step(0, 100, 300, (50, 250)),
            step(1, 300, 310, (250, 5_260)),
        ];
        let kinds = [
            (StepKind::Send, String::new()),
            (StepKind::Clock, String::new()),
        ];
        let clock = Clock::of(&steps, &kinds);
        let near = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert!(near(clock.at(Duration::from_millis(150)), 100.0));
        // During the clock step, before its jump; after it, 5 s later.
        assert!(near(clock.at(Duration::from_millis(305)), 255.0));
        assert!(near(clock.at(Duration::from_millis(320)), 5_270.0));
        // Before the first step: at its start.
        assert!(near(clock.at(Duration::from_millis(10)), 50.0));
        // A call timed in the clock step, a ms before a send that began
        // after it, is that send's: after the jump.
        let steps = [
            step(0, 100, 300, (50, 250)),
            step(1, 300, 310, (250, 5_260)),
            step(2, 310, 400, (5_260, 5_350)),
        ];
        let kinds = [
            (StepKind::Send, String::new()),
            (StepKind::Clock, String::new()),
            (StepKind::Send, String::new()),
        ];
        let clock = Clock::of(&steps, &kinds);
        assert!(near(clock.at(Duration::from_millis(309)), 259.0));
        assert!(near(clock.at_call(Duration::from_millis(309)), 5_260.0));
        assert!(near(clock.at_call(Duration::from_millis(301)), 250.0));
        assert!(near(clock.at_call(Duration::from_millis(350)), 5_300.0));
        assert!(Clock::default().at(Duration::from_millis(10)).abs() < 1e-9);
    }

    /// The first scenario of a file naming `app` and `deployable`.
    fn prepared(dir: &std::path::Path, app: &str, deployable: &str) -> Prepared {
        let app = crate::world::paths::scenarios_dir().join("apps").join(app);
        let text = format!(
            "application = \"{}\"\ndeployable = \"{deployable}\"\n\n[[scenario]]\nname = \"one\"\n\n\
             [[scenario.steps]]\nsend = {{ requests = 1 }}\n",
            app.display()
        );
        let path = dir.join("w.toml");
        std::fs::write(&path, text).expect("write");
        crate::language::scenario::load_file(&path, std::path::Path::new("w.toml"))
            .expect("loads")
            .remove(0)
    }

    #[test]
    fn the_windows_are_those_of_the_limits_the_deployable_counts() {
        let dir = tempfile::tempdir().expect("temp dir");
        // The built-in limits are a minute's; a route of 10 s adds its window...
        assert_eq!(
            windows(&prepared(dir.path(), "cloudflare.toml", "edge")),
            [10, 60]
        );
        // ...a route of a minute adds none...
        assert_eq!(
            windows(&prepared(dir.path(), "minute-route.toml", "edge")),
            [60]
        );
        // ...one of two minutes adds its own.
        assert_eq!(
            windows(&prepared(dir.path(), "redis-route.toml", "edge")),
            [60, 120]
        );
        // A deployable serving no API counts nothing.
        assert!(windows(&prepared(dir.path(), "cloudflare.toml", "site")).is_empty());
    }

    use crate::engine::BindingOutcome;

    fn call(isolate: usize, at: u64, outcome: BindingOutcome) -> BindingCall {
        BindingCall {
            isolate,
            generation: 0,
            binding: "LIMITS_120_PER_60S".into(),
            at: Duration::from_millis(at),
            outcome,
        }
    }

    fn request(isolate: usize, sent: u64, latency: u64) -> RequestRecord {
        RequestRecord {
            step: 0,
            number: 1,
            isolate,
            outcome: Ok(200),
            headers: Default::default(),
            body: String::new(),
            latency: Duration::from_millis(latency),
            sent: Duration::from_millis(sent),
        }
    }

    /// (isolate, trouble, started ms, ended ms, probe ms).
    fn seen(
        calls: &[BindingCall],
        requests: &[RequestRecord],
    ) -> Vec<(usize, Trouble, u64, u64, Option<u64>)> {
        cool_offs(calls, requests)
            .iter()
            .map(|c| {
                (
                    c.call.isolate,
                    c.trouble,
                    c.started.as_millis() as u64,
                    c.ended.as_millis() as u64,
                    c.probe.map(|p| p.at.as_millis() as u64),
                )
            })
            .collect()
    }

    #[test]
    fn a_cool_off_runs_from_the_trouble_seen_to_the_next_call_and_only_where_it_was_observed() {
        let ms = Duration::from_millis;
        // A hanging binding: the first request (100 to 600 ms) waits for
        // the deadline; the next ones are answered without a call; the
        // call at 900 ms probes it and is answered.
        let hanging = [
            call(0, 101, BindingOutcome::Pending),
            call(0, 900, BindingOutcome::Answered(ms(2))),
            call(0, 910, BindingOutcome::Answered(ms(2))),
        ];
        let requests = [
            request(0, 100, 500),
            request(0, 601, 2),
            request(0, 604, 2),
            request(0, 899, 4),
            request(0, 909, 4),
        ];
        assert_eq!(
            seen(&hanging, &requests),
            [(0, Trouble::NoAnswerInTime, 600, 900, Some(900))]
        );
        // Two requests in flight together: their two calls start one cool-off,
        // from the first answer, not one between the calls.
        let together = [
            call(0, 100, BindingOutcome::Pending),
            call(0, 101, BindingOutcome::Pending),
            call(0, 900, BindingOutcome::Rejected(ms(1))),
        ];
        let both = [
            request(0, 99, 501),
            request(0, 100, 502),
            request(0, 610, 2),
        ];
        assert_eq!(
            seen(&together, &both),
            [(0, Trouble::NoAnswerInTime, 600, 900, Some(900))]
        );
        // The probe troubled again, then nothing asked it to the end: a
        // second cool-off, to the last answer, with no probe.
        let after = [
            request(0, 99, 501),
            request(0, 100, 502),
            request(0, 610, 2),
            request(0, 950, 3),
        ];
        let again = seen(&together, &after);
        assert_eq!(again.len(), 2, "{again:?}");
        assert_eq!(again[1], (0, Trouble::Rejected, 901, 953, None));
        // A throw seen at once; a slow answer past the deadline is no answer in time.
        let thrown = [
            call(1, 50, BindingOutcome::Threw),
            call(1, 700, BindingOutcome::Answered(ms(600))),
        ];
        let served = [request(1, 49, 3), request(1, 60, 2), request(1, 699, 605)];
        assert_eq!(
            seen(&thrown, &served),
            [(1, Trouble::Threw, 50, 700, Some(700))]
        );
        // Answers in time start nothing, however long no call comes; and a
        // trouble after which the isolate answered nothing is no cool-off seen.
        let healthy = [
            call(0, 100, BindingOutcome::Answered(ms(3))),
            call(0, 5_000, BindingOutcome::Answered(ms(3))),
        ];
        assert!(seen(&healthy, &requests).is_empty());
        let alone = [call(0, 100, BindingOutcome::Pending)];
        assert!(seen(&alone, &[request(0, 99, 501)]).is_empty());
        // Another isolate's answers are not this one's.
        assert!(seen(&alone, &[request(0, 99, 501), request(1, 700, 2)]).is_empty());
    }
}
