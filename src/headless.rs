//! Line progress for `--headless` runs and non-terminal stdout: one line per
//! meaningful event, good for `nohup` logs. Write errors (a closed terminal) are
//! ignored: the sweep must outlive its output.

use std::io::Write;

use tokio::sync::broadcast;

use crate::event::{Event, Level};
use crate::export::cell_label;
use crate::store::Status;

/// The line an event prints, if any.
pub fn line(ev: &Event) -> Option<String> {
    let time = |at: &str| at.get(11..19).unwrap_or(at).to_string();
    Some(match ev {
        Event::SweepStarted {
            at,
            plan,
            run_dir,
            configs,
            cells,
            already_done,
        } => format!(
            "{} sweep {plan}: {configs} configs, {cells} cells{} → {run_dir}",
            time(at),
            if *already_done > 0 {
                format!(" ({already_done} already recorded)")
            } else {
                String::new()
            }
        ),
        Event::ConfigStarting {
            at,
            config,
            index,
            total,
            command,
            attempt,
            ..
        } => format!(
            "{} [{index}/{total}] {config}: starting{}  $ {command}",
            time(at),
            if *attempt > 1 {
                format!(" (attempt {attempt})")
            } else {
                String::new()
            }
        ),
        Event::ServerReady {
            at,
            config,
            after_s,
            context_limit,
            model,
            ..
        } => format!(
            "{} {config}: ready after {after_s:.1} s (model {model}, context {})",
            time(at),
            context_limit
                .map(|c| c.to_string())
                .unwrap_or_else(|| "unknown".into())
        ),
        Event::CellFinished { at, record } => {
            let r = record;
            let detail =
                match r.status {
                    Status::Ok => {
                        match &r.metrics {
                            Some(m) => format!(
                        "ok  {:.1} tok/s  ttft p50 {:.0} ms  itl p50 {}  prompt {:.0} tok{}",
                        m.output_tok_s,
                        m.ttft_ms_p50,
                        m.itl_ms_p50.map(|v| format!("{v:.1} ms")).unwrap_or_else(|| "n/a".into()),
                        m.prompt_tokens_mean,
                        m.accept_len.map(|a| format!("  accept {a:.2}")).unwrap_or_default()
                    ),
                            None => "ok".into(),
                        }
                    }
                    Status::Failed => match &r.failure {
                        Some(f) => format!("FAILED {} — {}", cell_label(r), f.message),
                        None => "FAILED".into(),
                    },
                    Status::Skipped => "skipped".into(),
                };
            format!("{}   {}  {detail}", time(at), r.cell)
        }
        Event::ServerExited {
            at,
            config,
            code,
            signal,
        } => {
            let how = crate::engine::process::describe_exit(*code, *signal);
            format!("{} {config}: server exited by itself ({how})", time(at))
        }
        Event::ServerStopped {
            at,
            config,
            how,
            after_s,
        } => {
            format!(
                "{} {config}: server stopped ({how}, {after_s:.1} s)",
                time(at)
            )
        }
        Event::Action {
            at,
            action,
            target,
            source,
        } => format!(
            "{} {action}{} (from {source})",
            time(at),
            target.as_ref().map(|t| format!(" {t}")).unwrap_or_default()
        ),
        Event::Paused { at } => format!("{} paused (after the running cell)", time(at)),
        Event::Resumed { at } => format!("{} resumed", time(at)),
        Event::Notice { at, level, message } => format!(
            "{} {}{message}",
            time(at),
            match level {
                Level::Info => "",
                Level::Warn => "warning: ",
                Level::Error => "error: ",
            }
        ),
        Event::SweepFinished {
            at,
            ok,
            failed,
            skipped,
        } => {
            format!(
                "{} sweep finished: {ok} ok, {failed} failed, {skipped} skipped",
                time(at)
            )
        }
        Event::SweepInterrupted { at, reason } => format!(
            "{} sweep interrupted ({reason}); resume with --resume",
            time(at)
        ),
        Event::CellStarted { .. } | Event::Log { .. } | Event::Gpu { .. } => return None,
    })
}

/// Print events until the stream closes.
pub async fn print(mut rx: broadcast::Receiver<Event>) {
    loop {
        match rx.recv().await {
            Ok(ev) => {
                if let Some(l) = line(&ev) {
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "{l}");
                    let _ = out.flush();
                }
            }
            Err(broadcast::error::RecvError::Lagged(n)) => {
                let _ = writeln!(
                    std::io::stdout().lock(),
                    "({n} events not shown; the run directory has them)"
                );
            }
            Err(broadcast::error::RecvError::Closed) => break,
        }
    }
}
