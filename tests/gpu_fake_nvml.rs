//! The NVML code path end to end against the fake library (`fake-nvml/`): the real
//! dlopen, symbol lookup, init, per-device reads and error mapping, on any machine.
//!
//! The fake reads its figures from `FAKE_NVML_*` environment variables, which are
//! process-wide, so each scenario runs in a child process: this test binary
//! re-executed with only the `child_probe` test selected and the variables set.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sweeptop as crate_under_test;

use crate_under_test::gpu::{
    foreign_processes, own_leftovers, render_table, sample_once, spawn_sampler, GpuSource,
};
use crate_under_test::model::{GpuSnapshot, GpuStatus};

/// Set in a child: what `child_probe` should do.
const CHILD_MODE: &str = "GPU_TEST_CHILD_MODE";
/// Set in a child: the fake library's path.
const CHILD_LIB: &str = "GPU_TEST_CHILD_LIB";
/// Set in a child: comma list of pids that count as the sweep's.
const CHILD_OURS: &str = "GPU_TEST_CHILD_OURS";
/// Marks a child's snapshot lines (libtest may print "test child_probe ... " first).
const SNAPSHOT_LINE: &str = "GPU_TEST_SNAPSHOT ";

/// Builds `fake-nvml` once per test binary and returns the path of its `.so`.
///
/// It uses its own target directory under this binary's profile directory, so it
/// never contends for the outer build's lock or disturbs its fingerprints, and it
/// works in any workspace that has `fake-nvml/` next to its manifest.
fn fake_lib() -> &'static Path {
    static LIB: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match LIB.get_or_init(build_fake_lib) {
        Ok(path) => path,
        Err(err) => panic!("building fake-nvml failed: {err}"),
    }
}

fn build_fake_lib() -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("fake-nvml/Cargo.toml");
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // <target>/<profile>/deps/<this test> → <target>/<profile>/fake-nvml-target
    let target_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or("test binary has no profile directory")?
        .join("fake-nvml-target");
    let output = Command::new(cargo)
        .arg("build")
        .arg("--quiet")
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target_dir)
        .arg("--message-format=json")
        .output()
        .map_err(|e| format!("running cargo: {e}"))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    // Ask cargo where it put the library instead of guessing the layout.
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| msg["reason"] == "compiler-artifact" && msg["target"]["name"] == "fake_nvml")
        .flat_map(|msg| msg["filenames"].as_array().cloned().unwrap_or_default())
        .filter_map(|f| f.as_str().map(PathBuf::from))
        .find(|f| f.extension().is_some_and(|ext| ext == "so"))
        .ok_or_else(|| "cargo reported no libfake_nvml.so".to_string())
}

/// Runs `child_probe` in a child process with the given fake configuration.
fn run_child(mode: &str, ours: &[u32], env: &[(&str, &str)]) -> Vec<GpuSnapshot> {
    let exe = std::env::current_exe().expect("test binary path");
    let ours = ours
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    // The probe's name in this test binary: its module path without the crate.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let probe = format!("{module}::child_probe");
    let mut cmd = Command::new(exe);
    cmd.args([probe.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_MODE, mode)
        .env(CHILD_LIB, fake_lib())
        .env(CHILD_OURS, ours);
    // Only the scenario's settings, whatever the caller's environment has.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("FAKE_NVML_") {
            cmd.env_remove(key);
        }
    }
    cmd.envs(env.iter().copied());
    let output = cmd.output().expect("run child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let snaps: Vec<GpuSnapshot> = stdout
        .lines()
        .filter_map(|l| l.split_once(SNAPSHOT_LINE).map(|(_, json)| json))
        .map(|json| serde_json::from_str(json).expect("snapshot json"))
        .collect();
    assert!(!snaps.is_empty(), "child printed no snapshot: {stdout}");
    snaps
}

fn run_once(ours: &[u32], env: &[(&str, &str)]) -> GpuSnapshot {
    run_child("once", ours, env).remove(0)
}

