//! Injected faults: what each crash kind prints (in the flavor's style, per TP
//! rank) and how the process then dies, plus the log flood thread. A crash
//! while serving is begun by the engine (`engine/generate.rs`), which stops
//! the streams first.
//!
//! The crash texts are in the scripts (scripts/common.txt and the flavor's file);
//! their wording follows shared/FAILURE_SIGNATURES.md, and the tracebacks are
//! shaped like the real servers' (SGLang scheduler exceptions, vLLM EngineCore /
//! worker errors, c10d watchdog noise) but written for the simulation, not
//! copied. The flood's filler lines stay in code: they are generated at up to
//! 1000 MB/s, on a thread that must keep up.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::args::{CrashKind, Flavor};
use crate::logs::{self, Clock, Stream};
use crate::script::{Line, Vars};
use crate::style::Style;
use crate::texts::texts;

/// How the process ends after its error output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Death {
    Exit(i32),
    Signal(libc::c_int),
}

/// Where in the server's life a crash happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Startup,
    Serving,
}

/// A crash report: blocks of lines, each written together to one stream.
#[derive(Debug, Default)]
pub struct Report {
    pub blocks: Vec<(Stream, Vec<String>)>,
}

impl Report {
    /// Adds a section's lines (as the style writes them) in blocks per stream.
    fn add(&mut self, style: &Style, lines: &[Line<'_>]) {
        self.blocks.extend(style.blocks(lines));
    }

    /// Everything the report prints, in order.
    #[cfg(test)]
    pub fn text(&self) -> String {
        let mut s = String::new();
        for (_, lines) in &self.blocks {
            for l in lines {
                s.push_str(l);
                s.push('\n');
            }
        }
        s
    }
}

/// Dies during startup with `kind`'s output.
pub fn startup_crash(style: &Style, tp: u32, kind: CrashKind) -> ! {
    let (report, death) = crash_report(style, tp, kind, When::Startup);
    write_report(&report);
    end_process(death)
}

/// Writes a report's blocks, and waits until they are out.
pub fn write_report(report: &Report) {
    for (stream, lines) in &report.blocks {
        logs::lines(*stream, lines.clone());
    }
    logs::flush(Duration::from_secs(3));
}

/// Ends the process: exit code, or a signal with its default action.
pub fn end_process(death: Death) -> ! {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    match death {
        Death::Exit(code) => std::process::exit(code),
        Death::Signal(sig) => {
            // SAFETY: plain libc calls on this process; the default action of these
            // signals ends it. No core file: a simulated segfault needs none.
            unsafe {
                let no_core = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::setrlimit(libc::RLIMIT_CORE, &no_core);
                libc::signal(sig, libc::SIG_DFL);
                libc::kill(libc::getpid(), sig);
            }
            std::thread::sleep(Duration::from_secs(1));
            std::process::exit(128 + sig)
        }
    }
}

impl When {
    /// The name the scripts test (`if when=startup`).
    fn name(self) -> &'static str {
        match self {
            When::Startup => "startup",
            When::Serving => "serving",
        }
    }
}

fn with_rank<'a>(vars: &Vars<'a>, rank: u32) -> Vars<'a> {
    let mut v = vars.clone();
    v.rank(rank);
    v
}

