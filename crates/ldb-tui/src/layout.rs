//! Where each panel goes, by terminal size. Pure geometry, no drawing.

use ldb_core::live::LiveSnapshot;
use ratatui::layout::{Constraint, Layout, Rect};

use crate::render::matrix;

/// Smallest terminal any layout fits in.
pub const MIN_WIDTH: u16 = 60;
/// Smallest terminal any layout fits in.
pub const MIN_HEIGHT: u16 = 20;

/// Layout family, chosen by width (the reference breaks at 150 and 108).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// ≥ 150 columns: prefill | matrix | events side by side.
    Wide,
    /// 108–149 columns: matrix above prefill | events.
    Mid,
    /// < 108 columns: everything stacked, compact panels.
    Narrow,
}

impl Mode {
    /// The family for a terminal `width` columns wide.
    pub fn for_width(width: u16) -> Mode {
        match width {
            150.. => Mode::Wide,
            108.. => Mode::Mid,
            _ => Mode::Narrow,
        }
    }
}

/// True when some layout fits in `area`.
pub fn fits(area: Rect) -> bool {
    area.width >= MIN_WIDTH && area.height >= MIN_HEIGHT
}

/// The rectangles of one frame. Absent panels are `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    /// Layout family used.
    pub mode: Mode,
    /// Header (3 rows).
    pub header: Rect,
    /// Current cell.
    pub current: Rect,
    /// Hardware (None without telemetry or when there is no room).
    pub hardware: Option<Rect>,
    /// Decode matrix.
    pub matrix: Rect,
    /// Prefill rows (None when the run has none).
    pub prefill: Option<Rect>,
    /// Event log.
    pub events: Rect,
    /// Footer (1 row).
    pub footer: Rect,
}

const PREFILL_WIDTH: u16 = 44;
const EVENTS_MIN: u16 = 24;
/// The matrix panel is never narrower than this, so its title and legend
/// stay readable while every cell is still `...`.
const MATRIX_MIN: u16 = 32;

/// Lay out `area` for `snap`. Call only when [`fits`] holds.
pub fn areas(area: Rect, snap: &LiveSnapshot) -> Areas {
    let mode = Mode::for_width(area.width);
    let has_hw = snap.hardware.is_some();
    let gpus = snap.hardware.as_ref().map_or(0, |h| h.gpus.len()) as u16;
    let has_prefill = !snap.prefill.is_empty();
    let ctx_rows = snap.contexts.len() as u16;
    match mode {
        Mode::Wide | Mode::Mid => {
            // CURRENT needs 9 lines; the hardware table 3 + one per GPU.
            let middle = if has_hw { (gpus + 5).clamp(11, 16) } else { 11 };
            let [header, mid, results, footer] = Layout::vertical([
                Constraint::Length(3),
                Constraint::Length(middle),
                Constraint::Min(8),
                Constraint::Length(1),
            ])
            .areas(area);
            let (current, hardware) = if has_hw {
                let [c, h] = Layout::horizontal([Constraint::Ratio(2, 5), Constraint::Ratio(3, 5)])
                    .areas(mid);
                (c, Some(h))
            } else {
                (mid, None)
            };
            let (matrix, prefill, events) = if mode == Mode::Wide {
                wide_results(results, snap, has_prefill)
            } else {
                mid_results(results, snap, has_prefill, ctx_rows)
            };
            Areas {
                mode,
                header,
                current,
                hardware,
                matrix,
                prefill,
                events,
                footer,
            }
        }
        Mode::Narrow => narrow(area, has_hw, gpus, has_prefill, ctx_rows, snap),
    }
}

fn wide_results(
    results: Rect,
    snap: &LiveSnapshot,
    has_prefill: bool,
) -> (Rect, Option<Rect>, Rect) {
    let pf = if has_prefill { PREFILL_WIDTH } else { 0 };
    let avail = results.width.saturating_sub(pf + EVENTS_MIN);
    let mw = matrix::plan(snap, avail).width().min(avail).max(MATRIX_MIN);
    let [p, m, e] = Layout::horizontal([
        Constraint::Length(pf),
        Constraint::Length(mw),
        Constraint::Min(EVENTS_MIN),
    ])
    .areas(results);
    (m, has_prefill.then_some(p), e)
}

fn mid_results(
    results: Rect,
    snap: &LiveSnapshot,
    has_prefill: bool,
    ctx_rows: u16,
) -> (Rect, Option<Rect>, Rect) {
    let mw = matrix::plan(snap, results.width)
        .width()
        .max(MATRIX_MIN)
        .min(results.width);
    let beside = results.width - mw;
    if !has_prefill && beside >= EVENTS_MIN {
        let [m, e] =
            Layout::horizontal([Constraint::Length(mw), Constraint::Min(0)]).areas(results);
        return (m, None, e);
    }
    let matrix_h = (ctx_rows + 5).min(results.height.saturating_sub(5));
    let [top, bottom] =
        Layout::vertical([Constraint::Length(matrix_h), Constraint::Min(5)]).areas(results);
    if !has_prefill {
        return (top, None, bottom);
    }
    if beside >= PREFILL_WIDTH {
        // Prefill beside the matrix, events get the whole bottom row.
        let [m, p] = Layout::horizontal([Constraint::Length(mw), Constraint::Min(0)]).areas(top);
        return (m, Some(p), bottom);
    }
    let [p, e] = Layout::horizontal([
        Constraint::Length(PREFILL_WIDTH),
        Constraint::Min(EVENTS_MIN),
    ])
    .areas(bottom);
    (top, Some(p), e)
}

fn narrow(
    area: Rect,
    has_hw: bool,
    gpus: u16,
    has_prefill: bool,
    ctx_rows: u16,
    snap: &LiveSnapshot,
) -> Areas {
    // Fixed parts first, then hardware and prefill only if room is left
    // after keeping three event lines.
    let current_h = 7;
    let matrix_h = (ctx_rows + 3).clamp(5, 10);
    let mut rest = area.height.saturating_sub(3 + 1 + current_h + matrix_h + 3);
    let hw_need = gpus.div_ceil(2) + 3;
    let hw_h = if has_hw && rest >= hw_need.min(6) {
        hw_need.min(6)
    } else {
        0
    };
    rest -= hw_h;
    let pf_need = snap.prefill.len() as u16 + 3;
    let pf_h = if has_prefill && rest >= 4 {
        pf_need.min(rest).min(8)
    } else {
        0
    };
    let [header, current, hardware, matrix, prefill, events, footer] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(current_h),
        Constraint::Length(hw_h),
        Constraint::Length(matrix_h),
        Constraint::Length(pf_h),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    Areas {
        mode: Mode::Narrow,
        header,
        current,
        hardware: (hw_h > 0).then_some(hardware),
        matrix,
        prefill: (pf_h > 0).then_some(prefill),
        events,
        footer,
    }
}

/// The output viewer popup: most of the screen.
pub fn output_viewer(area: Rect) -> Rect {
    centered(
        area,
        area.width.saturating_sub(8).max(20),
        area.height.saturating_sub(4).max(6),
    )
}

/// The text region inside the output viewer (below its one-line stream bar).
pub fn output_text(area: Rect) -> Rect {
    let v = output_viewer(area);
    Rect::new(
        v.x + 1,
        v.y + 2,
        v.width.saturating_sub(2),
        v.height.saturating_sub(3),
    )
    .intersection(area)
}

/// A `w`×`h` rectangle centred in `area` (clipped to it).
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}
