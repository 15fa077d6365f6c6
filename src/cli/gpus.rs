//! `sweeptop gpus [--json] [--watch] [--require N]`: what NVML reports, for
//! checking a machine before a sweep. NVML missing is a state it prints, not
//! an error; `--require N` makes too few GPUs an exit status scripts can gate
//! on.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use super::{GpuArgs, Result};
use crate::model::GpuSnapshot;

#[derive(clap::Args, Debug)]
pub struct GpusArgs {
    /// One JSON object per sample instead of the table.
    #[arg(long)]
    json: bool,
    /// Repeat every --gpu-interval-ms until interrupted (redrawn in place on a
    /// terminal, one table after another otherwise).
    #[arg(long)]
    watch: bool,
    /// Exit 1 (after printing) when NVML shows fewer than N GPUs, so a script
    /// can gate a sweep on the machine it got.
    #[arg(long, value_name = "N")]
    require: Option<usize>,
    #[command(flatten)]
    gpu: GpuArgs,
}

/// Exit status when `--require` is not met.
const TOO_FEW: u8 = 1;

/// Why the snapshot does not meet `--require`, if it does not.
fn shortfall(snap: &GpuSnapshot, require: Option<usize>) -> Option<String> {
    let want = require?;
    let have = snap.gpus.len();
    (have < want).then(|| {
        format!(
            "sweeptop gpus: {want} GPU{} required, NVML shows {have} ({})\n",
            if want == 1 { "" } else { "s" },
            snap.status.label()
        )
    })
}

pub fn gpus(args: GpusArgs) -> Result<u8> {
    let source = args.gpu.source(false);
    let no_ours = |_pid: u32| false;
    let interval = Duration::from_millis(args.gpu.gpu_interval_ms.max(250));
    let in_place = args.watch && !args.json && std::io::stdout().is_terminal();
    let show = |snap: &GpuSnapshot| -> Result<()> {
        if args.json {
            super::print(&format!("{}\n", crate::model::text::to_json_string(snap)?))
        } else if in_place {
            // Home, the table, then clear what an earlier, longer one left
            // (raw mode: a line ends with a carriage return too).
            let table = crate::gpu::render_table(snap).replace('\n', "\x1b[K\r\n");
            super::print(&format!("\x1b[H{table}\x1b[J"))
        } else {
            let sep = if args.watch { "\n" } else { "" };
            super::print(&format!("{}{sep}", crate::gpu::render_table(snap)))
        }
    };
    let short = |snap: &GpuSnapshot| -> Option<u8> {
        let why = shortfall(snap, args.require)?;
        eprint!("{why}");
        Some(TOO_FEW)
    };
    if !args.watch {
        let snap = crate::gpu::sample_once(&source, &no_ours);
        show(&snap)?;
        return Ok(short(&snap).unwrap_or(0));
    }
    // In place, keys are read as nvtop's are: `q`, Esc or Ctrl-C leaves.
    let _raw = if in_place {
        super::print("\x1b[2J")?;
        RawMode::enter()
    } else {
        None
    };
    // Repeating: the sampler thread keeps one NVML handle open.
    let (tx, rx) = std::sync::mpsc::channel();
    if _raw.is_some() {
        let quit = tx.clone();
        std::thread::spawn(move || {
            while !quits(crossterm::event::read()) {}
            let _ = quit.send(Watch::Quit);
        });
    }
    let _sampler = crate::gpu::spawn_sampler(
        source,
        interval,
        Arc::new(no_ours),
        Box::new(move |snap| tx.send(Watch::Snap(Box::new(snap))).is_ok()),
    );
    while let Ok(Watch::Snap(snap)) = rx.recv() {
        show(&snap)?;
        // Watching a machine that lacks GPUs is pointless for a gate.
        if let Some(code) = short(&snap) {
            return Ok(code);
        }
    }
    Ok(0)
}

/// What `--watch` waits for: the next sample, or a key that leaves.
enum Watch {
    Snap(Box<GpuSnapshot>),
    Quit,
}

/// Whether a terminal event leaves `--watch` (a read error does too: no
/// keys will come).
fn quits(ev: std::io::Result<crossterm::event::Event>) -> bool {
    use crossterm::event::{Event, KeyCode, KeyEventKind, KeyModifiers};
    match ev {
        Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => {
            matches!(k.code, KeyCode::Char('q') | KeyCode::Esc)
                || (k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL))
        }
        Ok(_) => false,
        Err(_) => true,
    }
}

/// The terminal in raw mode while watching, restored however `gpus` ends.
struct RawMode;

impl RawMode {
    fn enter() -> Option<RawMode> {
        crossterm::terminal::enable_raw_mode()
            .ok()
            .map(|()| RawMode)
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = crossterm::terminal::disable_raw_mode();
    }
}
