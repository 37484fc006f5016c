use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ldb_core::live::{Control, StreamText};

use super::*;
use crate::demo;
use crate::model::{Model, Overlay};

fn key(code: KeyCode) -> Msg {
    Msg::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn ctrl_c() -> Msg {
    Msg::Key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL))
}

fn model() -> Model {
    Model::new(demo::mid_decode(), (120, 40), true)
}

/// A model whose stream 0 wraps to `lines` lines in the 120×40 viewer.
fn long_output(lines: usize) -> Model {
    let mut m = model();
    m.snapshot.outputs = vec![
        StreamText {
            slot: 0,
            text: (0..lines)
                .map(|i| format!("line {i}"))
                .collect::<Vec<_>>()
                .join("\n"),
        },
        StreamText {
            slot: 5,
            text: "short".into(),
        },
    ];
    m.overlay = Overlay::Output;
    m
}

#[test]
fn q_stops_once() {
    let mut m = model();
    assert_eq!(
        update(&mut m, key(KeyCode::Char('q'))),
        Some(Cmd::Control(Control::Stop))
    );
    assert!(m.stopping);
    assert_eq!(update(&mut m, key(KeyCode::Char('q'))), None);
}

#[test]
fn ctrl_c_stops_and_repeats() {
    let mut m = model();
    assert_eq!(update(&mut m, ctrl_c()), Some(Cmd::Control(Control::Stop)));
    assert_eq!(update(&mut m, ctrl_c()), Some(Cmd::Control(Control::Stop)));
    // A plain `c` does nothing.
    assert_eq!(update(&mut m, key(KeyCode::Char('c'))), None);
}

#[test]
fn s_skips_once_per_cell() {
    let mut m = model();
    assert_eq!(
        update(&mut m, key(KeyCode::Char('s'))),
        Some(Cmd::Control(Control::Skip))
    );
    assert_eq!(update(&mut m, key(KeyCode::Char('s'))), None);
    // Same cell again: still skipping.
    update(&mut m, Msg::Snapshot(Box::new(demo::mid_decode())));
    assert_eq!(update(&mut m, key(KeyCode::Char('s'))), None);
    // The next cell: skip works again.
    let mut next = demo::mid_decode();
    if let Some(c) = next.current.as_mut() {
        c.concurrency = 8;
    }
    update(&mut m, Msg::Snapshot(Box::new(next)));
    assert!(!m.skipping);
    assert_eq!(
        update(&mut m, key(KeyCode::Char('s'))),
        Some(Cmd::Control(Control::Skip))
    );
}

#[test]
fn no_skip_after_stop() {
    let mut m = model();
    update(&mut m, key(KeyCode::Char('q')));
    assert_eq!(update(&mut m, key(KeyCode::Char('s'))), None);
}

#[test]
fn key_release_is_ignored() {
    let mut m = model();
    let mut k = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE);
    k.kind = KeyEventKind::Release;
    assert_eq!(update(&mut m, Msg::Key(k)), None);
    assert!(!m.stopping);
}

#[test]
fn overlays_toggle_and_close() {
    let mut m = model();
    update(&mut m, key(KeyCode::Char('?')));
    assert_eq!(m.overlay, Overlay::Help);
    update(&mut m, key(KeyCode::Char('?')));
    assert_eq!(m.overlay, Overlay::None);
    update(&mut m, key(KeyCode::Char('o')));
    assert_eq!(m.overlay, Overlay::Output);
    update(&mut m, key(KeyCode::Char('?')));
    assert_eq!(m.overlay, Overlay::Help);
    update(&mut m, key(KeyCode::Esc));
    assert_eq!(m.overlay, Overlay::None);
    update(&mut m, key(KeyCode::Char('o')));
    update(&mut m, key(KeyCode::Char('o')));
    assert_eq!(m.overlay, Overlay::None);
}

#[test]
fn arrows_do_nothing_without_viewer() {
    let mut m = model();
    m.dirty = false;
    assert_eq!(update(&mut m, key(KeyCode::Up)), None);
    assert_eq!(m.viewer.scroll, None);
    assert!(!m.dirty, "an unbound key does not redraw");
}

#[test]
fn viewer_scrolls_within_bounds() {
    let mut m = long_output(100);
    let (lines, page) = viewer_extent(&m);
    assert_eq!(lines, 100);
    let max = lines - page;
    // Follows the end until scrolled.
    assert_eq!(m.viewer.scroll, None);
    update(&mut m, key(KeyCode::Up));
    assert_eq!(m.viewer.scroll, Some(max - 1));
    update(&mut m, key(KeyCode::PageUp));
    assert_eq!(m.viewer.scroll, Some(max - 1 - page));
    for _ in 0..20 {
        update(&mut m, key(KeyCode::PageUp));
    }
    assert_eq!(m.viewer.scroll, Some(0));
    update(&mut m, key(KeyCode::Up));
    assert_eq!(m.viewer.scroll, Some(0));
    update(&mut m, key(KeyCode::Down));
    assert_eq!(m.viewer.scroll, Some(1));
    // Scrolling past the end follows the text again.
    for _ in 0..20 {
        update(&mut m, key(KeyCode::PageDown));
    }
    assert_eq!(m.viewer.scroll, None);
    update(&mut m, key(KeyCode::Home));
    assert_eq!(m.viewer.scroll, Some(0));
    update(&mut m, key(KeyCode::End));
    assert_eq!(m.viewer.scroll, None);
}