/// The child side. Run as part of the normal suite it only checks that the fake
/// library builds and that it is not a child.
#[test]
fn child_probe() {
    let Ok(mode) = std::env::var(CHILD_MODE) else {
        assert!(fake_lib().exists());
        return;
    };
    let lib = PathBuf::from(std::env::var(CHILD_LIB).expect("lib path"));
    let ours_list: Vec<u32> = std::env::var(CHILD_OURS)
        .unwrap_or_default()
        .split(',')
        .filter_map(|p| p.parse().ok())
        .collect();
    let ours = move |pid: u32| ours_list.contains(&pid);
    let source = GpuSource::Nvml {
        lib_path: Some(lib),
    };
    let print = |snap: &GpuSnapshot| {
        println!("{SNAPSHOT_LINE}{}", serde_json::to_string(snap).unwrap());
    };
    match mode.as_str() {
        "once" => print(&sample_once(&source, &ours)),
        "repeat" => {
            // Init and shutdown several times in one process, then keep one handle
            // open on the sampler thread across samples.
            for _ in 0..3 {
                print(&sample_once(&source, &ours));
            }
            let (tx, rx) = std::sync::mpsc::channel();
            let sampler = spawn_sampler(
                source.clone(),
                Duration::from_millis(250),
                Arc::new(ours),
                Box::new(move |snap| tx.send(snap).is_ok()),
            );
            for _ in 0..3 {
                print(&rx.recv_timeout(Duration::from_secs(10)).expect("sample"));
            }
            drop(sampler);
            print(&sample_once(&source, &|_| false));
        }
        other => panic!("unknown child mode {other}"),
    }
}

fn driver_550() -> GpuStatus {
    GpuStatus::Nvml {
        driver: Some("550.54.15".into()),
        cuda: Some("12.4".into()),
    }
}

#[test]
fn zero_gpus_is_no_gpus() {
    let snap = run_once(&[], &[("FAKE_NVML_GPUS", "0")]);
    assert_eq!(snap.status, GpuStatus::NoGpus);
    assert!(snap.gpus.is_empty());
}

