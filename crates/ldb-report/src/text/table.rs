//! A small box-table and panel renderer with rounded corners.
//!
//! ```text
//! Title
//! ╭─────┬───────╮
//! │ ctx │ 1     │
//! ├─────┼───────┤
//! │ 0   │ 129.5 │
//! ╰─────┴───────╯
//! ```
//!
//! Rows are separated by a rule only when some cell spans several lines.

use super::style::{Span, Tone, paint, paint_spans, spans_width, wrap};

/// Horizontal alignment of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Right,
}

/// One table cell: one or more lines of spans.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Cell {
    pub lines: Vec<Vec<Span>>,
}

impl Cell {
    /// A one-line cell without styling.
    pub fn plain(text: impl Into<String>) -> Self {
        Cell {
            lines: vec![vec![Span::plain(text)]],
        }
    }

    /// A one-line cell made of spans.
    pub fn spans(spans: Vec<Span>) -> Self {
        Cell { lines: vec![spans] }
    }

    fn width(&self) -> usize {
        self.lines.iter().map(|l| spans_width(l)).max().unwrap_or(0)
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Self {
        Cell::plain(s)
    }
}

impl From<&str> for Cell {
    fn from(s: &str) -> Self {
        Cell::plain(s)
    }
}

/// A titled table.
#[derive(Debug, Clone, Default)]
pub(crate) struct Table {
    title: Vec<Span>,
    headers: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    /// A table with a title and column names; every column left-aligned.
    pub fn new(title: &str, headers: &[&str]) -> Self {
        Table {
            title: vec![Span::new(title, Tone::Title)],
            headers: headers.iter().map(|h| h.to_string()).collect(),
            align: vec![Align::Left; headers.len()],
            rows: Vec::new(),
        }
    }

    /// Same, with owned column names.
    pub fn with_headers(title: &str, headers: Vec<String>) -> Self {
        let align = vec![Align::Left; headers.len()];
        Table {
            title: vec![Span::new(title, Tone::Title)],
            headers,
            align,
            rows: Vec::new(),
        }
    }

    /// Appends a dim suffix to the title.
    pub fn title_suffix(mut self, suffix: &str) -> Self {
        self.title.push(Span::new(suffix, Tone::Dim));
        self
    }

    /// Right-aligns the given columns.
    pub fn right(mut self, cols: &[usize]) -> Self {
        for &c in cols {
            if let Some(a) = self.align.get_mut(c) {
                *a = Align::Right;
            }
        }
        self
    }

    /// Adds a row (missing cells render empty, extra cells are dropped).
    pub fn push(&mut self, row: Vec<Cell>) {
        self.rows.push(row);
    }

    /// Rendered lines: the title, then the box.
    pub fn render(&self, color: bool) -> Vec<String> {
        let n = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().take(n).enumerate() {
                widths[i] = widths[i].max(cell.width());
            }
        }
        let rule = |l: &str, m: &str, r: &str| {
            let parts: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
            format!("{l}{}{r}", parts.join(m))
        };
        let mut out = vec![paint_spans(&self.title, color), rule("╭", "┬", "╮")];
        let header: Vec<Cell> = self
            .headers
            .iter()
            .map(|h| Cell::plain(h.as_str()))
            .collect();
        out.extend(self.row_lines(&header, &widths, color));
        out.push(rule("├", "┼", "┤"));
        let multi = self
            .rows
            .iter()
            .any(|r| r.iter().any(|c| c.lines.len() > 1));
        for (i, row) in self.rows.iter().enumerate() {
            if multi && i > 0 {
                out.push(rule("├", "┼", "┤"));
            }
            out.extend(self.row_lines(row, &widths, color));
        }
        out.push(rule("╰", "┴", "╯"));
        out
    }

    fn row_lines(&self, row: &[Cell], widths: &[usize], color: bool) -> Vec<String> {
        let height = row.iter().map(|c| c.lines.len()).max().unwrap_or(1).max(1);
        (0..height)
            .map(|k| {
                let mut line = String::from("│");
                for (i, w) in widths.iter().enumerate() {
                    let spans = row.get(i).and_then(|c| c.lines.get(k));
                    let (text, used) = match spans {
                        Some(s) => (paint_spans(s, color), spans_width(s)),
                        None => (String::new(), 0),
                    };
                    let pad = " ".repeat(w - used.min(*w));
                    match self.align[i] {
                        Align::Left => line.push_str(&format!(" {text}{pad} │")),
                        Align::Right => line.push_str(&format!(" {pad}{text} │")),
                    }
                }
                line
            })
            .collect()
    }
}

/// A box with the title in its top border, sized to its text.
///
/// `body` is wrapped to fit `width`; `dim_border` draws the frame dim.
pub(crate) fn panel(
    title: &str,
    body: &str,
    width: usize,
    color: bool,
    dim_border: bool,
) -> Vec<String> {
    let inner = width.saturating_sub(4).max(20);
    let lines = wrap(body, inner);
    let content = lines
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0)
        .max(title.chars().count() + 2);
    let border_tone = if dim_border { Tone::Dim } else { Tone::Plain };
    let frame = |s: &str| paint(s, border_tone, color);
    let top_fill = "─".repeat(content - title.chars().count() - 1);
    let mut out = vec![format!(
        "{}{}{}",
        frame("╭─ "),
        paint(title, Tone::Title, color),
        frame(&format!(" {top_fill}╮"))
    )];
    for l in &lines {
        let pad = " ".repeat(content - l.chars().count());
        out.push(format!("{} {l}{pad} {}", frame("│"), frame("│")));
    }
    out.push(frame(&format!("╰{}╯", "─".repeat(content + 2))));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_boxes_line_up() {
        let mut t = Table::new("T", &["a", "bb"]).right(&[1]);
        t.push(vec!["x".into(), "1".into()]);
        t.push(vec!["yyy".into(), "22".into()]);
        let text = t.render(false).join("\n");
        assert_eq!(
            text,
            "T\n╭─────┬────╮\n│ a   │ bb │\n├─────┼────┤\n│ x   │  1 │\n│ yyy │ 22 │\n╰─────┴────╯"
        );
    }

    #[test]
    fn multi_line_cells_get_row_rules() {
        let mut t = Table::new("T", &["a"]);
        let mut two = Cell::plain("1");
        two.lines.push(vec![Span::new("2", Tone::Dim)]);
        t.push(vec![two]);
        t.push(vec!["3".into()]);
        let lines = t.render(false);
        assert_eq!(lines.len(), 9);
        assert_eq!(lines[6], "├───┼".trim_end_matches('┼').to_string() + "┤");
    }

    #[test]
    fn panel_wraps_and_closes() {
        let p = panel("Phase 3", "word ".repeat(30).trim(), 40, false, false);
        assert!(p[0].starts_with("╭─ Phase 3 ─"));
        let w = p[0].chars().count();
        assert!(p.iter().all(|l| l.chars().count() == w), "{p:#?}");
        assert!(w <= 40);
    }
}
