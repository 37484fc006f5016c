//! The house rule on size (house-style.md): no non-test function over 100
//! lines and no non-test file over 600 lines, in every crate of the
//! workspace. The few offenders that remain are listed below with their
//! size today: one may shrink (and should then leave the list), none may
//! grow, and a new one fails this test with its place and size.
//!
//! The scan relies on rustfmt's layout (a body ends at a `}` on its own
//! line at the indentation of its `fn`); test modules (`#[cfg(test)] mod`),
//! `tests.rs` files and `tests/`, `benches/` and `examples/` directories
//! are left out.
//!
//! `cargo test -p llm-decode-bench --test size_rule -- --nocapture` prints
//! every offender.

use std::path::{Path, PathBuf};

const MAX_FN_LINES: usize = 100;
const MAX_FILE_LINES: usize = 600;

/// Known offenders: (path from the workspace root, function name or `""`
/// for the file itself, lines today).
const KNOWN: &[(&str, &str, usize)] = &[];

/// One item over its limit.
#[derive(Debug, PartialEq)]
struct Offender {
    path: String,
    item: String,
    lines: usize,
}

#[test]
fn no_function_over_100_lines_and_no_file_over_600() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut offenders = Vec::new();
    for file in rust_files(&root.join("crates")) {
        let rel = file
            .strip_prefix(&root)
            .unwrap_or(&file)
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&file).expect("read a source file");
        offenders.extend(scan(&rel, &text));
    }
    for o in &offenders {
        println!("{}: {} {} lines", o.path, item_name(&o.item), o.lines);
    }
    let mut problems = Vec::new();
    for o in &offenders {
        match KNOWN.iter().find(|(p, i, _)| *p == o.path && *i == o.item) {
            Some((_, _, known)) if o.lines <= *known => {}
            Some((_, _, known)) => problems.push(format!(
                "{}: {} grew to {} lines (was {known}; limit {})",
                o.path,
                item_name(&o.item),
                o.lines,
                limit(&o.item)
            )),
            None => problems.push(format!(
                "{}: {} has {} lines (limit {}): split it into pieces named for what they do",
                o.path,
                item_name(&o.item),
                o.lines,
                limit(&o.item)
            )),
        }
    }
    for (p, i, _) in KNOWN {
        if !offenders.iter().any(|o| o.path == *p && o.item == *i) {
            problems.push(format!(
                "{p}: {} is within the limit now: remove it from KNOWN in tests/size_rule.rs",
                item_name(i)
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn item_name(item: &str) -> String {
    if item.is_empty() {
        "the file".to_string()
    } else {
        format!("fn {item}")
    }
}

fn limit(item: &str) -> usize {
    if item.is_empty() {
        MAX_FILE_LINES
    } else {
        MAX_FN_LINES
    }
}

/// Every `.rs` file under `dir` that is not test code.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !matches!(name, "tests" | "benches" | "examples" | "target" | "fuzz") {
                out.extend(rust_files(&path));
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(path);
        }
    }
    out
}

/// The offenders of one file: the file (its lines outside test modules)
/// and each function over the limit.
fn scan(path: &str, text: &str) -> Vec<Offender> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut code_lines = 0;
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() == "#[cfg(test)]" && next_is_mod(&lines, i + 1) {
            i = block_end(&lines, i + 1) + 1;
            continue;
        }
        code_lines += 1;
        if let Some(name) = fn_name(lines[i])
            && let Some(end) = fn_end(&lines, i)
            && end - i + 1 > MAX_FN_LINES
        {
            out.push(Offender {
                path: path.to_string(),
                item: name,
                lines: end - i + 1,
            });
        }
        i += 1;
    }
    if code_lines > MAX_FILE_LINES {
        out.push(Offender {
            path: path.to_string(),
            item: String::new(),
            lines: code_lines,
        });
    }
    out
}

fn next_is_mod(lines: &[&str], i: usize) -> bool {
    lines.get(i).is_some_and(|l| {
        let t = l.trim_start();
        t.starts_with("mod ") || t.starts_with("pub mod ") || t.starts_with("pub(crate) mod ")
    })
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The line closing the block opened at (or after) line `i`: the first
/// later line that is `}` at the opening line's indentation. A one-line
/// block (`mod x;`, `fn f() {}`) ends where it starts.
fn block_end(lines: &[&str], i: usize) -> usize {
    let first = lines[i].trim_end();
    if first.ends_with(';') || first.ends_with('}') {
        return i;
    }
    let close = format!("{}}}", " ".repeat(indent(lines[i])));
    (i + 1..lines.len())
        .find(|&j| lines[j].trim_end() == close)
        .unwrap_or(lines.len() - 1)
}

/// The name of the function a line starts, if it starts one.
fn fn_name(line: &str) -> Option<String> {
    let mut t = line.trim_start();
    if t.starts_with("pub(") {
        t = t.split_once(") ")?.1;
    }
    for prefix in ["pub ", "const ", "async ", "unsafe ", "extern \"C\" "] {
        t = t.strip_prefix(prefix).unwrap_or(t);
    }
    let rest = t.strip_prefix("fn ")?;
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// The line ending the function that starts at `i`; `None` for a
/// declaration without a body (a trait method).
fn fn_end(lines: &[&str], i: usize) -> Option<usize> {
    let fn_indent = indent(lines[i]);
    for (j, line) in lines.iter().enumerate().skip(i) {
        let t = line.trim_end();
        if t.ends_with(';') && !t.contains('{') {
            return None;
        }
        if t.ends_with('{') || t.ends_with('}') {
            if t.ends_with('}') && t.contains('{') {
                return Some(j);
            }
            let close = format!("{}}}", " ".repeat(fn_indent));
            return (j + 1..lines.len()).find(|&k| lines[k].trim_end() == close);
        }
    }
    None
}

#[test]
fn the_scan_measures_functions_and_files_as_rustfmt_lays_them_out() {
    let body = "    let x = 1;\n".repeat(101);
    let text = format!(
        "//! doc\n\npub(crate) async fn long(\n    a: u32,\n) -> u32 {{\n{body}    x\n}}\n\nfn short() {{}}\n\ntrait T {{\n    fn decl(&self);\n}}\n\n#[cfg(test)]\nmod tests {{\n    fn ignored() {{\n{body}    }}\n}}\n"
    );
    let found = scan("x.rs", &text);
    assert_eq!(
        found,
        vec![Offender {
            path: "x.rs".into(),
            item: "long".into(),
            lines: 106,
        }]
    );
    let big = "const A: u8 = 0;\n".repeat(601);
    assert_eq!(scan("y.rs", &big).len(), 1);
}