#[test]
fn one_gpu_reports_every_metric() {
    let snap = run_once(
        &[],
        &[
            ("FAKE_NVML_UTIL", "87"),
            ("FAKE_NVML_MEM_USED_MIB", "100000"),
            ("FAKE_NVML_DRIVER_VERSION", "550.54.15"),
        ],
    );
    assert_eq!(snap.status, driver_550());
    assert_eq!(snap.gpus.len(), 1);
    let gpu = &snap.gpus[0];
    assert_eq!(gpu.index, 0);
    assert_eq!(gpu.name, "Fake H200 #0");
    assert_eq!(gpu.util_pct, Some(87));
    assert_eq!(gpu.mem_used_mib, Some(100_000));
    assert_eq!(gpu.mem_total_mib, Some(143_771));
    assert_eq!(gpu.temp_c, Some(30 + 87 * 45 / 100));
    assert_eq!(gpu.power_w, Some(597.0));
    assert_eq!(gpu.power_limit_w, Some(700.0));
    assert_eq!(gpu.sm_clock_mhz, Some(1980));
    assert!(gpu.processes.is_empty());
    let now = now_ms();
    assert!(
        snap.at_ms <= now && now - snap.at_ms < 60_000,
        "at_ms {}",
        snap.at_ms
    );
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn eight_gpus_each_with_their_own_figures() {
    let snap = run_once(
        &[],
        &[
            ("FAKE_NVML_GPUS", "8"),
            ("FAKE_NVML_UTIL", "0,10,20,30,40,50,60,70"),
            ("FAKE_NVML_MEM_TOTAL_MIB", "81559"),
        ],
    );
    assert_eq!(snap.status, driver_550());
    assert_eq!(snap.gpus.len(), 8);
    for (i, gpu) in snap.gpus.iter().enumerate() {
        assert_eq!(gpu.index, i as u32);
        assert_eq!(gpu.name, format!("Fake H200 #{i}"));
        assert_eq!(gpu.util_pct, Some(10 * i as u32));
        assert_eq!(gpu.mem_total_mib, Some(81_559));
        assert_eq!(gpu.mem_used_mib, Some(0));
    }
    assert_eq!(snap.gpus[0].sm_clock_mhz, Some(345));
    let table = render_table(&snap);
    assert_eq!(table.lines().count(), 1 + 1 + 8, "{table}");
    assert!(table.contains("Fake H200 #7"), "{table}");
}

#[test]
fn driver_not_loaded_is_a_state() {
    let snap = run_once(&[], &[("FAKE_NVML_INIT_ERROR", "driver_not_loaded")]);
    assert!(
        matches!(snap.status, GpuStatus::DriverNotLoaded { .. }),
        "{:?}",
        snap.status
    );
    assert_eq!(snap.status.label(), "NVIDIA driver not loaded");
    assert!(snap.gpus.is_empty());
}

#[test]
fn other_init_failures_are_errors_with_the_cause() {
    let snap = run_once(&[], &[("FAKE_NVML_INIT_ERROR", "no_permission")]);
    match &snap.status {
        GpuStatus::Error { detail } => assert!(detail.contains("permission"), "{detail}"),
        other => panic!("expected Error, got {other:?}"),
    }
    let snap = run_once(&[], &[("FAKE_NVML_INIT_ERROR", "library_not_found")]);
    assert!(
        matches!(snap.status, GpuStatus::LibraryNotFound { .. }),
        "{:?}",
        snap.status
    );
}

#[test]
fn unsupported_metrics_are_na_and_the_rest_still_read() {
    let snap = run_once(
        &[],
        &[
            ("FAKE_NVML_NOT_SUPPORTED", "power,temperature"),
            ("FAKE_NVML_UTIL", "50"),
            ("FAKE_NVML_MEM_USED_MIB", "2048"),
        ],
    );
    assert_eq!(snap.status, driver_550());
    let gpu = &snap.gpus[0];
    assert_eq!(gpu.power_w, None);
    assert_eq!(gpu.temp_c, None);
    assert_eq!(gpu.power_limit_w, Some(700.0));
    assert_eq!(gpu.util_pct, Some(50));
    assert_eq!(gpu.mem_used_mib, Some(2048));
    assert_eq!(gpu.sm_clock_mhz, Some(1980));
    assert_eq!(gpu.name, "Fake H200 #0");

    let snap = run_once(&[], &[("FAKE_NVML_NOT_SUPPORTED", "name,memory,processes")]);
    let gpu = &snap.gpus[0];
    assert_eq!(gpu.name, "unknown");
    assert_eq!((gpu.mem_used_mib, gpu.mem_total_mib), (None, None));
    assert_eq!(gpu.util_pct, Some(0));
    assert!(render_table(&snap).contains("N/A"));
}

#[test]
fn processes_are_attributed_to_the_sweep_or_not() {
    // A real process, so its name comes from /proc/PID/comm.
    let mut sleeper = Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("spawn sleep");
    let sleeper_pid = sleeper.id();
    let procs = format!("0:{sleeper_pid}:70000,0:4000001:2000,1:4000002:na,1:4000003:0");
    let snap = run_once(
        &[sleeper_pid],
        &[("FAKE_NVML_GPUS", "2"), ("FAKE_NVML_PROCS", &procs)],
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();

    let gpu0 = &snap.gpus[0];
    assert_eq!(gpu0.processes.len(), 2);
    assert_eq!(gpu0.processes[0].pid, sleeper_pid);
    assert_eq!(gpu0.processes[0].name, "sleep");
    assert_eq!(gpu0.processes[0].used_mib, Some(70_000));
    assert!(gpu0.processes[0].ours);
    assert_eq!(gpu0.processes[1].pid, 4_000_001);
    assert_eq!(gpu0.processes[1].name, "?");
    assert!(!gpu0.processes[1].ours);
    // Used memory defaults to the sum of the GPU's processes in the fake.
    assert_eq!(gpu0.mem_used_mib, Some(72_000));
    let gpu1 = &snap.gpus[1];
    assert_eq!(gpu1.processes[0].used_mib, None);

    let foreign: Vec<(u32, u32)> = foreign_processes(&snap, None)
        .into_iter()
        .map(|(gpu, p)| (gpu, p.pid))
        .collect();
    // 4000003 holds no memory; 4000002's memory is unknown so it counts.
    assert_eq!(foreign, vec![(0, 4_000_001), (1, 4_000_002)]);
    let foreign_gpu1 = foreign_processes(&snap, Some(&[1]));
    assert_eq!(foreign_gpu1.len(), 1);
    assert_eq!(foreign_gpu1[0].1.pid, 4_000_002);
    let own = own_leftovers(&snap, Some(&[0, 1]));
    assert_eq!(own.len(), 1);
    assert_eq!((own[0].0, own[0].1.pid), (0, sleeper_pid));
    assert!(own_leftovers(&snap, Some(&[1])).is_empty());
}

#[test]
fn repeated_init_and_the_sampler_thread_work() {
    let snaps = run_child(
        "repeat",
        &[],
        &[("FAKE_NVML_GPUS", "2"), ("FAKE_NVML_UTIL", "42")],
    );
    assert_eq!(snaps.len(), 7);
    for snap in &snaps {
        assert_eq!(snap.status, driver_550());
        assert_eq!(snap.gpus.len(), 2);
        assert_eq!(snap.gpus[1].util_pct, Some(42));
    }
    // The sampler's three snapshots are at least the minimum interval apart.
    let sampled = &snaps[3..6];
    for pair in sampled.windows(2) {
        assert!(pair[1].at_ms >= pair[0].at_ms + 200, "{:?}", pair);
    }
}

#[test]
fn a_missing_library_is_library_not_found() {
    let source = GpuSource::Nvml {
        lib_path: Some(PathBuf::from("/nonexistent/dir/libnvidia-ml.so.1")),
    };
    let snap = sample_once(&source, &|_| false);
    match &snap.status {
        GpuStatus::LibraryNotFound { detail } => {
            assert!(
                detail.contains("/nonexistent/dir/libnvidia-ml.so.1"),
                "{detail}"
            );
        }
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
    assert!(snap.gpus.is_empty());
    assert!(snap.status.label().starts_with("NVML not found: "));
}

#[test]
fn a_library_that_is_not_nvml_is_library_not_found() {
    // libc loads fine but has no nvmlInit_v2.
    let source = GpuSource::Nvml {
        lib_path: Some(PathBuf::from("libc.so.6")),
    };
    let snap = sample_once(&source, &|_| false);
    match &snap.status {
        GpuStatus::LibraryNotFound { detail } => {
            assert!(detail.contains("nvmlInit_v2"), "{detail}")
        }
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
}

/// `sweeptop gpus --json --nvml-lib <fake>` prints the fake's values, through the
/// real binary, and the table form shows N/A for what the card does not support.
#[test]
fn gpus_command_reads_the_fake_library() {
    let out = Command::new(env!("CARGO_BIN_EXE_sweeptop"))
        .args(["gpus", "--json", "--nvml-lib"])
        .arg(fake_lib())
        .env("FAKE_NVML_GPUS", "2")
        .env("FAKE_NVML_UTIL", "73")
        .env("FAKE_NVML_MEM_USED_MIB", "1234")
        .env_remove("FAKE_NVML_NOT_SUPPORTED")
        .env_remove("FAKE_NVML_INIT_ERROR")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let snap: GpuSnapshot = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        matches!(snap.status, GpuStatus::Nvml { .. }),
        "{:?}",
        snap.status
    );
    assert_eq!(snap.gpus.len(), 2);
    assert_eq!(snap.gpus[1].util_pct, Some(73));
    assert_eq!(snap.gpus[1].mem_used_mib, Some(1234));

    let out = Command::new(env!("CARGO_BIN_EXE_sweeptop"))
        .args(["gpus", "--nvml-lib"])
        .arg(fake_lib())
        .env("FAKE_NVML_GPUS", "1")
        .env("FAKE_NVML_NOT_SUPPORTED", "power")
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(table.contains("N/A"), "{table}");
    // No library at all is a state, not an error.
    let out = Command::new(env!("CARGO_BIN_EXE_sweeptop"))
        .args(["gpus", "--nvml-lib", "/nonexistent/libnvidia-ml.so.1"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("NVML not found"));
}

/// Preflight through NVML: a foreign process holding memory on a config's GPU
/// fails that config before launch (with the process named); a config on a
/// free GPU runs, and its cells carry the GPU figures NVML reported.
#[test]
fn foreign_gpu_memory_fails_preflight_and_gpu_figures_reach_results() {
    let dir = std::env::temp_dir().join(format!("sweeptop-gpu-preflight-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let plan = dir.join("p.toml");
    std::fs::write(
        &plan,
        r#"
name = "gpu-preflight"
config_id = "gpu{gpu}"
[server]
# Paced so the cell spans several 250 ms samples.
command = "{sweeptop} sim-server --port {port} --startup-ms 50 --ttft-ms 10 --itl-ms 10"
port = "auto"
env = { CUDA_VISIBLE_DEVICES = "{gpu}" }
[limits]
context = 4096
[[workloads]]
id = "w"
contexts = [32]
concurrency = [1]
requests = 2
max_tokens = 60
[[phases]]
id = "p"
  [phases.matrix]
  gpu = [0, 1]
"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sweeptop"))
        .args([
            "run",
            "--headless",
            "--gpu-interval-ms",
            "250",
            "--nvml-lib",
        ])
        .arg(fake_lib())
        .arg(&plan)
        .arg("--out")
        .arg(dir.join("run"))
        .env("FAKE_NVML_GPUS", "2")
        .env("FAKE_NVML_UTIL", "64")
        .env("FAKE_NVML_MEM_USED_MIB", "5000")
        .env("FAKE_NVML_PROCS", "0:1:4096")
        .env_remove("FAKE_NVML_NOT_SUPPORTED")
        .env_remove("FAKE_NVML_INIT_ERROR")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.join("run/results.jsonl")).unwrap();
    let results: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let gpu0 = results.iter().find(|r| r["config"] == "gpu0").unwrap();
    assert_eq!(gpu0["status"], "failed", "{gpu0}");
    assert_eq!(gpu0["failure"]["source"], "preflight");
    let msg = gpu0["failure"]["message"].as_str().unwrap();
    assert!(
        msg.contains("GPU 0: pid 1") && msg.contains("4096 MiB"),
        "{msg}"
    );
    let gpu1 = results.iter().find(|r| r["config"] == "gpu1").unwrap();
    assert_eq!(gpu1["status"], "ok", "{gpu1}");
    assert_eq!(gpu1["metrics"]["gpu_mem_peak_mib"], 5000, "{gpu1}");
    assert_eq!(
        gpu1["metrics"]["gpu_util_mean"].as_f64(),
        Some(64.0),
        "{gpu1}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `check` refuses a plan whose GPU list names a GPU the machine does not
/// have, as NVML shows it; one it has passes, and without NVML (--no-gpu) the
/// list is taken as written.
#[test]
fn check_refuses_a_gpu_the_machine_does_not_have() {
    let dir = std::env::temp_dir().join(format!("sweeptop-check-gpus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let plan = |gpus: &str| {
        let p = dir.join(format!("plan-{}.toml", gpus.replace(',', "_")));
        let text = "name = \"g\"\n[server]\ncommand = \"x --port {port}\"\nport = \"auto\"\n\
                    gpus = \"GPUS\"\n[[workloads]]\nid = \"w\"\ncontexts = [64]\n\
                    concurrency = [1]\n[[phases]]\nid = \"p\"\n"
            .replace("GPUS", gpus);
        std::fs::write(&p, text).unwrap();
        p
    };
    let check = |p: &Path, extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_sweeptop"))
            .arg("check")
            .arg(p)
            .arg("--nvml-lib")
            .arg(fake_lib())
            .args(extra)
            .env("FAKE_NVML_GPUS", "2")
            .env_remove("FAKE_NVML_INIT_ERROR")
            .output()
            .unwrap()
    };
    let out = check(&plan("5"), &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("GPU 5") && err.contains("2 GPUs"), "{err}");
    let out = check(&plan("0,1"), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = check(&plan("5"), &["--no-gpu"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
