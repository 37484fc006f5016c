//! Colours. Named ANSI colours only, so the dashboard reads on 16-colour
//! terminals and keeps its meaning when a theme remaps them.

use ratatui::style::{Color, Modifier, Style};

/// Panel borders.
pub fn frame() -> Style {
    Style::new().fg(Color::Green)
}

/// Panel titles.
pub fn title() -> Style {
    Style::new()
        .fg(Color::LightGreen)
        .add_modifier(Modifier::BOLD)
}

/// Ordinary text.
pub fn text() -> Style {
    Style::new()
}

/// Values worth the eye (tok/s).
pub fn value() -> Style {
    Style::new().fg(Color::LightGreen)
}

/// Secondary text (legends, details, pending cells).
pub fn dim() -> Style {
    Style::new().fg(Color::DarkGray)
}

/// Something is happening now (running cell, stage).
pub fn active() -> Style {
    Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD)
}

/// Warnings (capacity-limited, skipped, high temperature).
pub fn warn() -> Style {
    Style::new().fg(Color::Yellow)
}

/// Errors.
pub fn error() -> Style {
    Style::new()
        .fg(Color::LightRed)
        .add_modifier(Modifier::BOLD)
}

/// Amber/red by how close `ratio` is to 1 (`amber`/`red` thresholds).
pub fn level(ratio: Option<f64>, amber: f64, red: f64) -> Style {
    match ratio {
        Some(r) if r >= red => error(),
        Some(r) if r >= amber => warn(),
        _ => text(),
    }
}
