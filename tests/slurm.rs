//! One sweep spread over a real Slurm cluster: a one-node cluster started here
//! (Debian's `slurm-wlm` and `munge`, installed when missing and we are root),
//! `sweeptop slurm` submits a 3-shard job array of the simulated server, the
//! sweep directory is watched while it runs, one task is cancelled mid-cell
//! (`scancel`, as a node loss or a time limit looks), `slurm --resume`
//! submits it again, and the merged results are checked cell by cell.
//!
//! Without root or the packages it says why and passes, unless
//! `SWEEPTOP_REQUIRE_SLURM=1` (CI), which makes that a failure. Run it with
//! `cargo test --test slurm -- --nocapture` to see what happened.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const SLURM_CONF: &str = "/etc/slurm/slurm.conf";

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn sh(cmd: &str) -> (bool, String) {
    match Command::new("sh").args(["-c", cmd]).output() {
        Ok(o) => (
            o.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
        ),
        Err(e) => (false, e.to_string()),
    }
}

/// Why a cluster cannot be had here, or `None` once the packages are there.
fn packages() -> Option<String> {
    if have("slurmctld") && have("slurmd") && have("sbatch") && have("munged") {
        return None;
    }
    if !nix_is_root() {
        return Some("slurm-wlm and munge are not installed and we are not root".into());
    }
    if !have("apt-get") {
        return Some("slurm-wlm and munge are not installed and there is no apt-get".into());
    }
    let started = Instant::now();
    let install = "DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge";
    let (ok, out) = sh(&format!("{install} || (apt-get update -q && {install})"));
    println!("installed slurm-wlm and munge in {:.0?}", started.elapsed());
    if !ok {
        return Some(format!(
            "apt-get could not install slurm-wlm and munge: {}",
            out.lines().last().unwrap_or("")
        ));
    }
    None
}

fn nix_is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A one-node cluster: its daemons, stopped (and `slurm.conf` put back) on drop.
struct Cluster {
    dir: PathBuf,
    /// Directories the cluster's jobs write to: a job step process holding
    /// a file under one of them is this cluster's.
    owned: Vec<PathBuf>,
    daemons: Vec<Child>,
    munged: Option<u32>,
    old_conf: Option<Vec<u8>>,
}

impl Cluster {
    fn start() -> Result<Cluster, String> {
        let dir = std::env::temp_dir().join(format!("sweeptop-slurm-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for d in ["state", "spool"] {
            std::fs::create_dir_all(dir.join(d)).map_err(|e| e.to_string())?;
        }
        let mut cluster = Cluster {
            dir: dir.clone(),
            owned: vec![dir.clone()],
            daemons: Vec::new(),
            munged: None,
            old_conf: std::fs::read(SLURM_CONF).ok(),
        };
        // munged: ours unless one already answers.
        if !sh("munge -n </dev/null >/dev/null 2>&1").0 {
            sh("[ -f /etc/munge/munge.key ] || mungekey -c");
            sh("mkdir -p /run/munge && chown munge:munge /run/munge");
            let (ok, out) = sh("runuser -u munge -- /usr/sbin/munged");
            if !ok {
                return Err(format!("munged did not start: {out}"));
            }
            cluster.munged = std::fs::read_to_string("/run/munge/munged.pid")
                .ok()
                .and_then(|p| p.trim().parse().ok());
        }
        let host = sh("hostname -s").1.trim().to_string();
        let d = dir.display();
        let conf = format!(
            "ClusterName=local\nSlurmctldHost={host}\nAuthType=auth/munge\n\
             ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSlurmUser=root\n\
             SlurmdUser=root\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
             SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
             SchedulerType=sched/backfill\nSelectType=select/cons_tres\n\
             SelectTypeParameters=CR_Core\nReturnToService=2\nMpiDefault=none\n\
             KillWait=5\n\
             NodeName={host} CPUs=2 RealMemory=2000 State=UNKNOWN\n\
             PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4\n"
        );
        std::fs::create_dir_all("/etc/slurm").map_err(|e| e.to_string())?;
        std::fs::write(SLURM_CONF, conf).map_err(|e| e.to_string())?;
        for daemon in ["slurmctld", "slurmd"] {
            let log = std::fs::File::create(dir.join(format!("{daemon}.log")))
                .map_err(|e| e.to_string())?;
            let child = Command::new(daemon)
                .arg("-D")
                .stdin(Stdio::null())
                .stdout(log.try_clone().map_err(|e| e.to_string())?)
                .stderr(log)
                .spawn()
                .map_err(|e| format!("{daemon}: {e}"))?;
            cluster.daemons.push(child);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (ok, out) = sh("sinfo -h -o %T");
            if ok && out.trim() == "idle" {
                break;
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(dir.join("slurmctld.log")).unwrap_or_default();
                return Err(format!("the node did not come up ({}): {log}", out.trim()));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(cluster)
    }
}

/// The `slurmstepd` processes (a job step's keeper) holding a file under one
/// of `dirs`.
fn step_daemons(dirs: &[PathBuf]) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() != "slurmstepd" {
            continue;
        }
        let ours = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|fds| {
                fds.flatten().any(|fd| {
                    std::fs::read_link(fd.path())
                        .is_ok_and(|target| dirs.iter().any(|d| target.starts_with(d)))
                })
            })
            .unwrap_or(false);
        if ours {
            out.push(pid);
        }
    }
    out
}

