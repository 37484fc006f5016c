//! Cost of one dashboard frame at 180×50 (the widest layout with every
//! panel), into ratatui's `TestBackend` so terminal I/O is not measured.
//!
//! CPU share at 10 fps = frame time × 10 / 1 s; see `docs/dashboard.md`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use ldb_tui::demo;
use ldb_tui::model::{Model, Overlay};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn frame(c: &mut Criterion) {
    for (name, w, h, overlay) in [
        ("frame_180x50", 180, 50, Overlay::None),
        ("frame_120x40", 120, 40, Overlay::None),
        ("frame_180x50_output_viewer", 180, 50, Overlay::Output),
    ] {
        let mut model = Model::new(demo::mid_decode(), (w, h), true);
        model.overlay = overlay;
        let mut term = match Terminal::new(TestBackend::new(w, h)) {
            Ok(t) => t,
            Err(e) => panic!("test backend: {e}"),
        };
        c.bench_function(name, |b| {
            b.iter(|| {
                // A fresh snapshot each frame, as the UI loop clones one per change.
                model.snapshot = black_box(demo::mid_decode());
                let _ = term.draw(|f| ldb_tui::render::render(f, &model));
            });
        });
    }
}

// The group lives in a private module so its generated `pub fn` is not
// crate-public API (and `missing_docs` stays quiet).
mod group {
    use super::*;
    criterion_group!(benches, frame);
}
criterion_main!(group::benches);
