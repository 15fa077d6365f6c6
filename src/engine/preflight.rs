//! What must hold before a server is launched: the paths it needs exist (a
//! reboot empties /dev/shm), no other process holds memory on its GPUs, and its
//! port is free. A failure here is the config's, with `source: preflight`, and
//! is never retried.

use std::path::Path;
use std::time::Duration;

use super::core::Core;
use super::process;
use crate::model::{Failure, FailureKind, FailureSource, Level, Timestamp};
use crate::plan::{Config, ForeignGpu, Port};

/// A preflight failure: the server was not started.
pub(super) fn failure(message: String) -> Failure {
    Failure::new(
        FailureKind::StartupFailed,
        FailureSource::Preflight,
        message,
    )
}

/// How long a `requires` path may take to answer whether it exists.
const REQUIRES_DEADLINE: Duration = Duration::from_secs(30);

/// Whether `path` exists, asked on the blocking pool: a model on a network
/// mount that hangs holds a pool thread, never the runtime. `None`: no
/// answer within [`REQUIRES_DEADLINE`].
async fn path_exists(path: &str) -> Option<bool> {
    let p = Path::new(path).to_path_buf();
    let asked = tokio::task::spawn_blocking(move || p.exists());
    tokio::time::timeout(REQUIRES_DEADLINE, asked)
        .await
        .ok()
        .map(|answer| answer.unwrap_or(false))
}

/// Check a config before its launch on `gpus`; the port to start it on.
pub(super) async fn check(core: &Core, config: &Config, gpus: &[u32]) -> Result<u16, Failure> {
    for path in &config.requires {
        match path_exists(path).await {
            Some(true) => {}
            Some(false) => {
                return Err(failure(format!(
                    "required path {path} does not exist{}",
                    crate::plan::missing_path_hint(path)
                )))
            }
            None => {
                return Err(failure(format!(
                    "required path {path} did not answer within {} s (a hung mount?)",
                    REQUIRES_DEADLINE.as_secs()
                )))
            }
        }
    }
    foreign_gpu_processes(core, config, gpus).await?;
    match config.port {
        Port::Fixed(p) => {
            if !process::wait_port_free(&config.host, p, Duration::from_secs(30)).await {
                return Err(failure(format!(
                    "port {p} on {} is in use by another process",
                    config.host
                )));
            }
            Ok(p)
        }
        Port::Auto => process::pick_free_port(&config.host)
            .map_err(|e| failure(format!("cannot find a free port on {}: {e}", config.host))),
    }
}

/// Other processes holding memory on the config's GPUs fail the preflight,
/// or only warn when the plan says so. Judged on a sample taken after the
/// previous server stopped.
async fn foreign_gpu_processes(core: &Core, config: &Config, gpus: &[u32]) -> Result<(), Failure> {
    let fresh = match core.gpu() {
        Some(g) => g.fresh_after(Timestamp::now()).await,
        None => None,
    };
    let Some(snap) = fresh else {
        return Ok(());
    };
    // Its own GPUs: its list, those picked for it, or (saying none) all.
    let mine = config.gpus_wanted().map(|_| gpus);
    let foreign = crate::gpu::foreign_processes(&snap, mine);
    if foreign.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = foreign
        .iter()
        .map(|(gpu, p)| {
            format!(
                "GPU {gpu}: pid {} {} ({} MiB)",
                p.pid,
                p.name,
                p.used_mib.map_or_else(|| "?".into(), |m| m.to_string())
            )
        })
        .collect();
    let message = format!(
        "other processes hold memory on the config's GPUs: {}",
        list.join("; ")
    );
    match core.plan.limits.foreign_gpu {
        ForeignGpu::Fail => Err(failure(format!(
            "{message} (set limits.foreign_gpu = \"warn\" to launch anyway)"
        ))),
        ForeignGpu::Warn => {
            core.notice(Level::Warn, format!("{}: {message}", config.id));
            Ok(())
        }
    }
}
