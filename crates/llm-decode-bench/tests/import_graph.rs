//! The import graph inside each crate (issue 36, item 3): one node per
//! source file, an edge from a file to every file it names through a
//! `crate::…` or `super::…` path (in `use` lines and in code). A strongly
//! connected group — files that all reach each other — is a knot a reader
//! must hold at once; the target is no group of more than 3 files.
//!
//! Where a crate is above the target today, its largest group's size is
//! written below: the group may shrink (lower the number with it) and may
//! not grow; every other crate must stay at 3 or fewer.
//!
//! `cargo test -p llm-decode-bench --test import_graph -- --nocapture`
//! prints each crate's largest group and its files; with
//! `IMPORT_GRAPH_EDGES=module::path` set, also that module's edges.
//!
//! A path is followed to the file that defines its item: through
//! `pub use` re-exports of the module it names (`crate::replay::X` where
//! `replay.rs` has `pub use config::X` leads to `replay/config.rs`). Test
//! modules (`tests.rs`, `*_tests.rs`, an inline `#[cfg(test)] mod`) are
//! left out: they read everything around them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_GROUP: usize = 3;

/// Crates above [`MAX_GROUP`] today: (crate folder, files in its largest
/// group today).
const KNOWN: &[(&str, usize)] = &[
    // The runner's phases reach each other through `RunCtx` and the cell:
    // the knot issue 36 items 1–3 exist to cut.
    ("ldb-runner", 36),
    // The result types and the modules whose figures they hold.
    ("ldb-core", 15),
];

