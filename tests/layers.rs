//! The architecture, checked: every module of `src/` imports only from the
//! layers below it (or from the modules of its own layer this table allows),
//! `model` imports nothing else from the crate, and there is no import cycle.
//! The graph is read from the `crate::` paths in the source, so moving a type
//! to the wrong place fails here, with the offending file named.
//!
//! `cargo test --test layers -- --nocapture` also prints the graph and the
//! lines of code per module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each module's layer: it may import any module of a lower layer.
const LAYERS: &[(&str, u8)] = &[
    ("model", 0),
    ("plan", 1),
    ("detect", 1),
    ("load", 1),
    ("gpu", 1),
    ("store", 1),
    ("engine", 2),
    ("control", 2),
    ("view", 3),
    ("tui", 3),
    ("export", 3),
    ("headless", 3),
    ("cli", 4),
];

/// Imports within a layer that are allowed (importer, imported). They must not
/// form a cycle either.
const SAME_LAYER: &[(&str, &str)] = &[
    // A workload's prompts and API come from the plan.
    ("load", "plan"),
    // The validator judges a cell's measured run.
    ("detect", "load"),
    // Attaching clients reach the engine's channels and commands.
    ("control", "engine"),
    // Every view renders the one view model.
    ("tui", "view"),
    ("export", "view"),
    ("headless", "view"),
    // The dashboard's `e` key writes the exports.
    ("tui", "export"),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file belongs to (`src/engine/cell.rs` → `engine`).
fn module_of(file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src()).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// The source without comments, string and char literals (so a path in a doc
/// comment or a message does not count as an import).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |e| e + 2);
        } else if let Some(hashes) = raw_string_start(rest) {
            let close = format!("\"{}", "#".repeat(hashes));
            let body = 2 + hashes;
            i += body
                + rest[body..]
                    .find(&close)
                    .map_or(rest.len() - body, |e| e + close.len());
            out.push_str("\"\"");
        } else if rest.starts_with('"') {
            let mut j = 1;
            while j < rest.len() {
                match b[i + j] {
                    b'\\' => j += 2,
                    b'"' => break,
                    _ => j += 1,
                }
            }
            i += (j + 1).min(rest.len());
            out.push_str("\"\"");
        } else if let Some(len) = char_literal(rest) {
            i += len;
            out.push_str("' '");
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// `r"`, `r#"`, `br##"`…: the number of hashes.
fn raw_string_start(s: &str) -> Option<usize> {
    let s = s.strip_prefix('b').unwrap_or(s);
    let s = s.strip_prefix('r')?;
    let hashes = s.bytes().take_while(|&c| c == b'#').count();
    s[hashes..].starts_with('"').then_some(hashes)
}

/// `'x'`, `'\n'`, `'\''`, `'\u{1F600}'` (not a lifetime): its length.
fn char_literal(s: &str) -> Option<usize> {
    if !s.starts_with('\'') {
        return None;
    }
    let mut it = s.char_indices().skip(1);
    let (_, c) = it.next()?;
    if c == '\\' {
        let end = s[2..].find('\'')? + 2;
        return Some(end + 1);
    }
    let (j, close) = it.next()?;
    (close == '\'').then_some(j + 1)
}

/// The crate's top-level modules a file's code names.
fn imports(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `sweeptop_crate::` and the like
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `use crate::{a, b::c, d::{e, f}}`: the first segment of each item.
            let mut depth = 0;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && (c.is_alphanumeric() || c == '_') => {
                        let name: String = group[i..]
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        found.insert(name);
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

struct Graph {
    /// module → (imported module → the first file that imports it)
    edges: BTreeMap<String, BTreeMap<String, PathBuf>>,
    lines: BTreeMap<String, usize>,
}

fn graph() -> Graph {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(f)).collect();
    let mut edges: BTreeMap<String, BTreeMap<String, PathBuf>> = BTreeMap::new();
    let mut lines = BTreeMap::new();
    for f in &files {
        let Some(m) = module_of(f) else { continue };
        let text = std::fs::read_to_string(f).unwrap_or_default();
        *lines.entry(m.clone()).or_insert(0) += text.lines().count();
        let entry = edges.entry(m.clone()).or_default();
        for dep in imports(&code_only(&text)) {
            if dep != m && modules.contains(&dep) {
                entry.entry(dep).or_insert_with(|| f.clone());
            }
        }
    }
    Graph { edges, lines }
}

fn layer(m: &str) -> Option<u8> {
    LAYERS.iter().find(|(n, _)| *n == m).map(|(_, l)| *l)
}

#[test]
fn every_module_has_a_layer() {
    for m in graph().edges.keys() {
        assert!(
            layer(m).is_some(),
            "src/{m} is in no layer: add it to LAYERS in tests/layers.rs (and to lib.rs's Layout)"
        );
    }
}

#[test]
fn the_model_imports_nothing_else_from_the_crate() {
    let g = graph();
    let deps = &g.edges["model"];
    assert!(
        deps.is_empty(),
        "model must not import other modules: {:?}",
        deps.iter()
            .map(|(d, f)| format!("{d} (in {})", f.display()))
            .collect::<Vec<_>>()
    );
}

#[test]
fn modules_import_only_from_the_layers_below() {
    let g = graph();
    let mut wrong = Vec::new();
    for (m, deps) in &g.edges {
        let Some(lm) = layer(m) else { continue };
        for (d, file) in deps {
            let ld = layer(d).unwrap_or(u8::MAX);
            let allowed = ld < lm || (ld == lm && SAME_LAYER.contains(&(m.as_str(), d.as_str())));
            if !allowed {
                wrong.push(format!(
                    "{m} (layer {lm}) imports {d} (layer {ld}) in {}",
                    file.display()
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layering:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn there_is_no_import_cycle() {
    let g = graph();
    // Depth-first search for a back edge; report the cycle it closes.
    fn visit(
        m: &str,
        g: &Graph,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut cycle = path[i..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for d in g.edges.get(m).into_iter().flat_map(|d| d.keys()) {
            if let Some(c) = visit(d, g, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for m in g.edges.keys() {
        if let Some(cycle) = visit(m, &g, &mut Vec::new(), &mut done) {
            panic!("import cycle: {}", cycle.join(" → "));
        }
    }
    for (m, deps) in &g.edges {
        println!(
            "{m:<9} {:>6} lines  → {}",
            g.lines[m],
            deps.keys().cloned().collect::<Vec<_>>().join(" ")
        );
    }
}

#[test]
fn the_reader_understands_rust() {
    let code = code_only(
        r##"
        // use crate::tui;
        /* crate::cli */
        let s = "crate::engine";
        let r = r#"crate::engine "quoted""#;
        let c = '"'; fn f<'a>(x: &'a str) {}
        use crate::{model::{Event, Level}, plan, store::RunDir};
        let x = crate::view::grid::Grid::build(&v);
        "##,
    );
    let found: Vec<String> = imports(&code).into_iter().collect();
    assert_eq!(found, ["model", "plan", "store", "view"]);
}
