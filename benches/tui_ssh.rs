//! What the dashboard costs over SSH: bytes written to the terminal per second
//! and the CPU of its threads, measured on the real binary running the demo on a
//! 120×40 pseudo-terminal (8 simulated GPUs).
//!
//! Run: `cargo bench --bench tui_ssh` (release build). Optional arguments after `--`:
//! `COLS ROWS`. Prints one line per second of the sweep, then a summary with
//! the targets (≤ 2 KB/s at steady state, dashboard threads ≤ 2 % of a core,
//! the whole process ≤ 1.5 %) and the last screen.

#[path = "../tests/pty/mod.rs"]
mod pty;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// CPU seconds of the dashboard's threads (`sweeptop-tui*`) and of the whole process.
fn cpu_seconds(pid: u32) -> (f64, f64) {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let ticks = |stat: &str| -> f64 {
        let rest = stat.rsplit(')').next().unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        // Fields 14 and 15 of stat (utime, stime) are 11 and 12 after the name.
        let u: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0);
        let s: f64 = f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
        u + s
    };
    let mut tui = 0.0;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            if comm.starts_with("sweeptop-tui") {
                tui += ticks(&std::fs::read_to_string(t.path().join("stat")).unwrap_or_default());
            }
        }
    }
    let all = ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default());
    (tui / hz, all / hz)
}

fn log_lines(run: &Path) -> usize {
    std::fs::read_dir(run.join("logs"))
        .map(|d| {
            d.flatten()
                .map(|e| {
                    std::fs::read(e.path())
                        .map(|b| b.iter().filter(|&&c| c == b'\n').count())
                        .unwrap_or(0)
                })
                .sum()
        })
        .unwrap_or(0)
}

struct Sample {
    t: f64,
    bytes: usize,
    frames: usize,
    tui_cpu: f64,
    all_cpu: f64,
    lines: usize,
}

fn main() {
    let args: Vec<u16> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (cols, rows) = (
        args.first().copied().unwrap_or(120),
        args.get(1).copied().unwrap_or(40),
    );
    let dir = std::env::temp_dir().join(format!("sweeptop-bench-tui-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let run = dir.join("run");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sweeptop"));
    cmd.args(["demo", "--out"])
        .arg(&run)
        .env("TERM", "xterm-256color")
        .env("LANG", "C.UTF-8")
        .env_remove("LC_ALL")
        .env_remove("NO_COLOR")
        .env("HOME", &dir)
        .env("XDG_CONFIG_HOME", dir.join(".config"));
    let mut term = pty::Pty::spawn(cmd, cols, rows);
    let pid = term.child.id();
    term.wait_for(" RUNNING ", Duration::from_secs(60));
    let start = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    let frames_so_far = |bytes: &[u8]| bytes.windows(8).filter(|w| *w == b"\x1b[?2026h").count();
    println!("  t   bytes/s  frames/s  log lines/s");
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let (bytes, frames) = {
            let o = term.out.lock().unwrap();
            (o.bytes.len(), frames_so_far(&o.bytes))
        };
        let (tui_cpu, all_cpu) = cpu_seconds(pid);
        let s = Sample {
            t: start.elapsed().as_secs_f64(),
            bytes,
            frames,
            tui_cpu,
            all_cpu,
            lines: log_lines(&run),
        };
        if let Some(p) = samples.last() {
            println!(
                "{:>3.0} {:>9} {:>9} {:>12}",
                s.t,
                s.bytes - p.bytes,
                s.frames - p.frames,
                s.lines - p.lines
            );
        }
        samples.push(s);
        let screen = term.screen();
        if screen.contains(" FINISHED ") || start.elapsed() > Duration::from_secs(600) {
            break;
        }
    }
    let last_screen = term.screen();
    term.send("q");
    let _ = term.wait_exit(Duration::from_secs(30));

    // Steady state: from the third second to the last sample before the end.
    let window: Vec<&Sample> = samples.iter().skip(2).collect();
    let (a, b) = (window[0], window[window.len() - 1]);
    let secs = b.t - a.t;
    let per_second: Vec<usize> = window.windows(2).map(|w| w[1].bytes - w[0].bytes).collect();
    let mut sorted = per_second.clone();
    sorted.sort_unstable();
    let rate = (b.bytes - a.bytes) as f64 / secs;
    let tui_pct = (b.tui_cpu - a.tui_cpu) / secs * 100.0;
    println!();
    println!("terminal            {cols}x{rows}, 8 simulated GPUs, demo sweep");
    println!("window              {secs:.0} s of steady state");
    println!(
        "log lines/s         {:.1} (server output written to logs/)",
        (b.lines - a.lines) as f64 / secs
    );
    println!(
        "frames/s            {:.2}",
        (b.frames - a.frames) as f64 / secs
    );
    println!(
        "bytes/s             {rate:.0} mean, {} median, {} max in one second",
        sorted[sorted.len() / 2],
        sorted[sorted.len() - 1]
    );
    println!("dashboard CPU       {tui_pct:.2} % of a core (threads sweeptop-tui*)");
    // Two decimals: a figure printed as "1.5" must not read as met when it
    // is 1.53.
    let all_pct = (b.all_cpu - a.all_cpu) / secs * 100.0;
    println!("whole process CPU   {all_pct:.2} % of a core (engine, load generator, GPU sampler)");
    let ok = |b: bool| if b { "met" } else { "NOT met" };
    println!("\n| figure | target | measured | |");
    println!("|---|---|---:|---|");
    println!(
        "| dashboard bytes at {cols}×{rows} | ≤ 2 KB/s | {:.2} KB/s | {} |",
        rate / 1000.0,
        ok(rate <= 2000.0)
    );
    println!(
        "| dashboard CPU (its threads) | ≤ 2 % of a core | {tui_pct:.2} % | {} |",
        ok(tui_pct <= 2.0)
    );
    println!(
        "| whole process CPU, demo | ≤ 1.5 % of a core | {all_pct:.2} % | {} |",
        ok(all_pct <= 1.5)
    );
    println!("\nlast screen:\n{last_screen}");
    let _ = std::fs::remove_dir_all(&dir);
}
