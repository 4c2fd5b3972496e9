//! The plots of a run, as SVG (plotters): queue depth over time, flow throughput over time,
//! FCT slowdown by flow size (the shape of HPCC's Fig. 11: median and 99th percentile per size
//! bucket), and the pause timeline per hop (when each transmitter asked its peer to pause).
//! Each is also written as PNG: the same SVG rasterised ([`png`]: usvg parses it, tiny-skia
//! paints it, resvg between them), so the two files never disagree.

use crate::output::{PlotData, Series};
use plotters::prelude::*;
use resvg::{tiny_skia, usvg};
use std::sync::{Arc, OnceLock};

const SIZE: (u32, u32) = (960, 540);
/// Series drawn at most per plot (the largest ones).
const MAX_SERIES: usize = 12;

/// Every plot: (file name, SVG text). A plot with nothing to show says so.
pub(crate) fn all(d: &PlotData) -> Vec<(&'static str, String)> {
    vec![
        (
            "queue_depth.svg",
            lines(
                "Egress queue depth",
                "time (µs)",
                "depth (KB)",
                &top(&d.queues),
                d.duration_us,
            ),
        ),
        (
            "flow_rates.svg",
            lines(
                "Flow throughput (delivered)",
                "time (µs)",
                "Gb/s",
                &top(&d.rates),
                d.duration_us,
            ),
        ),
        ("fct_slowdown.svg", fct(&d.fct)),
        ("pause_timeline.svg", pauses(&d.pauses, d.duration_us)),
    ]
}

/// The `MAX_SERIES` series with the largest peaks, in their original order.
fn top(series: &[Series]) -> Vec<&Series> {
    let peak = |s: &Series| s.points.iter().map(|p| p.1).fold(0.0, f64::max);
    let mut idx: Vec<usize> = (0..series.len())
        .filter(|&i| peak(&series[i]) > 0.0)
        .collect();
    idx.sort_by(|&a, &b| {
        peak(&series[b])
            .total_cmp(&peak(&series[a]))
            .then(a.cmp(&b))
    });
    idx.truncate(MAX_SERIES);
    idx.sort_unstable();
    idx.into_iter().map(|i| &series[i]).collect()
}

fn color(i: usize) -> RGBColor {
    const PALETTE: [RGBColor; 12] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
        RGBColor(0, 0, 0),
        RGBColor(100, 100, 255),
    ];
    PALETTE[i % PALETTE.len()]
}

fn lines(title: &str, x: &str, y: &str, series: &[&Series], x_max: f64) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let _ = root.fill(&WHITE);
        let y_max = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(0.0, f64::max)
            .max(1e-9)
            * 1.1;
        let Ok(mut chart) = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max.max(1e-9), 0.0..y_max)
        else {
            return svg_placeholder(title);
        };
        let _ = chart
            .configure_mesh()
            .x_desc(x)
            .y_desc(y)
            .light_line_style(WHITE)
            .draw();
        for (i, s) in series.iter().enumerate() {
            let c = color(i);
            if let Ok(a) = chart.draw_series(LineSeries::new(s.points.iter().copied(), &c)) {
                a.label(s.name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c));
            }
        }
        if !series.is_empty() {
            let _ = chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw();
        }
        let _ = root.present();
    }
    svg
}

fn svg_placeholder(title: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\"><text x=\"20\" y=\"40\">{title}: nothing to plot</text></svg>\n",
        SIZE.0, SIZE.1
    )
}

/// Slowdown against size: every flow as a dot, and per size bucket (deciles of the completed
/// flows' sizes) the median and the 99th percentile.
fn fct(points: &[(u64, f64)]) -> String {
    let title = "FCT slowdown by flow size";
    if points.is_empty() {
        return svg_placeholder(title);
    }
    let mut sorted: Vec<(u64, f64)> = points.to_vec();
    sorted.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let buckets = 10.min(sorted.len());
    let mut median = Vec::new();
    let mut p99 = Vec::new();
    for b in 0..buckets {
        let lo = b * sorted.len() / buckets;
        let hi = ((b + 1) * sorted.len() / buckets).max(lo + 1);
        let chunk = &sorted[lo..hi];
        let mut s: Vec<f64> = chunk.iter().map(|p| p.1).collect();
        s.sort_by(f64::total_cmp);
        let x = chunk[chunk.len() / 2].0 as f64;
        median.push((x, s[s.len() / 2]));
        p99.push((x, s[((s.len() * 99) / 100).min(s.len() - 1)]));
    }
    let x_min = sorted.first().map_or(1.0, |p| p.0 as f64).max(1.0);
    let x_max = sorted.last().map_or(10.0, |p| p.0 as f64).max(x_min * 10.0);
    let y_max = sorted.iter().map(|p| p.1).fold(1.0, f64::max) * 1.2;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let _ = root.fill(&WHITE);
        let Ok(mut chart) = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((x_min..x_max).log_scale(), (0.8..y_max).log_scale())
        else {
            return svg_placeholder(title);
        };
        let _ = chart
            .configure_mesh()
            .x_desc("flow size (bytes)")
            .y_desc("slowdown (FCT / ideal)")
            .draw();
        let _ = chart.draw_series(
            sorted
                .iter()
                .map(|p| Circle::new((p.0 as f64, p.1), 2, color(7).filled())),
        );
        if let Ok(a) = chart.draw_series(LineSeries::new(median, &color(0))) {
            a.label("median")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color(0)));
        }
        if let Ok(a) = chart.draw_series(LineSeries::new(p99, &color(3))) {
            a.label("99th percentile")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color(3)));
        }
        let _ = chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw();
        let _ = root.present();
    }
    svg
}