#[test]
fn short_text_never_scrolls() {
    let mut m = long_output(3);
    update(&mut m, key(KeyCode::Up));
    assert_eq!(m.viewer.scroll, None);
    update(&mut m, key(KeyCode::PageUp));
    assert_eq!(m.viewer.scroll, None);
}

#[test]
fn streams_cycle_both_ways() {
    let mut m = long_output(100);
    update(&mut m, key(KeyCode::Up));
    update(&mut m, key(KeyCode::Char('n')));
    assert_eq!(m.viewer.stream, 1);
    assert_eq!(m.viewer.scroll, None, "a new stream starts at its end");
    update(&mut m, key(KeyCode::Right));
    assert_eq!(m.viewer.stream, 0);
    update(&mut m, key(KeyCode::Left));
    assert_eq!(m.viewer.stream, 1);
    update(&mut m, key(KeyCode::Char('p')));
    assert_eq!(m.viewer.stream, 0);
}

#[test]
fn fewer_streams_clamp_the_index() {
    let mut m = model();
    m.overlay = Overlay::Output;
    m.viewer.stream = 3;
    let mut s = demo::mid_decode();
    s.outputs.truncate(2);
    update(&mut m, Msg::Snapshot(Box::new(s)));
    assert_eq!(m.viewer.stream, 1);
    let mut s = demo::mid_decode();
    s.outputs.clear();
    update(&mut m, Msg::Snapshot(Box::new(s)));
    assert_eq!(m.viewer.stream, 0);
    assert_eq!(update(&mut m, key(KeyCode::Char('n'))), None);
}

#[test]
fn shrinking_the_terminal_clamps_the_scroll() {
    let mut m = long_output(100);
    update(&mut m, key(KeyCode::Up));
    update(&mut m, Msg::Resize(200, 120));
    // 100 lines fit on a 120-row screen: back to following.
    assert_eq!(m.viewer.scroll, None);
    assert_eq!(m.size, (200, 120));
}

#[test]
fn snapshots_and_resizes_mark_dirty_ticks_do_not() {
    let mut m = model();
    m.dirty = false;
    update(&mut m, Msg::Tick(std::time::Instant::now()));
    assert!(!m.dirty);
    update(&mut m, Msg::Resize(80, 30));
    assert!(m.dirty);
    m.dirty = false;
    update(&mut m, Msg::Snapshot(Box::new(demo::prefill_running())));
    assert!(m.dirty);
}

#[test]
fn clocks_count_on_between_snapshots() {
    use std::time::{Duration, Instant};
    let t0 = Instant::now();
    let mut m = Model::new(demo::prefill_running(), (120, 40), true);
    update(&mut m, Msg::Tick(t0));
    assert_eq!(m.run_since(), 0.0);
    m.dirty = false;
    update(&mut m, Msg::Tick(t0 + Duration::from_millis(500)));
    assert!(!m.dirty, "no new whole second yet");
    update(&mut m, Msg::Tick(t0 + Duration::from_secs(3)));
    assert!(m.dirty);
    assert_eq!(m.run_since(), 3.0);
    assert_eq!(m.prefill_since(), 3.0);
    // The same snapshot again: the counts go on.
    update(&mut m, Msg::Snapshot(Box::new(demo::prefill_running())));
    assert_eq!(m.run_since(), 3.0);
    // New run clocks restart the run count only.
    let mut s = demo::prefill_running();
    s.elapsed += 3.0;
    update(&mut m, Msg::Snapshot(Box::new(s.clone())));
    assert_eq!(m.run_since(), 0.0);
    assert_eq!(m.prefill_since(), 3.0);
    // A new running prefill row restarts its count.
    s.prefill[1].tok_per_sec = Some(1.0);
    s.prefill[2].eta = Some(9.0);
    update(&mut m, Msg::Snapshot(Box::new(s.clone())));
    assert_eq!(m.prefill_since(), 0.0);
    // Once the run is done nothing counts on.
    update(&mut m, Msg::Tick(t0 + Duration::from_secs(9)));
    s.phase = ldb_core::live::Phase::Done;
    update(&mut m, Msg::Snapshot(Box::new(s)));
    update(&mut m, Msg::Tick(t0 + Duration::from_secs(20)));
    assert_eq!(m.run_since(), 0.0);
}

#[test]
fn ctrl_l_asks_for_a_full_redraw() {
    let mut m = model();
    let k = Msg::Key(KeyEvent::new(KeyCode::Char('l'), KeyModifiers::CONTROL));
    assert_eq!(update(&mut m, k), Some(Cmd::Redraw));
    assert!(!m.stopping);
}

#[test]
fn the_viewer_keeps_only_the_tail_of_huge_text() {
    let mut m = long_output(1);
    m.snapshot.outputs[0].text = "x\n".repeat(100_000);
    let (lines, _) = viewer_extent(&m);
    assert!(lines <= VIEWER_BYTES / 2 + 1, "{lines}");
}
