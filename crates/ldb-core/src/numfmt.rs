//! Number formats shared by the report, the dashboard and the event log, so
//! one value reads the same everywhere.

pub use crate::tokens::{format_context as context, thousands};

/// A float rounded to an integer, with thousands separators (sign kept);
/// `—` when not a number.
pub fn thousands_f(v: f64) -> String {
    if !v.is_finite() {
        return "—".into();
    }
    let r = v.round();
    let s = thousands(r.abs() as u64);
    if r < 0.0 { format!("-{s}") } else { s }
}

/// `v` with `digits` significant digits, but between zero and two decimals
/// (tables stay narrow and never print scientific forms): `sig(512.3, 3)` =
/// `512`, `sig(42.47, 3)` = `42.5`, `sig(3.254, 3)` = `3.25`,
/// `sig(0.5, 3)` = `0.50`, `sig(1234.5, 3)` = `1234`.
pub fn sig(v: f64, digits: i32) -> String {
    if !v.is_finite() || v == 0.0 {
        return format!("{v:.0}");
    }
    let magnitude = v.abs().log10().floor() as i32;
    let decimals = (digits - 1 - magnitude).clamp(0, 2) as usize;
    format!("{v:.decimals$}")
}

/// `v` in thousands with `decimals` decimals and a `k`: `kilo(8650.0, 1)` =
/// `8.7k`, `kilo(15400.0, 0)` = `15k`.
pub fn kilo(v: f64, decimals: usize) -> String {
    format!("{:.decimals$}k", v / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn significant_digits_by_magnitude() {
        assert_eq!(sig(512.3, 3), "512");
        assert_eq!(sig(42.47, 3), "42.5");
        assert_eq!(sig(3.254, 3), "3.25");
        assert_eq!(sig(0.5, 3), "0.50");
        assert_eq!(sig(1.234, 4), "1.23");
        assert_eq!(sig(123.44, 4), "123.4");
        assert_eq!(sig(12.344, 4), "12.34");
        assert_eq!(sig(1234.5, 3), "1234");
        assert_eq!(sig(0.0, 3), "0");
    }

    #[test]
    fn thousands_and_kilo() {
        assert_eq!(thousands_f(8199.4), "8,199");
        assert_eq!(thousands_f(-1234.0), "-1,234");
        assert_eq!(thousands_f(f64::NAN), "—");
        assert_eq!(kilo(8650.0, 1), "8.7k");
        assert_eq!(kilo(15_400.0, 0), "15k");
    }

    #[test]
    fn one_context_format() {
        assert_eq!(context(0), "0");
        assert_eq!(context(512), "512");
        assert_eq!(context(1024), "1k");
        assert_eq!(context(1536), "1.5k");
        assert_eq!(context(131_072), "128k");
    }
}
