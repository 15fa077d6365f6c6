//! Starting a config's server and stopping it: preflight, the command line
//! filled in, the process started in its own group and recorded (so a later
//! `--resume` can stop it), then ready = the health check passes, the plan's
//! ready line appeared and (if asked) one tiny generation succeeded; and the
//! context limit and model name it will be measured with.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::cell::Session;
use super::commands::Between;
use super::core::{Core, Skip};
use super::server::{Launch, Server};
use super::{preflight, process};
use crate::load::{self, Target};
use crate::model::{
    Event, Failure, FailureKind, FailureSource, GpuStatus, Level, ServerMeta, Timestamp,
};
use crate::plan::{Config, ContextLimit};

/// A config's server, ready, and its cells' view of it.
pub(super) struct Live {
    pub server: Server,
    pub session: Session,
}

/// Launching one config's server for a lane.
pub(super) struct Launcher<'a> {
    pub core: &'a Arc<Core>,
    /// Wakes when a command was applied (a skip or quit while it starts).
    pub steer: &'a mut watch::Receiver<u64>,
    /// The GPUs the config runs on.
    pub gpus: &'a [u32],
}

/// A launch's command line, filled in.
struct CommandLine {
    argv: Vec<String>,
    env: Vec<(String, String)>,
    /// As the user would type it.
    shown: String,
}

