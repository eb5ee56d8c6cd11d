//! Small charts drawn on the server as SVG: no script, nothing fetched, text escaped.

use std::fmt::Write as _;

const WIDTH: f64 = 240.0;
const HEIGHT: f64 = 48.0;

/// A bar chart of `values` (oldest first) with a title for screen readers and hover text.
pub fn bars(title: &str, values: &[u64]) -> String {
    let max = values.iter().copied().max().unwrap_or(0).max(1) as f64;
    let n = values.len().max(1) as f64;
    let step = WIDTH / n;
    let mut svg = format!(
        "<svg class=\"chart\" role=\"img\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" \
         height=\"{HEIGHT}\" xmlns=\"http://www.w3.org/2000/svg\"><title>{}</title>\
         <rect class=\"frame\" x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{HEIGHT}\"></rect>",
        escape(title)
    );
    for (i, v) in values.iter().enumerate() {
        let h = (*v as f64 / max * (HEIGHT - 2.0)).max(if *v > 0 { 1.0 } else { 0.0 });
        let _ = write!(
            svg,
            "<rect class=\"bar\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\"><title>{v}</title></rect>",
            i as f64 * step,
            HEIGHT - h,
            (step - 1.0).max(0.5),
        );
    }
    svg.push_str("</svg>");
    svg
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_escapes_its_title_and_scales_to_the_largest_value() {
        let svg = bars("<b>\"x\"", &[0, 5, 10]);
        assert!(svg.contains("<title>&lt;b&gt;&quot;x&quot;</title>"));
        assert!(svg.contains("height=\"46.0\""));
        assert_eq!(svg.matches("<rect class=\"bar\"").count(), 3);
    }
}
