//! A scenario's timeline as inline SVG: its requests on the scenario clock,
//! a lane per isolate, the boundaries of the windows of the limits its
//! deployable counts, its steps, its fallback lines, each shadow limit's
//! first would-be refusal, and each binding's
//! cool-offs (shaded) and probes (marked) in the lane that observed them.
//!
//! The axis is the scenario clock, drawn piecewise: real time to scale,
//! and each jump of the clock (`advance_clock`, `wait_for_window`,
//! `wait_for_room`) as a fixed-width break, so a 60 s jump leaves the
//! milliseconds of traffic around it readable.

use std::fmt::Write as _;

use super::{escape, seconds};
use crate::commands::trace::{StepKind, Trace, TraceRequest};

/// The SVG's width in user units (it scales down to the page's width).
const WIDTH: f64 = 960.0;
/// Room on the left for the lanes' names.
const LEFT: f64 = 92.0;
/// Room on the right.
const RIGHT: f64 = 12.0;
/// The strip above the lanes: step labels and the axis.
const TOP: f64 = 64.0;
/// Room below the lanes: the boundaries' labels.
const BOTTOM: f64 = 22.0;
/// One row of requests in a lane.
const ROW: f64 = 6.0;
/// At most this many rows in a lane; more requests at once overlap.
const MAX_ROWS: usize = 8;
/// The widest a break of the clock is drawn.
const BREAK: f64 = 36.0;
/// Clock jumps shorter than this (in ms) are no break.
const JUMP_MS: f64 = 1.0;

/// One knot of the piecewise axis: a scenario-clock time, the real ms and
/// the breaks before it.
#[derive(Debug, Clone, Copy)]
struct Knot {
    clock: f64,
    real: f64,
    breaks: f64,
}

/// The scenario clock mapped to x.
#[derive(Debug)]
struct Axis {
    knots: Vec<Knot>,
    scale: f64,
    break_width: f64,
}

impl Axis {
    /// The axis of `trace`'s steps, stretched to its last request or line.
    fn of(trace: &Trace) -> Option<Axis> {
        let first = trace.steps.first()?;
        let mut knots = vec![Knot {
            clock: first.clock_started_ms,
            real: 0.0,
            breaks: 0.0,
        }];
        let mut at = |clock: f64, real: f64, breaks: f64| {
            let last = *knots.last().unwrap_or(&Knot {
                clock,
                real: 0.0,
                breaks: 0.0,
            });
            if clock > last.clock {
                knots.push(Knot {
                    clock,
                    real: last.real + real,
                    breaks: last.breaks + breaks,
                });
            }
        };
        let mut clock = first.clock_started_ms;
        for step in &trace.steps {
            at(step.clock_started_ms, step.clock_started_ms - clock, 0.0);
            let moved = step.clock_ended_ms - step.clock_started_ms;
            if moved - step.real_ms > JUMP_MS {
                let real_end = step.clock_started_ms + step.real_ms;
                at(real_end, step.real_ms, 0.0);
                at(step.clock_ended_ms, 0.0, 1.0);
            } else {
                at(step.clock_ended_ms, moved, 0.0);
            }
            clock = clock.max(step.clock_ended_ms);
        }
        let end = trace
            .requests
            .iter()
            .map(|r| r.sent_ms + r.latency_ms)
            .chain(trace.fallbacks.iter().map(|f| f.clock_ms))
            .chain(trace.shadow_refusals.iter().map(|s| s.clock_ms))
            .chain(trace.cool_offs.iter().map(|c| c.ended_ms))
            .fold(clock, f64::max);
        at(end, end - clock, 0.0);
        let last = *knots.last()?;
        let plot = WIDTH - LEFT - RIGHT;
        let break_width = if last.breaks > 0.0 {
            BREAK.min(plot * 0.4 / last.breaks)
        } else {
            0.0
        };
        let scale = (plot - last.breaks * break_width) / last.real.max(1.0);
        Some(Axis {
            knots,
            scale,
            break_width,
        })
    }

