//! `sweeptop run --resume DIR --retry failed|skipped|CELL|CONFIG…`: which
//! recorded cells of a run to measure again. They run like any pending cell
//! (in plan order, on a fresh server), and their new record follows the old
//! one in `results.jsonl` (the last record wins).

use std::collections::BTreeSet;

use super::commands::{target_problem, UnknownTarget};
use crate::model::{CellRecord, Command, Status};
use crate::plan::Plan;

/// A `--retry` name that is neither `failed`, `skipped`, a cell nor a config.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--retry: {0} (or `failed`, `skipped`)")]
pub struct UnknownRetry(UnknownTarget);

/// The cells `targets` name: `failed` and `skipped` by their latest record,
/// else a cell id or a config id (all its cells). An unknown name is an
/// error that lists what the plan has.
pub fn cells_to_retry(
    plan: &Plan,
    latest: &[CellRecord],
    targets: &[String],
) -> Result<BTreeSet<String>, UnknownRetry> {
    let mut cells = BTreeSet::new();
    for t in targets {
        let status = match t.as_str() {
            "failed" => Some(Status::Failed),
            "skipped" => Some(Status::Skipped),
            _ => None,
        };
        match status {
            Some(s) => cells.extend(
                latest
                    .iter()
                    .filter(|r| r.status == s)
                    .map(|r| r.cell.clone()),
            ),
            None => {
                let cmd = Command::Retry { target: t.clone() };
                if let Some(problem) = target_problem(plan, &cmd) {
                    return Err(UnknownRetry(problem));
                }
                cells.extend(
                    plan.cells
                        .iter()
                        .filter(|c| c.id == *t || c.config == *t)
                        .map(|c| c.id.clone()),
                );
            }
        }
    }
    Ok(cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_skipped_cells_and_configs_are_chosen_by_their_latest_record() {
        let plan = Plan::parse(
            std::path::Path::new("p.toml"),
            r#"name = "p"
[server]
command = "s {port} {b}"
port = "auto"
[[workloads]]
id = "w"
contexts = [1024, 2048]
concurrency = [1]
[[phases]]
id = "x"
matrix = { b = [1, 2] }
"#,
        )
        .unwrap();
        let ids: Vec<String> = plan.cells.iter().map(|c| c.id.clone()).collect();
        let rec = |id: &str, s: Status| crate::model::sample_record(id, s, "");
        let latest = vec![
            rec(&ids[0], Status::Ok),
            rec(&ids[1], Status::Failed),
            rec(&ids[2], Status::Skipped),
            rec(&ids[3], Status::Ok),
        ];
        let pick = |t: &[&str]| {
            cells_to_retry(
                &plan,
                &latest,
                &t.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(pick(&["failed"]).unwrap(), BTreeSet::from([ids[1].clone()]));
        assert_eq!(
            pick(&["failed", "skipped"]).unwrap(),
            BTreeSet::from([ids[1].clone(), ids[2].clone()])
        );
        // A config: every cell of it; a cell: that one.
        let config = plan.cells[3].config.clone();
        assert_eq!(pick(&[&config]).unwrap().len(), 2);
        assert_eq!(pick(&[&ids[0]]).unwrap(), BTreeSet::from([ids[0].clone()]));
        let err = pick(&["nope"]).unwrap_err().to_string();
        assert!(err.contains("`nope`") && err.contains("failed"), "{err}");
    }
}
