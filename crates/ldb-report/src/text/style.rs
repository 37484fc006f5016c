//! Optional ANSI styling, word wrapping and width measurement.
//!
//! Everything is laid out on plain text first; colour is applied per span at
//! the very end, so widths never depend on escape codes.

/// How a piece of text is emphasised when colour is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tone {
    /// No styling.
    Plain,
    /// Table and panel titles (bold green).
    Title,
    /// Secondary detail and notes (dim).
    Dim,
    /// Problems: errors, interrupted runs (red).
    Warn,
}

/// A run of text with one tone.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Span {
    pub text: String,
    pub tone: Tone,
}

impl Span {
    pub fn new(text: impl Into<String>, tone: Tone) -> Self {
        Span {
            text: text.into(),
            tone,
        }
    }

    pub fn plain(text: impl Into<String>) -> Self {
        Span::new(text, Tone::Plain)
    }
}

/// Visible width of a line of spans (one column per `char`).
pub(crate) fn spans_width(spans: &[Span]) -> usize {
    spans.iter().map(|s| s.text.chars().count()).sum()
}

/// Text with the tone's escape codes around it when `color` is on.
pub(crate) fn paint(text: &str, tone: Tone, color: bool) -> String {
    let code = match tone {
        _ if !color || text.is_empty() => return text.to_string(),
        Tone::Plain => return text.to_string(),
        Tone::Title => "1;32",
        Tone::Dim => "2",
        Tone::Warn => "1;31",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// Spans joined into one output string.
pub(crate) fn paint_spans(spans: &[Span], color: bool) -> String {
    spans
        .iter()
        .map(|s| paint(&s.text, s.tone, color))
        .collect()
}

/// Width of a rendered string, skipping `ESC [ … m` sequences.
pub(crate) fn visible_width(s: &str) -> usize {
    let mut width = 0;
    let mut chars = s.chars();
    while let Some(ch) = chars.next() {
        if ch == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            width += 1;
        }
    }
    width
}

/// Greedy word wrap to `width` columns (a longer word gets a line of its own).
pub(crate) fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(20);
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        let cur_w = cur.chars().count();
        if cur_w > 0 && cur_w + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

/// A dim paragraph wrapped to the report width.
pub(crate) fn note(text: &str, width: usize, color: bool) -> Vec<String> {
    wrap(text, width)
        .iter()
        .map(|l| paint(l, Tone::Dim, color))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_ignores_escape_codes() {
        let s = paint("∅ (1/2)*", Tone::Dim, true);
        assert_ne!(s, "∅ (1/2)*");
        assert_eq!(visible_width(&s), 8);
    }

    #[test]
    fn wrap_breaks_between_words() {
        let lines = wrap("aaa bbb ccc ddd eee fff ggg hhh iii", 20);
        assert_eq!(lines, vec!["aaa bbb ccc ddd eee", "fff ggg hhh iii"]);
    }

    #[test]
    fn no_color_means_no_escapes() {
        assert_eq!(paint("x", Tone::Warn, false), "x");
    }
}
