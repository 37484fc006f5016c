//! HARDWARE: per-GPU table (wide/mid) or compact lines (narrow), plus CPU.

use ldb_core::hardware::GpuSample;
use ldb_core::live::HardwareLive;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::format::{self, gib, opt};
use crate::layout::Mode;
use crate::render::panel;
use crate::theme;

/// Draw the hardware panel into `area`.
pub fn render(f: &mut Frame, area: Rect, hw: &HardwareLive, mode: Mode) {
    let compact = mode == Mode::Narrow || area.width < 60;
    let inner = panel(f, area, if compact { "HW" } else { "HARDWARE" });
    let mut lines = vec![cpu_line(hw)];
    if hw.gpus.is_empty() {
        lines.push(Line::styled("Waiting for GPU samples…", theme::dim()));
    } else if compact {
        lines.extend(compact_lines(hw, inner.width));
    } else {
        let full = inner.width >= 84;
        lines.push(Line::styled(header(full), theme::dim()));
        lines.extend(hw.gpus.iter().map(|g| gpu_row(g, full)));
    }
    let room = usize::from(inner.height);
    if lines.len() > room && room > 0 {
        let hidden = lines.len() - room + 1;
        lines.truncate(room - 1);
        lines.push(Line::styled(format!("+{hidden} hidden"), theme::dim()));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

fn cpu_line(hw: &HardwareLive) -> Line<'static> {
    Line::from(vec![
        Span::styled("CPU ", theme::title()),
        Span::raw(format!(
            "{} {} {}",
            opt(hw.cpu_util_pct, 0, "%"),
            opt(hw.cpu_freq_mhz.map(|m| m / 1000.0), 1, "G"),
            opt(hw.cpu_temp_c, 0, "C"),
        )),
    ])
}

fn header(full: bool) -> String {
    let mut s = format!(
        "{:>3} {:>4} {:>4} {:>12} {:>9} {:>4}",
        "GPU", "SM", "Mem", "VRAM", "W now/lim", "T"
    );
    if full {
        s.push_str(&format!(" {:>5} {:>11}", "Clk", "PCIe rx/tx"));
    }
    s
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn busy(pct: Option<f64>) -> Style {
    if pct.is_some_and(|p| p >= 60.0) {
        theme::value()
    } else {
        theme::text()
    }
}

fn gpu_row(g: &GpuSample, full: bool) -> Line<'static> {
    let vram = format!("{}/{}", gib(g.vram_used_mb), gib(g.vram_total_mb));
    let power = format!("{}/{}", opt(g.power_w, 0, ""), opt(g.power_limit_w, 0, ""));
    let mut spans = vec![
        Span::styled(format!("{:>3}", g.index), theme::title()),
        Span::styled(format!(" {:>4}", opt(g.util_pct, 0, "%")), busy(g.util_pct)),
        Span::styled(
            format!(" {:>4}", opt(g.mem_util_pct, 0, "%")),
            busy(g.mem_util_pct),
        ),
        Span::styled(
            format!(" {vram:>12}"),
            theme::level(ratio(g.vram_used_mb, g.vram_total_mb), 0.85, 0.95),
        ),
        Span::styled(
            format!(" {power:>9}"),
            theme::level(ratio(g.power_w, g.power_limit_w), 0.65, 0.85),
        ),
        Span::styled(
            format!(" {:>4}", opt(g.temp_c, 0, "C")),
            theme::level(g.temp_c.map(|t| t / 100.0), 0.72, 0.82),
        ),
    ];
    if full {
        let pcie = format!(
            "{}/{}",
            opt(g.pcie_rx_mb_s, 0, ""),
            opt(g.pcie_tx_mb_s, 0, "")
        );
        spans.push(Span::raw(format!(
            " {:>5} {pcie:>11}",
            opt(g.sm_clock_mhz.map(|m| m / 1000.0), 1, "G")
        )));
    }
    Line::from(spans)
}

fn compact_lines(hw: &HardwareLive, width: u16) -> Vec<Line<'static>> {
    let cell = |g: &GpuSample| {
        format!(
            "G{} {}/{} v{} w{} t{}",
            g.index,
            opt(g.util_pct, 0, ""),
            opt(g.mem_util_pct, 0, ""),
            gib(g.vram_used_mb),
            opt(g.power_w, 0, ""),
            opt(g.temp_c, 0, "C"),
        )
    };
    let per_line = if width >= 64 { 2 } else { 1 };
    hw.gpus
        .chunks(per_line)
        .map(|pair| {
            let text: Vec<String> = pair.iter().map(cell).collect();
            Line::raw(format::fit(&text.join(" │ "), width.into()))
        })
        .collect()
}
