//! `sweeptop resume --all [DIR]`: after a reboot (or any stop), every
//! unfinished run under DIR resumed in the background — one after another,
//! oldest first, so two runs never compete for the same GPUs (`--parallel`:
//! all at once) — each in its own lock, each re-running the prepare steps
//! its configs need. `--dry-run` says what it would do; `--print-systemd`
//! and `--print-cron` print what makes it happen at every boot.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{user, Context, Result};
use crate::model::RunState;
use crate::plan::Plan;
use crate::store::runs::list_runs;
use crate::store::{self, sweep::ShardState};

/// Where runs are unless told.
const DEFAULT_DIR: &str = "runs";
/// The log of the background resumer, in DIR.
pub const RESUME_LOG: &str = "resume.log";
/// Held by the background resumer while it works through DIR.
const RESUME_LOCK: &str = ".resume.lock";

#[derive(clap::Args, Debug)]
pub struct ResumeArgs {
    /// Resume every unfinished run under DIR (the only form for now: one
    /// run is resumed with `sweeptop run --resume RUN`).
    #[arg(long)]
    all: bool,
    /// Where runs are (default ./runs).
    #[arg(default_value = DEFAULT_DIR)]
    dir: PathBuf,
    /// Say what would be resumed and prepared, and do nothing.
    #[arg(long)]
    dry_run: bool,
    /// Start every run at once, each detached (for runs on GPUs they do not
    /// share); by default they run one after another.
    #[arg(long)]
    parallel: bool,
    /// Print a systemd user unit that runs `resume --all DIR` at boot.
    #[arg(long, conflicts_with_all = ["dry_run", "print_cron", "parallel"])]
    print_systemd: bool,
    /// Print an `@reboot` crontab line that runs `resume --all DIR`.
    #[arg(long, conflicts_with_all = ["dry_run", "parallel"])]
    print_cron: bool,
    /// No GPU telemetry in the resumed runs.
    #[arg(long)]
    no_gpu: bool,
    /// Load NVML from this file in the resumed runs.
    #[arg(long, value_name = "PATH")]
    nvml_lib: Option<PathBuf>,
    /// (The background resumer itself: runs each in turn, in the foreground.)
    #[arg(long, hide = true)]
    in_turn: bool,
}

/// One run to resume, and what it will do first.
struct Todo {
    dir: PathBuf,
    /// Cells without a record, or cut short by the stop.
    left: usize,
    /// Prepare steps whose target is missing: (key, what it creates).
    missing: Vec<(String, Vec<String>)>,
}

pub fn resume(args: ResumeArgs) -> Result<u8> {
    if args.print_systemd || args.print_cron {
        return print_recovery(&args);
    }
    if !args.all {
        return Err(user(
            "say `sweeptop resume --all [DIR]` to resume every unfinished run under DIR \
             (default ./runs), or `sweeptop run --resume RUN` for one",
        ));
    }
    if !args.dir.is_dir() {
        return Err(user(format!(
            "{} is not a directory of runs (see `sweeptop ls`)",
            args.dir.display()
        )));
    }
    if args.in_turn {
        return in_turn(&args);
    }
    let (todo, notes) = find(&args.dir);
    let mut out = String::new();
    for n in &notes {
        out.push_str(&format!("{n}\n"));
    }
    if todo.is_empty() {
        out.push_str(&format!(
            "nothing to resume under {}: every run has finished or runs now\n",
            args.dir.display()
        ));
        super::print(&out)?;
        return Ok(0);
    }
    let how = if args.parallel {
        "all at once"
    } else {
        "one after another"
    };
    out.push_str(&format!(
        "{} {} run(s) under {}, {how}:\n",
        if args.dry_run {
            "would resume"
        } else {
            "resuming"
        },
        todo.len(),
        args.dir.display()
    ));
    for t in &todo {
        out.push_str(&format!("  {} ({} cells left)\n", t.dir.display(), t.left));
        for (key, creates) in &t.missing {
            out.push_str(&format!(
                "    prepare {key} first: {} is missing\n",
                creates.join(", ")
            ));
        }
    }
    super::print(&out)?;
    if args.dry_run {
        return Ok(0);
    }
    if args.parallel {
        for t in &todo {
            let status = Command::new(exe()?)
                .args(["run", "--resume"])
                .arg(&t.dir)
                .arg("--detach")
                .args(gpu_flags(&args))
                .stdin(Stdio::null())
                .status()
                .context(|| "cannot start sweeptop".into())?;
            if !status.success() {
                eprintln!("warning: {} was not resumed ({status})", t.dir.display());
            }
        }
        return Ok(0);
    }
    if resumer_running(&args.dir) {
        super::print(&format!(
            "another resumer works through {} already (its log: {}); it takes these in turn\n",
            args.dir.display(),
            args.dir.join(RESUME_LOG).display()
        ))?;
        return Ok(0);
    }
    detach_in_turn(&args)
}

