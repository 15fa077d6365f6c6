//! `sweeptop slurm PLAN`: one sweep spread over a Slurm cluster as a job
//! array, one shard of the plan per array task, in a sweep directory on a
//! filesystem every node sees; `sweeptop slurm --resume SWEEP` submits again
//! the shards that have cells left. The layout is [`crate::store::sweep`]'s.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{user, Context, Result};
use crate::model::Timestamp;
use crate::plan::Plan;
use crate::store::{self, sweep};
use crate::view::shards::cells_left;

#[derive(clap::Args, Debug)]
pub struct SlurmArgs {
    /// The plan file (TOML).
    #[arg(required_unless_present = "resume", conflicts_with = "resume")]
    plan: Option<PathBuf>,
    /// Submit again the shards of this sweep directory that have cells left.
    #[arg(long, value_name = "SWEEP_DIR")]
    resume: Option<PathBuf>,
    /// Shards: array tasks of one node each (the plan's configs are split
    /// into this many parts of about equal estimated GPU time).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::plan::shard::MAX_SHARDS)))]
    nodes: u32,
    /// Slurm partition (#SBATCH --partition).
    #[arg(long, value_name = "P")]
    partition: Option<String>,
    /// GPUs per task (#SBATCH --gres=gpu:G).
    #[arg(long, value_name = "G")]
    gpus_per_node: Option<u32>,
    /// Time limit of each task, as Slurm writes it (#SBATCH --time, e.g. 4:00:00).
    #[arg(long, value_name = "T")]
    time: Option<String>,
    /// Slurm account (#SBATCH --account).
    #[arg(long, value_name = "A")]
    account: Option<String>,
    /// One more #SBATCH option, verbatim (repeat for several), e.g.
    /// --sbatch-arg=--qos=high.
    #[arg(long = "sbatch-arg", value_name = "ARG", allow_hyphen_values = true)]
    sbatch_arg: Vec<String>,
    /// One more argument for each task's `sweeptop run` (repeat for
    /// several), e.g. --run-arg=--no-gpu.
    #[arg(long = "run-arg", value_name = "ARG", allow_hyphen_values = true)]
    run_arg: Vec<String>,
    /// Sweep directory, on a filesystem every node sees (default
    /// runs/<plan>-<UTC timestamp>-slurm).
    #[arg(long, value_name = "DIR", conflicts_with = "resume")]
    out: Option<PathBuf>,
    /// Print the batch script and submit nothing (nothing is written).
    #[arg(long)]
    dry_run: bool,
}

/// What the batch script is made of.
pub struct Script<'a> {
    pub sweep: &'a Path,
    pub exe: &'a Path,
    pub cwd: &'a Path,
    pub plan_name: &'a str,
    pub shards: u32,
    pub partition: Option<&'a str>,
    pub time: Option<&'a str>,
    pub account: Option<&'a str>,
    pub gpus: Option<u32>,
    pub sbatch_args: &'a [String],
    pub run_args: &'a [String],
}

