//! One line chart as an inline SVG string, drawn by `plotters`' SVG backend.
//!
//! Every chart of the HTML report is a set of named series of `(x, y)`
//! points: lines with a dot on each point and a legend. A chart whose series
//! hold no finite point says "no data" instead of drawing empty axes, and a
//! drawing error becomes the same note with its reason: the page is always
//! written.

use plotters::prelude::*;

use super::escape::escape;

/// Pixel size of every chart (the SVG scales down with the page).
const SIZE: (u32, u32) = (1040, 440);

/// Width of the legend column right of the plot.
const LEGEND_WIDTH: u32 = 250;

/// Height of one legend row.
const LEGEND_ROW: u32 = 20;

/// Longest legend text, in characters (longer names end in `…`).
const LEGEND_CHARS: usize = 30;

/// An axis number: `1,234`, `123`, `12.3`, `1.23`, `0`.
pub(crate) fn number(v: f64) -> String {
    if v.abs() >= 1000.0 {
        ldb_core::numfmt::thousands_f(v)
    } else if v.abs() < 1e-9 {
        "0".into()
    } else {
        ldb_core::numfmt::sig(v, 3)
    }
}

/// `name`, cut to [`LEGEND_CHARS`].
fn short(name: &str) -> String {
    if name.chars().count() <= LEGEND_CHARS {
        name.to_string()
    } else {
        let mut s: String = name.chars().take(LEGEND_CHARS - 1).collect();
        s.push('…');
        s
    }
}

/// One named line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    /// Legend text (escaped by the SVG backend).
    pub name: String,
    /// Points in x order; non-finite ones are dropped when drawing.
    pub points: Vec<(f64, f64)>,
}

/// How a chart is labelled and scaled.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec<'a> {
    /// The `id` of the `<figure>` (stable: tests and readers look for it).
    pub id: &'a str,
    /// Caption above the chart.
    pub title: &'a str,
    /// One sentence under the caption saying what is plotted.
    pub note: &'a str,
    /// X axis label.
    pub x_desc: &'a str,
    /// Y axis label.
    pub y_desc: &'a str,
    /// X values are concurrencies: a log₂ axis labelled 1, 2, 4, …
    pub x_log2: bool,
    /// How an axis value reads (after undoing the log₂ for such axes).
    pub x_fmt: fn(f64) -> String,
}

/// `<figure id=…>` with the caption, the note and the chart (or "no data").
pub(crate) fn figure(spec: &Spec<'_>, series: &[Series]) -> String {
    // A panic inside the charting crate must not end a run that writes the
    // page after every cell: it becomes this chart's "could not be drawn".
    let drawn = std::panic::catch_unwind(|| draw(spec, series))
        .unwrap_or_else(|_| Err("the charting library failed".to_string()));
    let body = match drawn {
        Ok(Some(svg)) => svg,
        Ok(None) => "<p class=\"no-data\">no data</p>".to_string(),
        Err(e) => format!(
            "<p class=\"no-data\">no data (the chart could not be drawn: {})</p>",
            escape(&e)
        ),
    };
    format!(
        "<figure class=\"chart\" id=\"{}\">\n<figcaption>{}</figcaption>\n<p class=\"note\">{}</p>\n{body}\n</figure>\n",
        escape(spec.id),
        escape(spec.title),
        escape(spec.note)
    )
}