/// Whether a background resumer holds DIR's resume lock now.
fn resumer_running(dir: &Path) -> bool {
    store::is_held(&dir.join(RESUME_LOCK))
}

/// Every run under `dir` with cells left (or `dir` itself when it is a
/// run), oldest first, and notes on what is left alone (running now, a
/// Slurm sweep, a shard never started, a plan that cannot be read).
fn find(dir: &Path) -> (Vec<Todo>, Vec<String>) {
    let mut runs = if store::is_run_dir(dir) {
        let parent = dir.parent().unwrap_or(Path::new("."));
        let mut all = list_runs(parent, crate::control::is_live);
        all.retain(|r| r.dir == dir);
        all
    } else {
        list_runs(dir, crate::control::is_live)
    };
    runs.reverse();
    let mut todo = Vec::new();
    let mut notes = Vec::new();
    let mut consider =
        |run_dir: &Path, notes: &mut Vec<String>| match crate::view::replay::plan_of_run(run_dir) {
            Ok(plan) => todo.extend(todo_of(run_dir, &plan)),
            Err(e) => notes.push(format!(
                "{} is left alone: its plan cannot be read ({e})",
                run_dir.display()
            )),
        };
    for run in runs {
        match (&run.state, &run.sweep) {
            (RunState::Running, _) => notes.push(format!(
                "{} runs now: sweeptop attach {}",
                run.dir.display(),
                run.dir.display()
            )),
            // A finished run may still have cells whose prepare step failed
            // (nothing was measured): those are tried again.
            (RunState::Finished | RunState::Interrupted, None) => consider(&run.dir, &mut notes),
            (RunState::Finished, Some(_)) => {}
            (RunState::Interrupted, Some(s)) if s.slurm => notes.push(format!(
                "{} is a Slurm sweep: its shards are resubmitted with `sweeptop slurm --resume {}`",
                run.dir.display(),
                run.dir.display()
            )),
            (RunState::Interrupted, Some(s)) => {
                for (i, state) in &s.shards {
                    let Some((_, shard_dir)) = s.dirs.iter().find(|(j, _)| j == i) else {
                        continue;
                    };
                    match state {
                        ShardState::Interrupted | ShardState::Died { .. } => {
                            consider(shard_dir, &mut notes)
                        }
                        ShardState::Pending => notes.push(format!(
                            "{}: shard {i} never started: sweeptop run {} --shard {i}/{} --out {}",
                            run.dir.display(),
                            s.plan.display(),
                            s.meta.shards,
                            shard_dir.display()
                        )),
                        _ => {}
                    }
                }
            }
        }
    }
    (todo, notes)
}

/// A stopped run, with what is left of it; `None` when nothing is.
fn todo_of(dir: &Path, plan: &Plan) -> Option<Todo> {
    let left = crate::view::replay::cells_left(plan, dir);
    if left.is_empty() {
        return None;
    }
    let configs: Vec<&str> = plan
        .cells
        .iter()
        .filter(|c| left.contains(&c.id))
        .map(|c| c.config.as_str())
        .collect();
    Some(Todo {
        dir: dir.to_path_buf(),
        left: left.len(),
        missing: missing_steps(plan, &configs),
    })
}