/// A word for `sh`, single-quoted when it needs to be.
fn sh_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The batch script every array task runs: its shard's run directory is
/// `shards/$SLURM_ARRAY_TASK_ID`, resumed when it already holds a run.
pub fn script(s: &Script) -> String {
    let sweep = s.sweep.display().to_string();
    let job_name: String = s
        .plan_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let mut t = String::from("#!/bin/bash\n");
    t.push_str(&format!(
        "# One shard of the sweep of plan `{}` per array task, written by `sweeptop slurm`.\n\
         # `sweeptop slurm --resume {sweep}` submits it again for the shards with cells left.\n",
        s.plan_name.replace('\n', " ")
    ));
    t.push_str(&format!("#SBATCH --job-name=sweeptop-{job_name}\n"));
    t.push_str(&format!("#SBATCH --array=1-{}\n", s.shards));
    t.push_str("#SBATCH --nodes=1\n#SBATCH --ntasks=1\n");
    t.push_str(&format!(
        "#SBATCH --output={sweep}/{}/%A_%a.out\n",
        sweep::SLURM_OUT
    ));
    t.push_str(&format!("#SBATCH --chdir={}\n", s.cwd.display()));
    if let Some(p) = s.partition {
        t.push_str(&format!("#SBATCH --partition={p}\n"));
    }
    if let Some(v) = s.time {
        t.push_str(&format!("#SBATCH --time={v}\n"));
    }
    if let Some(a) = s.account {
        t.push_str(&format!("#SBATCH --account={a}\n"));
    }
    if let Some(g) = s.gpus {
        t.push_str(&format!("#SBATCH --gres=gpu:{g}\n"));
    }
    for a in s.sbatch_args {
        t.push_str(&format!("#SBATCH {a}\n"));
    }
    let exe = sh_quote(&s.exe.display().to_string());
    let extra: String = s
        .run_args
        .iter()
        .map(|a| format!(" {}", sh_quote(a)))
        .collect();
    t.push_str(&format!(
        "set -eu\n\
         i=\"${{SLURM_ARRAY_TASK_ID:?this script runs as a Slurm array task}}\"\n\
         dir={q}/{shards}/\"$i\"\n\
         if [ -e \"$dir/{plan}\" ]; then\n\
         \x20 exec {exe} run --resume \"$dir\" --headless{extra}\n\
         fi\n\
         exec {exe} run {q}/{plan} --shard \"$i/{n}\" --out \"$dir\" --headless{extra}\n",
        q = sh_quote(&sweep),
        shards = sweep::SHARDS,
        plan = store::PLAN,
        n = s.shards,
    ));
    t
}

/// A value that goes on an `#SBATCH` line: one line, no spaces.
fn check_directive(what: &str, v: &str) -> Result<()> {
    if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(user(format!(
            "{what} `{}`: it goes on an #SBATCH line, so it may not be empty or hold spaces",
            v.escape_debug()
        )));
    }
    Ok(())
}

fn absolute(p: &Path) -> Result<PathBuf> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    let cwd = std::env::current_dir().context(|| "cannot read the current directory".into())?;
    Ok(cwd.join(p))
}

pub fn slurm(args: SlurmArgs) -> Result<u8> {
    for (what, v) in [
        ("--partition", &args.partition),
        ("--time", &args.time),
        ("--account", &args.account),
    ] {
        if let Some(v) = v {
            check_directive(what, v)?;
        }
    }
    for a in &args.sbatch_arg {
        check_directive("--sbatch-arg", a)?;
        if !a.starts_with('-') {
            return Err(user(format!(
                "--sbatch-arg `{a}`: write an sbatch option, e.g. --sbatch-arg=--qos=high"
            )));
        }
    }
    match &args.resume {
        Some(dir) => resume(&args, dir),
        None => new_sweep(&args),
    }
}

