//! Events and metrics in words: the one formatter behind progress lines
//! (`--headless`, `attach --headless`, `progress.log`), the dashboard's own
//! notes in the log pane, the details view and `loadtest`'s report. Every
//! line it returns has passed [`display_string`]: server text cannot drive a terminal.

use crate::model::text::{bytes, display_string, duration};
use crate::model::{
    describe_exit, families, CellRecord, Event, Level, Metrics, PrepareOutcome, Status, Value,
};

/// The line an event prints, if any.
pub fn line(ev: &Event) -> Option<String> {
    let text = match ev {
        Event::SweepStarted {
            plan,
            run_dir,
            configs,
            cells,
            already_done,
            ..
        } => format!(
            "sweep {plan}: {configs} configs, {cells} cells{} → {run_dir}",
            if *already_done > 0 {
                format!(" ({already_done} already recorded)")
            } else {
                String::new()
            }
        ),
        Event::ConfigStarting {
            config,
            index,
            total,
            command,
            attempt,
            gpus,
            ..
        } => format!(
            "[{index}/{total}] {config}: starting{}{}  $ {command}",
            if *attempt > 1 {
                format!(" (attempt {attempt})")
            } else {
                String::new()
            },
            match gpus.as_slice() {
                [] => String::new(),
                [g] => format!(" on GPU {g}"),
                many => format!(
                    " on GPUs {}",
                    many.iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            }
        ),
        Event::ServerReady {
            config,
            after_s,
            context_limit,
            model,
            ..
        } => format!(
            "{config}: ready after {after_s:.1} s (model {model}, context {})",
            context_limit.map_or_else(|| "unknown".into(), |c| c.to_string())
        ),
        Event::CellFinished { record, .. } => format!("  {}  {}", record.cell, outcome(record)),
        Event::ServerExited {
            config,
            code,
            signal,
            ..
        } => format!(
            "{config}: server exited by itself ({})",
            describe_exit(*code, *signal)
        ),
        Event::ServerStopped {
            config,
            how,
            after_s,
            ..
        } => format!("{config}: server stopped ({how}, {after_s:.1} s)"),
        Event::Action {
            action,
            target,
            source,
            ..
        } => format!(
            "{action}{} (from {source})",
            target.as_ref().map(|t| format!(" {t}")).unwrap_or_default()
        ),
        Event::Paused { .. } => "paused (after the running cell)".into(),
        Event::Resumed { .. } => "resumed".into(),
        Event::Notice { level, message, .. } => format!(
            "{}{message}",
            match level {
                Level::Info => "",
                Level::Warn => "warning: ",
                Level::Error => "error: ",
            }
        ),
        Event::PrepareStarted {
            step,
            command,
            creates,
            expect_bytes,
            configs,
            ..
        } => format!(
            "prepare {step}: starting for {} → {}{}  $ {command}",
            config_list(configs),
            creates.join(", "),
            expect_bytes.map_or_else(String::new, |b| format!(" ({} expected)", bytes(b))),
        ),
        Event::PrepareProgress {
            step,
            bytes: got,
            expect_bytes,
            rate_bps,
            recorded: true,
            ..
        } => format!(
            "preparing {}",
            progress(step, *got, *expect_bytes, *rate_bps)
        ),
        Event::PrepareEnded {
            step,
            outcome,
            bytes: got,
            duration_s,
            message,
            ..
        } => match outcome {
            PrepareOutcome::Present => {
                format!("prepare {step}: in place already ({})", bytes(*got))
            }
            PrepareOutcome::Done => format!(
                "prepare {step}: done, {} in {} ({}/s)",
                bytes(*got),
                duration(*duration_s),
                bytes((*got as f64 / duration_s.max(0.001)) as u64)
            ),
            PrepareOutcome::Failed => format!(
                "prepare {step}: FAILED after {} — {}",
                duration(*duration_s),
                message.as_deref().unwrap_or("")
            ),
        },
        Event::SweepFinished {
            ok,
            failed,
            skipped,
            ..
        } => format!("sweep finished: {ok} ok, {failed} failed, {skipped} skipped"),
        // A reason that says how to go on is not told twice.
        Event::SweepInterrupted { reason, .. } if reason.contains("--resume") => {
            format!("sweep interrupted ({reason})")
        }
        Event::SweepInterrupted { reason, .. } => {
            format!("sweep interrupted ({reason}); resume with --resume")
        }
        Event::CellStarted { .. }
        | Event::PrepareProgress { .. }
        | Event::Log { .. }
        | Event::Gpu { .. }
        | Event::Viewers { .. } => return None,
    };
    // Server text (log lines, failure messages), plan names and control
    // clients' words all pass through here: one sanitiser for every line.
    let text = match ev.at() {
        Some(at) => format!("{} {text}", at.clock()),
        None => text,
    };
    Some(display_string(text))
}

/// A step's progress: `qwen: 31.2 GB / 52.0 GB · 410 MB/s · ETA 0:51`
/// (the size alone when the whole is not known).
pub fn progress(step: &str, got: u64, expect: Option<u64>, rate_bps: f64) -> String {
    let mut s = match expect {
        Some(e) => format!("{step}: {} / {}", bytes(got), bytes(e)),
        None => format!("{step}: {}", bytes(got)),
    };
    if rate_bps >= 1.0 {
        s.push_str(&format!(" · {}/s", bytes(rate_bps as u64)));
        if let Some(e) = expect.filter(|&e| e > got) {
            s.push_str(&format!(" · ETA {}", duration((e - got) as f64 / rate_bps)));
        }
    }
    s
}

/// `tp1-base`, `tp1-base and tp4-base`, `3 configs`.
fn config_list(configs: &[String]) -> String {
    match configs {
        [] => "the sweep".into(),
        [one] => one.clone(),
        [a, b] => format!("{a} and {b}"),
        many => format!("{} configs", many.len()),
    }
}

/// A finished cell in a few words: `ok  389.2 tok/s  ttft p50 85ms …`,
/// `FAILED ctx 400: 32,808 > 32,768 — 4 of 4 requests failed: …`, `skipped`;
/// an ok cell's warning follows its numbers: `ok  175.0 tok/s …  SHORT 4 of 4
/// requests returned fewer tokens than the 128 asked (…)`.
pub fn outcome(r: &CellRecord) -> String {
    match (r.status, &r.metrics, &r.failure) {
        (Status::Ok, Some(m), _) => {
            let mut line = format!("ok  {}", summary(m));
            for (i, w) in r.warnings.iter().enumerate() {
                let sep = if i == 0 { "  " } else { "; " };
                line.push_str(&format!("{sep}{} {}", w.kind.badge(), w.message));
            }
            line
        }
        (Status::Ok, None, _) => "ok".into(),
        // The failure's label, as its grid cell says it.
        (Status::Failed, _, Some(f)) => format!("FAILED {} — {}", f.label(), f.message),
        (Status::Failed, _, None) => "FAILED".into(),
        (Status::Skipped, _, _) => "skipped".into(),
    }
}

/// The metrics the table marks for summaries, on one line; a metric that was
/// not measured (no speculative decoding: no acceptance length) is left out.
pub fn summary(m: &Metrics) -> String {
    crate::model::METRICS
        .iter()
        .filter_map(|metric| {
            let name = metric.summary?;
            if metric.value(m) == Value::Missing {
                return None;
            }
            let text = metric.human(m);
            Some(if name.is_empty() {
                text
            } else {
                format!("{name} {text}")
            })
        })
        .collect::<Vec<_>>()
        .join("  ")
}

/// Every metric, one line per family: (`TTFT`, `p50 85.0ms  p90 90.0ms
/// p99 1.24s  mean 88.0ms  server 80.5ms`), then the client − server TTFT
/// when the server gave its own. The details view and `loadtest` print
/// these. A value not measured is left out of its line; a family with no
/// value at all reads `N/A` with `all`, and is left out without it.
pub fn metric_lines(m: &Metrics, all: bool) -> Vec<(&'static str, String)> {
    let mut lines: Vec<(&'static str, String)> = families()
        .into_iter()
        .filter_map(|(family, metrics)| {
            let values: Vec<String> = metrics
                .iter()
                .filter(|x| x.value(m) != Value::Missing)
                .map(|x| {
                    if x.stat.is_empty() {
                        x.human(m)
                    } else {
                        format!("{} {}", x.stat, x.human(m))
                    }
                })
                .collect();
            match (values.is_empty(), all) {
                (false, _) => Some((family, values.join("  "))),
                (true, true) => Some((family, "N/A".to_string())),
                (true, false) => None,
            }
        })
        .collect();
    if let Some(gap) = m.ttft_gap_ms() {
        lines.push(("TTFT client − server", format!("{gap:+.1} ms")));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{sample_metrics, sample_record};

    #[test]
    fn line_views_print_a_steps_recorded_progress_only() {
        let at = crate::model::Timestamp::parse("2026-12-07T01:00:00Z").unwrap();
        let progress = |recorded| Event::PrepareProgress {
            at,
            step: "model".into(),
            bytes: 12_500_000,
            expect_bytes: Some(52_000_000_000),
            rate_bps: 410e6,
            recorded,
        };
        assert_eq!(line(&progress(false)), None);
        let l = line(&progress(true)).unwrap();
        assert!(
            l.ends_with("preparing model: 12.5 MB / 52.0 GB · 410 MB/s · ETA 2:07"),
            "{l}"
        );
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(1_000_000_000_000_000), "1.0 PB");
        assert_eq!(duration(3723.0), "1:02:03");
        assert_eq!(duration(f64::NAN), "0:00");
    }

    fn record(status: Status) -> CellRecord {
        sample_record(
            "tp1-baseline/code-ctx1024-c1",
            status,
            "CUDA error: an illegal instruction was encountered",
        )
    }

    #[test]
    fn finished_cells_read_as_one_line() {
        let ok = Event::CellFinished {
            at: record(Status::Ok).finished_at,
            record: Box::new(record(Status::Ok)),
        };
        assert_eq!(
            line(&ok).unwrap(),
            "08:16:24   tp1-baseline/code-ctx1024-c1  ok  66.7 tok/s  ttft p50 85.0ms  itl p50 10.0ms  prompt 1024 tokens"
        );
        let failed = record(Status::Failed);
        assert_eq!(
            outcome(&failed),
            "FAILED ILL-INSTR — CUDA error: an illegal instruction was encountered"
        );
        assert_eq!(outcome(&record(Status::Skipped)), "skipped");
        assert_eq!(
            line(&Event::Log {
                config: "c".into(),
                line: "x".into(),
                mark: crate::model::LogMark::Plain
            }),
            None
        );
    }

    #[test]
    fn every_metric_has_a_line() {
        let lines = metric_lines(&sample_metrics(), true);
        let all: String = lines.iter().map(|(k, v)| format!("{k}: {v}\n")).collect();
        assert!(
            all.contains("TTFT: p50 85.0ms  p90 90.0ms  p99 1.24s  mean 88.0ms  server 80.5ms"),
            "{all}"
        );
        assert!(all.contains("output tok/s: 66.7 tok/s"), "{all}");
        // A value not measured is left out of its line.
        assert!(
            all.contains("ITL: p50 10.0ms  p99 12.0ms  mean 10.5ms  server 10.1ms"),
            "{all}"
        );
        assert!(all.contains("TTFT client − server: +7.5 ms"), "{all}");
        // Every measured metric is on a line; the one family with nothing
        // measured (acceptance length) reads N/A.
        let values: usize = lines.iter().map(|(_, v)| v.split("  ").count()).sum();
        let measured = crate::model::METRICS
            .iter()
            .filter(|x| x.value(&sample_metrics()) != Value::Missing)
            .count();
        assert_eq!(values, measured + 1 + 1);
        assert!(all.contains("acceptance length: N/A"), "{all}");
        let some = metric_lines(&sample_metrics(), false);
        assert_eq!(some.len(), lines.len() - 1);
        assert!(!some.iter().any(|(k, _)| *k == "acceptance length"));
    }
}