/// The finite points of each series, x moved to log₂ where asked; empty
/// series dropped.
fn prepared(spec: &Spec<'_>, series: &[Series]) -> Vec<Series> {
    series
        .iter()
        .map(|s| Series {
            name: s.name.clone(),
            points: s
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite() && (!spec.x_log2 || *x > 0.0))
                .map(|&(x, y)| (if spec.x_log2 { x.log2() } else { x }, y))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

/// `lo..hi` covering `values`, widened when it would be a single point.
fn span(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (mut lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
        (l.min(v), h.max(v))
    });
    if from_zero {
        lo = lo.min(0.0);
    }
    if hi - lo < 1e-9 {
        let pad = (hi.abs() * 0.1).max(0.5);
        (lo - pad, hi + pad)
    } else {
        (lo, hi)
    }
}

/// The SVG text, `None` when there is nothing to draw.
fn draw(spec: &Spec<'_>, series: &[Series]) -> Result<Option<String>, String> {
    let series = prepared(spec, series);
    if series.is_empty() {
        return Ok(None);
    }
    let all = || series.iter().flat_map(|s| s.points.iter());
    let (x0, x1) = span(all().map(|p| p.0), false);
    let (y0, y1) = span(all().map(|p| p.1), true);
    // Room around the points so dots on the edge are whole.
    let xpad = (x1 - x0) * 0.04;
    let (x0, x1) = (x0 - xpad, x1 + xpad);
    let y1 = y1 + (y1 - y0) * 0.08;
    super::plot_range::check("x", x0, x1)?;
    super::plot_range::check("y", y0, y1)?;
    let log2 = spec.x_log2;
    let fmt = spec.x_fmt;
    let x_label = move |v: &f64| -> String {
        if !log2 {
            return fmt(*v);
        }
        // Only whole powers of two get a label on a concurrency axis.
        if (v - v.round()).abs() < 1e-6 && *v >= -1e-6 {
            fmt(2f64.powf(v.round()))
        } else {
            String::new()
        }
    };
    // The legend gets its own column right of the plot, so it never hides
    // a point; the chart grows taller when the legend needs the room.
    let height = SIZE.1.max(40 + LEGEND_ROW * series.len() as u32);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (SIZE.0, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (plot, legend) = root.split_horizontally(SIZE.0 - LEGEND_WIDTH);
        let mut chart = ChartBuilder::on(&plot)
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc(spec.x_desc)
            .y_desc(spec.y_desc)
            .x_labels(12)
            .y_labels(8)
            .x_label_formatter(&x_label)
            .y_label_formatter(&|v| number(*v))
            .max_light_lines(1)
            .light_line_style(RGBColor(244, 244, 244))
            .bold_line_style(RGBColor(225, 225, 225))
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 15))
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, s) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(|e| e.to_string())?;
            chart
                .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(|e| e.to_string())?;
            let y = 24 + LEGEND_ROW as i32 * i as i32;
            legend
                .draw(&PathElement::new(
                    vec![(8, y), (30, y)],
                    color.stroke_width(3),
                ))
                .map_err(|e| e.to_string())?;
            legend
                .draw(&Text::new(
                    short(&s.name),
                    (36, y - 7),
                    ("sans-serif", 13).into_font(),
                ))
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(Some(svg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec<'static> {
        Spec {
            id: "chart-test",
            title: "Test <chart>",
            note: "a & b",
            x_desc: "concurrency",
            y_desc: "tok/s",
            x_log2: true,
            x_fmt: |v| format!("{v:.0}"),
        }
    }

    #[test]
    fn empty_and_non_finite_series_say_no_data() {
        let none = figure(&spec(), &[]);
        assert!(none.contains("id=\"chart-test\"") && none.contains("no data"));
        assert!(none.contains("Test &lt;chart&gt;") && none.contains("a &amp; b"));
        let nan = Series {
            name: "x".into(),
            points: vec![(f64::NAN, 1.0), (0.0, 2.0), (4.0, f64::INFINITY)],
        };
        // x = 0 has no place on a log axis.
        assert!(figure(&spec(), &[nan]).contains("no data"));
    }

    #[test]
    fn a_single_point_draws_and_the_legend_is_escaped() {
        let s = Series {
            name: "<b>ctx=8k</b>".into(),
            points: vec![(4.0, 100.0)],
        };
        let f = figure(&spec(), &[s]);
        assert!(f.contains("<svg"), "{f}");
        assert!(!f.contains("<b>"), "{f}");
        assert!(f.contains("&lt;b&gt;ctx=8k"), "{f}");
    }

    #[test]
    fn long_legend_names_are_cut() {
        assert_eq!(short("ctx=8k"), "ctx=8k");
        let long = "a-very-long-result-file-name-from-ci ctx=128k";
        let cut = short(long);
        assert_eq!(cut.chars().count(), LEGEND_CHARS);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn extreme_values_still_draw() {
        let s = Series {
            name: "x".into(),
            points: vec![(1.0, 1e-12), (2.0, 1e15), (1024.0, 0.0)],
        };
        assert!(figure(&spec(), &[s]).contains("<svg"));
    }

    #[test]
    fn concurrency_axes_label_powers_of_two_only() {
        let s = Series {
            name: "ctx=0".into(),
            points: vec![(1.0, 10.0), (2.0, 19.0), (4.0, 35.0), (64.0, 400.0)],
        };
        let f = figure(&spec(), &[s]);
        // plotters writes each label on a line of its own.
        for label in ["\n1\n", "\n2\n", "\n4\n", "\n64\n"] {
            assert!(f.contains(label), "{label} missing");
        }
        assert!(!f.contains("\n1.4\n") && !f.contains("\n3\n"));
    }
}
