//! Spreadsheet formula injection: a cell of a result file's text (an error
//! from the server, a model name, a note) that starts with `=`, `+`, `-`,
//! `@`, a tab or a carriage return is run as a formula by Excel, LibreOffice
//! and Google Sheets when the CSV is opened (`=HYPERLINK(…)`, `=cmd|…`).
//! Such a cell gets a leading `'`, which the spreadsheets show as text;
//! numbers (`-1.5`, `+3`) are left as they are so they stay numbers.

/// `cell` as it is safe to write (see the module).
pub(crate) fn neutralise(cell: String) -> String {
    let risky = matches!(
        cell.chars().next(),
        Some('=' | '+' | '-' | '@' | '\t' | '\r')
    );
    if risky && !cell.parse::<f64>().is_ok_and(f64::is_finite) {
        format!("'{cell}")
    } else {
        cell
    }
}

#[cfg(test)]
mod tests {
    use super::neutralise;

    #[test]
    fn formulas_become_text_and_numbers_stay_numbers() {
        for (given, written) in [
            (
                "=HYPERLINK(\"http://x\",\"y\")",
                "'=HYPERLINK(\"http://x\",\"y\")",
            ),
            ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
            ("-2+3", "'-2+3"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\t=1", "'\t=1"),
            ("\r=1", "'\r=1"),
            ("-inf", "'-inf"),
            ("-1.5", "-1.5"),
            ("+3", "+3"),
            ("-2e-7", "-2e-7"),
            ("HTTP 500 = boom", "HTTP 500 = boom"),
            ("", ""),
        ] {
            assert_eq!(neutralise(given.to_string()), written, "{given:?}");
        }
    }
}