    /// Where `clock` (ms on the scenario clock) is drawn.
    fn x(&self, clock: f64) -> f64 {
        let place = |k: Knot| LEFT + k.real * self.scale + k.breaks * self.break_width;
        let Some(first) = self.knots.first() else {
            return LEFT;
        };
        if clock <= first.clock {
            return place(*first);
        }
        for pair in self.knots.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if clock <= b.clock {
                let f = (clock - a.clock) / (b.clock - a.clock);
                return place(a) + f * (place(b) - place(a));
            }
        }
        let last = self.knots[self.knots.len() - 1];
        place(last) + (clock - last.clock) * self.scale
    }

    fn start(&self) -> f64 {
        self.knots.first().map_or(0.0, |k| k.clock)
    }

    fn end(&self) -> f64 {
        self.knots.last().map_or(0.0, |k| k.clock)
    }

    /// The axis's pieces on the scenario clock, start and end: a clock
    /// jump's break is one of them.
    fn pieces(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.knots
            .windows(2)
            .map(|pair| (pair[0].clock, pair[1].clock))
    }
}

/// The CSS class of a request's mark: by status, 200, 429 or anything else
/// (a lost request too).
pub fn status_class(status: Option<u16>) -> &'static str {
    match status {
        Some(200) => "s200",
        Some(429) => "s429",
        _ => "sother",
    }
}

/// The timeline of `trace` as an `<svg>` element; `None` when no step ran.
pub fn timeline(trace: &Trace, title: &str) -> Option<String> {
    let axis = Axis::of(trace)?;
    let lanes = lanes(trace);
    let lanes_height: f64 = lanes.iter().map(Lane::height).sum();
    let height = TOP + lanes_height + BOTTOM;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="timeline" viewBox="0 0 {WIDTH} {height:.0}" role="img" aria-label="{}"><title>{}</title>"#,
        escape(&summary(trace)),
        escape(title),
    );
    let mut y = TOP;
    for (index, lane) in lanes.iter().enumerate() {
        let _ = write!(
            svg,
            r#"<rect class="lane" x="{LEFT}" y="{y:.1}" width="{:.1}" height="{:.1}"/><text class="lane-name" x="4" y="{:.1}">{name}</text>"#,
            WIDTH - LEFT - RIGHT,
            lane.height(),
            y + lane.height() / 2.0 + 4.0,
            name = trace.lanes.name(index),
        );
        cool_offs(&mut svg, trace, &axis, (index, lane), y);
        y += lane.height();
    }
    steps(&mut svg, trace, &axis, height);
    boundaries(&mut svg, &axis, height, &trace.windows);
    let mut y = TOP;
    for (index, lane) in lanes.iter().enumerate() {
        marks(&mut svg, trace, &axis, (index, lane), y);
        probes(&mut svg, trace, &axis, (index, lane), y);
        y += lane.height();
    }
    let _ = write!(
        svg,
        r#"<text class="axis-label" x="{LEFT}" y="{:.1}">{}</text><text class="axis-label" x="{:.1}" y="{:.1}" text-anchor="end">{}</text></svg>"#,
        TOP - 12.0,
        seconds(axis.start()),
        WIDTH - RIGHT,
        TOP - 12.0,
        seconds(axis.end()),
    );
    Some(svg)
}