/// The report for `kind` and how the process dies after it. The words are the
/// scripts' (common.txt and the flavor's file); the order of the parts, per rank,
/// is the servers' and is written here.
pub fn crash_report(style: &Style, tp: u32, kind: CrashKind, when: When) -> (Report, Death) {
    let mut r = Report::default();
    let mut vars = style.vars();
    vars.set("tp", tp)
        .set("kind", kind.name())
        .set("when", when.name());
    let section = |name: &str, vars: &Vars<'_>| texts().render(style.flavor, name, vars);
    match kind {
        CrashKind::OomKilled => {
            r.add(style, &section("oom-killed", &vars));
            return (r, Death::Signal(libc::SIGKILL));
        }
        CrashKind::ServerExited => return (r, Death::Exit(1)),
        CrashKind::SignalCrash => {
            r.add(style, &section("faulthandler", &vars));
            return (r, Death::Signal(libc::SIGSEGV));
        }
        _ => {}
    }
    let ranks = tp.clamp(1, 8);
    for rank in 0..ranks {
        r.add(style, &section("before-traceback", &with_rank(&vars, rank)));
    }
    match style.flavor {
        Flavor::Sglang => {
            for rank in 0..ranks {
                let v = with_rank(&vars, rank);
                r.add(style, &section("scheduler-exception", &v));
                if when == When::Serving {
                    r.add(style, &section("watchdog-noise", &v));
                }
            }
            r.add(style, &section("sigquit", &vars));
            // The scheduler signals its parent, which kills its whole process tree.
            (r, Death::Signal(libc::SIGKILL))
        }
        Flavor::Vllm => {
            let multiproc = ranks > 1 && when == When::Serving;
            vars.set("multiproc", if multiproc { "yes" } else { "no" });
            if multiproc {
                for rank in 0..ranks {
                    let v = with_rank(&vars, rank);
                    r.add(style, &section("worker-exception", &v));
                    r.add(style, &section("watchdog-noise", &v));
                }
                // str(exception) of the workers' error: the message without its type.
                let exception = section("exception", &vars);
                let message = exception
                    .first()
                    .and_then(|l| l.text.split_once(": ").map(|(_, m)| m.to_string()))
                    .unwrap_or_default();
                vars.set("worker_error", message);
            }
            r.add(style, &section("engine-exception", &vars));
            match when {
                When::Startup => r.add(style, &section("engine-startup-failed", &vars)),
                When::Serving => {
                    if !multiproc {
                        r.add(style, &section("watchdog-noise", &with_rank(&vars, 0)));
                    }
                    r.add(style, &section("engine-dead", &vars));
                }
            }
            (r, Death::Exit(1))
        }
    }
}

/// Lines the log flood has written to stderr so far.
static FLOODED: AtomicU64 = AtomicU64::new(0);

/// What the log flood has written, said as the server stops: the reader's log
/// must hold at least that many of its lines.
pub fn flood_summary() -> String {
    format!(
        "sim: the log flood wrote {} lines",
        FLOODED.load(Ordering::Relaxed)
    )
}

/// Starts the log flood: benign lines to stderr at `mb_per_s`, on its own OS
/// thread so that a slow reader or a busy writer never touches token pacing.
pub fn start_flood(style: Style, mb_per_s: f64) {
    let spawned = std::thread::Builder::new()
        .name("sim-flood".into())
        .spawn(move || flood(style, mb_per_s));
    if let Err(e) = spawned {
        logs::line(
            Stream::Stderr,
            format!("sim: cannot start the log flood: {e}"),
        );
    }
}

fn flood(style: Style, mb_per_s: f64) {
    const TICK: Duration = Duration::from_millis(10);
    let bytes_per_tick = (mb_per_s * 1e6 * TICK.as_secs_f64()).max(1.0) as usize;
    let mut next = Instant::now();
    let mut n: u64 = 0;
    let mut buf = String::with_capacity(bytes_per_tick + 256);
    loop {
        buf.clear();
        let stamp = Clock::now();
        while buf.len() < bytes_per_tick {
            n += 1;
            benign_line(&style, &stamp, n, &mut buf);
            buf.push('\n');
        }
        {
            let mut err = std::io::stderr().lock();
            if err.write_all(buf.as_bytes()).is_err() {
                return;
            }
        }
        FLOODED.store(n, Ordering::Relaxed);
        next += TICK;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else if now - next > Duration::from_secs(1) {
            // Far behind (a blocked reader): do not burst to catch up.
            next = now;
        }
    }
}

