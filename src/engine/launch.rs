//! Starting a config's server and stopping it: preflight, the command line
//! filled in, the process started in its own group and recorded (so a later
//! `--resume` can stop it), then ready = the health check passes, the plan's
//! ready line appeared and (if asked) one tiny generation succeeded; and the
//! context limit and model name it will be measured with.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::commands::Between;
use super::server::{ExitInfo, Launch, Server};
use super::{preflight, Lane};
use crate::detect;
use crate::load::{self, Target};
use crate::model::{
    Event, Failure, FailureKind, FailureSource, GpuStatus, Level, ServerMeta, Timestamp,
};
use crate::plan::{Config, ContextLimit};

/// A cell's prompt bodies and their measured token count.
pub(super) type Prompts = (Arc<Vec<String>>, u64);

/// What the engine keeps about a live server.
pub(super) struct Live {
    pub server: Server,
    pub target: Target,
    pub context_limit: Option<u64>,
    pub prompts: HashMap<(String, u64), Prompts>,
    /// How this server's prompts are measured (chosen at its first cell).
    pub measure: Option<load::tokenizer::Measure>,
    /// The request tags that cost the same with this server's tokenizer
    /// (chosen with `measure`).
    pub tags: load::tags::Tags,
    /// How this server's prefix cache is flushed: unknown until its first
    /// cold cell, then the endpoint that worked, or none.
    pub flush: Option<Option<&'static str>>,
    /// The server's `/metrics` was missing or unknown, and a notice said so.
    pub said_no_metrics: bool,
}

impl Lane {
    /// Preflight, spawn and wait for readiness. `Ok(None)` means quit.
    pub(super) async fn launch(
        &mut self,
        config: &Config,
        index: usize,
        total: usize,
        attempt: u32,
    ) -> Result<Option<Live>, Failure> {
        let port = self.preflight(config).await?;
        let sweeptop = self.sweeptop_exe.display().to_string();
        let run_dir = self.run_path.display().to_string();
        let gpus: Vec<String> = self.gpus.iter().map(u32::to_string).collect();
        let gpus = gpus.join(",");
        let fill = |s: &str| {
            crate::plan::template::fill(s, &|name| match name {
                "port" => Some(port.to_string()),
                "host" => Some(config.host.clone()),
                "run_dir" => Some(run_dir.clone()),
                "sweeptop" => Some(sweeptop.clone()),
                "gpus" => Some(gpus.clone()),
                other => Some(format!("{{{other}}}")),
            })
            .unwrap_or_else(|_| s.to_string())
        };
        let argv: Vec<String> = config.argv.iter().map(|a| fill(a)).collect();
        let mut env: Vec<(String, String)> = config
            .env
            .iter()
            .map(|(k, v)| (k.clone(), fill(v)))
            .collect();
        // The server's whole tree carries the run's tag, so a resume finds it
        // even if this process is killed before `server.pid` is written.
        env.push((super::process::RUN_TAG.into(), self.run_tag.clone()));
        let command = crate::plan::template::command_line(&argv, config.shell);
        self.emit(Event::ConfigStarting {
            at: Timestamp::now(),
            config: config.id.clone(),
            phase: config.phase.clone(),
            index: index + 1,
            total,
            command: command.clone(),
            attempt: attempt + 1,
            gpus: self.gpus.clone(),
        });
        self.book().run.note_in_log(
            &config.id,
            &format!(
                "# sweeptop {} launch {} of {}: {command}",
                Timestamp::now(),
                attempt + 1,
                config.id
            ),
        );
        let log_path = self.book().run.log_path(&config.id);
        let mut server = Server::spawn(Launch {
            argv: &argv,
            shell: config.shell,
            env: &env,
            log_path: &log_path,
            config: &config.id,
            patterns: self.patterns.clone(),
            ready_line: config.ready.log_line.clone(),
            logs: self.bus.logs.clone(),
        })
        .map_err(|e| {
            preflight::failure(format!(
                "cannot start `{}`: {e}",
                argv.first().map_or("", String::as_str)
            ))
        })?;
        if let Some(g) = self.gpu() {
            g.add_server(server.pgid, &self.gpus);
        }
        crate::store::crash_point("server.unrecorded");
        let start = super::process::start_time(server.pgid).unwrap_or(0);
        self.server_started(&config.id, &self.gpus, server.pgid, start);
        let base = format!("http://{}:{}", url_host(&config.host), port);
        match self.wait_ready(config, &mut server, &base).await {
            Ok(true) => {}
            Ok(false) => {
                self.stop(config, &mut server).await;
                return Ok(None);
            }
            Err(f) => {
                self.stop(config, &mut server).await;
                return Err(f);
            }
        }
        let about = load::about(&self.http, &base, config.kind.preset()).await;
        let model = config
            .model
            .clone()
            .or(about.model.clone())
            .unwrap_or_else(|| "default".into());
        let context_limit = match self.plan.limits.context {
            ContextLimit::Tokens(n) => Some(n),
            ContextLimit::Server => about.context,
        };
        let meta = self.server_meta(config, &about, &model, &command).await;
        if context_limit.is_none() {
            self.notice(Level::Warn, format!("{}: the server reports no context limit and the plan sets none; prompts are not clamped", config.id));
        }
        self.emit(Event::ServerReady {
            at: Timestamp::now(),
            config: config.id.clone(),
            pid: server.pgid,
            after_s: server.started.elapsed().as_secs_f64(),
            context_limit,
            model: model.clone(),
            server: Some(Box::new(meta)),
        });
        Ok(Some(Live {
            server,
            target: Target {
                base,
                api: config.api,
                model,
            },
            context_limit,
            prompts: HashMap::new(),
            flush: None,
            said_no_metrics: false,
            tags: load::tags::Tags::default(),
            measure: None,
        }))
    }