/// The steps the configs with cells left need whose target is missing.
fn missing_steps(plan: &Plan, configs_left: &[&str]) -> Vec<(String, Vec<String>)> {
    plan.prepare
        .iter()
        .filter(|s| {
            plan.configs
                .iter()
                .any(|c| configs_left.contains(&c.id.as_str()) && c.prepare.contains(&s.key))
        })
        .filter(|s| s.creates.iter().any(|c| !Path::new(c).exists()))
        .map(|s| (s.key.clone(), s.creates.clone()))
        .collect()
}

fn exe() -> Result<PathBuf> {
    std::env::current_exe().context(|| "cannot find this program".into())
}

/// The GPU flags the resumed runs get.
fn gpu_flags(args: &ResumeArgs) -> Vec<String> {
    let mut f = Vec::new();
    if args.no_gpu {
        f.push("--no-gpu".into());
    }
    if let Some(p) = &args.nvml_lib {
        f.push("--nvml-lib".into());
        f.push(p.display().to_string());
    }
    f
}

/// Start the resumer in the background (its own session, so a closed SSH
/// link does not stop it), its output in DIR/resume.log.
fn detach_in_turn(args: &ResumeArgs) -> Result<u8> {
    let log_path = args.dir.join(RESUME_LOG);
    let mut cmd = Command::new(exe()?);
    cmd.args(["resume", "--all", "--in-turn"])
        .arg(&args.dir)
        .args(gpu_flags(args));
    let child = super::spawn_detached(cmd, &log_path, "the background resumer")?;
    super::print(&format!(
        "resuming in the background (pid {}), its log in {}\nlist runs (and the one running):  sweeptop ls {}\nwatch it:  sweeptop attach RUN_DIR\n",
        child.id(),
        log_path.display(),
        args.dir.display()
    ))?;
    Ok(0)
}

/// The background resumer: each unfinished run in turn, oldest first, as
/// `sweeptop run --resume RUN --headless` (its output in the run's own
/// `sweeptop.log`), under DIR's resume lock (a second resumer says so and
/// leaves).
fn in_turn(args: &ResumeArgs) -> Result<u8> {
    let lock_path = args.dir.join(RESUME_LOCK);
    let lock = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .context(|| format!("cannot open {}", lock_path.display()))?;
    if lock.try_lock().is_err() {
        println!(
            "{} another resumer works through {} already",
            crate::model::Timestamp::now(),
            args.dir.display()
        );
        return Ok(0);
    }
    let mut out = std::io::stdout();
    // Runs are found again before each one: what the last one did (or a
    // user meanwhile) changes what is left.
    let mut tried: Vec<PathBuf> = Vec::new();
    loop {
        let (todo, _) = find(&args.dir);
        let Some(next) = todo.into_iter().find(|t| !tried.contains(&t.dir)) else {
            break;
        };
        tried.push(next.dir.clone());
        let _ = writeln!(
            out,
            "{} resuming {} ({} cells left)",
            crate::model::Timestamp::now(),
            next.dir.display(),
            next.left
        );
        let run_log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(next.dir.join(store::DETACH_LOG));
        let (o, e) = match &run_log {
            Ok(f) => (
                f.try_clone().map_or(Stdio::null(), Stdio::from),
                f.try_clone().map_or(Stdio::null(), Stdio::from),
            ),
            Err(_) => (Stdio::null(), Stdio::null()),
        };
        let status = Command::new(exe()?)
            .args(["run", "--resume"])
            .arg(&next.dir)
            .arg("--headless")
            .args(gpu_flags(args))
            .stdin(Stdio::null())
            .stdout(o)
            .stderr(e)
            .status();
        let _ = writeln!(
            out,
            "{} {}: {}",
            crate::model::Timestamp::now(),
            next.dir.display(),
            match status {
                Ok(s) if s.success() => "finished".to_string(),
                Ok(s) => format!("stopped ({s}); see its {}", store::DETACH_LOG),
                Err(e) => format!("could not be started: {e}"),
            }
        );
    }
    drop(lock);
    Ok(0)
}