/// One benign line, varied so that it looks like a busy multi-GPU log.
fn benign_line(style: &Style, stamp: &Clock, n: u64, buf: &mut String) {
    use std::fmt::Write as _;
    let rank = n % 4;
    let tid = style.pid + 50 + rank as u32;
    let _ = match n % 3 {
        0 => write!(
            buf,
            "sim-node:{}:{tid} [{rank}] NCCL INFO Channel {:02}/0 : {rank}[{rank}] -> {}[{}] via P2P/CUMEM/read",
            style.pid,
            n % 32,
            (rank + 1) % 4,
            (rank + 1) % 4
        ),
        1 => write!(
            buf,
            "sim-node:{}:{tid} [{rank}] NCCL INFO ncclCommInitRank comm 0x55d0c{:07x} rank {rank} nranks 4 cudaDev {rank} nvmlDev {rank} busId {}000 commId 0x{:016x} - Init COMPLETE",
            style.pid,
            n % 0xfff_ffff,
            18 + rank * 16,
            n.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ),
        _ => match style.flavor {
            Flavor::Sglang => write!(
                buf,
                "[{} TP{rank}] Cache flush skipped: {} pending requests (req {n})",
                stamp.datetime(),
                n % 7
            ),
            Flavor::Vllm => write!(
                buf,
                "DEBUG {} [core.py:735] EngineCore waiting for work. (poll {n})",
                stamp.short()
            ),
        },
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn style(flavor: Flavor) -> Style {
        Style { flavor, pid: 4242 }
    }

    #[test]
    fn every_kind_names_its_cause() {
        let cases: [(CrashKind, &str); 8] = [
            (
                CrashKind::CudaIllegalInstruction,
                "CUDA error: an illegal instruction was encountered",
            ),
            (
                CrashKind::CudaIllegalAddress,
                "CUDA error: an illegal memory access was encountered",
            ),
            (CrashKind::CudaOom, "CUDA out of memory"),
            (CrashKind::DeviceAssert, "device-side assert triggered"),
            (CrashKind::NcclError, "NCCL error"),
            (
                CrashKind::NoKernelImage,
                "no kernel image is available for execution on the device",
            ),
            (
                CrashKind::TritonError,
                "triton.runtime.errors.OutOfResources",
            ),
            (
                CrashKind::SignalCrash,
                "Fatal Python error: Segmentation fault",
            ),
        ];
        for flavor in [Flavor::Sglang, Flavor::Vllm] {
            for tp in [1, 4] {
                for (kind, core) in cases {
                    let (r, _) = crash_report(&style(flavor), tp, kind, When::Serving);
                    let text = r.text();
                    assert!(text.contains(core), "{flavor:?} tp{tp} {kind}: {text}");
                }
            }
        }
    }

    #[test]
    fn the_first_fatal_line_is_the_cause_not_the_watchdog() {
        for flavor in [Flavor::Sglang, Flavor::Vllm] {
            let (r, _) = crash_report(
                &style(flavor),
                2,
                CrashKind::CudaIllegalInstruction,
                When::Serving,
            );
            let text = r.text();
            let cause = text.find("an illegal instruction was encountered").unwrap();
            let noise = text.find("DistBackendError").unwrap();
            assert!(cause < noise, "{flavor:?}");
            // Every rank reports it.
            assert!(text.matches("Rank 1] Process group watchdog").count() >= 1);
        }
    }

    #[test]
    fn flavors_die_their_own_way() {
        let k = CrashKind::CudaIllegalAddress;
        let (r, d) = crash_report(&style(Flavor::Sglang), 1, k, When::Serving);
        assert_eq!(d, Death::Signal(libc::SIGKILL));
        assert!(r.text().contains("Received sigquit from a child process"));
        let (r, d) = crash_report(&style(Flavor::Vllm), 1, k, When::Serving);
        assert_eq!(d, Death::Exit(1));
        assert!(r.text().contains("EngineDeadError"));
        let (r, d) = crash_report(&style(Flavor::Vllm), 1, CrashKind::OomKilled, When::Serving);
        assert_eq!(
            (r.text().as_str(), d),
            ("Killed\n", Death::Signal(libc::SIGKILL))
        );
        let (r, d) = crash_report(
            &style(Flavor::Vllm),
            1,
            CrashKind::ServerExited,
            When::Serving,
        );
        assert_eq!((r.text().as_str(), d), ("", Death::Exit(1)));
        let (_, d) = crash_report(
            &style(Flavor::Sglang),
            1,
            CrashKind::SignalCrash,
            When::Serving,
        );
        assert_eq!(d, Death::Signal(libc::SIGSEGV));
    }

    #[test]
    fn startup_oom_wording() {
        let (r, _) = crash_report(&style(Flavor::Sglang), 1, CrashKind::CudaOom, When::Startup);
        assert!(r.text().contains("Not enough memory"));
        let (r, _) = crash_report(&style(Flavor::Vllm), 1, CrashKind::CudaOom, When::Startup);
        assert!(r
            .text()
            .contains("No available memory for the cache blocks"));
        assert!(r.text().contains("Engine core initialization failed"));
        let (r, _) = crash_report(
            &style(Flavor::Vllm),
            1,
            CrashKind::NoKernelImage,
            When::Startup,
        );
        assert!(r
            .text()
            .contains("sm_120 is not compatible with the current PyTorch"));
    }

    #[test]
    fn benign_lines_are_lines() {
        let mut buf = String::new();
        for n in 0..9 {
            benign_line(&style(Flavor::Vllm), &Clock::now(), n, &mut buf);
            assert!(!buf.contains('\n'));
            buf.clear();
        }
    }
}