    /// Ready = the health check passes, the plan's log line (if any) appeared,
    /// and (if asked) one tiny generation succeeded. `Ok(false)` = quit.
    async fn wait_ready(
        &mut self,
        config: &Config,
        server: &mut Server,
        base: &str,
    ) -> Result<bool, Failure> {
        let client = self.http.clone();
        let deadline = Instant::now() + Duration::from_secs_f64(config.ready.timeout_s);
        let url = format!("{base}{}", config.ready.path);
        let mut exit = server.exit.clone();
        loop {
            if let Some(info) = server.exited() {
                server.drain_logs(Duration::from_secs(2)).await;
                return Err(startup_failure(server, info));
            }
            let log_ok = config.ready.log_line.is_none()
                || server
                    .log
                    .lock()
                    .map(|l| l.ready_line_seen)
                    .unwrap_or(false);
            if log_ok {
                let healthy = client
                    .get(&url)
                    .timeout(Duration::from_secs(5))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                if healthy {
                    if !config.ready.generate {
                        return Ok(true);
                    }
                    // The model name the server lists, as the cells will send it.
                    let model = match &config.model {
                        Some(m) => m.clone(),
                        None => load::about(&client, base, config.kind.preset())
                            .await
                            .model
                            .unwrap_or_else(|| "default".into()),
                    };
                    let target = Target {
                        base: base.to_string(),
                        api: config.api,
                        model,
                    };
                    let progress = load::client::Progress::new();
                    let Ok(pool) = load::Pool::new(base) else {
                        return Ok(false);
                    };
                    let rec = load::client::send(
                        &pool,
                        &target,
                        "Hello",
                        1,
                        Duration::from_secs(60),
                        &progress,
                    )
                    .await;
                    if rec.ok() {
                        return Ok(true);
                    }
                }
            }
            if Instant::now() >= deadline {
                let log_line = config
                    .ready
                    .log_line
                    .as_ref()
                    .map(|l| format!(", log line \"{l}\""))
                    .unwrap_or_default();
                return Err(Failure::new(
                    FailureKind::StartupTimeout,
                    FailureSource::ServerLog,
                    format!(
                        "not ready after {:.0} s (health {url}{log_line})",
                        config.ready.timeout_s
                    ),
                )
                .with_evidence(server.tail(20)));
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                _ = exit.changed() => {}
                changed = self.steer.changed() => {
                    if changed.is_err() {
                        continue;
                    }
                    match self.interrupted_by(&config.id) {
                        Some(Between::Quit) => return Ok(false),
                        Some(Between::SkipConfig) => {
                            return Err(Failure::new(
                                FailureKind::StartupFailed,
                                FailureSource::Client,
                                "skipped while starting",
                            ));
                        }
                        // A cell skipped while the server starts is its first.
                        Some(Between::SkipCell) => self.book().skips.push((Some(config.id.clone()), super::Skip::Cell)),
                        Some(Between::Continue) | None => {}
                    }
                }
            }
        }
    }