/// `--print-systemd` / `--print-cron`: what runs `resume --all DIR` at
/// every boot, with absolute paths (neither starts in this directory).
fn print_recovery(args: &ResumeArgs) -> Result<u8> {
    let exe = exe()?;
    let dir = std::path::absolute(&args.dir)
        .context(|| format!("cannot make {} absolute", args.dir.display()))?;
    let cwd = std::env::current_dir().context(|| "cannot read the current directory".into())?;
    let flags = gpu_flags(args)
        .iter()
        .map(|f| format!(" {}", shell_word(f)))
        .collect::<String>();
    let command = format!(
        "{} resume --all {}{flags}",
        shell_word(&exe.display().to_string()),
        shell_word(&dir.display().to_string())
    );
    // A unit or cron job starts with a bare environment: what finds the
    // servers and the copy tools here (PATH, a virtualenv, the Hugging Face
    // cache) is written into it.
    let env = captured_env();
    let text = if args.print_systemd {
        format!(
            "# Resume every unfinished sweeptop run under {dir} at boot.\n\
             # Save as ~/.config/systemd/user/sweeptop-resume.service, then:\n\
             #   systemctl --user daemon-reload && systemctl --user enable sweeptop-resume\n\
             #   loginctl enable-linger $USER   # user units start at boot, without a login\n\
             # The environment below was this shell's when it was printed (a user\n\
             # unit starts without it); put secrets such as HF_TOKEN in `hf auth login`.\n\
             # `systemctl --user stop` does not stop the sweeps it resumed: they\n\
             # run detached; stop one with `sweeptop attach RUN --send quit`.\n\
             [Unit]\n\
             Description=Resume interrupted sweeptop runs under {dir}\n\
             \n\
             [Service]\n\
             Type=oneshot\n\
             WorkingDirectory={cwd}\n\
             {environment}\
             ExecStart={command}\n\
             # The resumer and its sweeps outlive this start command.\n\
             RemainAfterExit=yes\n\
             KillMode=process\n\
             \n\
             [Install]\n\
             WantedBy=default.target\n",
            dir = dir.display(),
            cwd = cwd.display(),
            environment = env
                .iter()
                .map(|(k, v)| format!(
                    "Environment=\"{k}={}\"\n",
                    v.replace('\\', "\\\\").replace('"', "\\\"")
                ))
                .collect::<String>(),
        )
    } else {
        format!(
            "# Resume every unfinished sweeptop run under {dir} at boot: add with `crontab -e`.\n\
             # (The environment is this shell's: cron starts without it.)\n\
             @reboot cd {cwd} && {environment}{command} >> {log} 2>&1\n",
            environment = env
                .iter()
                .map(|(k, v)| format!("{k}={} ", shell_word(v)))
                .collect::<String>(),
            dir = dir.display(),
            cwd = shell_word(&cwd.display().to_string()),
            log = shell_word(&dir.join(RESUME_LOG).display().to_string()),
        )
    };
    super::print(&text)?;
    Ok(0)
}

/// The variables a sweep's servers and prepare steps are found and run
/// with, as this shell has them (a boot-time start has none of them).
fn captured_env() -> Vec<(String, String)> {
    const KEEP: [&str; 7] = [
        "PATH",
        "VIRTUAL_ENV",
        "HF_HOME",
        "HF_HUB_CACHE",
        "CUDA_HOME",
        "LD_LIBRARY_PATH",
        "CUDA_VISIBLE_DEVICES",
    ];
    KEEP.iter()
        .filter_map(|k| Some((k.to_string(), std::env::var(k).ok()?)))
        .filter(|(_, v)| !v.is_empty() && !v.contains('\n') && !v.contains('%'))
        .collect()
}

/// `s` as one shell word (quoted only when it must be).
fn shell_word(s: &str) -> String {
    crate::plan::template::join_words(&[s.to_string()])
}