fn new_sweep(args: &SlurmArgs) -> Result<u8> {
    let Some(plan_path) = &args.plan else {
        return Err(user("a plan file is needed (or --resume SWEEP_DIR)"));
    };
    let plan = Plan::load(plan_path).map_err(|e| user(e.to_string()))?;
    plan.check_files().map_err(|e| user(e.to_string()))?;
    let dir = match &args.out {
        Some(d) => absolute(d)?,
        None => absolute(&PathBuf::from("runs").join(format!(
            "{}-{}-slurm",
            plan.name,
            Timestamp::now().compact()
        )))?,
    };
    check_directive("the sweep directory", &dir.display().to_string())?;
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context(|| "cannot find this program".into())?;
    let cwd = std::env::current_dir().context(|| "cannot read the current directory".into())?;
    check_directive("the current directory", &cwd.display().to_string())?;
    let text = script(&Script {
        sweep: &dir,
        exe: &exe,
        cwd: &cwd,
        plan_name: &plan.name,
        shards: args.nodes,
        partition: args.partition.as_deref(),
        time: args.time.as_deref(),
        account: args.account.as_deref(),
        gpus: args.gpus_per_node,
        sbatch_args: &args.sbatch_arg,
        run_args: &args.run_arg,
    });
    let configs = plan.configs.len() as u32;
    let note = (args.nodes > configs).then(|| {
        format!(
            "note: {} shards for {configs} configs: {} shard(s) have nothing to run and finish at once\n",
            args.nodes,
            args.nodes - configs
        )
    });
    if args.dry_run {
        super::print(&text)?;
        eprint!("{}", note.unwrap_or_default());
        eprintln!(
            "(dry run: nothing written or submitted; it would be {}/{} submitted with `sbatch --parsable`)",
            dir.display(),
            sweep::SBATCH
        );
        return Ok(0);
    }
    let meta = sweep::SweepMeta {
        plan: plan.name.clone(),
        shards: args.nodes,
        created_at: Timestamp::now(),
        sweeptop: exe.display().to_string(),
        submissions: Vec::new(),
    };
    sweep::create_sweep(&dir, &plan.source, &meta).map_err(super::store_error)?;
    write_script(&dir, &text)?;
    let shards: Vec<u32> = (1..=args.nodes).collect();
    let job = submit(&dir, None)?;
    record(&dir, &job, &shards)?;
    eprint!("{}", note.unwrap_or_default());
    super::print(&format!(
        "submitted job {job}: {n} shard(s) of plan {plan} (array 1-{n})\n\
         sweep directory: {d}\n\
         watch it:   sweeptop ls {d}   (or sweeptop attach {d})\n\
         results:    sweeptop export {d} --format md\n\
         continue:   sweeptop slurm --resume {d}\n",
        n = args.nodes,
        plan = plan.name,
        d = dir.display(),
    ))?;
    Ok(0)
}

fn write_script(dir: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(sweep::SBATCH);
    std::fs::write(&p, text).context(|| format!("cannot write {}", p.display()))?;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
        .context(|| format!("cannot make {} executable", p.display()))?;
    Ok(())
}

/// `sbatch --parsable [--array=LIST] SCRIPT`: the job id.
fn submit(dir: &Path, array: Option<&str>) -> Result<String> {
    let mut cmd = Command::new("sbatch");
    cmd.arg("--parsable");
    if let Some(a) = array {
        cmd.arg(format!("--array={a}"));
    }
    cmd.arg(dir.join(sweep::SBATCH));
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(user(format!(
                "sbatch not found: is this a Slurm login node? The sweep directory {} is ready; \
                 submit it from one with `sweeptop slurm --resume {}` (or see the script with --dry-run)",
                dir.display(),
                dir.display()
            )))
        }
        Err(e) => return Err(e).context(|| "cannot run sbatch".into()),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // `--parsable` prints `JOBID` or `JOBID;CLUSTER`.
    let job = stdout
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .and_then(|l| l.split(';').next())
        .filter(|j| !j.is_empty() && j.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_string);
    match job {
        Some(job) if out.status.success() => Ok(job),
        _ => Err(user(format!(
            "sbatch refused the job ({}): {}; the sweep directory is {}",
            out.status,
            crate::model::text::display_lines(stderr.trim()).replace('\n', " / "),
            dir.display()
        ))),
    }
}

fn record(dir: &Path, job: &str, shards: &[u32]) -> Result<()> {
    sweep::record_submission(dir, job, shards).map_err(super::store_error)
}