#[test]
fn no_crate_has_an_import_knot_larger_than_its_ceiling() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut problems = Vec::new();
    for krate in crate_dirs(&root.join("crates")) {
        let name = krate
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let graph = Graph::of_crate(&krate.join("src"));
        let group = graph.largest_group();
        if let Ok(m) = std::env::var("IMPORT_GRAPH_EDGES") {
            for (from, to) in graph.edges.iter().filter(|(f, _)| f.as_str() == m) {
                println!("{name}: {from} -> {to:?}");
            }
        }
        println!("{name}: largest group {} files: {group:?}", group.len());
        let ceiling = KNOWN
            .iter()
            .find(|(k, _)| *k == name)
            .map_or(MAX_GROUP, |(_, n)| *n);
        if group.len() > ceiling {
            problems.push(format!(
                "{name}: {} files import each other in a circle (ceiling {ceiling}): {}",
                group.len(),
                group.join(", ")
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_scan_finds_paths_in_uses_groups_and_code() {
    let text =
        "use crate::{a::{b, c}, d};\nuse super::e;\n// crate::ignored\nfn f() { crate::g::h(); }\n";
    let mut found: Vec<Vec<String>> = paths_in(text)
        .into_iter()
        .map(|(sup, p)| {
            let mut v = vec![if sup == 0 {
                "crate".into()
            } else {
                format!("super{sup}")
            }];
            v.extend(p);
            v
        })
        .collect();
    found.sort();
    let want: Vec<Vec<String>> = ["crate a b", "crate a c", "crate d", "crate g h", "super1 e"]
        .iter()
        .map(|s| s.split(' ').map(String::from).collect())
        .collect();
    assert_eq!(found, want);
}

#[test]
fn a_circle_of_three_modules_is_one_group() {
    let mut g = Graph::default();
    for (a, b) in [("x", "y"), ("y", "z"), ("z", "x"), ("z", "w")] {
        g.edge(a, b);
    }
    let group = g.largest_group();
    assert_eq!(group, vec!["x", "y", "z"]);
}

/// The crate folders under `crates/`.
fn crate_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("crates/ is readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("src").is_dir())
        .collect();
    out.sort();
    out
}

/// Files as nodes, by module path (`""` is the crate root).
#[derive(Default)]
struct Graph {
    edges: BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    fn edge(&mut self, from: &str, to: &str) {
        self.edges.entry(to.into()).or_default();
        if from != to {
            self.edges.entry(from.into()).or_default().insert(to.into());
        }
    }

    fn of_crate(src: &Path) -> Graph {
        let files = module_files(src);
        let modules: BTreeSet<&str> = files.keys().map(String::as_str).collect();
        let texts: BTreeMap<&str, String> = files
            .iter()
            .map(|(m, p)| {
                let text = std::fs::read_to_string(p).expect("read a source file");
                (m.as_str(), without_test_module(&text).to_string())
            })
            .collect();
        // `pub use child::Item;` in a module file: a path through that
        // module to `Item` leads to the file that defines it.
        let mut aliases: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for (module, text) in &texts {
            let own = segments(module);
            for (from, rest) in reexports_in(text) {
                let base = match from {
                    None => own.len(),
                    Some(0) => 0,
                    Some(n) => own.len().saturating_sub(n),
                };
                if let Some((item, _)) = rest.split_last() {
                    let mut full = own[..base].to_vec();
                    full.extend(rest.iter().map(String::as_str));
                    let full = full.iter().map(|s| s.to_string()).collect();
                    aliases.insert((module.to_string(), item.clone()), full);
                }
            }
        }
        let mut g = Graph::default();
        for (module, text) in &texts {
            g.edge(module, module);
            let own = segments(module);
            for (supers, rest) in paths_in(text) {
                // `super` from `a/b.rs` (module a::b) names a; from a
                // `mod.rs` or a root file, the same rule on the module path.
                let base = if supers == 0 {
                    0 // `crate::`
                } else if let Some(b) = own.len().checked_sub(supers) {
                    b
                } else {
                    continue;
                };
                let mut full: Vec<String> = own[..base].iter().map(|s| s.to_string()).collect();
                full.extend(rest);
                if let Some(target) = resolve(&modules, &aliases, full) {
                    g.edge(module, target);
                }
            }
        }
        g
    }

    /// The largest strongly connected group, its module names sorted
    /// (Tarjan's algorithm, iterative over the small graphs here).
    fn largest_group(&self) -> Vec<String> {
        let nodes: Vec<&String> = self.edges.keys().collect();
        let index_of: BTreeMap<&String, usize> =
            nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let adj: Vec<Vec<usize>> = nodes
            .iter()
            .map(|n| self.edges[*n].iter().map(|t| index_of[t]).collect())
            .collect();
        let mut best: Vec<usize> = Vec::new();
        for group in tarjan(&adj) {
            if group.len() > best.len() {
                best = group;
            }
        }
        let mut names: Vec<String> = best.iter().map(|&i| nodes[i].clone()).collect();
        names.sort();
        names
    }
}

/// Strongly connected components of `adj`.
fn tarjan(adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(v: usize, adj: &[Vec<usize>], s: &mut State) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &adj[v] {
            match s.index[w] {
                None => {
                    visit(w, adj, s);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                group.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(group);
        }
    }
    let n = adj.len();
    let mut s = State {
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(v, adj, &mut s);
        }
    }
    s.out
}

/// Every non-test source file of a crate by its module path.
fn module_files(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source folder is readable") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap_or(&path);
            let mut parts: Vec<String> = rel
                .iter()
                .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            // Test modules read everything around them; they are not part
            // of the structure a reader follows.
            if parts
                .last()
                .is_some_and(|l| l == "tests" || l.ends_with("_tests"))
            {
                continue;
            }
            if parts
                .last()
                .is_some_and(|l| l == "mod" || l == "lib" || l == "main")
            {
                parts.pop();
            }
            out.insert(parts.join("::"), path);
        }
    }
    out
}

fn segments(module: &str) -> Vec<&str> {
    module.split("::").filter(|s| !s.is_empty()).collect()
}

/// The file a path leads to: its longest prefix that is a module with a
/// file, followed through that module's re-exports (a few hops at most).
fn resolve<'a>(
    modules: &BTreeSet<&'a str>,
    aliases: &BTreeMap<(String, String), Vec<String>>,
    mut full: Vec<String>,
) -> Option<&'a str> {
    for _ in 0..4 {
        let refs: Vec<&str> = full.iter().map(String::as_str).collect();
        let module = longest_module(modules, &refs)?;
        let depth = segments(module).len();
        let Some(next) = full.get(depth) else {
            return Some(module);
        };
        match aliases.get(&(module.to_string(), next.clone())) {
            Some(to) if *to != full[..=depth] => {
                let mut moved = to.clone();
                moved.extend(full[depth + 1..].iter().cloned());
                full = moved;
            }
            _ => return Some(module),
        }
    }
    let refs: Vec<&str> = full.iter().map(String::as_str).collect();
    longest_module(modules, &refs)
}

