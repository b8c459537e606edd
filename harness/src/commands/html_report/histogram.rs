//! A scenario's latency histogram as inline SVG: its requests' latencies in
//! equal bins from 0 to a round maximum.

use std::fmt::Write as _;

const WIDTH: f64 = 480.0;
const HEIGHT: f64 = 120.0;
const LEFT: f64 = 36.0;
const BOTTOM: f64 = 20.0;
const TOP: f64 = 8.0;
const BINS: usize = 24;

/// The smallest of 1, 2, 5 times a power of ten that is at least `value`.
fn round_up(value: f64) -> f64 {
    let mut step = 1.0;
    loop {
        for factor in [1.0, 2.0, 5.0] {
            if step * factor >= value {
                return step * factor;
            }
        }
        step *= 10.0;
    }
}

/// The histogram of `latencies_ms` as an `<svg>` element; `None` for no request.
pub fn histogram(latencies_ms: &[f64]) -> Option<String> {
    let max = latencies_ms.iter().copied().fold(0.0, f64::max);
    if latencies_ms.is_empty() {
        return None;
    }
    let top = round_up(max.max(1.0));
    let width = top / BINS as f64;
    let mut counts = [0usize; BINS];
    for latency in latencies_ms {
        let bin = ((latency / width) as usize).min(BINS - 1);
        counts[bin] += 1;
    }
    let tallest = counts.iter().copied().max().unwrap_or(1).max(1);
    let plot_w = WIDTH - LEFT - 8.0;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let bar_w = plot_w / BINS as f64;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="histogram" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="latency histogram: {} requests, 0 to {top} ms in {BINS} bins, the fullest holding {tallest}">"#,
        latencies_ms.len(),
    );
    for (bin, count) in counts.iter().enumerate().filter(|(_, c)| **c > 0) {
        let h = *count as f64 / tallest as f64 * plot_h;
        let _ = write!(
            svg,
            r#"<rect class="bar" x="{:.1}" y="{:.1}" width="{:.1}" height="{h:.1}"><title>{:.0} to {:.0} ms: {count}</title></rect>"#,
            LEFT + bin as f64 * bar_w + 1.0,
            TOP + plot_h - h,
            bar_w - 2.0,
            bin as f64 * width,
            (bin + 1) as f64 * width,
        );
    }
    let base = TOP + plot_h;
    let _ = write!(
        svg,
        r#"<line class="axis" x1="{LEFT}" x2="{:.1}" y1="{base}" y2="{base}"/><text x="{LEFT}" y="{:.1}">0</text><text x="{:.1}" y="{:.1}" text-anchor="end">{top} ms</text><text x="{:.1}" y="{:.1}" text-anchor="end">{tallest}</text><text x="{:.1}" y="{:.1}" text-anchor="middle">latency</text></svg>"#,
        LEFT + plot_w,
        base + 14.0,
        LEFT + plot_w,
        base + 14.0,
        LEFT - 4.0,
        TOP + 10.0,
        LEFT + plot_w / 2.0,
        base + 14.0,
    );
    Some(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_ends_at_a_round_number_and_every_request_is_in_a_bin() {
        assert!((round_up(7.0) - 10.0).abs() < 1e-9);
        assert!((round_up(501.0) - 1000.0).abs() < 1e-9);
        assert!((round_up(120.0) - 200.0).abs() < 1e-9);
        let svg = histogram(&[1.0, 2.0, 3.0, 180.0]).expect("requests");
        assert!(svg.contains("200 ms"), "{svg}");
        assert!(svg.contains("4 requests"), "{svg}");
        assert_eq!(histogram(&[]), None);
    }
}
