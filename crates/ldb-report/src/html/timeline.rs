//! `<section id="timelines">`: each decode cell's seconds as small multiples
//! (one small figure per cell with a timeline, `id="timeline-C-CTX"`), panels
//! stacked on one time axis (seconds from the streams' launch): client
//! tok/s by arrival second, the server's running and waiting requests, KV
//! usage and GPU utilisation in percent, GPU power, PCIe throughput. Grey
//! lines mark the window's start and end; a panel with no data is left out.
//! Nothing at all when no file has a timeline (older results).

use plotters::prelude::*;

use ldb_core::result::CellResult;
use ldb_core::timeline::CellTimeline;

use super::Page;
use super::chart::number;
use super::escape::escape;
use crate::text::format::context;

/// Pixel width of one small figure, and the height of one panel.
const WIDTH: u32 = 380;
const PANEL: u32 = 92;

const BLUE: RGBColor = RGBColor(31, 119, 180);
const ORANGE: RGBColor = RGBColor(230, 110, 20);
const GREY: RGBColor = RGBColor(150, 150, 150);

/// One panel: a caption and up to two lines.
struct Panel {
    caption: String,
    lines: Vec<(RGBColor, Vec<(f64, f64)>)>,
}

/// `(t, v)` for the entries with a value.
fn pts(t: &[f64], v: &[Option<f64>], scale: f64) -> Vec<(f64, f64)> {
    t.iter()
        .zip(v)
        .filter_map(|(t, v)| Some((*t, (*v)? * scale)))
        .filter(|(t, v)| t.is_finite() && v.is_finite())
        .collect()
}

/// The panels of a timeline that have data.
fn panels(t: &CellTimeline) -> Vec<Panel> {
    // Each second's count plotted at the middle of the span it covers, as a
    // rate: the first second starts at the launch at the earliest, and the
    // window's last may end early. A last piece under half a second is left
    // out of the plot (a few tokens over a sliver read as a spike); the
    // text form keeps it.
    let client: Vec<(f64, f64)> = t
        .client_tokens
        .iter()
        .enumerate()
        .filter_map(|(i, &n)| {
            let a = t.bin_start_s(i).max(0.0);
            let b = (t.bin_start_s(i) + 1.0).min(t.window_end_s);
            let last = i + 1 == t.client_tokens.len();
            (b - a >= 0.5 || !last).then(|| ((a + b) / 2.0, n as f64 / (b - a).max(0.05)))
        })
        .collect();
    let mut out = vec![Panel {
        caption: "client tok/s by arrival second".into(),
        lines: vec![(BLUE, client)],
    }];
    if let Some(s) = &t.server {
        out.push(Panel {
            caption: "requests: running (blue), waiting (orange)".into(),
            lines: vec![
                (BLUE, pts(&s.t_s, &s.running, 1.0)),
                (ORANGE, pts(&s.t_s, &s.waiting, 1.0)),
            ],
        });
    }
    let kv = t.server.as_ref().map(|s| pts(&s.t_s, &s.kv_usage, 100.0));
    let util = t.gpu.as_ref().map(|g| pts(&g.t_s, &g.util_pct, 1.0));
    out.push(Panel {
        caption: "%: KV usage (blue), GPU utilisation (orange)".into(),
        lines: vec![
            (BLUE, kv.unwrap_or_default()),
            (ORANGE, util.unwrap_or_default()),
        ],
    });
    if let Some(g) = &t.gpu {
        out.push(Panel {
            caption: "GPU power, W (all GPUs)".into(),
            lines: vec![(BLUE, pts(&g.t_s, &g.power_w, 1.0))],
        });
        out.push(Panel {
            caption: "PCIe MB/s: rx (blue), tx (orange)".into(),
            lines: vec![
                (BLUE, pts(&g.t_s, &g.pcie_rx_mb_s, 1.0)),
                (ORANGE, pts(&g.t_s, &g.pcie_tx_mb_s, 1.0)),
            ],
        });
    }
    out.retain(|p| p.lines.iter().any(|(_, l)| !l.is_empty()));
    out
}