impl Drop for Cluster {
    fn drop(&mut self) {
        sh("scancel --user=root >/dev/null 2>&1");
        // The jobs' steps end while their daemons are still there to hear it.
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline
            && (!sh("squeue -h").1.trim().is_empty() || !step_daemons(&self.owned).is_empty())
        {
            std::thread::sleep(Duration::from_millis(200));
        }
        for child in self.daemons.iter_mut().rev() {
            // SAFETY: plain kill(2) of our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(15);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        // A step keeper left without its daemon (it would wait for it forever).
        for pid in step_daemons(&self.owned) {
            // SAFETY: plain kill(2) of a job step of this cluster.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        if let Some(pid) = self.munged {
            // SAFETY: plain kill(2) of the munged we started.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }
        // slurm.conf as it was (none, if there was none): never one that
        // names the directory removed here.
        match &self.old_conf {
            Some(old) => {
                let _ = std::fs::write(SLURM_CONF, old);
            }
            None => {
                let _ = std::fs::remove_file(SLURM_CONF);
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const PLAN: &str = r#"
name = "slurm-e2e"
[server]
command = "{sweeptop} sim-server --port {port} --startup-ms 50 --ttft-ms 5 --itl-ms 15 {fault}"
port = "auto"
stop_grace_s = 1
[limits]
context = 4096
[[workloads]]
id = "w"
contexts = [64, 128, 256, 512]
concurrency = [1]
requests = 4
max_tokens = 40
[[phases]]
id = "p"
vars = { fault = "" }
matrix = { kind = ["a", "b", "crash"] }
[[phases.set]]
when = { kind = "crash" }
vars = { fault = "--fault crash:cuda_illegal_instruction@1" }
"#;

fn sweeptop_json(tag: &str, args: &[&str]) -> serde_json::Value {
    let mut c = sweeptop(tag);
    c.args(args);
    let out = run_with_deadline(c, Duration::from_secs(30));
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn shard_states(tag: &str, sweep: &Path) -> Vec<String> {
    let runs = sweeptop_json(tag, &["ls", sweep.to_str().unwrap(), "--json"]);
    runs[0]["shards"]
        .as_array()
        .map(|s| {
            s.iter()
                .map(|s| {
                    let host = s["host"]
                        .as_str()
                        .map(|h| format!(" on {h}"))
                        .unwrap_or_default();
                    format!(
                        "{}{host} {}/{}",
                        s["state"].as_str().unwrap_or("?"),
                        s["done"],
                        s["total"]
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_sweep_spread_over_slurm_survives_a_cancelled_task() {
    let began = Instant::now();
    let require = std::env::var("SWEEPTOP_REQUIRE_SLURM").is_ok_and(|v| v == "1");
    if let Some(why) = packages() {
        assert!(!require, "SWEEPTOP_REQUIRE_SLURM=1 but no Slurm: {why}");
        println!("not run: {why}");
        return;
    }
    if sh("pgrep -x slurmctld || pgrep -x slurmd").0 {
        let why = "a Slurm daemon already runs on this machine; this test starts its own cluster";
        assert!(!require, "SWEEPTOP_REQUIRE_SLURM=1 but {why}");
        println!("not run: {why}");
        return;
    }
    let mut cluster = match Cluster::start() {
        Ok(c) => c,
        Err(why) => {
            assert!(!require, "SWEEPTOP_REQUIRE_SLURM=1 but no cluster: {why}");
            println!("not run: {why}");
            return;
        }
    };
    let t = |what: &str| println!("{:>6.1}s  {what}", began.elapsed().as_secs_f64());
    t("cluster up (slurmctld, slurmd, munged)");

    let dir = scratch("slurm");
    cluster.owned.push(dir.clone());
    let tag = format!("slurm-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let sweep = dir.join("sweep");
    let s = sweep.to_str().unwrap().to_string();
    let mut c = sweeptop(&tag);
    c.current_dir(&dir).args([
        "slurm",
        plan.to_str().unwrap(),
        "--nodes",
        "3",
        "--partition",
        "debug",
        "--time",
        "10:00",
        "--out",
        &s,
        "--run-arg=--no-gpu",
    ]);
    let out = run_with_deadline(c, Duration::from_secs(30));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    print!("{text}");
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sweep.join("sweep.json")).unwrap()).unwrap();
    let job = meta["submissions"][0]["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    t(&format!("submitted job {job}"));
    // A viewer following the whole sweep through its files.
    let mut viewer = sweeptop(&tag);
    viewer
        .args(["attach", &s, "--headless"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let viewer = viewer.spawn().unwrap();

    // Watch the sweep directory until every shard has started.
    let mut last = Vec::new();
    wait_until(Duration::from_secs(90), "every shard to run", || {
        let states = shard_states(&tag, &sweep);
        if states != last {
            t(&format!("shards: {}", states.join(" | ")));
            last = states.clone();
        }
        states.iter().filter(|s| s.starts_with("running")).count() == 3
    });
    let mut c = sweeptop(&tag);
    c.args(["ls", &s]);
    print!(
        "{}",
        String::from_utf8_lossy(&run_with_deadline(c, Duration::from_secs(30)).stdout)
    );
    // Three configs of equal cost, one per shard in plan order: shard 2
    // runs config b. Cancel it mid-cell: a result recorded, another running.
    let victim = 2u32;
    let vdir = sweep.join(format!("shards/{victim}"));
    wait_until(
        Duration::from_secs(60),
        "a cell of the victim mid-way",
        || {
            let ev = events(&vdir);
            let started = ev.iter().filter(|e| e["event"] == "cell_started").count();
            let finished = ev.iter().filter(|e| e["event"] == "cell_finished").count();
            finished >= 1 && started > finished
        },
    );
    let before = results(&vdir).len();
    let (ok, out) = sh(&format!("scancel {job}_{victim}"));
    assert!(ok, "scancel: {out}");
    t(&format!(
        "scancel {job}_{victim} with {before} cell(s) of shard {victim} recorded, one running"
    ));
    wait_until(
        Duration::from_secs(60),
        "the cancelled shard to stop",
        || {
            let states = shard_states(&tag, &sweep);
            let st = &states[victim as usize - 1];
            st.starts_with("interrupted") || st.starts_with("died")
        },
    );
    t(&format!(
        "shards: {}",
        shard_states(&tag, &sweep).join(" | ")
    ));
    wait_until(
        Duration::from_secs(120),
        "the other shards to finish",
        || {
            let states = shard_states(&tag, &sweep);
            states
                .iter()
                .enumerate()
                .all(|(i, s)| i + 1 == victim as usize || s.starts_with("finished"))
        },
    );
    t(&format!(
        "shards: {}",
        shard_states(&tag, &sweep).join(" | ")
    ));
    // No shard runs: the viewer has seen every shard's cells, and says how to go on.
    let seen = wait_output(viewer, Duration::from_secs(30));
    let seen = String::from_utf8_lossy(&seen.stdout).into_owned();
    for config in ["a", "b", "crash"] {
        assert!(
            seen.contains(&format!("  {config}/w-")),
            "no cell of {config} followed:\n{seen}"
        );
    }
    let last = seen.lines().last().unwrap_or("");
    assert!(last.contains("slurm --resume"), "{seen}");
    t(&format!(
        "the viewer followed {} lines, ending: {last}",
        seen.lines().count()
    ));

    let mut c = sweeptop(&tag);
    c.current_dir(&dir).args(["slurm", "--resume", &s]);
    let out = run_with_deadline(c, Duration::from_secs(30));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    print!("{text}");
    assert!(
        text.contains("submitted job") && text.contains(&format!("shard(s) {victim} of")),
        "{text}"
    );
    t("resubmitted the cancelled shard");
    wait_until(Duration::from_secs(120), "the sweep to finish", || {
        sweeptop_json(&tag, &["ls", &s, "--json"])[0]["state"] == "finished"
    });
    t(&format!(
        "shards: {}",
        shard_states(&tag, &sweep).join(" | ")
    ));

    // Cell by cell: every cell exactly once in the merged view, ok where the
    // plan's server is healthy, failed where it crashes.
    let exported = sweeptop_json(&tag, &["export", &s, "--format", "json"]);
    let rows = exported
        .as_array()
        .or_else(|| exported["results"].as_array())
        .unwrap()
        .clone();
    let mut cells: Vec<String> = rows
        .iter()
        .map(|r| r["cell"].as_str().unwrap().to_string())
        .collect();
    cells.sort();
    let mut want = plan_cells(&plan);
    want.sort();
    assert_eq!(cells, want, "every cell exactly once");
    for r in &rows {
        let healthy = r["config"] != "crash";
        assert_eq!(
            r["status"] == "ok",
            healthy,
            "{} is {}",
            r["cell"],
            r["status"]
        );
    }
    let resumed = results(&vdir).len();
    assert!(resumed >= 4 && resumed > before, "{before} then {resumed}");
    println!(
        "{} cells: {} ok, {} failed (config crash); shard {victim} had {before} recorded when cancelled",
        rows.len(),
        rows.iter().filter(|r| r["status"] == "ok").count(),
        rows.iter().filter(|r| r["status"] == "failed").count()
    );
    drop(cluster);
    assert!(
        !std::fs::read_to_string(SLURM_CONF).is_ok_and(|c| c.contains("sweeptop-slurm-")),
        "slurm.conf still names the removed cluster directory"
    );
    assert!(
        step_daemons(std::slice::from_ref(&dir)).is_empty(),
        "a job step of the cluster is still there"
    );
    t("cluster stopped");
    let _ = std::fs::remove_dir_all(&dir);
}
