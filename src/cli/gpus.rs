//! `sweeptop gpus [--json] [--watch]`: what NVML reports, for checking a
//! machine before a sweep. NVML missing is a state it prints, not an error.

use std::sync::Arc;
use std::time::Duration;

use super::{GpuArgs, Result};
use crate::model::GpuSnapshot;

#[derive(clap::Args, Debug)]
pub struct GpusArgs {
    #[arg(long)]
    json: bool,
    /// Repeat every --gpu-interval-ms until interrupted.
    #[arg(long)]
    watch: bool,
    #[command(flatten)]
    gpu: GpuArgs,
}

pub fn gpus(args: GpusArgs) -> Result<u8> {
    let source = args.gpu.source(false);
    let no_ours = |_pid: u32| false;
    let interval = Duration::from_millis(args.gpu.gpu_interval_ms.max(250));
    let show = |snap: &GpuSnapshot| -> Result<()> {
        if args.json {
            super::print(&format!("{}\n", crate::model::text::to_json_string(snap)?))
        } else {
            let sep = if args.watch { "\n" } else { "" };
            super::print(&format!("{}{sep}", crate::gpu::render_table(snap)))
        }
    };
    if !args.watch {
        show(&crate::gpu::sample_once(&source, &no_ours))?;
        return Ok(0);
    }
    // Repeating: the sampler thread keeps one NVML handle open.
    let (tx, rx) = std::sync::mpsc::channel();
    let _sampler = crate::gpu::spawn_sampler(
        source,
        interval,
        Arc::new(no_ours),
        Box::new(move |snap| tx.send(snap).is_ok()),
    );
    while let Ok(snap) = rx.recv() {
        show(&snap)?;
    }
    Ok(0)
}