    /// Stop the server's whole group and say how it ended.
    pub(super) async fn stop(&mut self, config: &Config, server: &mut Server) {
        if server.stopped {
            return;
        }
        // Gone before we asked it to stop: say how it ended.
        if let Some(info) = server.exited() {
            self.emit(Event::ServerExited {
                at: Timestamp::now(),
                config: config.id.clone(),
                code: info.code,
                signal: info.signal,
            });
        }
        let t = Instant::now();
        let how = server
            .stop(Duration::from_secs_f64(config.stop_grace_s))
            .await;
        self.server_stopped(&config.id);
        if let Some(g) = self.gpu() {
            g.remove_server(server.pgid);
        }
        self.emit(Event::ServerStopped {
            at: Timestamp::now(),
            config: config.id.clone(),
            how,
            after_s: t.elapsed().as_secs_f64(),
        });
    }

    /// GPUs a config uses: from its `CUDA_VISIBLE_DEVICES`, else all.
    /// What was benchmarked on this launch: the server as it describes
    /// itself, the model's `config.json` hash, the command, and the machine.
    async fn server_meta(
        &self,
        config: &Config,
        about: &load::About,
        model: &str,
        command: &str,
    ) -> ServerMeta {
        let model_path = about.model_root.clone();
        let model_config_sha256 = match &model_path {
            Some(dir) => {
                let file = std::path::Path::new(dir).join("config.json");
                tokio::task::spawn_blocking(move || crate::store::sha256_file(&file).ok())
                    .await
                    .ok()
                    .flatten()
            }
            None => None,
        };
        let snapshot = self.gpu().and_then(|g| g.latest());
        let (mut gpus, mut driver, mut cuda) = (Vec::new(), None, None);
        if let Some(s) = &snapshot {
            for &i in &self.gpus {
                if let Some(g) = s.gpu(i) {
                    gpus.push(format!("{i}: {}", g.name));
                }
            }
            if let GpuStatus::Nvml { driver: d, cuda: c } = &s.status {
                (driver, cuda) = (d.clone(), c.clone());
            }
        }
        ServerMeta {
            kind: config.kind.as_str().to_string(),
            version: about.version.clone(),
            model: model.to_string(),
            model_path,
            model_config_sha256,
            command: command.to_string(),
            host: host_name(),
            gpus,
            driver,
            cuda,
            sweeptop_version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// Why a server exited before it was ready: the cause in its log, else what
/// its exit status says (a plain exit is `startup_failed`).
fn startup_failure(server: &Server, info: ExitInfo) -> Failure {
    let (logged, tail) = server
        .log
        .lock()
        .map(|l| (l.watch.failure(), l.watch.tail(detect::TAIL_KEEP)))
        .unwrap_or((None, Vec::new()));
    let how = info.describe();
    match logged {
        Some(mut f) => {
            f.message = format!("server exited during startup ({how}): {}", f.message);
            f
        }
        None => {
            let mut f = detect::exit_failure(
                info.code,
                info.signal,
                "server exited during startup",
                &how,
                &tail,
            );
            if f.kind == FailureKind::ServerExited {
                f.kind = FailureKind::StartupFailed;
            }
            f
        }
    }
}

/// The host as it goes in a URL: IPv6 in brackets, "any address" as loopback.
fn url_host(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else if host == "0.0.0.0" {
        "127.0.0.1".into()
    } else {
        host.to_string()
    }
}

/// This machine's name, as the kernel has it.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into())
}