/// One row per transmitter that sent XOFF: a bar while its pause request stood.
fn pauses(rows: &[(String, Vec<(f64, f64)>)], duration_us: f64) -> String {
    let title = "PFC pause requests per hop (XOFF → XON)";
    if rows.is_empty() {
        return svg_placeholder(title);
    }
    let n = rows.len();
    let height = (120 + 28 * n as u32).max(240);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (SIZE.0, height)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let Ok(mut chart) = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(110)
            // Row i is centred on y = i, so that the integer key points plotters labels fall
            // on the rows' middles.
            .build_cartesian_2d(0.0..duration_us.max(1e-9), -0.5..n as f64 - 0.5)
        else {
            return svg_placeholder(title);
        };
        let labels: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
        let _ = chart
            .configure_mesh()
            .x_desc("time (µs)")
            // n + 1 key points at most over a range of n: plotters' step is then 1, a label
            // on every row (with n it would pick 2 and label every other row).
            .y_labels(n + 1)
            .y_label_formatter(&|y| {
                let i = y.round();
                if (y - i).abs() > 1e-6 || i < 0.0 {
                    return String::new();
                }
                labels.get(i as usize).cloned().unwrap_or_default()
            })
            .disable_y_mesh()
            .draw();
        for (i, (_, intervals)) in rows.iter().enumerate() {
            let y = i as f64;
            let _ = chart.draw_series(intervals.iter().map(|&(a, b)| {
                Rectangle::new(
                    [(a, y - 0.35), (b.max(a + duration_us / 2000.0), y + 0.35)],
                    color(i).filled(),
                )
            }));
        }
        let _ = root.present();
    }
    svg
}

/// The font family the PNGs' text is drawn in when the system has it (Debian:
/// `fonts-dejavu-core`); plotters writes `font-family="sans-serif"` and this is what it maps to.
const PNG_SANS_SERIF: &str = "DejaVu Sans";

/// The system's fonts, loaded once per process (a scan of the font directories), and the family
/// `sans-serif` resolves to (`None`: no font found, the PNGs have no text).
fn fonts() -> &'static (Arc<usvg::fontdb::Database>, Option<String>) {
    static FONTS: OnceLock<(Arc<usvg::fontdb::Database>, Option<String>)> = OnceLock::new();
    FONTS.get_or_init(|| {
        let mut db = usvg::fontdb::Database::new();
        db.load_system_fonts();
        // A fixed choice, not fontdb's default ("Arial", usually absent here), so that the
        // same machine always draws the same pixels.
        let families: Vec<String> = db
            .faces()
            .flat_map(|f| f.families.iter().map(|(name, _)| name.clone()))
            .collect();
        let sans = families
            .iter()
            .find(|f| f.as_str() == PNG_SANS_SERIF)
            .or_else(|| families.iter().min())
            .cloned();
        if let Some(family) = &sans {
            db.set_sans_serif_family(family.clone());
        }
        (Arc::new(db), sans)
    })
}

/// The font the PNGs' text is drawn in, or why there is none (for `summary.txt`).
pub(crate) fn png_font() -> Result<String, String> {
    fonts().1.clone().ok_or_else(|| {
        "no system font found: the PNG plots have no text (Debian: apt install \
         fonts-dejavu-core; the SVG plots are complete)"
            .to_owned()
    })
}

/// The PNG of an SVG plot, at the SVG's size, its text in the system's font.
pub(crate) fn png(svg: &str) -> Result<Vec<u8>, String> {
    rasterise(svg, Arc::clone(&fonts().0))
}

fn rasterise(svg: &str, fontdb: Arc<usvg::fontdb::Database>) -> Result<Vec<u8>, String> {
    let options = usvg::Options {
        fontdb,
        ..usvg::Options::default()
    };
    let tree = usvg::Tree::from_str(svg, &options).map_err(|e| format!("parsing the SVG: {e}"))?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| format!("no {}x{} pixmap", size.width(), size.height()))?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap
        .encode_png()
        .map_err(|e| format!("encoding the PNG: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plot_is_rasterised_at_its_svgs_size_and_its_text_is_drawn() {
        let series = Series {
            name: "q0".into(),
            points: vec![(0.0, 1.0), (50.0, 4.0), (100.0, 2.0)],
        };
        let svg = lines("Queue", "time (µs)", "KB", &[&series], 100.0);
        let bytes = png(&svg).expect("a PNG");
        let image = tiny_skia::Pixmap::decode_png(&bytes).expect("it decodes");
        assert_eq!((image.width(), image.height()), SIZE);
        // Not blank: the line is drawn in its colour.
        let pixels = image.pixels();
        let line = color(0);
        assert!(pixels
            .iter()
            .any(|p| (p.red(), p.green(), p.blue()) == (line.0, line.1, line.2)));
        // The text is drawn: against the same SVG rasterised without fonts (axes, ticks and
        // lines only), the caption, labels and numbers add dark pixels. scripts/test.sh installs
        // fonts-dejavu-core; without a font this says so rather than pass.
        png_font().expect("a system font for the PNGs' text");
        let dark = |bytes: &[u8]| {
            let image = tiny_skia::Pixmap::decode_png(bytes).expect("it decodes");
            image
                .pixels()
                .iter()
                .filter(|p| p.red() < 96 && p.green() < 96 && p.blue() < 96)
                .count()
        };
        let without_text = rasterise(&svg, Arc::new(usvg::fontdb::Database::new())).expect("PNG");
        let (with, without) = (dark(&bytes), dark(&without_text));
        assert!(
            with > without + 300,
            "{with} dark pixels with text, {without} without"
        );
        // The same SVG gives the same bytes.
        assert_eq!(png(&svg).expect("a PNG"), bytes);
    }
}
