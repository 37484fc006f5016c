//! The one check every chart's axis range passes before it reaches
//! `plotters`: its tick search steps through the range in floating point
//! and never ends when the range is infinite, or when the step is below the
//! precision of the values (a range of 1 around 1e15). A result file from
//! elsewhere can hold any number, so a range out of these bounds becomes the
//! chart's "could not be drawn" note instead of a page that never comes.

/// No figure the product draws (tok/s, seconds, watts, percent, MB/s,
/// token counts) comes near this; beyond it a value is a hostile or corrupt
/// file.
const MAX_MAGNITUDE: f64 = 1e18;

/// The smallest width relative to the values' magnitude: far above f64's
/// precision (about 1e-16), so every tick step moves the value.
const MIN_RELATIVE_WIDTH: f64 = 1e-6;

/// `Ok` when `lo..hi` can be handed to `plotters`; else why not.
pub(super) fn check(axis: &str, lo: f64, hi: f64) -> Result<(), String> {
    let width = hi - lo;
    let magnitude = lo.abs().max(hi.abs());
    let fits = lo.is_finite()
        && hi.is_finite()
        && width.is_finite()
        && width > 0.0
        && magnitude <= MAX_MAGNITUDE
        && width >= magnitude * MIN_RELATIVE_WIDTH;
    if fits {
        Ok(())
    } else {
        Err(format!(
            "its {axis} values ({lo:e} to {hi:e}) are outside what a chart can show"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::check;
    use plotters::prelude::*;

    /// Draws an empty chart with a mesh over the ranges: the tick search
    /// this module guards.
    fn draw(x: (f64, f64), y: (f64, f64)) {
        let mut svg = String::new();
        let root = SVGBackend::with_string(&mut svg, (200, 100)).into_drawing_area();
        let mut chart = ChartBuilder::on(&root)
            .x_label_area_size(10)
            .y_label_area_size(10)
            .build_cartesian_2d(x.0..x.1, y.0..y.1)
            .expect("built");
        chart.configure_mesh().draw().expect("drawn");
    }

    #[test]
    fn ranges_a_run_cannot_produce_are_refused() {
        assert!(check("x", 0.0, 30.0).is_ok());
        assert!(check("y", -5.0, 1e9).is_ok());
        for (lo, hi) in [
            (-1e308, 1e308),
            (0.0, f64::INFINITY),
            (f64::NAN, 1.0),
            (2.0, 2.0),
            (3.0, 1.0),
            (0.0, 2e18),
            (1e11, 1e11 + 1.0),
        ] {
            let e = check("x", lo, hi).expect_err("refused");
            assert!(e.contains("outside what a chart can show"), "{e}");
        }
    }

    #[test]
    fn the_edges_of_the_accepted_ranges_still_draw() {
        // Each finishes: at the largest magnitude, at the narrowest width
        // for it, and a tiny range near zero.
        draw((0.0, 1e18), (-1e18, 1e18));
        draw((1e18 - 1e12, 1e18), (1e6, 1e6 + 1.0));
        draw((0.0, 1e-9), (-1e-300, 1e-300));
    }
}