/// The paths of `pub use` / `pub(crate) use` / `pub(super) use` lines, as
/// (`None`: relative to the module, `self::` dropped; `Some(0)`: from the
/// crate root; `Some(n)`: `n` levels up; the segments).
fn reexports_in(text: &str) -> Vec<(Option<usize>, Vec<String>)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        let Some(rest) = ["pub use ", "pub(crate) use ", "pub(super) use "]
            .iter()
            .find_map(|p| t.strip_prefix(p))
        else {
            continue;
        };
        let rest = rest.strip_prefix("self::").unwrap_or(rest);
        let (from, rest) = if let Some(r) = rest.strip_prefix("crate::") {
            (Some(0), r)
        } else {
            let mut r = rest;
            let mut n = 0;
            while let Some(x) = r.strip_prefix("super::") {
                r = x;
                n += 1;
            }
            ((n > 0).then_some(n), r)
        };
        out.extend(
            tree(rest.as_bytes())
                .0
                .into_iter()
                .filter(|p| p.len() > 1 || from.is_some())
                .map(|p| (from, p)),
        );
    }
    out
}

/// `text` without its inline test module: `#[cfg(test)]` before a
/// `mod … {` (rustfmt and this codebase keep it last in the file).
fn without_test_module(text: &str) -> &str {
    let mut at = 0;
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|n| n.trim_start().starts_with("mod ") && n.trim_end().ends_with('{'))
        {
            return &text[..at];
        }
        at += line.len();
    }
    text
}

/// The longest prefix of `path` that is a module with a file.
fn longest_module<'a>(modules: &BTreeSet<&'a str>, path: &[&str]) -> Option<&'a str> {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find_map(|p| modules.get(p.as_str()).copied())
}

/// Every `crate::…` and `super::…` path in `text` (outside line comments),
/// as (number of leading `super`s, 0 for `crate`; the segments after them),
/// with brace groups expanded. Read as bytes: the paths are ASCII, the
/// text around them need not be.
fn paths_in(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    // rustfmt spreads a use group over lines: read the code as one line.
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join(" ");
    let b = code.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let starts_word = i == 0 || !is_ident(b[i - 1]);
        if !(starts_word && (b[i..].starts_with(b"crate::") || b[i..].starts_with(b"super::"))) {
            i += 1;
            continue;
        }
        let mut supers = 0;
        let mut j = i;
        if b[j..].starts_with(b"crate::") {
            j += "crate::".len();
        } else {
            while b[j..].starts_with(b"super::") {
                supers += 1;
                j += "super::".len();
            }
        }
        let (paths, end) = tree(&b[j..]);
        out.extend(paths.into_iter().map(|p| (supers, p)));
        i = j + end.max(1);
    }
    out
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The paths of a use tree at the start of `s` (`a::b`, `a::{b, c::d}`,
/// `{a, b}`), and how many bytes it took.
fn tree(s: &[u8]) -> (Vec<Vec<String>>, usize) {
    let mut prefix = Vec::new();
    let mut i = 0;
    loop {
        let start = i;
        while i < s.len() && is_ident(s[i]) {
            i += 1;
        }
        if i > start {
            prefix.push(String::from_utf8_lossy(&s[start..i]).into_owned());
        }
        // A group right after `crate::` (`crate::{a, b}`) or after a
        // segment (`a::{b, c}`).
        let group = if i == start && s[i..].starts_with(b"{") {
            Some(1)
        } else {
            s[i..].starts_with(b"::{").then_some(3)
        };
        if let Some(skip) = group {
            i += skip;
            let mut out = Vec::new();
            loop {
                while i < s.len() && (s[i].is_ascii_whitespace() || s[i] == b',') {
                    i += 1;
                }
                if i >= s.len() || s[i] == b'}' {
                    return (out, i + 1);
                }
                let (inner, used) = tree(&s[i..]);
                out.extend(inner.into_iter().map(|p| [prefix.clone(), p].concat()));
                i += used.max(1);
            }
        }
        if s[i..].starts_with(b"::") {
            i += 2;
            continue;
        }
        return (vec![prefix], i);
    }
}
