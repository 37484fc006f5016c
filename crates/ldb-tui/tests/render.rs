//! Snapshot tests of whole frames at each layout width.

use ldb_core::live::LiveSnapshot;
use ldb_tui::demo;
use ldb_tui::model::{Model, Overlay};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn frame(model: &Model) -> String {
    let (w, h) = model.size;
    let mut term = Terminal::new(TestBackend::new(w, h)).expect("test backend");
    term.draw(|f| ldb_tui::render::render(f, model))
        .expect("draw");
    term.backend().to_string()
}

fn model(snapshot: LiveSnapshot, w: u16, h: u16) -> Model {
    Model::new(snapshot, (w, h), true)
}

#[test]
fn wide_mid_decode() {
    insta::assert_snapshot!(frame(&model(demo::mid_decode(), 180, 50)));
}

#[test]
fn mid_mid_decode() {
    insta::assert_snapshot!(frame(&model(demo::mid_decode(), 120, 40)));
}

#[test]
fn narrow_mid_decode() {
    insta::assert_snapshot!(frame(&model(demo::mid_decode(), 80, 30)));
}

#[test]
fn too_small() {
    insta::assert_snapshot!(frame(&model(demo::mid_decode(), 30, 8)));
}

#[test]
fn wide_prefill_running_without_hardware() {
    insta::assert_snapshot!(frame(&model(demo::prefill_running(), 180, 50)));
}

#[test]
fn mid_prefill_running_without_hardware() {
    insta::assert_snapshot!(frame(&model(demo::prefill_running(), 120, 40)));
}

#[test]
fn narrow_prefill_running_without_hardware() {
    insta::assert_snapshot!(frame(&model(demo::prefill_running(), 80, 30)));
}

#[test]
fn mid_decode_without_hardware_mid_width() {
    let mut s = demo::mid_decode();
    s.hardware = None;
    insta::assert_snapshot!(frame(&model(s, 120, 40)));
}

#[test]
fn help_overlay() {
    let mut m = model(demo::mid_decode(), 120, 40);
    m.overlay = Overlay::Help;
    insta::assert_snapshot!(frame(&m));
}

#[test]
fn output_overlay() {
    let mut m = model(demo::mid_decode(), 120, 40);
    m.overlay = Overlay::Output;
    m.viewer.stream = 2;
    insta::assert_snapshot!(frame(&m));
}

#[test]
fn stopping_footer() {
    let mut m = model(demo::mid_decode(), 120, 40);
    m.stopping = true;
    let f = frame(&m);
    assert!(f.contains("stopping"), "{f}");
}

#[test]
fn empty_snapshot_renders_at_every_size() {
    for (w, h) in [
        (180, 50),
        (120, 40),
        (80, 30),
        (60, 20),
        (200, 12),
        (59, 60),
    ] {
        let f = frame(&model(LiveSnapshot::default(), w, h));
        assert!(!f.is_empty());
    }
}

#[test]
fn every_size_from_tiny_to_wide_renders() {
    let s = demo::mid_decode();
    for w in (1..=200).step_by(7) {
        for h in (1..=60).step_by(4) {
            for overlay in [Overlay::None, Overlay::Help, Overlay::Output] {
                let mut m = model(s.clone(), w, h);
                m.overlay = overlay;
                let _ = frame(&m);
            }
        }
    }
}

#[test]
fn clocks_count_on_in_the_header_and_prefill_panels() {
    use ldb_tui::update::{Msg, update};
    use std::time::{Duration, Instant};
    let mut s = demo::prefill_running();
    s.eta = Some(600.0);
    // As the runner publishes a prefill row: an estimate, no elapsed time.
    s.prefill[1].elapsed = 0.0;
    s.prefill[1].eta = Some(20.0);
    let mut m = model(s, 120, 40);
    let t0 = Instant::now();
    update(&mut m, Msg::Tick(t0));
    update(&mut m, Msg::Tick(t0 + Duration::from_secs(5)));
    let f = frame(&m);
    assert!(f.contains("elapsed 53s"), "{f}");
    assert!(f.contains("ETA 9m 55s"), "{f}");
    assert!(f.contains("left ~15s"), "{f}");
    assert!(f.contains("▶    5s eta ~15s"), "{f}");
    update(&mut m, Msg::Tick(t0 + Duration::from_secs(30)));
    let f = frame(&m);
    assert!(f.contains("estimate ~20s exceeded; still waiting"), "{f}");
    assert!(f.contains("over estimate"), "{f}");
}
