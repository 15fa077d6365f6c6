//! The detection corpus: real excerpts from public issues and logs of
//! inference servers (`tests/corpus/<server>/*.txt`), each headed by its
//! source and the kind it must be classified as (`none` for benign text that
//! must not be flagged, `ready` and `accept` for readiness and
//! speculative-decoding lines). Prints the recall of every kind and the
//! false positives, and fails if either falls below its floor.
//!
//!   cargo test --test corpus -- --nocapture

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sweeptop::detect::{classify_line, classify_text, LineClass};

/// The floor this corpus is held to: the share of fatal excerpts classified
/// to their kind. No benign excerpt may be flagged.
const MIN_RECALL: f64 = 0.98;

struct Case {
    path: PathBuf,
    expect: String,
    text: String,
}

fn cases() -> Vec<Case> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut out = Vec::new();
    let Ok(dirs) = std::fs::read_dir(&root) else {
        return out;
    };
    let mut files: Vec<PathBuf> = dirs
        .flatten()
        .filter(|d| d.path().is_dir())
        .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
        .map(|f| f.path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    for path in files {
        let raw = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text
            .split_once("\n---\n")
            .unwrap_or_else(|| panic!("{}: no `---` after the header", path.display()));
        let field = |name: &str| {
            head.lines()
                .find_map(|l| l.strip_prefix(&format!("# {name}:")))
                .map(|v| v.trim().to_string())
                .unwrap_or_else(|| panic!("{}: no `# {name}:` line", path.display()))
        };
        let source = field("source");
        assert!(
            source.contains('/') || source.contains("http"),
            "{}: the source must name a repository or a page",
            path.display()
        );
        let expect = field("expect");
        out.push(Case {
            path,
            expect,
            text: body.to_string(),
        });
    }
    out
}

/// What sweeptop makes of an excerpt, in the corpus' words.
fn verdict(c: &Case) -> String {
    match c.expect.as_str() {
        "ready" => {
            let ready = c.text.lines().any(|l| classify_line(l) == LineClass::Ready);
            if ready { "ready" } else { "not ready" }.to_string()
        }
        "accept" => {
            let stat = c.text.lines().any(|l| {
                matches!(
                    classify_line(l),
                    LineClass::SpecStats { .. } | LineClass::DraftAcceptance { .. }
                )
            });
            if stat { "accept" } else { "no statistic" }.to_string()
        }
        _ => classify_text(&c.text)
            .kind
            .map_or("none".to_string(), |k| k.as_str().to_string()),
    }
}

#[test]
fn every_excerpt_is_classified_as_its_source_says() {
    let cases = cases();
    if cases.is_empty() {
        eprintln!("no corpus under tests/corpus");
        return;
    }
    let mut by_kind: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut misses = Vec::new();
    for c in &cases {
        let got = verdict(c);
        let e = by_kind.entry(c.expect.as_str()).or_default();
        e.0 += 1;
        if got == c.expect {
            e.1 += 1;
        } else {
            misses.push(format!(
                "  {}: expected {}, got {got}",
                c.path.display(),
                c.expect
            ));
        }
    }
    eprintln!("| expect | excerpts | classified right | recall |\n|---|---:|---:|---:|");
    let (mut fatal, mut fatal_hit) = (0, 0);
    for (kind, (n, hit)) in &by_kind {
        eprintln!(
            "| {kind} | {n} | {hit} | {:.1} % |",
            *hit as f64 * 100.0 / *n as f64
        );
        if !matches!(*kind, "none" | "ready" | "accept") {
            fatal += n;
            fatal_hit += hit;
        }
    }
    let benign = by_kind.get("none").copied().unwrap_or_default();
    let false_positives = benign.0 - benign.1;
    let recall = fatal_hit as f64 / fatal.max(1) as f64;
    eprintln!(
        "\n{} excerpts; fatal recall {:.1} % ({fatal_hit} of {fatal}); false positives {false_positives} of {} benign",
        cases.len(),
        recall * 100.0,
        benign.0
    );
    if !misses.is_empty() {
        eprintln!("misses:\n{}", misses.join("\n"));
    }
    assert!(
        recall >= MIN_RECALL,
        "fatal recall {recall:.3} under {MIN_RECALL}"
    );
    assert_eq!(false_positives, 0, "benign excerpts flagged");
}
