//! Reading `results.jsonl` back: the record of truth for export, `open`,
//! resume and `ls`. The last record of a cell wins (a retried cell appends a
//! new line); a sweep directory's shards read as one set of results.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use super::error::{io_err, StoreError};
use super::sweep::Sweep;
use super::RESULTS;
use crate::model::{CellRecord, Timestamp};

/// Results read back from a run: the last record per cell wins (a retried cell
/// appends a new line). Unreadable lines are reported, never fatal.
#[derive(Debug, Default)]
pub struct Results {
    pub records: Vec<CellRecord>,
    pub problems: Vec<String>,
}

impl Results {
    pub fn get(&self, cell: &str) -> Option<&CellRecord> {
        self.records.iter().find(|r| r.cell == cell)
    }

    /// Keep only the records of `cells` (the plan's): a record of a cell the
    /// plan does not have (a hand edit, another plan's line) is not this run's
    /// result. What was dropped is told in `problems`.
    pub fn only_cells<'a>(&mut self, cells: impl IntoIterator<Item = &'a str>) {
        let cells: HashSet<&str> = cells.into_iter().collect();
        let before = self.records.len();
        self.records.retain(|r| cells.contains(r.cell.as_str()));
        let dropped = before - self.records.len();
        if dropped > 0 {
            self.problems.push(format!(
                "{dropped} record(s) in {RESULTS} are for cells the plan does not have; they are ignored"
            ));
        }
    }
}

/// The results of a run directory, or of every shard of a sweep directory.
pub fn read_results(dir: &Path) -> Result<Results, StoreError> {
    if let Some(sweep) = Sweep::open(dir) {
        return read_sweep_results(&sweep);
    }
    let p = dir.join(RESULTS);
    let f = match File::open(&p) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Results::default()),
        Err(e) => return Err(io_err(&p)(e)),
    };
    let mut problems = Vec::new();
    let mut records = Vec::new();
    let mut lines = BufReader::new(f).split(b'\n').enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let line = line.map_err(io_err(&p))?;
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        match serde_json::from_slice::<CellRecord>(&line) {
            // An `ok` without tokens (a hand edit, an older bug) is no result.
            Ok(r) if !r.holds_invariant() => problems.push(format!(
                "{}:{}: cell {} is recorded as ok without tokens; the record is ignored and the cell will run again",
                p.display(),
                i + 1,
                r.cell
            )),
            Ok(r) => records.push(r),
            Err(e) => {
                let last = lines.peek().is_none();
                problems.push(format!(
                    "{}:{}: {} ({e})",
                    p.display(),
                    i + 1,
                    if last {
                        "torn last line, the cell will run again"
                    } else {
                        "unreadable result line skipped"
                    }
                ));
            }
        }
    }
    Ok(Results {
        records: last_per_cell(records),
        problems,
    })
}

/// Every shard's results merged: the last record of a cell wins (by when it
/// finished, then by shard and line order). What is foreign among the shards
/// is told in `problems` and not read.
fn read_sweep_results(sweep: &Sweep) -> Result<Results, StoreError> {
    let mut all: Vec<(Timestamp, u32, usize, CellRecord)> = Vec::new();
    let mut problems = sweep.notices();
    for (i, dir) in sweep.shards.iter().cloned() {
        let r = read_results(&dir)?;
        problems.extend(r.problems);
        all.extend(
            r.records
                .into_iter()
                .enumerate()
                .map(|(n, rec)| (rec.finished_at, i, n, rec)),
        );
    }
    all.sort_by_key(|a| (a.0, a.1, a.2));
    Ok(Results {
        records: last_per_cell(all.into_iter().map(|(_, _, _, r)| r)),
        problems,
    })
}

/// One record per cell, in the order cells first appear, each the last one
/// given for its cell.
fn last_per_cell(records: impl IntoIterator<Item = CellRecord>) -> Vec<CellRecord> {
    let mut out: Vec<CellRecord> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for r in records {
        match index.get(&r.cell) {
            Some(&at) => out[at] = r,
            None => {
                index.insert(r.cell.clone(), out.len());
                out.push(r);
            }
        }
    }
    out
}