/// One lane's requests and fallback lines, its top at `y`.
fn marks(svg: &mut String, trace: &Trace, axis: &Axis, (index, lane): (usize, &Lane<'_>), y: f64) {
    let name = trace.lanes.name(index);
    for (request, row) in &lane.marks {
        let x0 = axis.x(request.sent_ms);
        let x1 = axis.x(request.sent_ms + request.latency_ms);
        let top = y + 4.0 + *row as f64 * ROW;
        let _ = write!(
            svg,
            r#"<rect class="req {}" x="{x0:.1}" y="{top:.1}" width="{:.1}" height="{}"/>"#,
            status_class(request.status),
            (x1 - x0).max(1.0),
            ROW - 1.0,
        );
        if request.differs {
            // A mark that stands out at any zoom: a ring around the request.
            let _ = write!(
                svg,
                r#"<circle class="differs" cx="{x0:.1}" cy="{:.1}" r="4"><title>{name}: a status its step did not expect ({}) at {}</title></circle>"#,
                top + (ROW - 1.0) / 2.0,
                request
                    .status
                    .map_or_else(|| "no response".to_owned(), |s| s.to_string()),
                seconds(request.sent_ms),
            );
        }
    }
    for fallback in trace.fallbacks.iter().filter(|f| f.isolate == index) {
        let x = axis.x(fallback.clock_ms);
        let _ = write!(
            svg,
            r#"<path class="fallback" d="M{x:.1},{:.1}l5,5-5,5-5-5z"><title>{name}: fallback {} ({}) at {}</title></path>"#,
            y + lane.height() / 2.0 - 5.0,
            escape(&fallback.binding),
            escape(&fallback.reason),
            seconds(fallback.clock_ms),
        );
    }
    for shadow in trace.shadow_refusals.iter().filter(|s| s.isolate == index) {
        let x = axis.x(shadow.clock_ms);
        let _ = write!(
            svg,
            r#"<path class="shadow" d="M{x:.1},{:.1}l5,9h-10z"><title>{name}: shadow limit {} would first have refused at {}</title></path>"#,
            y + lane.height() / 2.0 - 5.0,
            escape(&shadow.limit),
            seconds(shadow.clock_ms),
        );
    }
}

/// One lane's cool-offs, its top at `y`: each a shaded span from the
/// trouble to the probe (or the last answer given without asking).
fn cool_offs(
    svg: &mut String,
    trace: &Trace,
    axis: &Axis,
    (index, lane): (usize, &Lane<'_>),
    y: f64,
) {
    let name = trace.lanes.name(index);
    for cool_off in trace.cool_offs.iter().filter(|c| c.isolate == index) {
        let x0 = axis.x(cool_off.started_ms);
        let x1 = axis.x(cool_off.ended_ms);
        let until = match cool_off.probe {
            Some(_) => format!("probed at {}", seconds(cool_off.ended_ms)),
            None => format!(
                "not probed before the scenario ended (last answer at {})",
                seconds(cool_off.ended_ms)
            ),
        };
        let _ = write!(
            svg,
            r#"<rect class="cooloff" x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}"><title>{name}: {} cooling off from {} ({}), not asked, its requests counted in memory; {until}</title></rect>"#,
            y + 1.0,
            (x1 - x0).max(2.0),
            lane.height() - 2.0,
            escape(&cool_off.binding),
            seconds(cool_off.started_ms),
            cool_off.trouble,
        );
    }
}

/// One lane's probes, its top at `y`: a line across the lane with a
/// notch above it, at the call that ended a cool-off.
fn probes(svg: &mut String, trace: &Trace, axis: &Axis, (index, lane): (usize, &Lane<'_>), y: f64) {
    let name = trace.lanes.name(index);
    for cool_off in trace.cool_offs.iter().filter(|c| c.isolate == index) {
        let Some(probe) = cool_off.probe else {
            continue;
        };
        let x = axis.x(probe.clock_ms);
        let _ = write!(
            svg,
            r#"<g class="probe"><line x1="{x:.1}" x2="{x:.1}" y1="{y:.1}" y2="{:.1}"/><path d="M{:.1},{y:.1}h8l-4,6z"/><title>{name}: {} probed at {}: {}</title></g>"#,
            y + lane.height(),
            x - 4.0,
            escape(&cool_off.binding),
            seconds(probe.clock_ms),
            if probe.answered {
                "it answered in time, so it is asked again"
            } else {
                "troubled again, a new cool-off"
            },
        );
    }
}

/// What the timeline shows, for a screen reader.
fn summary(trace: &Trace) -> String {
    let count = |class: &str| {
        trace
            .requests
            .iter()
            .filter(|r| status_class(r.status) == class)
            .count()
    };
    format!(
        "timeline: {} requests ({} answered 200, {} answered 429, {} other), {} steps, {} fallback lines, {} shadow refusal lines, {} cool-offs",
        trace.requests.len(),
        count("s200"),
        count("s429"),
        count("sother"),
        trace.steps.len(),
        trace.fallbacks.len(),
        trace.shadow_refusals.len(),
        trace.cool_offs.len()
    )
}

/// One isolate's lane: its requests, each with the row it is drawn in.
struct Lane<'t> {
    rows: usize,
    marks: Vec<(&'t TraceRequest, usize)>,
}

impl Lane<'_> {
    fn height(&self) -> f64 {
        self.rows as f64 * ROW + 8.0
    }
}

/// The lanes of `trace`, a request in the first row free at its send time.
fn lanes(trace: &Trace) -> Vec<Lane<'_>> {
    let count = trace
        .requests
        .iter()
        .map(|r| r.isolate + 1)
        .chain(trace.fallbacks.iter().map(|f| f.isolate + 1))
        .chain(trace.shadow_refusals.iter().map(|s| s.isolate + 1))
        .fold(trace.isolates.max(1), usize::max);
    (0..count)
        .map(|isolate| {
            let mut mine: Vec<&TraceRequest> = trace
                .requests
                .iter()
                .filter(|r| r.isolate == isolate)
                .collect();
            mine.sort_by(|a, b| a.sent_ms.total_cmp(&b.sent_ms));
            let mut ends: Vec<f64> = Vec::new();
            let marks = mine
                .into_iter()
                .map(|request| {
                    let row = match ends.iter().position(|end| *end <= request.sent_ms) {
                        Some(row) => row,
                        None if ends.len() < MAX_ROWS => {
                            ends.push(f64::MIN);
                            ends.len() - 1
                        }
                        None => (0..ends.len())
                            .min_by(|a, b| ends[*a].total_cmp(&ends[*b]))
                            .unwrap_or(0),
                    };
                    ends[row] = request.sent_ms + request.latency_ms;
                    (request, row)
                })
                .collect();
            Lane {
                rows: ends.len().max(1),
                marks,
            }
        })
        .collect()
}

/// At most this many boundaries of one window are drawn in one piece of the
/// axis (a long jump of the clock over short windows would be thousands,
/// all inside its break).
const MAX_BOUNDARIES: usize = 2_000;

/// The boundaries of `windows` (lengths in seconds, the scenario's limits')
/// on the scenario clock within the axis, each a line labelled with its
/// window's length (one that ends several windows, with the longest): the
/// longest window's lines solid and always drawn (but one per place, as
/// inside a break), a shorter one's dashed and left out when too close to
/// the last line drawn; a label too close to the last, or to the longest
/// window's next, is left to the line's title, which says the time.
fn boundaries(svg: &mut String, axis: &Axis, height: f64, windows: &[u32]) {
    let Some(&longest) = windows.iter().max() else {
        return;
    };
    // Each boundary's time (ms), with the windows it ends, shortest first.
    let mut ends: std::collections::BTreeMap<u64, Vec<u32>> = Default::default();
    for (start, end) in axis.pieces() {
        let start = start.max(0.0) as u64;
        for &window in windows.iter().filter(|w| **w > 0) {
            let ms = u64::from(window) * 1000;
            let mut boundary = (start / ms + 1) * ms;
            for _ in 0..MAX_BOUNDARIES {
                if boundary as f64 > end {
                    break;
                }
                let ended = ends.entry(boundary).or_default();
                if !ended.contains(&window) {
                    ended.push(window);
                }
                boundary += ms;
            }
        }
    }
    let longest_after = |at: u64| {
        ends.range(at + 1..)
            .find(|(_, w)| w.contains(&longest))
            .map(|(b, _)| axis.x(*b as f64))
    };
    let (mut last_line, mut last_longest, mut last_label) = (f64::MIN, f64::MIN, f64::MIN);
    for (&boundary, ended) in &ends {
        let x = axis.x(boundary as f64);
        let window = ended.iter().copied().max().unwrap_or(longest);
        let is_longest = window == longest;
        let drawn = if is_longest {
            x - last_longest >= 1.0
        } else {
            x - last_line >= 24.0
        };
        if !drawn {
            continue;
        }
        let class = if is_longest { "longest" } else { "shorter" };
        let lengths: Vec<String> = ended.iter().map(|w| format!("{w} s")).collect();
        let _ = write!(
            svg,
            r#"<line class="boundary {class}" data-window="{window}" x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}"><title>{} window boundary at {}</title></line>"#,
            TOP - 6.0,
            height - BOTTOM,
            lengths.join(" and "),
            seconds(boundary as f64),
        );
        last_line = x;
        if is_longest {
            last_longest = x;
        }
        // The longest window's label is always drawn: a shorter one near it is not.
        let crowds_longest = !is_longest && longest_after(boundary).is_some_and(|n| n - x < 36.0);
        if x - last_label >= 36.0 && !crowds_longest {
            let _ = write!(
                svg,
                r#"<text class="boundary-label" x="{x:.1}" y="{:.1}">{window} s</text>"#,
                height - 6.0,
            );
            last_label = x;
        }
    }
    // The labels' row is named once a line is drawn.
    if last_line > f64::MIN {
        let _ = write!(
            svg,
            r#"<text class="axis-label" x="4" y="{:.1}">windows</text>"#,
            height - 6.0,
        );
    }
}

/// Each step's marker: a `send` a band along the axis, a clock move its
/// break, every other step a labelled line.
fn steps(svg: &mut String, trace: &Trace, axis: &Axis, height: f64) {
    let mut level = 0usize;
    for step in &trace.steps {
        let x0 = axis.x(step.clock_started_ms);
        let x1 = axis.x(step.clock_ended_ms);
        match step.kind {
            StepKind::Send if !step.failed => {
                let _ = write!(
                    svg,
                    r#"<rect class="step-send" x="{x0:.1}" y="{:.1}" width="{:.1}" height="4"><title>step {}: {}</title></rect>"#,
                    TOP - 8.0,
                    (x1 - x0).max(1.0),
                    step.number,
                    escape(&step.label),
                );
                continue;
            }
            StepKind::Send => {
                let _ = write!(
                    svg,
                    r#"<rect class="step-send failed" x="{x0:.1}" y="{:.1}" width="{:.1}" height="4"><title>step {}: {}: failed</title></rect>"#,
                    TOP - 8.0,
                    (x1 - x0).max(1.0),
                    step.number,
                    escape(&step.label),
                );
            }
            StepKind::Clock => {
                let real_end = axis.x(step.clock_started_ms + step.real_ms);
                if x1 - real_end > 1.0 {
                    let _ = write!(
                        svg,
                        r#"<rect class="break" x="{real_end:.1}" y="{:.1}" width="{:.1}" height="{:.1}"><title>the clock moved {} ahead</title></rect>"#,
                        TOP - 6.0,
                        x1 - real_end,
                        height - BOTTOM - TOP + 6.0,
                        seconds(step.clock_ended_ms - step.clock_started_ms - step.real_ms),
                    );
                }
            }
            StepKind::Behaviour | StepKind::Sleep | StepKind::Other => {}
        }
        let class = match step.kind {
            _ if step.failed => "failed",
            StepKind::Behaviour => "behaviour",
            StepKind::Clock => "clock",
            _ => "other",
        };
        let failed = if step.failed { " failed" } else { "" };
        let label_y = 12.0 + (level % 3) as f64 * 14.0;
        level += 1;
        let label: String = step.label.chars().take(64).collect();
        // A label near the right edge ends at its line.
        let (label_x, anchor) = if x0 > WIDTH - 260.0 {
            (x0 - 2.0, "end")
        } else {
            (x0 + 2.0, "start")
        };
        let _ = write!(
            svg,
            r#"<g class="step {class}"><line x1="{x0:.1}" x2="{x0:.1}" y1="{:.1}" y2="{:.1}"/><text x="{label_x:.1}" y="{label_y:.1}" text-anchor="{anchor}">{}. {}{failed}</text><title>step {}: {} (at {}){failed}</title></g>"#,
            label_y + 2.0,
            height - BOTTOM,
            step.number,
            escape(&label),
            step.number,
            escape(&step.label),
            seconds(step.clock_started_ms),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::trace::TraceStep;

    fn step(kind: StepKind, clock: (f64, f64), real_ms: f64) -> TraceStep {
        TraceStep {
            number: 1,
            kind,
            label: "step".into(),
            clock_started_ms: clock.0,
            clock_ended_ms: clock.1,
            real_ms,
            failed: false,
        }
    }

    #[test]
    fn a_jump_of_the_clock_is_a_break_and_real_time_is_to_scale() {
        let trace = Trace {
            steps: vec![
                step(StepKind::Send, (0.0, 100.0), 100.0),
                step(StepKind::Clock, (100.0, 60_000.0), 2.0),
                step(StepKind::Send, (60_000.0, 60_100.0), 100.0),
            ],
            ..Trace::default()
        };
        let axis = Axis::of(&trace).expect("steps ran");
        let before = axis.x(102.0);
        let after = axis.x(60_000.0);
        assert!((after - before - BREAK).abs() < 0.01, "{before} -> {after}");
        // 100 ms before the jump are drawn as wide as 100 ms after it.
        let first = axis.x(100.0) - axis.x(0.0);
        let second = axis.x(60_100.0) - axis.x(60_000.0);
        assert!((first - second).abs() < 0.01, "{first} vs {second}");
        assert!((axis.x(60_100.0) - (WIDTH - RIGHT)).abs() < 0.01);
        // Monotonic everywhere.
        let xs: Vec<f64> = (0..=61).map(|s| axis.x(f64::from(s) * 1000.0)).collect();
        assert!(xs.windows(2).all(|w| w[0] <= w[1]), "{xs:?}");
    }

    #[test]
    fn a_shadow_limits_first_would_be_refusal_is_marked_in_its_lane_with_its_limit() {
        use crate::commands::trace::TraceShadowRefusal;
        for (isolate, clock_ms) in [(0, 1_000.0), (1, 2_500.0), (2, 9_000.0)] {
            let trace = Trace {
                isolates: 3,
                steps: vec![step(StepKind::Send, (0.0, 10_000.0), 10_000.0)],
                shadow_refusals: vec![TraceShadowRefusal {
                    isolate,
                    clock_ms,
                    limit: "/api/<search>".into(),
                }],
                ..Trace::default()
            };
            let svg = timeline(&trace, "shadow").expect("a step ran");
            let marks: Vec<&str> = svg.split("<path class=\"shadow\"").skip(1).collect();
            assert_eq!(marks.len(), 1, "{svg}");
            assert!(
                marks[0].contains(&format!(
                    "isolate {isolate}: shadow limit /api/&lt;search&gt; would first have refused at"
                )),
                "{}",
                marks[0]
            );
            let axis = Axis::of(&trace).expect("steps ran");
            assert!(
                marks[0].contains(&format!("d=\"M{:.1},", axis.x(clock_ms))),
                "at its time: {}",
                marks[0]
            );
            assert!(svg.contains("1 shadow refusal lines"), "{svg}");
        }
    }

    /// A trace of one `send` of real time from 0 to 130 s (no break), its
    /// deployable's limits in windows of `windows` seconds.
    fn two_minutes(windows: &[u32]) -> Trace {
        Trace {
            steps: vec![step(StepKind::Send, (0.0, 130_000.0), 130_000.0)],
            windows: windows.to_vec(),
            ..Trace::default()
        }
    }

    /// The boundary lines drawn: (class, window, title).
    fn lines(svg: &str) -> Vec<(String, String, String)> {
        svg.split("<line class=\"boundary ")
            .skip(1)
            .map(|line| {
                let class = line.split('"').next().unwrap_or_default().to_owned();
                let window = line
                    .split("data-window=\"")
                    .nth(1)
                    .and_then(|w| w.split('"').next())
                    .unwrap_or_default()
                    .to_owned();
                let title = line
                    .split("<title>")
                    .nth(1)
                    .and_then(|t| t.split("</title>").next())
                    .unwrap_or_default()
                    .to_owned();
                (class, window, title)
            })
            .collect()
    }

    /// A day's jump of the clock over 10 s windows: thousands of boundaries
    /// inside the break, and still every one of the 30 s sent after it.
    #[test]
    fn boundaries_after_a_long_jump_of_the_clock_are_drawn() {
        const DAY: f64 = 86_400_000.0;
        let trace = Trace {
            steps: vec![
                step(StepKind::Send, (0.0, 5_000.0), 5_000.0),
                step(StepKind::Clock, (5_000.0, DAY), 2.0),
                step(StepKind::Send, (DAY, DAY + 30_000.0), 30_000.0),
            ],
            windows: vec![10],
            ..Trace::default()
        };
        let svg = timeline(&trace, "day").expect("a timeline");
        let titles: Vec<String> = lines(&svg).into_iter().map(|(_, _, t)| t).collect();
        for after in ["1440:10.000", "1440:20.000", "1440:30.000"] {
            assert!(
                titles.iter().any(|t| t.ends_with(&format!("at {after}"))),
                "no boundary at {after}: {:?}",
                &titles[titles.len().saturating_sub(5)..]
            );
        }
    }

    #[test]
    fn a_scenario_whose_limits_are_all_a_minute_draws_no_ten_second_lines() {
        let svg = timeline(&two_minutes(&[60]), "minute").expect("a timeline");
        let drawn = lines(&svg);
        assert_eq!(
            drawn,
            [
                (
                    "longest".to_owned(),
                    "60".to_owned(),
                    "60 s window boundary at 1:00.000".to_owned()
                ),
                (
                    "longest".to_owned(),
                    "60".to_owned(),
                    "60 s window boundary at 2:00.000".to_owned()
                ),
            ]
        );
        assert_eq!(svg.matches(">60 s</text>").count(), 2, "{svg}");
        assert!(!svg.contains(">10 s</text>"), "{svg}");
    }

    #[test]
    fn each_window_length_of_the_limits_draws_its_boundaries_labelled_with_it() {
        let svg = timeline(&two_minutes(&[10, 60]), "both").expect("a timeline");
        let drawn = lines(&svg);
        // Every 10 s from 10 to 130 s: 13 lines, the minutes' drawn once, solid.
        assert_eq!(drawn.len(), 13, "{drawn:?}");
        let longest: Vec<&str> = drawn
            .iter()
            .filter(|(class, _, _)| class == "longest")
            .map(|(_, _, title)| title.as_str())
            .collect();
        assert_eq!(
            longest,
            [
                "10 s and 60 s window boundary at 1:00.000",
                "10 s and 60 s window boundary at 2:00.000"
            ]
        );
        assert!(
            drawn
                .iter()
                .filter(|(class, _, _)| class == "shorter")
                .all(|(_, window, title)| window == "10" && title.starts_with("10 s window")),
            "{drawn:?}"
        );
        assert!(svg.contains(">10 s</text>") && svg.contains(">60 s</text>"));
        // A window of two minutes: its boundary alone is solid.
        let svg = timeline(&two_minutes(&[60, 120]), "route").expect("a timeline");
        let classes: Vec<(String, String)> = lines(&svg)
            .into_iter()
            .map(|(class, window, _)| (class, window))
            .collect();
        assert_eq!(
            classes,
            [
                ("shorter".to_owned(), "60".to_owned()),
                ("longest".to_owned(), "120".to_owned())
            ]
        );
        assert!(svg.contains(">windows</text>"));
        // A deployable that counts nothing draws no boundary, nor names their row.
        let svg = timeline(&two_minutes(&[]), "none").expect("a timeline");
        assert!(lines(&svg).is_empty(), "{svg}");
        assert!(!svg.contains(">windows</text>"));
        // Nor does a minute's window in a run shorter than a minute.
        let short = Trace {
            steps: vec![step(StepKind::Send, (1_000.0, 3_000.0), 2_000.0)],
            windows: vec![60],
            ..Trace::default()
        };
        let svg = timeline(&short, "short").expect("a timeline");
        assert!(
            lines(&svg).is_empty() && !svg.contains(">windows</text>"),
            "{svg}"
        );
    }
}
