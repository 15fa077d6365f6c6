//! The architecture, checked: every module of `src/` imports only from the
//! layers below it (or from the modules of its own layer this table allows),
//! `model` imports nothing else from the crate, and there is no import cycle,
//! between modules nor between the files of one folder (of `src/`, and of the
//! simulated server's `sim-server/src`). The graph is read from the `crate::`
//! and `super::` paths in the product code (test modules and test-only files
//! left out: a test may build its inputs with anything; a name a folder's
//! `mod.rs` re-exports counts as the child's it comes from), so moving a type
//! to the wrong place fails here, with the offending file named.
//! `src/lib.rs`'s Layout table is held to `LAYERS` and `SAME_LAYER`, and
//! only `cli` may name the simulated server's crate.
//!
//! `cargo test --test e2e layers:: -- --nocapture` also prints the graph and the
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
    // A workload's prompts and API, and a server kind's preset, come from the
    // plan.
    ("load", "plan"),
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

/// The simulated server's crate (`sweeptop-sim`): its files are held to the
/// same rule, no cycle between the files of a folder.
fn sim_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sim-server/src")
}

/// The crates whose folders are checked for file cycles.
fn crate_roots() -> [PathBuf; 2] {
    [src(), sim_src()]
}

/// `file` as the repository names it (`sim-server/src/logs.rs`).
fn shown(file: &Path) -> String {
    let rel = file
        .strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or(file);
    rel.to_string_lossy().replace('\\', "/")
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
    names_after(code, "crate::")
}