impl Launcher<'_> {
    /// Preflight, spawn and wait for readiness. `Ok(None)` means quit.
    pub async fn launch(
        &mut self,
        config: &Config,
        index: usize,
        total: usize,
        attempt: u32,
    ) -> Result<Option<Live>, Failure> {
        let port = preflight::check(self.core, config, self.gpus).await?;
        let line = self.command_line(config, port);
        self.core.emit(Event::ConfigStarting {
            at: Timestamp::now(),
            config: config.id.clone(),
            phase: config.phase.clone(),
            index: index + 1,
            total,
            command: line.shown.clone(),
            attempt: attempt + 1,
            gpus: self.gpus.to_vec(),
        });
        let mut server = self.spawn(config, &line, attempt)?;
        let base = format!("http://{}:{}", url_host(&config.host), port);
        match self.wait_ready(config, &mut server, &base).await {
            Ok(true) => {}
            Ok(false) => {
                stop(self.core, config, &mut server).await;
                return Ok(None);
            }
            Err(f) => {
                stop(self.core, config, &mut server).await;
                return Err(f);
            }
        }
        let session = self.ready(config, &server, base, &line.shown).await;
        Ok(Some(Live { server, session }))
    }

    /// The config's command line and environment, its placeholders filled.
    fn command_line(&self, config: &Config, port: u16) -> CommandLine {
        let sweeptop = self.core.sweeptop_exe.display().to_string();
        let run_dir = self.core.run_path.display().to_string();
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
        env.push((process::RUN_TAG.into(), self.core.run_tag.clone()));
        let shown = crate::plan::template::command_line(&argv, config.shell);
        CommandLine { argv, env, shown }
    }

    /// Start the server in its own group, its log going to the run
    /// directory, and record it (for the GPUs' owners and a later resume).
    fn spawn(&self, config: &Config, line: &CommandLine, attempt: u32) -> Result<Server, Failure> {
        let core = self.core;
        let note = format!(
            "# sweeptop {} launch {} of {}: {}",
            Timestamp::now(),
            attempt + 1,
            config.id,
            line.shown
        );
        let log_path = crate::store::log_path(&core.run_path, &config.id);
        let server = Server::spawn(Launch {
            argv: &line.argv,
            shell: config.shell,
            env: &line.env,
            log_path: &log_path,
            log_note: &note,
            log_max_bytes: core.plan.limits.log_max_bytes(),
            config: &config.id,
            patterns: core.patterns.clone(),
            ready_line: config.ready.log_line.clone(),
            logs: core.bus.logs.clone(),
            keep_fd: None,
        })
        .map_err(|e| {
            preflight::failure(format!(
                "cannot start `{}`: {e}",
                line.argv.first().map_or("", String::as_str)
            ))
        })?;
        if let Some(g) = core.gpu() {
            g.add_server(server.pgid, self.gpus);
        }
        crate::store::crash_point("server.unrecorded");
        let start = process::start_time(server.pgid).unwrap_or(0);
        core.server_started(&config.id, self.gpus, server.pgid, start);
        Ok(server)
    }

    /// A ready server: the model and context limit its cells are measured
    /// with, and what was benchmarked, told to everyone.
    async fn ready(
        &self,
        config: &Config,
        server: &Server,
        base: String,
        command: &str,
    ) -> Session {
        let core = self.core;
        let about = load::about(&core.http, &base, config.kind.preset()).await;
        let model = config
            .model
            .clone()
            .or(about.model.clone())
            .unwrap_or_else(|| "default".into());
        let context_limit = match core.plan.limits.context {
            ContextLimit::Tokens(n) => Some(n),
            ContextLimit::Server => about.context,
        };
        let meta = self.server_meta(config, &about, &model, command).await;
        for why in &about.refused {
            core.notice(Level::Warn, format!("{}: {why}", config.id));
        }
        if context_limit.is_none() {
            core.notice(Level::Warn, format!("{}: the server reports no context limit and the plan sets none; prompts are not clamped", config.id));
        }
        if let (Some(note), ContextLimit::Server) = (about.slots_note(), &core.plan.limits.context)
        {
            core.notice(Level::Info, format!("{}: {note}", config.id));
        }
        core.emit(Event::ServerReady {
            at: Timestamp::now(),
            config: config.id.clone(),
            pid: server.pgid,
            after_s: server.started.elapsed().as_secs_f64(),
            context_limit,
            model: model.clone(),
            server: Some(Box::new(meta)),
        });
        Session::new(
            Target {
                cache_prompt: None,
                base,
                api: config.api,
                model,
            },
            context_limit,
            core.http.clone(),
            core.seq.clone(),
            config.kind.preset().flush,
            config.tokenizer.as_ref().map(std::path::PathBuf::from),
        )
        .knowing(&about)
        .sharing_counts(core.books.clone())
    }

    /// Ready = the health check passes, the plan's log line (if any) appeared,
    /// and (if asked) one tiny generation succeeded. `Ok(false)` = quit.
    async fn wait_ready(
        &mut self,
        config: &Config,
        server: &mut Server,
        base: &str,
    ) -> Result<bool, Failure> {
        let client = self.core.http.clone();
        let deadline = Instant::now() + Duration::from_secs_f64(config.ready.timeout_s);
        let url = format!("{base}{}", config.ready.path);
        let mut exit = server.exit.clone();
        loop {
            if let Some(info) = server.exited() {
                server.drain_logs(Duration::from_secs(2)).await;
                return Err(server.startup_failure(info));
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
                        cache_prompt: None,
                        base: base.to_string(),
                        api: config.api,
                        model,
                    };
                    let progress = load::client::Progress::new();
                    let Ok(pool) = load::Pool::new(base).map(std::sync::Arc::new) else {
                        return Ok(false);
                    };
                    let rec = load::client::send(
                        &pool,
                        &target,
                        &[&load::client::JsonText::new("Hello")],
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
                    match self.core.interruption(&config.id) {
                        Some(Between::Quit) => return Ok(false),
                        Some(Between::SkipConfig) => {
                            return Err(Failure::new(
                                FailureKind::StartupFailed,
                                FailureSource::Client,
                                "skipped while starting",
                            ));
                        }
                        // A cell skipped while the server starts is its first.
                        Some(Between::SkipCell) => self.core.book().skips.push((Some(config.id.clone()), Skip::Cell)),
                        Some(Between::Continue) | None => {}
                    }
                }
            }
        }
    }

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
        // A model directory's config.json, or a one-file model's head; a
        // path on a hung mount gives up after 10 s.
        let (model_config_sha256, model_file_head_sha256) = match model_path.clone() {
            Some(p) => {
                let hash = tokio::task::spawn_blocking(move || {
                    let path = std::path::PathBuf::from(p);
                    if path.is_file() {
                        (
                            None,
                            crate::store::sha256_head(&path, MODEL_HEAD_BYTES).ok(),
                        )
                    } else {
                        (
                            crate::store::sha256_file(&path.join("config.json")).ok(),
                            None,
                        )
                    }
                });
                tokio::time::timeout(Duration::from_secs(10), hash)
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .unwrap_or_default()
            }
            None => (None, None),
        };
        let snapshot = self.core.gpu().and_then(|g| g.latest());
        let (mut gpus, mut driver, mut cuda) = (Vec::new(), None, None);
        if let Some(s) = &snapshot {
            for &i in self.gpus {
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
            model_file_head_sha256,
            command: command.to_string(),
            host: host_name(),
            gpus,
            driver,
            cuda,
            sweeptop_version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// How much of a one-file model (a GGUF) its hash covers: the header,
/// metadata and vocabulary, not gigabytes of weights.
const MODEL_HEAD_BYTES: u64 = 16 << 20;

/// What the config's log file cut since this was last asked, and problems
/// writing it, as notices.
pub(super) fn say_log_cuts(core: &Core, config: &str, server: &Server) {
    let cap = core.plan.limits.log_max_bytes();
    for cut in server.take_log_cuts() {
        core.notice(Level::Warn, cut.notice(config, cap));
    }
    for problem in server.take_log_problems() {
        core.notice(Level::Warn, format!("{config}: {problem}"));
    }
}

/// Stop the server's whole group and say how it ended.
pub(super) async fn stop(core: &Core, config: &Config, server: &mut Server) {
    if server.stopped {
        return;
    }
    // Gone before we asked it to stop: say how it ended.
    if let Some(info) = server.exited() {
        core.emit(Event::ServerExited {
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
    say_log_cuts(core, &config.id, server);
    core.server_stopped(&config.id);
    if let Some(g) = core.gpu() {
        g.remove_server(server.pgid);
    }
    core.emit(Event::ServerStopped {
        at: Timestamp::now(),
        config: config.id.clone(),
        how,
        after_s: t.elapsed().as_secs_f64(),
    });
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