fn resume(args: &SlurmArgs, dir: &Path) -> Result<u8> {
    if !sweep::is_sweep_dir(dir) {
        return Err(user(format!(
            "{} is not a sweep directory (no {}); `sweeptop slurm PLAN` makes one",
            dir.display(),
            sweep::SWEEP
        )));
    }
    let dir = absolute(dir)?;
    let meta = sweep::read_sweep(&dir).map_err(super::store_error)?;
    let plan = Plan::load(&dir.join(store::PLAN)).map_err(|e| user(e.to_string()))?;
    if !dir.join(sweep::SBATCH).exists() {
        return Err(user(format!(
            "{} has no {}: it cannot be submitted again",
            dir.display(),
            sweep::SBATCH
        )));
    }
    let queued = sweep::queued_tasks(&meta).unwrap_or_default();
    let found = sweep::Sweep::open(&dir);
    let mut again = Vec::new();
    let mut report = String::new();
    for f in found.iter().flat_map(|s| &s.foreign) {
        if f.index.is_none() {
            report.push_str(&format!("{}\n", f.notice()));
        }
    }
    for i in 1..=meta.shards {
        let state = found
            .as_ref()
            .map_or(sweep::ShardState::Pending, |s| s.state(i));
        // Something foreign in a shard's place is never resumed into: the
        // shard waits until it is moved away.
        let Some(shard_dir) = found.as_ref().and_then(|s| s.shard_path(i)) else {
            report.push_str(&format!(
                "shard {i}/{}: {}, not submitted: move {} away to run it\n",
                meta.shards,
                state.text(),
                sweep::shard_dir(&dir, i).display()
            ));
            continue;
        };
        let left = cells_left(&plan, meta.shards, i, &shard_dir);
        let why = if state == sweep::ShardState::Finished && left == 0 {
            "finished".to_string()
        } else if state.is_running() {
            format!("{}, {left} cell(s) left", state.text())
        } else if queued.contains(&i) {
            "still queued".to_string()
        } else {
            again.push(i);
            format!("{}, {left} cell(s) left: submitted again", state.text())
        };
        report.push_str(&format!("shard {i}/{}: {why}\n", meta.shards));
    }
    if again.is_empty() {
        super::print(&format!(
            "{report}nothing to submit in {}: every shard has finished, is queued or running, or has something foreign in its place\n",
            dir.display()
        ))?;
        return Ok(0);
    }
    let list: Vec<String> = again.iter().map(u32::to_string).collect();
    if args.dry_run {
        super::print(&format!(
            "{report}(dry run: would submit `sbatch --parsable --array={} {}`)\n",
            list.join(","),
            dir.join(sweep::SBATCH).display()
        ))?;
        return Ok(0);
    }
    let job = submit(&dir, Some(&list.join(",")))?;
    record(&dir, &job, &again)?;
    super::print(&format!(
        "{report}submitted job {job}: shard(s) {} of {}\n",
        list.join(", "),
        dir.display()
    ))?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_runs_or_resumes_the_tasks_shard() {
        let extra = vec!["--qos=high".to_string()];
        let run = vec!["--no-gpu".to_string(), "it's".to_string()];
        let text = script(&Script {
            sweep: Path::new("/shared/runs/demo-slurm"),
            exe: Path::new("/opt/sweeptop/bin/sweeptop"),
            cwd: Path::new("/home/me"),
            plan_name: "demo",
            shards: 4,
            partition: Some("gpu"),
            time: Some("4:00:00"),
            account: Some("lab"),
            gpus: Some(8),
            sbatch_args: &extra,
            run_args: &run,
        });
        for line in [
            "#SBATCH --array=1-4",
            "#SBATCH --nodes=1",
            "#SBATCH --partition=gpu",
            "#SBATCH --time=4:00:00",
            "#SBATCH --account=lab",
            "#SBATCH --gres=gpu:8",
            "#SBATCH --qos=high",
            "#SBATCH --output=/shared/runs/demo-slurm/slurm/%A_%a.out",
            "exec /opt/sweeptop/bin/sweeptop run --resume \"$dir\" --headless --no-gpu 'it'\\''s'",
            "exec /opt/sweeptop/bin/sweeptop run /shared/runs/demo-slurm/plan.toml --shard \"$i/4\" --out \"$dir\" --headless --no-gpu 'it'\\''s'",
        ] {
            assert!(text.lines().any(|l| l.trim() == line), "{line}\n{text}");
        }
        // Every #SBATCH line comes before the first command.
        let first_cmd = text.lines().position(|l| l.starts_with("set ")).unwrap();
        assert!(text
            .lines()
            .skip(first_cmd)
            .all(|l| !l.starts_with("#SBATCH")));
    }

    #[test]
    fn directives_refuse_spaces() {
        assert!(check_directive("--time", "1:00").is_ok());
        assert!(check_directive("--time", "1:00\n#SBATCH --x").is_err());
        assert!(check_directive("--partition", "a b").is_err());
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("/x/y-1"), "/x/y-1");
    }
}
