//! Property tests of the plan parser and expander: no input makes them panic,
//! a mutated real plan is either a located error or a consistent plan, and a
//! generated plan expands to exactly the cells its axes promise.

use std::collections::HashSet;
use std::path::Path;

use proptest::prelude::*;

use super::{Plan, PlanError};

const REAL_PLANS: &[&str] = &[
    include_str!("../../sample_runs/demo.toml"),
    include_str!("../../sample_runs/qwen3.6-27b-sglang.toml"),
];

/// Pieces of TOML a mutation may put anywhere: structure, numbers at and past
/// every limit, strange strings and placeholders.
const PIECES: &[&str] = &[
    "[",
    "]",
    "{",
    "}",
    "=",
    "\"",
    "'",
    "\n",
    "[[phases]]\n",
    "[[workloads]]\n",
    "[limits]\n",
    "[phases.matrix]\n",
    "[[phases.set]]\n",
    "when = { x = [1] }\n",
    "{tp}",
    "{{",
    "}}",
    "{port",
    "nan",
    "inf",
    "-inf",
    "-1",
    "0",
    "1e300",
    "18446744073709551616",
    "4294967296",
    "\"file:/nonexistent\"",
    "\"jsonl:\"",
    "\"\"",
    "\u{202e}",
    "\u{0}",
    "\t",
    ",",
    "true",
    "contexts = []\n",
    "concurrency = [0]\n",
    "tp = [1, 1]\n",
    "id = \"p\"\n",
];

/// A real plan with a few random edits: a piece inserted, a span deleted, or
/// a line repeated.
fn mutated() -> impl Strategy<Value = String> {
    (
        0..REAL_PLANS.len(),
        prop::collection::vec(
            (
                0usize..3,
                any::<prop::sample::Index>(),
                0..PIECES.len(),
                0usize..40,
            ),
            1..6,
        ),
    )
        .prop_map(|(which, edits)| {
            let mut s = REAL_PLANS[which].to_string();
            for (op, at, piece, len) in edits {
                let mut i = at.index(s.len() + 1);
                while !s.is_char_boundary(i) {
                    i -= 1;
                }
                match op {
                    0 => s.insert_str(i, PIECES[piece]),
                    1 => {
                        let mut end = (i + len).min(s.len());
                        while !s.is_char_boundary(end) {
                            end -= 1;
                        }
                        s.replace_range(i..end, "");
                    }
                    _ => {
                        let start = s[..i].rfind('\n').map_or(0, |p| p + 1);
                        let end = s[i..].find('\n').map_or(s.len(), |p| i + p + 1);
                        let line = s[start..end].to_string();
                        s.insert_str(end, &line);
                    }
                }
            }
            s
        })
}

/// What must hold of any plan that parses.
fn consistent(plan: &Plan) -> Result<(), TestCaseError> {
    let ids: HashSet<&str> = plan.cells.iter().map(|c| c.id.as_str()).collect();
    prop_assert_eq!(ids.len(), plan.cells.len(), "cell ids are unique");
    let configs: HashSet<&str> = plan.configs.iter().map(|c| c.id.as_str()).collect();
    prop_assert_eq!(configs.len(), plan.configs.len(), "config ids are unique");
    prop_assert!(plan
        .cells
        .iter()
        .all(|c| configs.contains(c.config.as_str())));
    prop_assert!(plan.cells.len() as u64 <= super::MAX_CELLS);
    prop_assert!(plan.name.chars().count() <= super::MAX_NAME_CHARS);
    for w in &plan.workloads {
        prop_assert!(w.requests >= 1 && w.max_tokens >= 1);
        prop_assert!(w.rate.is_none_or(|r| r > 0.0 && r.is_finite()));
    }
    let l = &plan.limits;
    for t in [l.request_timeout_s, l.stall_timeout_s, l.cell_timeout_s] {
        prop_assert!(t > 0.0 && t.is_finite());
    }
    Ok(())
}

/// An error names the plan, and a place in it that exists.
fn located(e: &PlanError, source: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(e.file.as_str(), "fuzz.toml");
    prop_assert!(
        e.line >= 1 && e.line <= source.lines().count().max(1) + 1,
        "{}",
        e
    );
    prop_assert!(!e.message.is_empty());
    Ok(())
}

proptest! {
    #![proptest_config(crate::model::fuzz_config())]

    #[test]
    fn any_text_is_a_plan_or_a_located_error(source in "\\PC{0,400}") {
        match Plan::parse(Path::new("fuzz.toml"), &source) {
            Ok(plan) => consistent(&plan)?,
            Err(e) => located(&e, &source)?,
        }
    }

    #[test]
    fn a_mutated_real_plan_is_a_plan_or_a_located_error(source in mutated()) {
        match Plan::parse(Path::new("fuzz.toml"), &source) {
            Ok(plan) => consistent(&plan)?,
            Err(e) => located(&e, &source)?,
        }
    }

    #[test]
    fn a_generated_plan_has_exactly_the_cells_its_axes_promise(
        axes in prop::collection::vec(1usize..6, 0..4),
        contexts in prop::collection::btree_set(1u64..100_000, 1..4),
        concurrency in prop::collection::btree_set(1u32..512, 1..4),
        excluded in any::<bool>(),
    ) {
        let mut matrix = String::new();
        for (i, n) in axes.iter().enumerate() {
            let values: Vec<String> = (0..*n).map(|v| v.to_string()).collect();
            matrix.push_str(&format!("a{i} = [{}]\n", values.join(", ")));
        }
        // Excluding one value of the first axis (when it has more than one).
        let exclude = match axes.first() {
            Some(n) if excluded && *n > 1 => "[[phases.exclude]]\na0 = 0\n".to_string(),
            _ => String::new(),
        };
        let list = |v: Vec<String>| v.join(", ");
        let source = format!(
            "name = \"gen\"\n[server]\ncommand = \"x {{port}}\"\nport = \"auto\"\n[[workloads]]\nid = \"w\"\ncontexts = [{}]\nconcurrency = [{}]\n[[phases]]\nid = \"p\"\n[phases.matrix]\n{matrix}{exclude}",
            list(contexts.iter().map(u64::to_string).collect()),
            list(concurrency.iter().map(u32::to_string).collect()),
        );
        let plan = Plan::parse(Path::new("fuzz.toml"), &source).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut configs: usize = axes.iter().product();
        if !exclude.is_empty() {
            configs -= configs / axes[0];
        }
        prop_assert_eq!(plan.configs.len(), configs);
        prop_assert_eq!(plan.cells.len(), configs * contexts.len() * concurrency.len());
        consistent(&plan)?;
    }
}
