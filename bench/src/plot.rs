//! `<date>-latency.png`: per-second p50 and p99 (log scale, with the 50 ms bound) above
//! per-second 2xx against the offered rate, for every run one after another.
//!
//! Pure Rust (plotters' bitmap backend); text needs a TrueType font, DejaVu Sans from the
//! usual place, and without it the plot is drawn with no text rather than not at all.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::sweep::RunResult;

const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
/// Seconds of empty space between two runs.
const GAP: f64 = 3.0;

/// Registers the font once; false when there is none to register.
fn font() -> bool {
    static FONT_OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FONT_OK.get_or_init(|| {
        let Ok(bytes) = std::fs::read(FONT) else {
            return false;
        };
        // plotters keeps fonts for the life of the process.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok()
    })
}

pub fn latency_png(path: &Path, runs: &[RunResult], p99_bound_ms: f64) -> anyhow::Result<()> {
    draw(path, runs, p99_bound_ms, font()).map_err(|e| anyhow::anyhow!("plot: {e}"))
}

fn draw(
    path: &Path,
    runs: &[RunResult],
    bound_ms: f64,
    text: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    // Where each run starts on the shared time axis.
    let mut offsets = Vec::with_capacity(runs.len());
    let mut x = 0.0;
    for r in runs {
        offsets.push(x);
        x += (r.load.timeline.len() as f64).max(r.duration_s) + GAP;
    }
    let x_max = x.max(1.0);
    let seconds = || runs.iter().flat_map(|r| r.load.timeline.iter());
    let y_max = seconds().map(|s| s.p99_ms).fold(bound_ms * 2.0, f64::max) * 1.5;
    let y_min = seconds()
        .map(|s| s.p50_ms)
        .filter(|&v| v > 0.0)
        .fold(f64::INFINITY, f64::min)
        .min(bound_ms)
        .max(0.05)
        / 2.0;
    let rate_max = runs
        .iter()
        .map(|r| {
            r.load.offered_rate.max(
                r.load
                    .timeline
                    .iter()
                    .map(|s| s.acked as f64)
                    .fold(0.0, f64::max),
            )
        })
        .fold(10.0, f64::max)
        * 1.15;

    // At most one label a second, so whole-second labels never repeat.
    let x_labels = (x_max as usize).clamp(2, 20);
    let root = BitMapBackend::new(path, (1600, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(560);
    let label_area = if text { 70 } else { 8 };

    let mut chart = ChartBuilder::on(&top);
    chart
        .margin(12)
        .x_label_area_size(if text { 30 } else { 8 })
        .y_label_area_size(label_area);
    if text {
        chart.caption(
            "Wharf: latency from scheduled send, per second (p50 blue, p99 red; dashed: bound)",
            ("sans-serif", 22),
        );
    }
    let mut chart = chart.build_cartesian_2d(0f64..x_max, (y_min..y_max).log_scale())?;
    {
        let mut mesh = chart.configure_mesh();
        mesh.light_line_style(WHITE.mix(0.0));
        if text {
            mesh.y_desc("ms (log scale)")
                .y_label_formatter(&|v| format!("{v}"))
                .x_label_formatter(&|v| format!("{v:.0}"))
                .x_labels(x_labels);
        } else {
            mesh.x_labels(0).y_labels(0);
        }
        mesh.draw()?;
    }
    // The bound, dashed.
    let mut dash = 0.0;
    while dash < x_max {
        chart.draw_series(LineSeries::new(
            [
                (dash, bound_ms),
                ((dash + x_max / 200.0).min(x_max), bound_ms),
            ],
            BLACK.mix(0.5).stroke_width(1),
        ))?;
        dash += x_max / 100.0;
    }
    for (r, &offset) in runs.iter().zip(&offsets) {
        let at = |t: u64| offset + t as f64 + 0.5;
        for (value, color) in [
            (
                &(|s: &crate::loadgen::Second| s.p50_ms) as &dyn Fn(&_) -> f64,
                BLUE,
            ),
            (&|s: &crate::loadgen::Second| s.p99_ms, RED),
        ] {
            let points: Vec<(f64, f64)> = r
                .load
                .timeline
                .iter()
                .filter(|s| value(s) > 0.0)
                .map(|s| (at(s.t), value(s).max(y_min)))
                .collect();
            chart.draw_series(LineSeries::new(points, color.stroke_width(2)))?;
        }
        chart.draw_series(LineSeries::new(
            [(offset, y_min), (offset, y_max)],
            BLACK.mix(0.25),
        ))?;
    }
    if text {
        for (i, (r, &offset)) in runs.iter().zip(&offsets).enumerate() {
            // Alternate heights so labels of short neighbouring runs do not overlap.
            let y = y_max / if i % 2 == 0 { 1.3 } else { 2.2 };
            let label = format!("{}: {:.0}/s", i + 1, r.load.offered_rate);
            chart.draw_series(std::iter::once(Text::new(
                label,
                (offset + 0.5, y),
                ("sans-serif", 14),
            )))?;
        }
    }

    let mut chart = ChartBuilder::on(&bottom);
    chart
        .margin(12)
        .x_label_area_size(if text { 40 } else { 8 })
        .y_label_area_size(label_area);
    if text {
        chart.caption(
            "2xx answers per second (green), offered rate (grey), shed 503 per second (orange)",
            ("sans-serif", 18),
        );
    }
    let mut chart = chart.build_cartesian_2d(0f64..x_max, 0f64..rate_max)?;
    {
        let mut mesh = chart.configure_mesh();
        mesh.light_line_style(WHITE.mix(0.0));
        if text {
            mesh.x_desc("seconds, runs one after another")
                .y_desc("per second")
                .x_label_formatter(&|v| format!("{v:.0}"))
                .y_label_formatter(&|v| format!("{v:.0}"))
                .x_labels(x_labels);
        } else {
            mesh.x_labels(0).y_labels(0);
        }
        mesh.draw()?;
    }
    for (r, &offset) in runs.iter().zip(&offsets) {
        let at = |t: u64| offset + t as f64 + 0.5;
        chart.draw_series(LineSeries::new(
            [
                (offset, r.load.offered_rate),
                (offset + r.duration_s, r.load.offered_rate),
            ],
            BLACK.mix(0.4).stroke_width(2),
        ))?;
        chart.draw_series(LineSeries::new(
            r.load.timeline.iter().map(|s| (at(s.t), s.acked as f64)),
            GREEN.stroke_width(2),
        ))?;
        if r.load.shed > 0 {
            chart.draw_series(LineSeries::new(
                r.load.timeline.iter().map(|s| (at(s.t), s.shed as f64)),
                RGBColor(255, 140, 0).stroke_width(2),
            ))?;
        }
        chart.draw_series(LineSeries::new(
            [(offset, 0.0), (offset, rate_max)],
            BLACK.mix(0.25),
        ))?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loadgen::{Second, Summary};
    use crate::wharf::Usage;

    fn run(rate: f64, secs: u64, p99: f64) -> RunResult {
        RunResult {
            label: format!("fixed {rate}/s"),
            phase: "fixed".into(),
            duration_s: secs as f64,
            sustainable: p99 < 50.0,
            load: Summary {
                offered_rate: rate,
                timeline: (0..secs)
                    .map(|t| Second {
                        t,
                        sent: rate as u64,
                        ok: rate as u64,
                        acked: rate as u64,
                        shed: if p99 > 50.0 { 10 } else { 0 },
                        p50_ms: p99 / 5.0,
                        p99_ms: p99 * (1.0 + t as f64 / 10.0),
                        max_ms: p99 * 2.0,
                        ..Default::default()
                    })
                    .collect(),
                shed: if p99 > 50.0 { 10 } else { 0 },
                ..Default::default()
            },
            wharf: Usage::default(),
        }
    }

    #[test]
    fn draws_a_png_with_and_without_text() {
        let runs = [
            run(500.0, 5, 8.0),
            run(3000.0, 8, 400.0),
            run(100.0, 0, 0.0),
        ];
        for text in [true, false] {
            let path = std::env::temp_dir().join(format!(
                "wharf-bench-plot-{}-{text}.png",
                std::process::id()
            ));
            if !text || font() {
                draw(&path, &runs, 50.0, text).expect("drawn");
                let bytes = std::fs::read(&path).expect("written");
                assert_eq!(&bytes[1..4], b"PNG");
                std::fs::remove_file(&path).expect("removed");
            }
        }
    }
}