/// The small SVG of one timeline.
fn draw(t: &CellTimeline) -> Result<String, String> {
    let panels = panels(t);
    let x0 = t.bin_start_s(0).min(0.0);
    let x1 = t.window_end_s.max(x0 + 1.0);
    super::plot_range::check("time", x0, x1)?;
    let mut svg = String::new();
    {
        let height = PANEL * panels.len().max(1) as u32;
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let areas = root.split_evenly((panels.len().max(1), 1));
        for (p, area) in panels.iter().zip(&areas) {
            let top = p.lines.iter().flat_map(|(_, l)| l.iter().map(|q| q.1));
            // At least 1 on top: a panel of near-zero values (an idle KV
            // cache) reads as flat, not as noise blown up to full height.
            let y1 = top.fold(0.0f64, f64::max).max(1.0) * 1.1;
            super::plot_range::check(&p.caption, 0.0, y1)?;
            let mut chart = ChartBuilder::on(area)
                .margin(4)
                .caption(&p.caption, ("sans-serif", 12))
                .x_label_area_size(16)
                .y_label_area_size(44)
                .build_cartesian_2d(x0..x1, 0.0..y1)
                .map_err(|e| e.to_string())?;
            chart
                .configure_mesh()
                .disable_mesh()
                .x_labels(6)
                .y_labels(3)
                .x_label_formatter(&|v| format!("{v:.0}"))
                .y_label_formatter(&|v| number(*v))
                .label_style(("sans-serif", 10))
                .draw()
                .map_err(|e| e.to_string())?;
            for edge in [t.window_start_s, t.window_end_s] {
                chart
                    .draw_series(LineSeries::new([(edge, 0.0), (edge, y1)], GREY))
                    .map_err(|e| e.to_string())?;
            }
            for (color, line) in &p.lines {
                chart
                    .draw_series(LineSeries::new(line.iter().copied(), color.stroke_width(1)))
                    .map_err(|e| e.to_string())?;
            }
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// `<figure>` of one cell (a drawing failure becomes its note, as in
/// `chart.rs`: the page is always written).
fn figure(c: &CellResult, t: &CellTimeline) -> String {
    let drawn = std::panic::catch_unwind(|| draw(t))
        .unwrap_or_else(|_| Err("the charting library failed".to_string()));
    let body = drawn.unwrap_or_else(|e| {
        format!(
            "<p class=\"no-data\">the timeline could not be drawn: {}</p>",
            escape(&e)
        )
    });
    format!(
        "<figure class=\"timeline\" id=\"timeline-{}-{}\">\n<figcaption>C={} ctx={} — window \
         {:.1}–{:.1} s, {} tokens</figcaption>\n{body}\n</figure>\n",
        c.concurrency,
        c.context_tokens,
        c.concurrency,
        escape(&context(c.context_tokens)),
        t.window_start_s,
        t.window_end_s,
        t.window_tokens()
    )
}

/// The section, or an empty string when no cell has a timeline.
pub(crate) fn section(page: &Page<'_>) -> String {
    let mut body = String::new();
    for i in page.inputs {
        let cells: Vec<(&CellResult, &CellTimeline)> = i
            .doc
            .results
            .iter()
            .filter_map(|c| Some((c, c.ext.timeline.as_ref()?)))
            .collect();
        if cells.is_empty() {
            continue;
        }
        if page.multi() {
            body.push_str(&format!("<h3>{}</h3>\n", escape(i.name)));
        }
        body.push_str("<div class=\"timelines\">\n");
        for (c, t) in cells {
            body.push_str(&figure(c, t));
        }
        body.push_str("</div>\n");
    }
    if body.is_empty() {
        return String::new();
    }
    format!(
        "<section id=\"timelines\">\n<h2>Timelines</h2>\n<p class=\"note\">Each sustained cell \
         second by second, from the streams' launch: grey lines mark the measurement window \
         (ramp-up before it). Client tok/s counts tokens in the second they arrived; server \
         points fall where the run's /metrics scrapes fell, GPU points where the hardware \
         monitor sampled. <code>report RESULT --timeline C:CTX</code> prints the numbers.</p>\n\
         {body}</section>\n"
    )
}
