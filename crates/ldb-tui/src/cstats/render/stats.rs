//! The Live Statistics table: completed and failed requests, the score
//! and its star bar, completion tokens, gen tok/s, the requests in flight
//! and TTFT (average, p50, p90).

use ldb_eval::cstats::CsLive;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Block, Row, Table};

use super::{header_style, title_style};

/// Draw the statistics of `v` into `area`.
pub fn render(f: &mut Frame<'_>, area: Rect, v: &CsLive) {
    f.render_widget(
        Table::new(
            rows(v),
            [
                Constraint::Length(16),
                Constraint::Length(34),
                Constraint::Length(10),
                Constraint::Length(10),
            ],
        )
        .header(Row::new(["metric", "value", "p50", "p90"]).style(header_style()))
        .block(Block::default().title(Line::styled("Live Statistics", title_style()))),
        area,
    );
}

fn rows(v: &CsLive) -> Vec<Row<'static>> {
    let [tok, rate, ttft] = v.stats();
    let text = |name: &str, value: String| {
        Row::new(vec![name.into(), value, String::new(), String::new()])
    };
    let spread = |name: &str, (avg, p50, p90): (f64, f64, f64), digits: usize| {
        Row::new(vec![
            name.into(),
            format!("{avg:.digits$}"),
            format!("{p50:.digits$}"),
            format!("{p90:.digits$}"),
        ])
    };
    vec![
        text(
            "completed",
            format!("{} ({} errors)", v.completed(), v.errors),
        ),
        text("score", v.score_text()),
        text("stars", stars(v)),
        spread("completion tok", tok, 0),
        spread("gen tok/s", rate, 1),
        text(
            "active now",
            format!(
                "~{:.0} tok/s, ~{} tok, {} streams",
                v.active.rate, v.active.tokens, v.active.total
            ),
        ),
        spread("TTFT s", ttft, 3),
    ]
}

/// A 10-slot bar: ★ correct, ☆ near, ✕ fail, ⊘ truncated, by largest remainder.
fn stars(v: &CsLive) -> String {
    let n = |l: &str| v.labels.get(l).copied().unwrap_or(0) as f64;
    let parts = [
        ('★', n("pass") + n("exact")),
        ('☆', n("near")),
        ('✕', n("fail")),
        ('⊘', n("truncated")),
    ];
    let total: f64 = parts.iter().map(|p| p.1).sum();
    if total == 0.0 {
        return "-".into();
    }
    let exact: Vec<f64> = parts.iter().map(|p| p.1 * 10.0 / total).collect();
    let mut slots: Vec<usize> = exact.iter().map(|x| x.floor() as usize).collect();
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    let mut left = 10 - slots.iter().sum::<usize>();
    for i in order {
        if left == 0 {
            break;
        }
        slots[i] += 1;
        left -= 1;
    }
    parts
        .iter()
        .zip(slots)
        .map(|(p, k)| p.0.to_string().repeat(k))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stars_split_ten_slots_by_largest_remainder() {
        let mut v = CsLive::new("t");
        assert_eq!(stars(&v), "-");
        v.labels.insert("pass".into(), 2);
        v.labels.insert("fail".into(), 1);
        assert_eq!(stars(&v), "★★★★★★★✕✕✕");
    }
}
