//! What Slurm still has of a sweep: the array tasks it queues or runs.

use std::collections::HashSet;

use super::SweepMeta;

/// Array tasks of the sweep's jobs that Slurm still has queued or running
/// (`JOB_TASK` → the task id); `None` when `squeue` cannot say (not a
/// Slurm machine).
pub fn queued_tasks(meta: &SweepMeta) -> Option<HashSet<u32>> {
    let jobs: Vec<&str> = meta.submissions.iter().map(|s| s.job_id.as_str()).collect();
    let mut out = HashSet::new();
    if jobs.is_empty() {
        return Some(out);
    }
    let o = std::process::Command::new("squeue")
        .args(["-h", "-r", "-o", "%i %T", "-j", &jobs.join(",")])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let mut words = line.split_whitespace();
        let (Some(id), Some(state)) = (words.next(), words.next()) else {
            continue;
        };
        // A task whose process is ending is judged by its files.
        if matches!(
            state,
            "COMPLETING" | "COMPLETED" | "CANCELLED" | "FAILED" | "TIMEOUT"
        ) {
            continue;
        }
        if let Some(task) = id.split_once('_').and_then(|(_, t)| t.parse::<u32>().ok()) {
            out.insert(task);
        }
    }
    Some(out)
}