/// The first segment of every path that starts with `prefix` (`crate::`,
/// `super::super::`…), groups included: `use crate::{a, b::c, d::{e, f}}`
/// names `a`, `b` and `d`.
fn names_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(prefix).map(|i| from + i) {
        let before = code[..at].chars().next_back();
        from = at + prefix.len();
        let rest = &code[from..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
            || rest.starts_with("super::")
        {
            continue; // `sweeptop_crate::`, or a longer `super::super::` path
        }
        if let Some(group) = rest.strip_prefix('{') {
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

/// The code without its `#[cfg(test)]` modules.
fn product_only(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let item = after.trim_start();
        if strip_mod_keyword(item).is_none() {
            out.push_str("#[cfg(test)]");
            rest = after;
            continue;
        }
        // `mod name;` (a test file, left out where files are listed) or
        // `mod name { … }`: skipped to its end.
        let Some(open) = item.find(['{', ';']) else {
            break;
        };
        if item.as_bytes()[open] == b';' {
            rest = &item[open + 1..];
            continue;
        }
        let mut depth = 0usize;
        let mut end = item.len();
        for (i, c) in item[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// After `mod `, `pub mod ` or `pub(…) mod `: the rest of the declaration.
fn strip_mod_keyword(item: &str) -> Option<&str> {
    let item = match item.strip_prefix("pub") {
        Some(rest) if rest.starts_with('(') => rest[rest.find(')')? + 1..].trim_start(),
        Some(rest) if rest.starts_with(char::is_whitespace) => rest.trim_start(),
        _ => item,
    };
    item.strip_prefix("mod ")
}

/// The files `#[cfg(test)] mod name;` declares: test code, not product.
fn test_files(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut tests = BTreeSet::new();
    for f in files {
        let code = code_only(&std::fs::read_to_string(f).unwrap_or_default());
        let dir = match f.file_stem().and_then(|s| s.to_str()) {
            Some("mod" | "lib" | "main") => f.parent().map(Path::to_path_buf),
            Some(stem) => f.parent().map(|p| p.join(stem)),
            None => None,
        };
        let Some(dir) = dir else { continue };
        let mut rest = code.as_str();
        while let Some(at) = rest.find("#[cfg(test)]") {
            rest = rest[at + "#[cfg(test)]".len()..].trim_start();
            let Some(decl) = strip_mod_keyword(rest) else {
                continue;
            };
            let name: String = decl
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if decl[name.len()..].trim_start().starts_with(';') {
                tests.insert(dir.join(format!("{name}.rs")));
                tests.insert(dir.join(&name));
            }
        }
    }
    tests
}

/// Product files of `src/`, each with its code (test modules left out).
fn product_files() -> Vec<(PathBuf, String)> {
    product_files_of(&src())
}

/// Product files of a crate's source folder, each with its code.
fn product_files_of(root: &Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    files.sort();
    let tests = test_files(&files);
    files
        .into_iter()
        .filter(|f| !tests.iter().any(|t| f.starts_with(t)))
        .map(|f| {
            let code = product_only(&code_only(&std::fs::read_to_string(&f).unwrap_or_default()));
            (f, code)
        })
        .collect()
}

struct Graph {
    /// module → (imported module → the first file that imports it)
    edges: BTreeMap<String, BTreeMap<String, PathBuf>>,
    lines: BTreeMap<String, usize>,
}

fn graph() -> Graph {
    let files = product_files();
    let modules: BTreeSet<String> = files.iter().filter_map(|(f, _)| module_of(f)).collect();
    let mut edges: BTreeMap<String, BTreeMap<String, PathBuf>> = BTreeMap::new();
    let mut lines = BTreeMap::new();
    for (f, code) in &files {
        let Some(m) = module_of(f) else { continue };
        *lines.entry(m.clone()).or_insert(0) += code.lines().count();
        let entry = edges.entry(m.clone()).or_default();
        for dep in imports(code) {
            if dep != m && modules.contains(&dep) {
                entry.entry(dep).or_insert_with(|| f.clone());
            }
        }
    }
    Graph { edges, lines }
}

/// A file's place inside a folder of a crate's `root` (`group`, e.g. `engine`
/// or `engine/cell`; `""` for the root itself): the folder's child it belongs
/// to (a file, or a subfolder with everything in it) and how many `super::`
/// reach the folder from it. `None` for the folder's own `mod.rs` (the root's
/// `lib.rs` and `main.rs`) and for files outside it.
fn node_of(root: &Path, file: &Path, group: &str) -> Option<(String, usize)> {
    let rel = file.strip_prefix(root.join(group)).ok()?;
    let parts: Vec<&str> = rel.iter().filter_map(|p| p.to_str()).collect();
    let own = if group.is_empty() {
        ["lib.rs", "main.rs"].as_slice()
    } else {
        ["mod.rs"].as_slice()
    };
    if parts.is_empty() || (parts.len() == 1 && own.contains(&parts[0])) {
        return None;
    }
    let node = parts[0].strip_suffix(".rs").unwrap_or(parts[0]).to_string();
    // `g/f.rs` and `g/d/mod.rs` are one `super::` below `g`.
    let depth = parts.len() - usize::from(parts.last() == Some(&"mod.rs"));
    Some((node, depth))
}

/// The names a folder's own file (`mod.rs`, or the root's `lib.rs`)
/// re-exports from its children, each with the child: `pub use child::X;`,
/// `pub(crate) use self::child::{Y, z::W as V};` name `X`, `Y` and `V`. An
/// import of `super::X` or `crate::folder::X` reaches the child, not the
/// folder's own file.
fn reexports(code: &str, children: &BTreeSet<&String>) -> BTreeMap<String, String> {
    let code = code.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut found = BTreeMap::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("use ").map(|i| from + i) {
        from = at + "use ".len();
        let before = code[..at].trim_end();
        let public = ["pub", "pub(crate)", "pub(super)"]
            .iter()
            .any(|p| before.ends_with(p));
        let word = code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !public || word {
            continue;
        }
        let Some(end) = code[from..].find(';') else {
            break;
        };
        let tree = code[from..from + end].trim();
        let tree = tree.strip_prefix("self::").unwrap_or(tree);
        let child: String = tree
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !children.contains(&child) {
            continue;
        }
        let mut names = Vec::new();
        use_leaves(tree, &mut names);
        for name in names {
            found.insert(name, child.clone());
        }
    }
    found
}

/// The names a use tree brings in: `a::{b, c::d as e, f::{self, g}}` → `b`,
/// `e`, `f`, `g` (a glob brings in none that can be told).
fn use_leaves(tree: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    if let (Some(open), Some(close)) = (tree.find('{'), tree.rfind('}')) {
        let prefix = tree[..open].trim_end_matches("::");
        let mut depth = 0;
        let mut start = open + 1;
        for (i, c) in tree[..close].char_indices().skip(open + 1) {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    use_leaf(prefix, &tree[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        use_leaf(prefix, &tree[start..close], out);
    } else if let Some((_, alias)) = tree.split_once(" as ") {
        if alias.trim() != "_" {
            out.push(alias.trim().to_string());
        }
    } else if let Some(last) = tree.rsplit("::").next().filter(|l| *l != "*") {
        out.push(last.trim().to_string());
    }
}

/// One item of a use group, below `prefix`.
fn use_leaf(prefix: &str, item: &str, out: &mut Vec<String>) {
    match item.trim() {
        "" => {}
        "self" => out.extend(prefix.rsplit("::").next().map(str::to_string)),
        item => use_leaves(item, out),
    }
}

/// For each folder of a crate's `root`, the root included, its children's
/// imports of each other: node → (node → the first file that imports it).
/// A name the folder's own file re-exports counts as its child's.
fn file_graphs(root: &Path) -> BTreeMap<String, Graph> {
    let files = product_files_of(root);
    let mut groups: BTreeSet<String> = BTreeSet::from([String::new()]);
    for (f, _) in &files {
        let rel = f.strip_prefix(root).unwrap_or(f);
        let mut dir = PathBuf::new();
        for part in rel.parent().into_iter().flat_map(|p| p.iter()) {
            dir.push(part);
            groups.insert(dir.to_string_lossy().replace('\\', "/"));
        }
    }
    let mut graphs = BTreeMap::new();
    for group in groups {
        let members: Vec<(&PathBuf, &String, String, usize)> = files
            .iter()
            .filter_map(|(f, code)| node_of(root, f, &group).map(|(n, d)| (f, code, n, d)))
            .collect();
        let nodes: BTreeSet<&String> = members.iter().map(|(_, _, n, _)| n).collect();
        let dir = root.join(&group);
        let own_files = if group.is_empty() {
            vec![dir.join("lib.rs"), dir.join("main.rs")]
        } else {
            vec![dir.join("mod.rs")]
        };
        let mut exported = BTreeMap::new();
        for (f, code) in &files {
            if own_files.contains(f) {
                exported.extend(reexports(code, &nodes));
            }
        }
        let mut g = Graph {
            edges: BTreeMap::new(),
            lines: BTreeMap::new(),
        };
        let path = if group.is_empty() {
            "crate::".to_string()
        } else {
            format!("crate::{}::", group.replace('/', "::"))
        };
        for (f, code, node, depth) in &members {
            let mut named = names_after(code, &path);
            named.extend(names_after(code, &"super::".repeat(*depth)));
            *g.lines.entry(node.clone()).or_insert(0) += code.lines().count();
            let entry = g.edges.entry(node.clone()).or_default();
            for name in named {
                let dep = if nodes.contains(&name) {
                    name
                } else if let Some(child) = exported.get(&name) {
                    child.clone()
                } else {
                    continue;
                };
                if dep != *node {
                    entry.entry(dep).or_insert_with(|| (*f).clone());
                }
            }
        }
        graphs.insert(group, g);
    }
    graphs
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

/// An import cycle of `g`, if it has one.
fn cycle(g: &Graph) -> Option<Vec<String>> {
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
    g.edges
        .keys()
        .find_map(|m| visit(m, g, &mut Vec::new(), &mut done))
}

#[test]
fn there_is_no_import_cycle() {
    let g = graph();
    if let Some(cycle) = cycle(&g) {
        panic!("import cycle: {}", cycle.join(" → "));
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
fn the_files_of_a_module_import_each_other_in_no_cycle() {
    let mut found = Vec::new();
    for root in crate_roots() {
        for (m, g) in file_graphs(&root) {
            if let Some(cycle) = cycle(&g) {
                // Name the file behind each step, so the import to move is plain.
                let steps: Vec<String> = cycle
                    .windows(2)
                    .map(|w| format!("{} ({})", w[0], shown(&g.edges[&w[0]][&w[1]])))
                    .collect();
                let folder = shown(&root.join(&m));
                found.push(format!(
                    "{}/: {} → {}",
                    folder.trim_end_matches('/'),
                    steps.join(" → "),
                    cycle[0]
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "files that import each other in a circle:\n{}",
        found.join("\n")
    );
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

#[test]
fn test_code_and_files_inside_a_module_are_told_apart() {
    let code = product_only(&code_only(
        "use crate::model;\n#[cfg(test)]\nmod tests { use crate::tui; fn f() { {} } }\nuse crate::plan;\n#[cfg(test)]\nmod fuzz;\n#[cfg(test)]\npub mod shared { use crate::cli; }\n",
    ));
    let found: Vec<String> = imports(&code).into_iter().collect();
    assert_eq!(found, ["model", "plan"]);
    let at = |p: &str, group: &str| node_of(&src(), &src().join(p), group);
    assert_eq!(at("engine/mod.rs", "engine"), None);
    assert_eq!(at("engine/lane.rs", "engine"), Some(("lane".into(), 1)));
    assert_eq!(at("engine/cell/mod.rs", "engine"), Some(("cell".into(), 1)));
    assert_eq!(
        at("engine/cell/spec.rs", "engine"),
        Some(("cell".into(), 2))
    );
    assert_eq!(
        at("engine/cell/spec.rs", "engine/cell"),
        Some(("spec".into(), 1))
    );
    assert_eq!(at("engine/cell/mod.rs", "engine/cell"), None);
    assert_eq!(at("engine/lane.rs", "engine/cell"), None);
    let up: Vec<String> = names_after(
        "use super::{a, b::c}; super::super::x; super::d::e",
        "super::",
    )
    .into_iter()
    .collect();
    assert_eq!(up, ["a", "b", "d"]);
}

#[test]
fn a_name_a_folder_re_exports_is_its_childs() {
    let children = ["a", "b", "c"].map(String::from);
    let children: BTreeSet<&String> = children.iter().collect();
    let code = code_only(
        "pub use a::{X, y::{Z as W, self}};\npub(crate) use self::b::f;\nuse c::Private;\npub use std::fmt::Display;\npub use c::*;\npub use b::{\n    G,\n    H,\n};\n",
    );
    let found: Vec<(String, String)> = reexports(&code, &children).into_iter().collect();
    let want = [
        ("G", "b"),
        ("H", "b"),
        ("W", "a"),
        ("X", "a"),
        ("f", "b"),
        ("y", "a"),
    ];
    assert_eq!(found, want.map(|(n, c)| (n.to_string(), c.to_string())));
    // A crate's root is a folder too, its `lib.rs` the folder's own file.
    let sim = sim_src();
    assert_eq!(node_of(&sim, &sim.join("lib.rs"), ""), None);
    assert_eq!(
        node_of(&sim, &sim.join("logs.rs"), ""),
        Some(("logs".into(), 1))
    );
    assert_eq!(
        node_of(&sim, &sim.join("script/render.rs"), ""),
        Some(("script".into(), 2))
    );
}

/// The `//! | layer | module | … | imports in its own layer |` rows of
/// `src/lib.rs`: (layer, modules, allowed same-layer imports).
type LayoutRow = (u8, Vec<String>, BTreeSet<(String, String)>);

/// The names in backticks in `text`.
fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The Layout table of `src/lib.rs`. The last column lists, per row, what
/// its modules may import from their own layer: `` `a` `` for every module
/// of the row, `` `m` also `b` `` for one of them; parenthesised words are
/// comments.
fn layout_rows(lib: &str) -> Vec<LayoutRow> {
    let mut rows = Vec::new();
    for line in lib.lines() {
        let Some(row) = line.strip_prefix("//! |") else {
            continue;
        };
        let cells: Vec<&str> = row.split(" | ").map(str::trim).collect();
        let Ok(layer) = cells[0].parse::<u8>() else {
            continue; // the header and its rule
        };
        assert_eq!(cells.len(), 4, "a Layout row of src/lib.rs: {line}");
        let modules = backticked(cells[1]);
        let mut imports = String::new();
        let mut depth = 0;
        for c in cells[3].trim_end_matches('|').chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                c if depth == 0 => imports.push(c),
                _ => {}
            }
        }
        let mut allowed = BTreeSet::new();
        for part in imports.split(';') {
            let (who, what) = match part.split_once(" also ") {
                Some((who, what)) => (backticked(who), backticked(what)),
                None => (modules.clone(), backticked(part)),
            };
            for m in &who {
                for d in &what {
                    allowed.insert((m.clone(), d.clone()));
                }
            }
        }
        rows.push((layer, modules, allowed));
    }
    rows
}

#[test]
fn the_layout_table_of_lib_rs_says_what_the_layers_are() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).expect("src/lib.rs");
    let rows = layout_rows(&lib);
    let mut wrong = Vec::new();
    let mut in_table = BTreeSet::new();
    let mut allowed = BTreeSet::new();
    for (l, modules, imports) in &rows {
        for m in modules {
            in_table.insert(m.clone());
            match layer(m) {
                Some(lm) if lm == *l => {}
                Some(lm) => wrong.push(format!("{m}: layer {l} in the table, {lm} in LAYERS")),
                None => wrong.push(format!("{m}: in the table, not in LAYERS")),
            }
        }
        allowed.extend(imports.iter().cloned());
    }
    for (m, _) in LAYERS {
        if !in_table.contains(*m) {
            wrong.push(format!("{m}: in LAYERS, no row of the table names it"));
        }
    }
    let same: BTreeSet<(String, String)> = SAME_LAYER
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    for (m, d) in allowed.difference(&same) {
        wrong.push(format!(
            "{m} → {d}: allowed by the table, not in SAME_LAYER"
        ));
    }
    for (m, d) in same.difference(&allowed) {
        wrong.push(format!(
            "{m} → {d}: in SAME_LAYER, not in the table's last column"
        ));
    }
    assert!(
        wrong.is_empty(),
        "src/lib.rs's Layout table and tests/layers.rs disagree:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_layout_table_is_read_as_written() {
    let rows = layout_rows(
        "//! | layer | module | what | imports in its own layer |\n//! | --- | --- | --- | --- |\n//! | 1 | [`load`] | x | `plan` (a `b` c; d) |\n//! | 3 | [`tui`], [`export`] | y | `view`; `tui` also `export` (the `e` key) |\n//! | 4 | [`cli`] | z | — |\n",
    );
    let pairs = |p: &[(&str, &str)]| -> BTreeSet<(String, String)> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(
        rows,
        [
            (1, vec!["load".to_string()], pairs(&[("load", "plan")])),
            (
                3,
                vec!["tui".to_string(), "export".to_string()],
                pairs(&[("tui", "view"), ("export", "view"), ("tui", "export")])
            ),
            (4, vec!["cli".to_string()], pairs(&[])),
        ]
    );
}

#[test]
fn only_cli_calls_into_the_simulated_server() {
    let mut found = Vec::new();
    for (f, code) in product_files() {
        if module_of(&f).as_deref() == Some("cli") {
            continue;
        }
        let named = code.match_indices("sweeptop_sim").any(|(at, _)| {
            let before = code[..at].chars().next_back();
            let after = code[at + "sweeptop_sim".len()..].chars().next();
            !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
        });
        if named {
            found.push(shown(&f));
        }
    }
    assert!(
        found.is_empty(),
        "sweeptop_sim is used outside src/cli (the engine starts the simulated server as a process, like any server): {}",
        found.join(", ")
    );
}
