//! Rendering and interaction tests: synthetic event sequences over the demo plan,
//! drawn on a `TestBackend` and compared with committed snapshots; keys checked
//! against the commands they send.

use std::path::{Path, PathBuf};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::style::Color;
use ratatui::Terminal;
use tokio::sync::mpsc;

use super::app::{Action, App, Mode, Redraw};
use super::disk::Worker;
use super::keymap::Keymap;
use super::theme::Theme;
use super::ui::{Look, Overlay};
use crate::engine::Request;
use crate::model::{
    CellRecord, Command, ContextNumbers, Event, Failure, FailureKind, FailureSource, GpuProcess,
    GpuSample, GpuSnapshot, GpuStatus, Level, LogMark, Metrics, Status, Timestamp,
};
use crate::plan::{Plan, DEMO_PATH, DEMO_PLAN};
use crate::view::state::ViewState;

mod shown;

fn plan() -> Arc<Plan> {
    Arc::new(Plan::parse(Path::new(DEMO_PATH), DEMO_PLAN).expect("the demo plan parses"))
}

/// A time `s` seconds into the sweep.
fn at(s: u32) -> Timestamp {
    Timestamp::from_unix_ms(1_748_772_000_000 + i64::from(s) * 1000)
}

fn metrics(tok_s: f64, ttft_ms: f64, accept: Option<f64>) -> Metrics {
    serde_json::from_value(serde_json::json!({
        "requests": 4, "failed_requests": 0, "short_requests": 0,
        "output_tokens": 192, "duration_s": 192.0 / tok_s, "output_tok_s": tok_s,
        "request_per_s": 1.5, "decode_tok_s_p50": tok_s * 0.9, "decode_tok_s_mean": tok_s * 0.88,
        "ttft_ms_p50": ttft_ms, "ttft_ms_p90": ttft_ms * 1.2, "ttft_ms_p99": ttft_ms * 1.4,
        "ttft_ms_mean": ttft_ms * 1.05,
        "itl_ms_p50": 11.5, "itl_ms_p90": 13.0, "itl_ms_p99": 19.25, "itl_ms_mean": 12.0,
        "tpot_ms_p50": 11.9, "e2e_ms_p50": 640.0, "e2e_ms_p99": 810.0,
        "prompt_tokens_mean": 1019.0, "tokens_estimated": false, "accept_len": accept,
        "gpu_mem_peak_mib": 81234, "gpu_util_mean": 87.5
    }))
    .expect("metrics fixture")
}

/// Builds the event story of a demo sweep, one cell at a time.
struct Story {
    plan: Arc<Plan>,
    events: Vec<Event>,
    t: u32,
}

impl Story {
    fn new() -> Story {
        let plan = plan();
        let events = vec![Event::SweepStarted {
            at: at(0),
            plan: plan.name.clone(),
            run_dir: "runs/demo-20250601-100000".into(),
            configs: plan.configs.len(),
            cells: plan.cells.len(),
            already_done: 0,
        }];
        Story { plan, events, t: 0 }
    }

    fn tick(&mut self) -> Timestamp {
        self.t += 1;
        at(self.t)
    }

    fn config(&mut self, id: &str) -> &mut Story {
        let (index, c) = self
            .plan
            .configs
            .iter()
            .enumerate()
            .find(|(_, c)| c.id == id)
            .map(|(i, c)| (i, c.clone()))
            .expect("config in the demo plan");
        let at = self.tick();
        self.events.push(Event::ConfigStarting {
            at,
            config: id.into(),
            phase: c.phase.clone(),
            index: index + 1,
            total: self.plan.configs.len(),
            command: format!("sweeptop sim-server --port 41231 --tp {}", c.axes["tp"]),
            attempt: 1,
            gpus: Vec::new(),
        });
        self.log(id, "[2025-06-01 10:00:01] server_args=ServerArgs(model_path='Qwen3.6-27B-sim', tp_size=1, ...)", LogMark::Plain);
        self.log(
            id,
            "[2025-06-01 10:00:02] Load weight end. mem usage=51.32 GB",
            LogMark::Plain,
        );
        self.log(
            id,
            "[2025-06-01 10:00:02] The server is fired up and ready to roll!",
            LogMark::Ready,
        );
        let at = self.tick();
        self.events.push(Event::ServerReady {
            at,
            config: id.into(),
            pid: 4242,
            after_s: 1.2,
            context_limit: Some(32768),
            model: "Qwen3.6-27B-sim".into(),
            server: Some(Box::new(crate::model::ServerMeta {
                kind: "sglang".into(),
                version: Some("0.5.0-sim".into()),
                model: "Qwen3.6-27B-sim".into(),
                model_path: Some("/dev/shm/Qwen3.6-27B".into()),
                model_config_sha256: Some("9f2c…e41a".into()),
                model_file_head_sha256: None,
                command: "sweeptop sim-server --flavor sglang --port 40001".into(),
                host: "gpu-node-7".into(),
                gpus: vec!["0: NVIDIA H200".into()],
                driver: Some("550.54.15".into()),
                cuda: Some("12.4".into()),
                sweeptop_version: "0.1.0".into(),
            })),
        });
        self
    }

    fn log(&mut self, config: &str, line: &str, mark: LogMark) -> &mut Story {
        self.events.push(Event::Log {
            config: config.into(),
            line: line.into(),
            mark,
        });
        self
    }

    fn cells(&self, config: &str) -> Vec<crate::plan::Cell> {
        self.plan.cells_of(config).cloned().collect()
    }

    fn start(&mut self, cell: &crate::plan::Cell) -> &mut Story {
        let at = self.tick();
        self.events.push(Event::CellStarted {
            at,
            cell: cell.id.clone(),
            config: cell.config.clone(),
        });
        self
    }

    fn finish(
        &mut self,
        cell: &crate::plan::Cell,
        status: Status,
        metrics: Option<Metrics>,
        failure: Option<Failure>,
    ) -> &mut Story {
        let started_at = at(self.t);
        let finished_at = self.tick();
        self.events.push(Event::CellFinished {
            at: finished_at,
            record: Box::new(CellRecord {
                cell: cell.id.clone(),
                config: cell.config.clone(),
                phase: cell.phase.clone(),
                workload: cell.workload.clone(),
                context_tokens: cell.context_tokens,
                concurrency: cell.concurrency,
                status,
                failure,
                metrics,
                started_at,
                finished_at,
                warnings: Vec::new(),
                repetitions: Vec::new(),
                spread: None,
                beside: Vec::new(),
                gpus: Vec::new(),
            }),
        });
        self
    }

    /// Run a config's cells: code cells ok at `speed` × a base rate, the long
    /// prompt rejected with a context-overflow 400.
    fn run_ok(&mut self, config: &str, speed: f64, accept: Option<f64>) -> &mut Story {
        self.config(config);
        for (i, c) in self.cells(config).iter().enumerate() {
            self.start(c);
            if c.workload == "longdoc" {
                self.finish(c, Status::Failed, None, Some(overflow()));
            } else {
                let base = [82.0, 301.5, 79.4, 288.0, 70.2, 240.8][i % 6];
                let ttft = [45.0, 61.0, 190.0, 260.0, 820.0, 1440.0][i % 6];
                self.log(
                    config,
                    &format!("[2025-06-01 10:00:0{i}] Decode batch. #running-req: {}, #token: 1234, gen throughput (token/s): {:.2}", c.concurrency, base * speed),
                    LogMark::Plain,
                );
                self.finish(
                    c,
                    Status::Ok,
                    Some(metrics(base * speed, ttft / speed.sqrt(), accept)),
                    None,
                );
            }
        }
        let at = self.tick();
        self.events.push(Event::ServerStopped {
            at,
            config: config.into(),
            how: "SIGINT".into(),
            after_s: 0.4,
        });
        self
    }

    /// The first cell crashes the server with an illegal instruction; the rest
    /// are not run.
    fn run_crash(&mut self, config: &str) -> &mut Story {
        self.config(config);
        let cells = self.cells(config);
        self.start(&cells[0]);
        for l in crash_lines() {
            self.log(config, l, LogMark::Failure);
        }
        let f = Failure::new(
            FailureKind::CudaIllegalInstruction,
            FailureSource::ServerLog,
            "CUDA error: an illegal instruction was encountered (exit code 1)",
        )
        .with_evidence(crash_lines().iter().map(|s| s.to_string()).collect());
        self.finish(&cells[0], Status::Failed, None, Some(f.clone()));
        for c in &cells[1..] {
            let not_run = Failure {
                message: format!(
                    "not run: the server died in {} ({})",
                    cells[0].id, f.message
                ),
                ..f.clone()
            };
            self.finish(c, Status::Failed, None, Some(not_run));
        }
        let at = self.tick();
        self.events.push(Event::ServerExited {
            at,
            config: config.into(),
            code: Some(1),
            signal: None,
        });
        self
    }

    fn gpus(&mut self, n: u32, busy: &[u32]) -> &mut Story {
        for k in 0..12u64 {
            self.events.push(gpu_event(n, busy, k));
        }
        self
    }

    fn view(&self) -> ViewState {
        let mut v = ViewState::new(Some(self.plan.clone()));
        for e in &self.events {
            v.apply(e);
        }
        v
    }
}

fn crash_lines() -> [&'static str; 3] {
    [
        "[2025-06-01 10:00:09] Scheduler hit an exception: Traceback (most recent call last):",
        "RuntimeError: CUDA error: an illegal instruction was encountered",
        "CUDA kernel errors might be asynchronously reported at some other API call",
    ]
}

fn overflow() -> Failure {
    Failure::new(FailureKind::ContextOverflow, FailureSource::Http, "HTTP 400: This model's maximum context length is 32768 tokens. However, you requested 32808 tokens (32760 in the messages, 48 in the completion).").with_context(Some(ContextNumbers {
            limit: Some(32768),
            prompt_tokens: Some(32760),
            output_tokens: Some(48),
            total_tokens: Some(32808),
        }))
}

fn gpu_event(n: u32, busy: &[u32], k: u64) -> Event {
    let gpus = (0..n)
        .map(|i| {
            let on = busy.contains(&i);
            GpuSample {
                index: i,
                name: "NVIDIA H200".into(),
                util_pct: Some(if on {
                    60 + ((k * 7 + i as u64 * 13) % 40) as u32
                } else {
                    0
                }),
                mem_used_mib: Some(if on { 118_000 + i as u64 * 311 } else { 512 }),
                mem_total_mib: Some(143_771),
                temp_c: Some(if on { 71 + i } else { 34 }),
                power_w: Some(if on { 512.0 + i as f64 } else { 74.0 }),
                power_limit_w: Some(700.0),
                sm_clock_mhz: Some(1980),
                processes: if on {
                    vec![GpuProcess {
                        pid: 4242,
                        name: "python3".into(),
                        used_mib: Some(117_000),
                        ours: true,
                    }]
                } else {
                    vec![]
                },
            }
        })
        .collect();
    Event::Gpu {
        snapshot: GpuSnapshot {
            at_ms: 1_748_772_000_000 + k * 1000,
            status: GpuStatus::Simulated,
            gpus,
        },
    }
}

fn look() -> Look {
    Look {
        ascii: false,
        show_gpu: true,
        mouse: false,
    }
}

/// An app over a view, live (its command channel returned), clock at the last event.
fn live(view: ViewState) -> (App, mpsc::Receiver<Request>) {
    let (tx, rx) = mpsc::channel(16);
    let mut app = App::new(
        view,
        Mode::Live { commands: tx },
        PathBuf::from("runs/demo-20250601-100000"),
        Keymap::default(),
        Theme::dark(),
        look(),
    );
    let now = Timestamp::from_unix_ms(app.view.latest_at.unix_ms() + 2000);
    app.update(Action::Tick(now));
    (app, rx)
}

/// The same with `--ascii`.
fn live_ascii(view: ViewState) -> (App, mpsc::Receiver<Request>) {
    let (tx, rx) = mpsc::channel(16);
    let app = App::new(
        view,
        Mode::Live { commands: tx },
        PathBuf::from("runs/demo"),
        Keymap::default(),
        Theme::dark(),
        Look {
            ascii: true,
            ..look()
        },
    );
    (app, rx)
}

/// A line of the running config's (tp1-dflash's) server log, as the
/// engine sends it.
fn log_line(line: impl Into<String>, mark: LogMark) -> Action {
    Action::Event(Event::Log {
        config: "tp1-dflash".into(),
        line: line.into(),
        mark,
    })
}

fn render(app: &mut App, w: u16, h: u16) -> Terminal<TestBackend> {
    app.update(Action::Resize(w, h));
    draw_as_is(app, w, h)
}

/// Draw without telling the app anything first.
fn draw_as_is(app: &App, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    terminal.draw(|f| super::draw::draw(f, app)).expect("draw");
    terminal
}

fn screen(t: &Terminal<TestBackend>) -> String {
    t.backend().to_string()
}

/// Hand the disk work the app asked for to a worker, as the frame loop does,
/// and apply each result as it comes back, until the worker is done.
fn finish_disk_work(app: &mut App) {
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = Worker::start(move |done| tx.send(done).is_ok());
    for job in app.take_jobs() {
        if let Some(done) = worker.ask(job) {
            app.update(Action::Disk(done));
        }
    }
    drop(worker);
    loop {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(done) => {
                app.update(Action::Disk(done));
            }
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => panic!("the disk work took over 30 s"),
        }
    }
}

fn press(app: &mut App, code: KeyCode) {
    press_mod(app, code, KeyModifiers::NONE);
}

fn press_mod(app: &mut App, code: KeyCode, m: KeyModifiers) {
    if let Some(a) = app.on_key(&KeyEvent::new(code, m)) {
        app.update(a);
    }
}

/// The demo part-way: the baseline done, DFlash running its third cell.
fn running_story() -> Story {
    let mut s = Story::new();
    s.run_ok("tp1-baseline", 1.0, None);
    s.config("tp1-dflash");
    let cells = s.cells("tp1-dflash");
    s.start(&cells[0])
        .finish(
            &cells[0],
            Status::Ok,
            Some(metrics(131.2, 41.0, Some(3.42))),
            None,
        )
        .start(&cells[1])
        .finish(
            &cells[1],
            Status::Ok,
            Some(metrics(290.3, 66.0, Some(3.18))),
            None,
        )
        .start(&cells[2]);
    s.log("tp1-dflash", "[2025-06-01 10:00:30] Decode batch. #running-req: 1, #token: 8400, gen throughput (token/s): 127.31, accept len: 3.40", LogMark::Plain);
    s.gpus(8, &[0]);
    s
}

/// The demo after DDTree b8 crashed.
fn crash_story() -> Story {
    let mut s = Story::new();
    s.run_ok("tp1-baseline", 1.0, None)
        .run_ok("tp1-dflash", 1.6, Some(3.3))
        .run_ok("tp1-ddtree-b4", 1.9, Some(4.1))
        .run_crash("tp1-ddtree-b8");
    s.gpus(8, &[]);
    s
}

#[test]
fn snapshot_empty_plan_start() {
    let mut s = Story::new();
    s.config("tp1-baseline");
    let (mut app, _rx) = live(s.view());
    let t = render(&mut app, 120, 40);
    insta::assert_snapshot!("empty_plan_start", t.backend());
}

#[test]
fn snapshot_running() {
    let (mut app, _rx) = live(running_story().view());
    let t = render(&mut app, 120, 40);
    let text = screen(&t);
    assert!(text.contains(" RUNNING "), "{text}");
    assert!(text.contains("config 2/8 tp1-dflash"), "{text}");
    assert!(text.contains("cells 9/56"), "{text}");
    insta::assert_snapshot!("running", t.backend());
}

#[test]
fn snapshot_crash_flagged() {
    let (mut app, _rx) = live(crash_story().view());
    let t = render(&mut app, 120, 40);
    let text = screen(&t);
    let badge = FailureKind::CudaIllegalInstruction.badge();
    let alert = format!(
        "tp1-ddtree-b8: {} — 7 cells failed",
        FailureKind::CudaIllegalInstruction.describe()
    );
    assert!(text.contains(&alert), "{text}");
    let row = text
        .lines()
        .find(|l| l.contains("tp1-ddtree-b8   "))
        .expect("the crashed config's row");
    // All seven: the crash, and the cells not run because of it.
    assert_eq!(row.matches(badge).count(), 7, "{row}");
    // The badge is drawn in the failure style.
    let buf = t.backend().buffer();
    let theme = Theme::dark();
    let width = buf.area.width;
    let (x, y) = (0..buf.area.height)
        .find_map(|y| {
            let row: String = (0..width).map(|x| buf[(x, y)].symbol()).collect();
            if !row.contains("tp1-ddtree-b8   ") {
                return None;
            }
            let at = row.find(badge)?;
            Some((row[..at].chars().count() as u16, y))
        })
        .expect("a badge in the crashed config's row");
    assert_eq!(buf[(x, y)].bg, theme.failed.bg.unwrap_or(Color::Reset));
    insta::assert_snapshot!("crash_flagged", t.backend());
}

#[test]
fn snapshot_overflow_flagged() {
    let mut s = Story::new();
    s.run_ok("tp1-baseline", 1.0, None);
    let (mut app, _rx) = live(s.view());
    let t = render(&mut app, 100, 30);
    let text = screen(&t);
    assert!(
        text.contains(&format!(
            "tp1-baseline: {} — 1 cell failed",
            FailureKind::ContextOverflow.describe()
        )),
        "{text}"
    );
    insta::assert_snapshot!("overflow_flagged", t.backend());
}

/// An ok cell whose requests came back short shows got/asked in the warning
/// colour instead of its value, and its details say why.
#[test]
fn a_short_cell_is_flagged_in_the_grid_and_explained_in_its_details() {
    let mut s = Story::new();
    s.run_ok("tp1-baseline", 1.0, None);
    let mut view = s.view();
    let first = s.cells("tp1-baseline")[0].id.clone();
    let mut r = view.records[&first].clone();
    let m = r.metrics.as_mut().unwrap();
    (m.short_requests, m.output_tokens_asked) = (4, Some(512));
    r.warnings = vec![
        Failure::new(
            FailureKind::ShortOutput,
            crate::model::FailureSource::Client,
            "4 of 4 requests returned fewer tokens than the 128 asked (49, 48, 48, 47; 192 of 512 tokens in all): prompt 2,000 + 128 asked > context 2,048",
        ),
    ];
    r.finished_at = at(500);
    view.apply(&Event::CellFinished {
        at: r.finished_at,
        record: Box::new(r),
    });
    let (mut app, _rx) = live(view);
    let t = render(&mut app, 100, 30);
    let text = screen(&t);
    assert!(text.contains("192/512"), "{text}");
    press(&mut app, KeyCode::Char('g'));
    press(&mut app, KeyCode::Enter);
    let t = render(&mut app, 120, 40);
    let text = screen(&t);
    assert!(
        text.contains("warning") && text.contains("fewer tokens than asked (short_output)"),
        "{text}"
    );
    assert!(
        text.contains("prompt 2,000 + 128 asked > context 2,048"),
        "{text}"
    );
}

#[test]
fn snapshot_paused() {
    let mut s = running_story();
    let cells = s.cells("tp1-dflash");
    let at = s.tick();
    s.events.push(Event::Action {
        at,
        action: "toggle_pause".into(),
        target: None,
        source: "key".into(),
    });
    s.events.push(Event::Paused { at });
    s.finish(
        &cells[2],
        Status::Ok,
        Some(metrics(120.0, 180.0, Some(3.2))),
        None,
    );
    let (mut app, _rx) = live(s.view());
    let t = render(&mut app, 120, 40);
    assert!(screen(&t).contains(" PAUSED "));
    insta::assert_snapshot!("paused", t.backend());
}

#[test]
fn snapshot_help_overlay() {
    let (mut app, _rx) = live(running_story().view());
    press(&mut app, KeyCode::Char('?'));
    assert!(matches!(app.ui.overlay, Overlay::Help { .. }));
    let t = render(&mut app, 120, 40);
    let text = screen(&t);
    // Generated from the keymap: every action's help line is there.
    for b in super::keymap::BINDINGS {
        assert!(text.contains(b.help), "{} missing\n{text}", b.name);
    }
    insta::assert_snapshot!("help_overlay", t.backend());
}

#[test]
fn snapshot_details_popup_of_a_crashed_cell() {
    let (mut app, _rx) = live(crash_story().view());
    // Select tp1-ddtree-b8's first cell.
    press(&mut app, KeyCode::Char('g'));
    for _ in 0..3 {
        press(&mut app, KeyCode::Down);
    }
    assert_eq!(app.ui.sel_col, Some(0));
    press(&mut app, KeyCode::Enter);
    let t = render(&mut app, 120, 40);
    let text = screen(&t);
    assert!(
        text.contains("Cell tp1-ddtree-b8/code-ctx1024-c1"),
        "{text}"
    );
    assert!(
        text.contains("an illegal instruction was encountered"),
        "{text}"
    );
    insta::assert_snapshot!("details_crashed_cell", t.backend());
}

#[test]
fn config_details_say_what_was_benchmarked() {
    let (mut app, _rx) = live(crash_story().view());
    press(&mut app, KeyCode::Char('g'));
    press(&mut app, KeyCode::Down); // tp1-dflash
    while app.ui.sel_col.is_some() {
        press(&mut app, KeyCode::Left);
    }
    press(&mut app, KeyCode::Enter);
    let t = render(&mut app, 120, 40);
    let text = screen(&t);
    assert!(text.contains("Config tp1-dflash"), "{text}");
    for said in [
        "sglang 0.5.0-sim",
        "/dev/shm/Qwen3.6-27B",
        "0: NVIDIA H200",
        "550.54.15 / 12.4",
        "gpu-node-7",
    ] {
        assert!(text.contains(said), "{said}: {text}");
    }
}

#[test]
fn snapshot_details_popup_of_an_ok_cell() {
    let (mut app, _rx) = live(crash_story().view());
    press(&mut app, KeyCode::Char('g'));
    press(&mut app, KeyCode::Down); // tp1-dflash
    press(&mut app, KeyCode::Right); // code 1k c4
    press(&mut app, KeyCode::Enter);
    let t = render(&mut app, 120, 40);
    let text = screen(&t);
    assert!(text.contains("prompt (real)"), "{text}");
    assert!(text.contains("1019 tokens"), "{text}");
    assert!(text.contains("acceptance length"), "{text}");
    insta::assert_snapshot!("details_ok_cell", t.backend());
}

#[test]
fn snapshot_one_gpu() {
    let mut s = Story::new();
    s.run_ok("tp1-baseline", 1.0, None);
    s.config("tp1-dflash");
    s.gpus(1, &[0]);
    let (mut app, _rx) = live(s.view());
    let t = render(&mut app, 120, 40);
    insta::assert_snapshot!("one_gpu", t.backend());
}

#[test]
fn snapshot_eight_gpus_tp4() {
    let mut s = Story::new();
    s.run_ok("tp1-baseline", 1.0, None);
    s.config("tp4-baseline");
    s.gpus(8, &[0, 1, 2, 3]);
    let (mut app, _rx) = live(s.view());
    let t = render(&mut app, 120, 40);
    let text = screen(&t);
    // The config's four GPUs are marked, the others are not.
    let marked = text.lines().filter(|l| l.contains("●")).count();
    assert_eq!(marked, 4, "{text}");
    insta::assert_snapshot!("eight_gpus_tp4", t.backend());
}

#[test]
fn snapshot_nvml_missing() {
    let mut s = Story::new();
    s.config("tp1-baseline");
    s.events.push(Event::Gpu {
        snapshot: GpuSnapshot {
            at_ms: 1,
            status: GpuStatus::LibraryNotFound {
                detail: "libnvidia-ml.so.1: cannot open shared object file".into(),
            },
            gpus: vec![],
        },
    });
    let (mut app, _rx) = live(s.view());
    let t = render(&mut app, 120, 40);
    let text = screen(&t);
    assert!(text.contains("NVML not found"), "{text}");
    insta::assert_snapshot!("nvml_missing", t.backend());
}

#[test]
fn snapshot_80x24() {
    let (mut app, _rx) = live(crash_story().view());
    let t = render(&mut app, 80, 24);
    let text = screen(&t);
    assert!(text.contains("ILL") || text.contains(FailureKind::CudaIllegalInstruction.badge()));
    // What must survive 80 columns: state, progress, ETA, the counts, every
    // key that steers the sweep, the GPUs' heat, and a mark on each row whose
    // failures are scrolled off to the right.
    let lines: Vec<&str> = text.lines().collect();
    for want in ["RUNNING", "28/56 cells", "ETA 01:01", "tp1"] {
        assert!(lines[0].contains(want), "{want}: {}", lines[0]);
    }
    assert!(lines[1].contains("18 ok 10 failed 28 left"), "{}", lines[1]);
    assert!(
        lines[1].contains("CUDA illegal instruction"),
        "{}",
        lines[1]
    );
    let hints = lines.last().unwrap();
    for want in [
        "p pause",
        "s skip cfg",
        "n skip cell",
        "r retry",
        "x exclude",
        "e export",
        "q quit",
        "? help",
    ] {
        assert!(hints.contains(want), "{want}: {hints}");
    }
    assert!(text.contains("hottest 34C"), "{text}");
    let baseline = lines
        .iter()
        .find(|l| l.contains("│ tp1-baseline "))
        .unwrap();
    assert!(
        baseline.trim_end_matches(['│', '"', ' ']).ends_with('▶'),
        "{baseline}"
    );
    insta::assert_snapshot!("size_80x24", t.backend());
}

#[test]
fn snapshot_200x50() {
    let (mut app, _rx) = live(crash_story().view());
    let t = render(&mut app, 200, 50);
    insta::assert_snapshot!("size_200x50", t.backend());
}

#[test]
fn snapshot_too_small() {
    let (mut app, _rx) = live(crash_story().view());
    let t = render(&mut app, 50, 12);
    assert!(screen(&t).contains("terminal too small"));
}

#[test]
fn snapshot_monochrome_theme_has_no_colour() {
    let (tx, _rx) = mpsc::channel(4);
    let mut app = App::new(
        crash_story().view(),
        Mode::Live { commands: tx },
        PathBuf::from("runs/demo"),
        Keymap::default(),
        Theme::mono(),
        look(),
    );
    let t = render(&mut app, 120, 40);
    for cell in t.backend().buffer().content() {
        assert_eq!(cell.fg, Color::Reset, "{cell:?}");
        assert_eq!(cell.bg, Color::Reset, "{cell:?}");
    }
    insta::assert_snapshot!("monochrome", t.backend());
}

#[test]
fn ascii_mode_draws_no_block_or_braille_characters() {
    let (mut app, _rx) = live_ascii(running_story().view());
    app.update(Action::Tick(at(40)));
    let t = render(&mut app, 120, 40);
    let text = screen(&t);
    for ch in text.chars() {
        assert!(ch.is_ascii(), "non-ASCII {ch:?} in ASCII mode\n{text}");
    }
    insta::assert_snapshot!("ascii", t.backend());
    // At 80x24 too, with the essentials, and a zoomed GPU chart.
    let small = screen(&render(&mut app, 80, 24));
    assert!(small.is_ascii(), "{small}");
    for want in ["ETA", "r retry", "x exclude", "q quit"] {
        assert!(small.contains(want), "{want}:\n{small}");
    }
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Char('z'));
    let chart = screen(&render(&mut app, 80, 24));
    assert!(chart.is_ascii(), "{chart}");
    assert!(chart.contains("100%"), "{chart}");
}

/// At 120 columns the bar shows every key that steers the sweep and, in
/// the room left, the next keys of the keymap (compact, not boxed, so they
/// fit), a long one skipped for a shorter one after it.
#[test]
fn the_hints_use_the_width_for_more_keys() {
    let (mut app, _rx) = live(crash_story().view());
    let text = screen(&render(&mut app, 120, 40));
    let hints = text.lines().last().unwrap();
    for want in [
        "p pause",
        "s skip cfg",
        "x exclude",
        "e export",
        "Enter details",
        "Tab focus",
        "q quit",
        "? help",
    ] {
        assert!(hints.contains(want), "{want}: {hints}");
    }
    let text = screen(&render(&mut app, 200, 50));
    let hints = text.lines().last().unwrap();
    // Roomy there: every key boxed, and the focus named.
    for want in [" c  chart", " z  zoom", " v  value", "focus: grid"] {
        assert!(hints.contains(want), "{want} at 200 columns: {hints}");
    }
}

/// With `confirm = []` in keys.toml a skip acts at once, as before.
#[test]
fn keys_that_ask_first_act_at_once_when_keys_toml_says_so() {
    let (mut app, mut rx) = live(crash_story().view());
    app.keymap = crate::tui::keymap::Keymap::default()
        .with_overrides("confirm = []", std::path::Path::new("keys.toml"))
        .unwrap();
    press(&mut app, KeyCode::Char('s'));
    assert_eq!(app.ui.overlay, Overlay::None);
    assert_eq!(
        rx.try_recv().map(|r| r.command).ok(),
        Some(Command::SkipConfig { config: None })
    );
}

#[test]
fn keys_send_the_engine_commands() {
    let (mut app, mut rx) = live(crash_story().view());
    let mut next = || rx.try_recv().map(|r| (r.command, r.source)).ok();
    press(&mut app, KeyCode::Char('p'));
    assert_eq!(next(), Some((Command::TogglePause, "key".into())));
    // Keys that cannot be undone ask first, naming what they will do; any
    // other key is no, `y`, Enter or the same key again is yes.
    press(&mut app, KeyCode::Char('s'));
    assert_eq!(next(), None, "nothing sent before the answer");
    assert!(
        matches!(&app.ui.overlay, Overlay::Confirm { what, .. } if what.starts_with("skip the rest of ")),
        "{:?}",
        app.ui.overlay
    );
    let asked = screen(&render(&mut app, 120, 40));
    assert!(asked.contains("Skip the rest of "), "{asked}");
    press(&mut app, KeyCode::Esc);
    assert_eq!(next(), None, "no is no");
    assert_eq!(app.ui.overlay, Overlay::None);
    press(&mut app, KeyCode::Char('s'));
    press(&mut app, KeyCode::Char('y'));
    assert_eq!(
        next().map(|c| c.0),
        Some(Command::SkipConfig { config: None })
    );
    press(&mut app, KeyCode::Char('n'));
    assert_eq!(next(), None);
    press(&mut app, KeyCode::Char('n'));
    assert_eq!(
        next().map(|c| c.0),
        Some(Command::SkipCell { config: None })
    );
    // Retry on a failed cell: that cell.
    press(&mut app, KeyCode::Char('g'));
    for _ in 0..3 {
        press(&mut app, KeyCode::Down);
    }
    assert_eq!(app.grid.configs[app.ui.sel_config].id, "tp1-ddtree-b8");
    press(&mut app, KeyCode::Right);
    let cell = app.selected_record().map(|r| r.cell.clone()).unwrap();
    press(&mut app, KeyCode::Char('r'));
    assert_eq!(next().map(|c| c.0), Some(Command::Retry { target: cell }));
    // Retry on an ok cell: refused, nothing sent.
    press(&mut app, KeyCode::Char('k'));
    press(&mut app, KeyCode::Char('r'));
    assert_eq!(next(), None);
    assert_eq!(app.ui.flash.as_ref().map(|f| f.level), Some(Level::Warn));
    // With the row label selected: the whole config.
    for _ in 0..8 {
        press(&mut app, KeyCode::Char('h'));
    }
    assert_eq!(app.ui.sel_col, None);
    press(&mut app, KeyCode::Char('r'));
    assert_eq!(
        next().map(|c| c.0),
        Some(Command::Retry {
            target: "tp1-ddtree-b4".into()
        })
    );
    press(&mut app, KeyCode::Char('x'));
    assert_eq!(next(), None);
    press(&mut app, KeyCode::Enter);
    assert_eq!(
        next().map(|c| c.0),
        Some(Command::Exclude {
            config: "tp1-ddtree-b4".into()
        })
    );
    // Once the engine has it, `x` again undoes it.
    app.update(Action::Event(Event::Action {
        at: app.view.latest_at,
        action: "exclude".into(),
        target: Some("tp1-ddtree-b4".into()),
        source: "key".into(),
    }));
    press(&mut app, KeyCode::Char('x'));
    assert_eq!(
        next().map(|c| c.0),
        Some(Command::Include {
            config: "tp1-ddtree-b4".into()
        })
    );
    app.update(Action::Event(Event::Action {
        at: app.view.latest_at,
        action: "include".into(),
        target: Some("tp1-ddtree-b4".into()),
        source: "key".into(),
    }));
    assert!(!app.view.excluded.contains("tp1-ddtree-b4"));
    // Quit asks first; `n` keeps running, Ctrl-C asks again and `y` quits.
    press(&mut app, KeyCode::Char('q'));
    assert_eq!(app.ui.overlay, Overlay::ConfirmQuit);
    assert_eq!(next(), None);
    press(&mut app, KeyCode::Char('n'));
    assert_eq!(app.ui.overlay, Overlay::None);
    assert_eq!(next(), None);
    press_mod(&mut app, KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(app.ui.overlay, Overlay::ConfirmQuit);
    let t = render(&mut app, 100, 30);
    assert!(screen(&t).contains("Quit the sweep?"));
    press(&mut app, KeyCode::Char('y'));
    assert_eq!(next().map(|c| c.0), Some(Command::Quit));
    assert!(!app.exit, "waits for the engine to stop");
    app.update(Action::Event(Event::SweepInterrupted {
        at: at(500),
        reason: "quit".into(),
    }));
    app.update(Action::EngineDone);
    assert!(app.exit);
}

/// The crash story, finished.
fn finished_story() -> Story {
    let mut s = crash_story();
    s.events.push(Event::SweepFinished {
        at: at(900),
        ok: 1,
        failed: 2,
        skipped: 3,
    });
    s
}

#[test]
fn a_signal_as_the_sweep_finishes_closes_the_view_once_the_engine_returns() {
    let s = finished_story();
    // FINISHED is on screen; the engine has not said it is done yet.
    let (mut app, _rx) = live(s.view());
    app.update(Action::Close);
    assert!(!app.exit, "the engine is still returning");
    app.update(Action::EngineDone);
    assert!(app.exit, "the signal came before the end was complete");
    // After the end, a signal closes the view at once.
    let (mut app, _rx) = live(s.view());
    app.update(Action::EngineDone);
    assert!(!app.exit);
    app.update(Action::Close);
    assert!(app.exit);
}

#[test]
fn a_finished_sweep_stays_on_screen_until_the_user_leaves() {
    let s = finished_story();
    let (mut app, mut rx) = live(s.view());
    app.update(Action::EngineDone);
    assert!(!app.exit);
    let t = render(&mut app, 120, 40);
    assert!(screen(&t).contains(" FINISHED "));
    // Keys that steer a sweep are not offered once it is over.
    let text = screen(&t);
    let hints = text.lines().last().unwrap();
    assert!(
        !hints.contains("pause") && !hints.contains("skip"),
        "{hints}"
    );
    // At 80 columns scrolled right, failures to the left are marked too.
    press(&mut app, KeyCode::Char('G'));
    for _ in 0..8 {
        press(&mut app, KeyCode::Right);
    }
    let text = screen(&render(&mut app, 80, 24));
    let b8 = text.lines().find(|l| l.contains("ILL-INSTR")).unwrap();
    assert!(b8.contains("◀tp1-ddtree-b8"), "{text}");
    // No question: the sweep is over.
    press(&mut app, KeyCode::Char('q'));
    assert!(app.exit);
    assert!(rx.try_recv().is_err());
}

#[test]
fn a_recorded_run_is_read_only() {
    let mut app = App::new(
        crash_story().view(),
        Mode::ReadOnly,
        PathBuf::from("/nonexistent"),
        Keymap::default(),
        Theme::dark(),
        look(),
    );
    // Its GPU figures are a recorded sample, and say when it was taken.
    let at = app.view.gpu.latest.as_ref().unwrap().at_ms;
    let clock = crate::model::Timestamp::from_unix_ms(at as i64).clock();
    let text = screen(&render(&mut app, 120, 40));
    assert!(text.contains(&format!("last sample {clock}")), "{text}");
    press(&mut app, KeyCode::Char('p'));
    let f = app.ui.flash.clone().expect("a message");
    assert!(f.text.starts_with("read-only"), "{}", f.text);
    press(&mut app, KeyCode::Char('q'));
    assert!(app.exit, "leaves without a question");
}

#[test]
fn export_writes_csv_and_markdown_into_the_run_directory() {
    let dir = std::env::temp_dir().join(format!("sweeptop-tui-export-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = crash_story();
    let mut run = crate::store::RunDir::create(&dir, "demo", DEMO_PLAN).unwrap();
    for e in &s.events {
        if let Event::CellFinished { record, .. } = e {
            run.append_result(record).unwrap();
        }
    }
    let (tx, _rx) = mpsc::channel(4);
    let mut app = App::new(
        s.view(),
        Mode::Live { commands: tx },
        dir.clone(),
        Keymap::default(),
        Theme::dark(),
        look(),
    );
    press(&mut app, KeyCode::Char('e'));
    finish_disk_work(&mut app);
    let csv = std::fs::read_to_string(dir.join(super::disk::EXPORT_CSV)).unwrap();
    let md = std::fs::read_to_string(dir.join(super::disk::EXPORT_MD)).unwrap();
    assert_eq!(csv.lines().count(), 1 + 4 * 7);
    assert!(md.contains("tp1-ddtree-b8"));
    let f = app.ui.flash.clone().unwrap();
    assert!(
        f.text.contains("results.csv") && f.text.contains("results.md"),
        "{}",
        f.text
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_recorded_run_reads_its_log_file_off_the_dashboards_thread() {
    let dir = std::env::temp_dir().join(format!("sweeptop-tui-logfile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join(crate::store::LOGS)).unwrap();
    let mut app = App::new(
        crash_story().view(),
        Mode::ReadOnly,
        dir.clone(),
        Keymap::default(),
        Theme::dark(),
        look(),
    );
    let config = app.grid.configs[app.ui.sel_config].id.clone();
    // A log file that cannot be read until it is written: a named pipe, as a
    // hung network mount would hold the read.
    let path = dir.join(crate::store::LOGS).join(format!("{config}.log"));
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string; mkfifo only creates the file.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = Worker::start(move |done| tx.send(done).is_ok());
    for job in app.take_jobs() {
        assert!(worker.ask(job).is_none(), "handed to the worker");
    }
    // While the read waits, keys are taken and frames drawn.
    let before = screen(&render(&mut app, 120, 40));
    assert!(!before.contains("a line from the log file"), "{before}");
    press(&mut app, KeyCode::Char('v'));
    assert!(!screen(&render(&mut app, 120, 40)).contains("a line from the log file"));
    assert!(rx.try_recv().is_err(), "nothing read yet");
    let writer = std::thread::spawn(move || {
        std::fs::write(&path, "a line from the log file\n").unwrap();
    });
    let done = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the log file is read once it is written");
    writer.join().unwrap();
    assert_eq!(app.update(Action::Disk(done)), Redraw::Now);
    let after = screen(&render(&mut app, 120, 40));
    assert!(after.contains("a line from the log file"), "{after}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Scrolled sideways to the last column on a narrow terminal, then given
/// the width (a resize, or zooming the log and back): every column shows
/// again from the first, with no empty columns at the right.
#[test]
fn the_grid_refits_its_columns_to_the_width_after_a_resize_or_a_zoom() {
    let (mut app, _rx) = live(running_story().view());
    let columns = app.grid.columns.len();
    assert!(columns >= 3, "{columns} columns");
    app.update(Action::Resize(80, 30));
    for _ in 0..columns + 2 {
        press(&mut app, KeyCode::Right);
    }
    assert!(app.ui.grid_left > 0, "scrolled sideways on 80 columns");
    app.update(Action::Resize(200, 50));
    assert_eq!(app.ui.grid_left, 0, "all {columns} columns fit on 200");
    // Zooming the log hides the grid; back, it fits the width again.
    app.update(Action::Resize(80, 30));
    for _ in 0..columns + 2 {
        press(&mut app, KeyCode::Right);
    }
    app.update(Action::Resize(200, 50));
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Char('z'));
    press(&mut app, KeyCode::Char('z'));
    assert_eq!(app.ui.grid_left, 0);
    let first = app.grid.columns[0].label().to_string();
    let text = screen(&render(&mut app, 200, 50));
    assert!(
        text.contains(&first),
        "first column {first:?} shown: {text}"
    );
}

/// Forty access lines in a row take one row of the pane, with their count;
/// the lines around them stay as they are.
#[test]
fn the_log_pane_shows_a_line_repeated_in_a_row_once_with_its_count() {
    let (mut app, _rx) = live(running_story().view());
    app.update(Action::Resize(120, 40));
    let plain = |line: &str| log_line(line, LogMark::Plain);
    app.update(plain("before the requests"));
    for _ in 0..40 {
        app.update(plain(
            r#"srv  log_server_r: request: POST /tokenize 127.0.0.1 200"#,
        ));
    }
    app.update(plain("after the requests"));
    app.update(plain("after the requests"));
    let text = screen(&render(&mut app, 120, 40));
    assert_eq!(
        text.matches("POST /tokenize").count(),
        1,
        "one row for the run: {text}"
    );
    assert!(
        text.contains("POST /tokenize 127.0.0.1 200 (×40)"),
        "{text}"
    );
    assert!(text.contains("before the requests"), "{text}");
    assert!(text.contains("after the requests (×2)"), "{text}");
    assert_eq!(text.matches("after the requests").count(), 1, "{text}");
}

#[test]
fn the_log_follows_and_holds_still_when_scrolled_back() {
    let (mut app, _rx) = live(running_story().view());
    app.update(Action::Resize(120, 40));
    let numbered = |i: u32| log_line(format!("line {i}"), LogMark::Plain);
    for i in 0..100 {
        app.update(numbered(i));
    }
    assert_eq!(app.ui.log_back, 0);
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Up);
    press(&mut app, KeyCode::Up);
    assert_eq!(app.ui.log_back, 2);
    let t = render(&mut app, 120, 40);
    let text = screen(&t);
    assert!(
        text.contains("line 97") && !text.contains("line 99"),
        "{text}"
    );
    for i in 100..110 {
        app.update(numbered(i));
    }
    // Still the same lines on screen.
    assert_eq!(app.ui.log_back, 12);
    press(&mut app, KeyCode::Char('G'));
    assert_eq!(app.ui.log_back, 0);
}

/// What a live log costs the terminal: a server writing a few lines a
/// second (as a real one does at low load) shifts the pane each second,
/// and lines alike in shape, as a server's are, cost about their
/// differences, not the whole pane.
#[test]
fn a_slow_live_log_sends_about_its_new_lines() {
    use super::thrifty::{FrameBuffer, Thrifty};
    let (mut app, _rx) = live(running_story().view());
    app.update(Action::Resize(120, 40));
    let bytes = FrameBuffer::default();
    let mut terminal = Terminal::new(Thrifty::new(bytes.clone())).expect("terminal");
    let mut t = app.now.unix_ms();
    let mut sent = Vec::new();
    for i in 0..90u32 {
        for k in 0..3 {
            app.update(log_line(
                format!(
                    "[2025-06-01 10:{:02}:{:02}] Decode batch. #running-req: {k}, #token: {i}",
                    i / 60,
                    i % 60
                ),
                LogMark::Plain,
            ));
        }
        t += 1000;
        app.update(Action::Tick(Timestamp::from_unix_ms(t)));
        terminal.draw(|f| super::draw::draw(f, &app)).expect("draw");
        sent.push(std::mem::take(&mut *bytes.0.borrow_mut()).len());
    }
    // After the pane has filled: 60 seconds, 180 lines of ~60 characters.
    let steady: usize = sent[30..].iter().sum();
    let per_line = steady / 180;
    assert!(per_line < 120, "{per_line} bytes a line ({sent:?})");
}

/// The log's search acts as less's: `?` back from the bottom of the view,
/// `/` on from its top, `n` again the same way, `N` the other; the match is
/// the top line with what follows it below; a stale "not found" goes with
/// the next match; Esc ends the search; `?` outside the log is the help.
#[test]
fn the_log_search_acts_as_in_less() {
    let (mut app, _rx) = live(running_story().view());
    app.update(Action::Resize(120, 40));
    for i in 0..200 {
        app.update(log_line(format!("line {i}"), LogMark::Plain));
    }
    // Outside the log `?` is the help.
    press_mod(&mut app, KeyCode::Char('?'), KeyModifiers::SHIFT);
    assert!(matches!(app.ui.overlay, Overlay::Help { .. }));
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Tab);
    assert_eq!(app.ui.focus, crate::tui::ui::Focus::Log);
    let ask = |app: &mut App, slash: char, q: &str| {
        press_mod(app, KeyCode::Char(slash), KeyModifiers::SHIFT);
        for c in q.chars() {
            press(app, KeyCode::Char(c));
        }
        press(app, KeyCode::Enter);
    };
    // The rows of the log pane, top to bottom, as drawn.
    let log_rows = |app: &mut App| -> Vec<String> {
        screen(&render(app, 120, 40))
            .lines()
            .filter_map(|l| l.split("│line ").nth(1))
            .map(|rest| {
                rest.split(|c: char| !c.is_ascii_digit())
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .collect()
    };
    // `?` from the bottom (line 199) back: 149 is the newest match; it is
    // the top row, the lines after it below.
    ask(&mut app, '?', "line 14");
    let rows = log_rows(&mut app);
    assert_eq!(rows.first().map(String::as_str), Some("149"), "{rows:?}");
    assert_eq!(rows.get(1).map(String::as_str), Some("150"), "{rows:?}");
    assert!(rows.len() > 5, "{rows:?}");
    let text = screen(&render(&mut app, 120, 40));
    assert!(
        text.contains("?line 14") && text.contains("n  older"),
        "{text}"
    );
    // n: further back; N: the other way.
    press(&mut app, KeyCode::Char('n'));
    assert_eq!(log_rows(&mut app).first().map(String::as_str), Some("148"));
    press(&mut app, KeyCode::Enter);
    assert_eq!(log_rows(&mut app).first().map(String::as_str), Some("147"));
    press_mod(&mut app, KeyCode::Char('N'), KeyModifiers::SHIFT);
    press_mod(&mut app, KeyCode::Char('N'), KeyModifiers::SHIFT);
    assert_eq!(log_rows(&mut app).first().map(String::as_str), Some("149"));
    // Past the last match: said; the view stays.
    press_mod(&mut app, KeyCode::Char('N'), KeyModifiers::SHIFT);
    assert!(app
        .ui
        .flash
        .as_ref()
        .is_some_and(|f| f.text.contains("not found further on")));
    assert_eq!(log_rows(&mut app).first().map(String::as_str), Some("149"));
    // Lines arriving keep the view (and the match) still.
    for i in 200..210 {
        app.update(log_line(format!("line {i}"), LogMark::Plain));
    }
    assert_eq!(log_rows(&mut app).first().map(String::as_str), Some("149"));
    // The next match makes the "not found" stale: it goes.
    press(&mut app, KeyCode::Char('n'));
    assert_eq!(log_rows(&mut app).first().map(String::as_str), Some("148"));
    assert!(app.ui.flash.is_none(), "{:?}", app.ui.flash);
    // `/` searches on from the top of the view: the match on top first.
    press(&mut app, KeyCode::Esc);
    assert!(!app.ui.searching);
    ask(&mut app, '/', "line 14");
    assert_eq!(log_rows(&mut app).first().map(String::as_str), Some("148"));
    press(&mut app, KeyCode::Char('n'));
    assert_eq!(log_rows(&mut app).first().map(String::as_str), Some("149"));
    let text = screen(&render(&mut app, 120, 40));
    assert!(
        text.contains("/line 14") && text.contains("n  newer"),
        "{text}"
    );
    // From the oldest line on, the first match is line 14.
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Char('g'));
    ask(&mut app, '/', "line 14");
    assert_eq!(log_rows(&mut app).first().map(String::as_str), Some("14"));
    // At the newest lines no match lies further on.
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Char('G'));
    ask(&mut app, '/', "line 14");
    assert!(app
        .ui
        .flash
        .as_ref()
        .is_some_and(|f| f.text.contains("not found further on")));
    // Esc ends the search: n is the skip key again, Enter in the log opens nothing.
    press(&mut app, KeyCode::Esc);
    assert!(!app.ui.searching);
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.ui.overlay, Overlay::None);
}

/// A search of a log with no line yet finds nothing and says so.
#[test]
fn a_search_of_an_empty_log_says_not_found() {
    let mut view = running_story().view();
    view.log = Default::default();
    let (mut app, _rx) = live(view);
    app.update(Action::Resize(120, 40));
    press(&mut app, KeyCode::Tab);
    for slash in ['/', '?'] {
        press_mod(&mut app, KeyCode::Char(slash), KeyModifiers::SHIFT);
        press(&mut app, KeyCode::Char('x'));
        press(&mut app, KeyCode::Enter);
        assert!(app
            .ui
            .flash
            .as_ref()
            .is_some_and(|f| f.text.contains("not found")));
        press(&mut app, KeyCode::Esc);
    }
}

#[test]
fn the_grid_scrolls_to_keep_the_selection_in_view() {
    let (mut app, _rx) = live(crash_story().view());
    app.ui.track_running = false;
    app.update(Action::Resize(80, 20));
    press(&mut app, KeyCode::Char('G'));
    let t = render(&mut app, 80, 20);
    let text = screen(&t);
    assert!(text.contains("tp4-ddtree-b4"), "{text}");
    for _ in 0..10 {
        press(&mut app, KeyCode::Right);
    }
    let t = render(&mut app, 80, 20);
    let text = screen(&t);
    assert!(text.contains("32760 c1"), "{text}");
    assert!(text.contains("columns"), "{text}");
}

#[test]
fn theme_and_value_keys_cycle() {
    let (mut app, _rx) = live(crash_story().view());
    let first = app.theme().name.clone();
    press(&mut app, KeyCode::Char('t'));
    assert_ne!(app.theme().name, first);
    press(&mut app, KeyCode::Char('v'));
    press(&mut app, KeyCode::Char('v'));
    let t = render(&mut app, 120, 40);
    let text = screen(&t);
    assert!(text.contains("speedup vs the phase baseline"), "{text}");
    assert!(text.contains("1.00x"), "{text}");
    assert!(text.contains("1.90x"), "{text}");
}

#[test]
fn log_lines_and_gpu_samples_wait_for_the_tick() {
    let (mut app, _rx) = live(running_story().view());
    app.update(Action::Resize(120, 40));
    let line = log_line("a brand new line", LogMark::Plain);
    assert_eq!(app.update(line), Redraw::No);
    assert_eq!(
        app.update(Action::Event(gpu_event(8, &[0], 99))),
        Redraw::No
    );
    let t = draw_as_is(&app, 120, 40);
    assert!(!screen(&t).contains("a brand new line"));
    // A finished cell is drawn at once (the log pane stays as it was).
    let cells = running_story().cells("tp1-dflash");
    let mut s = Story::new();
    s.t = 200;
    s.finish(&cells[2], Status::Ok, Some(metrics(99.0, 50.0, None)), None);
    let ev = s.events.pop().unwrap();
    assert_eq!(app.update(Action::Event(ev)), Redraw::Now);
    assert!(!screen(&draw_as_is(&app, 120, 40)).contains("a brand new line"));
    // The tick brings the log pane up to date.
    let later = Timestamp::from_unix_ms(app.now.unix_ms() + 1000);
    assert_eq!(app.update(Action::Tick(later)), Redraw::Soon);
    assert!(screen(&draw_as_is(&app, 120, 40)).contains("a brand new line"));
}

/// More lines at a tick than a glance takes in wait one more tick (the
/// pane is a sample of a chatty log either way, at half the bytes); a few
/// lines, or a failure line among many, show at the next tick.
#[test]
fn a_chatty_log_is_brought_up_to_date_every_other_tick() {
    let (mut app, _rx) = live(running_story().view());
    app.update(Action::Resize(120, 40));
    let mut t = app.now.unix_ms();
    let mut tick = |app: &mut App| {
        t += 1000;
        app.update(Action::Tick(Timestamp::from_unix_ms(t)));
        screen(&draw_as_is(app, 120, 40))
    };
    for i in 0..40 {
        app.update(log_line(format!("chatty {i}"), LogMark::Plain));
    }
    assert!(!tick(&mut app).contains("chatty 39"), "one tick waited");
    assert!(tick(&mut app).contains("chatty 39"), "shown the next");
    app.update(log_line("a few more", LogMark::Plain));
    assert!(tick(&mut app).contains("a few more"), "a few lines at once");
    for i in 0..40 {
        app.update(log_line(format!("again {i}"), LogMark::Plain));
    }
    app.update(log_line(
        "RuntimeError: CUDA error: an illegal instruction was encountered",
        LogMark::Failure,
    ));
    assert!(
        tick(&mut app).contains("an illegal instruction"),
        "a failure line at once"
    );
}

#[test]
fn a_crash_and_an_overflow_are_drawn_apart() {
    let (mut app, _rx) = live(crash_story().view());
    let t = render(&mut app, 200, 50);
    let buf = t.backend().buffer();
    // The first grid cell showing each badge, and its style.
    let style_of = |text: &str| {
        let area = buf.area;
        for y in 0..area.height {
            let row: String = (0..area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect();
            if !(row.starts_with("│ tp1-") || row.starts_with("│▶tp1-")) {
                continue;
            }
            if let Some(i) = row.find(text) {
                let x = row[..i].chars().count() as u16;
                let c = &buf[(x, y)];
                return (c.fg, c.bg);
            }
        }
        panic!("{text} is not on the screen:\n{}", screen(&t));
    };
    let theme = Theme::dark();
    let crash = style_of("ILL-INSTR");
    assert_eq!(crash.1, theme.failed.bg.unwrap());
    // At 200 columns the overflow shows its numbers, in the other colour.
    let overflow = style_of("400 32,808>32,768");
    assert_eq!(overflow.1, theme.failed_other.bg.unwrap());
    assert_ne!(crash, overflow);
}

#[test]
fn a_keys_file_that_takes_a_key_from_another_action_says_so_at_start() {
    let keymap = Keymap::default()
        .with_overrides("pause = \"x\"\n", std::path::Path::new("keys.toml"))
        .unwrap();
    let (tx, _rx) = mpsc::channel(4);
    let app = App::new(
        running_story().view(),
        Mode::Live { commands: tx },
        PathBuf::from("runs/demo"),
        keymap,
        Theme::dark(),
        look(),
    );
    let f = app.ui.flash.clone().expect("a message");
    assert_eq!(
        f.text,
        "keys.toml: x now does pause, not exclude (exclude has no key left)"
    );
}

#[test]
fn every_line_of_long_wrapped_evidence_can_be_scrolled_to() {
    let mut view = crash_story().view();
    let id = "tp1-ddtree-b8/code-ctx1024-c1".to_string();
    let mut r = view.records[&id].clone();
    if let Some(f) = r.failure.as_mut() {
        f.evidence = (0..30)
            .map(|i| {
                format!(
                    "frame #{i}: {}",
                    "c10d::ProcessGroupNCCL::watchdogHandler() ".repeat(4)
                )
            })
            .chain(["the cause, on the last line".to_string()])
            .collect();
    }
    r.finished_at = view.latest_at;
    view.records.insert(id, r);
    let (mut app, _rx) = live(view);
    press(&mut app, KeyCode::Char('g'));
    for _ in 0..3 {
        press(&mut app, KeyCode::Down);
    }
    press(&mut app, KeyCode::Enter);
    let text = screen(&render(&mut app, 80, 24));
    assert!(text.contains("more below"), "{text}");
    assert!(!text.contains("the cause, on the last line"), "{text}");
    press(&mut app, KeyCode::End);
    let text = screen(&render(&mut app, 80, 24));
    assert!(text.contains("the cause, on the last line"), "{text}");
    assert!(!text.contains("more below"), "{text}");
}

/// The config ids the grid shows, top to bottom.
fn shown_ids(app: &App) -> Vec<String> {
    app.grid
        .shown_configs()
        .map(|c| app.grid.configs[c].id.clone())
        .collect()
}

#[test]
fn slash_in_the_grid_filters_configs_by_name_and_esc_shows_all() {
    let (mut app, _rx) = live(crash_story().view());
    app.update(Action::Resize(120, 40));
    press(&mut app, KeyCode::Char('/'));
    assert!(matches!(app.ui.overlay, Overlay::Filter(_)));
    for c in "ddtree".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    // Applied as typed; the phases with no match are gone.
    assert_eq!(
        shown_ids(&app),
        [
            "tp1-ddtree-b4",
            "tp1-ddtree-b8",
            "tp1-ddtree-b12",
            "tp4-ddtree-b4"
        ]
    );
    // `n` is text here, not "skip cell".
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.ui.overlay, Overlay::None);
    let text = screen(&render(&mut app, 120, 40));
    assert!(
        text.contains("\"ddtree\"") && text.contains("4 of 8 configs"),
        "{text}"
    );
    assert!(!text.contains("tp1-dflash "), "{text}");
    // The selection moves through the shown configs only.
    press(&mut app, KeyCode::Char('g'));
    press(&mut app, KeyCode::Down);
    assert_eq!(app.grid.configs[app.ui.sel_config].id, "tp1-ddtree-b8");
    // `/` again starts from the filter; Esc drops it.
    press(&mut app, KeyCode::Char('/'));
    assert_eq!(app.ui.overlay, Overlay::Filter("ddtree".into()));
    press(&mut app, KeyCode::Esc);
    assert_eq!(shown_ids(&app).len(), 8);
    // With the log focused, `/` searches the log as before.
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Char('/'));
    assert!(matches!(app.ui.overlay, Overlay::Search(_)));
}

#[test]
fn grid_views_failures_only_one_phase_sorted_and_at_p99() {
    let (mut app, _rx) = live(crash_story().view());
    app.update(Action::Resize(120, 40));
    press(&mut app, KeyCode::Char('F'));
    // Every config run so far has a failed cell (the long prompt's 400);
    // those not run yet have none.
    assert_eq!(
        shown_ids(&app),
        [
            "tp1-baseline",
            "tp1-dflash",
            "tp1-ddtree-b4",
            "tp1-ddtree-b8"
        ]
    );
    assert!(screen(&render(&mut app, 120, 40)).contains("failures only"));
    press(&mut app, KeyCode::Char('F'));
    press(&mut app, KeyCode::Char(']'));
    assert_eq!(app.ui.arrange.phase.as_deref(), Some("tp1"));
    assert!(shown_ids(&app).iter().all(|c| c.starts_with("tp1-")));
    press(&mut app, KeyCode::Char(']'));
    assert!(shown_ids(&app).iter().all(|c| c.starts_with("tp4-")));
    press(&mut app, KeyCode::Char(']'));
    assert_eq!(app.ui.arrange.phase, None);
    press(&mut app, KeyCode::Char('['));
    assert_eq!(app.ui.arrange.phase.as_deref(), Some("tp4"));
    press(&mut app, KeyCode::Char(']'));

    // Sort by the first column: fastest first, the crashed config after
    // every value, configs with nothing yet last.
    press(&mut app, KeyCode::Char('g'));
    press(&mut app, KeyCode::Char('o'));
    let tp1: Vec<String> = shown_ids(&app).into_iter().take(5).collect();
    assert_eq!(
        tp1,
        [
            "tp1-ddtree-b4",
            "tp1-dflash",
            "tp1-baseline",
            "tp1-ddtree-b8",
            "tp1-ddtree-b12"
        ]
    );
    let text = screen(&render(&mut app, 120, 40));
    assert!(text.contains("sorted by code 1k c1"), "{text}");
    press(&mut app, KeyCode::Char('o'));
    assert_eq!(shown_ids(&app)[0], "tp1-baseline");

    // `%`: latency values at p90, then p99; output tok/s has no p99.
    press(&mut app, KeyCode::Char('%'));
    press(&mut app, KeyCode::Char('%'));
    assert_eq!(app.ui.stat, "p99");
    assert_eq!(app.value_mode().title(), "output tok/s");
    while app.ui.value.title() != "TTFT p50" {
        press(&mut app, KeyCode::Char('v'));
    }
    assert_eq!(app.value_mode().title(), "TTFT p99");
    assert!(screen(&render(&mut app, 120, 40)).contains("Results · TTFT p99"));
}

#[test]
fn zoom_gives_the_focused_pane_the_screen_and_long_log_lines_wrap() {
    let mut s = crash_story();
    let long = format!("{}THE-END", "x".repeat(150));
    s.log("tp1-ddtree-b8", &long, LogMark::Plain);
    let (mut app, _rx) = live(s.view());
    let text = screen(&render(&mut app, 120, 40));
    assert!(text.contains("THE-END"), "a long line wraps:\n{text}");
    press(&mut app, KeyCode::Char('w'));
    assert!(!screen(&render(&mut app, 120, 40)).contains("THE-END"));
    press(&mut app, KeyCode::Char('w'));

    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Char('z'));
    let text = screen(&render(&mut app, 80, 24));
    // The log has the body: no grid, no GPUs, and the crash lines are whole.
    assert!(!text.contains("Results"), "{text}");
    assert!(!text.contains("GPUs"), "{text}");
    assert!(text.contains("Server log"), "{text}");
    assert!(
        text.contains("illegal instruction was encountered"),
        "{text}"
    );
    press(&mut app, KeyCode::Char('z'));
    // Tab goes on to the GPUs, then back to the grid.
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Char('z'));
    let text = screen(&render(&mut app, 80, 24));
    assert!(
        text.contains("Results") && !text.contains("Server log"),
        "{text}"
    );
    // Every config fits when the grid has the screen.
    assert!(text.contains("tp4-ddtree-b4"), "{text}");
}

#[test]
fn an_attached_view_says_so_counts_viewers_and_names_who_paused() {
    let mut s = running_story();
    let at = Timestamp::from_unix_ms(
        s.events
            .iter()
            .rev()
            .find_map(|e| e.at())
            .unwrap()
            .unix_ms()
            + 10,
    );
    s.events.push(Event::Viewers { count: 2 });
    s.events.push(Event::Action {
        at,
        action: "toggle_pause".into(),
        target: None,
        source: "viewer 1".into(),
    });
    s.events.push(Event::Paused { at });
    let (tx, _rx) = mpsc::channel(4);
    let mut app = App::new(
        s.view(),
        Mode::Attached { commands: tx },
        PathBuf::from("runs/demo"),
        Keymap::default(),
        Theme::dark(),
        look(),
    );
    let text = screen(&render(&mut app, 120, 40));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("ATTACHED · 2 viewers"), "{}", lines[0]);
    assert!(lines[0].contains("by another viewer"), "{}", lines[0]);
    // The first hint is how to leave without stopping the sweep.
    let hints = lines.last().unwrap();
    assert!(
        hints.trim_start_matches(['"', ' ']).starts_with("d "),
        "{hints}"
    );
    assert!(hints.contains("detach"), "{hints}");
    // This viewer's own pause reads as "you"; the sweep's dashboard by name.
    assert_eq!(app.who(&app.own_source()), "you");
    assert_eq!(app.who("key"), "the sweep's own dashboard");
    assert_eq!(app.who("script"), "a script (attach --send)");
    // The sweep's own dashboard shows who is watching it.
    let (mut own, _rx) = live(s.view());
    let text = screen(&render(&mut own, 120, 40));
    assert!(
        text.lines().next().unwrap().contains("2 attached"),
        "{text}"
    );
    assert!(!text.lines().last().unwrap().contains("detach"), "{text}");
}

#[test]
fn with_the_mouse_a_click_selects_a_cell_and_the_wheel_scrolls() {
    use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    let (mut app, _rx) = live(crash_story().view());
    app.update(Action::Resize(120, 40));
    let mouse = |app: &mut App, kind, column, row| {
        let ev = MouseEvent {
            kind,
            column,
            row,
            modifiers: KeyModifiers::NONE,
        };
        if let Some(a) = app.on_mouse(&ev) {
            app.update(a);
        }
    };
    // Find tp1-dflash's row and the `8k c1` column on the screen.
    let text = screen(&render(&mut app, 120, 40));
    let lines: Vec<&str> = text.lines().collect();
    let row = lines
        .iter()
        .position(|l| l.contains("│ tp1-dflash "))
        .unwrap() as u16;
    let heading = lines.iter().position(|l| l.contains("8k c1")).unwrap();
    let column = lines[heading].find("8k c1").unwrap() as u16;
    // (Lines are quoted: one character before the screen's first column.)
    mouse(
        &mut app,
        MouseEventKind::Down(MouseButton::Left),
        column,
        row,
    );
    assert_eq!(app.grid.configs[app.ui.sel_config].id, "tp1-dflash");
    assert_eq!(app.ui.sel_col, Some(2));
    assert_eq!(app.ui.focus, super::ui::Focus::Grid);
    // A click on a row label selects the whole config.
    mouse(&mut app, MouseEventKind::Down(MouseButton::Left), 4, row);
    assert_eq!(app.ui.sel_col, None);
    // The wheel over the log scrolls it back (the whole log, once Esc has
    // put the selection back on what runs); a click there focuses it.
    press(&mut app, KeyCode::Esc);
    let log_row = lines.iter().position(|l| l.contains("Server log")).unwrap() as u16 + 2;
    mouse(&mut app, MouseEventKind::ScrollUp, 100, log_row);
    assert_eq!(app.ui.log_back, 3);
    assert_eq!(app.ui.focus, super::ui::Focus::Grid);
    mouse(
        &mut app,
        MouseEventKind::Down(MouseButton::Left),
        100,
        log_row,
    );
    assert_eq!(app.ui.focus, super::ui::Focus::Log);
}

#[test]
fn the_gpu_panel_zoomed_draws_a_utilisation_chart_per_gpu() {
    let mut s = crash_story();
    for k in 0..30 {
        s.events.push(gpu_event(2, &[0], k));
    }
    let (mut app, _rx) = live(s.view());
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Tab);
    assert_eq!(app.ui.focus, super::ui::Focus::Gpu);
    press(&mut app, KeyCode::Char('z'));
    let text = screen(&render(&mut app, 80, 24));
    assert!(
        !text.contains("Results") && !text.contains("Server log"),
        "{text}"
    );
    assert!(text.contains("100%") && text.contains("  0%"), "{text}");
    // GPU 0 is busy: its chart has full bars; GPU 1 idle has none.
    assert!(text.contains("█"), "{text}");
}

#[test]
fn c_charts_the_selected_workload_across_the_phase() {
    let (mut app, _rx) = live(crash_story().view());
    // tp1-dflash, first column (code 1k c1).
    press(&mut app, KeyCode::Char('g'));
    press(&mut app, KeyCode::Down);
    press(&mut app, KeyCode::Char('c'));
    assert_eq!(app.ui.overlay, Overlay::Chart);
    let chart = app
        .grid
        .chart(&app.view, app.value_mode(), app.ui.sel_config, 0)
        .unwrap();
    assert_eq!(chart.x_label, "concurrency");
    assert_eq!(chart.xs, vec![1.0, 4.0]);
    let dflash = chart
        .series
        .iter()
        .find(|s| s.name == "tp1-dflash")
        .unwrap();
    let want = [(1.0, 131.2), (4.0, 482.4)];
    assert_eq!(dflash.points.len(), 2);
    for (p, w) in dflash.points.iter().zip(want) {
        assert!(
            p.0 == w.0 && (p.1 - w.1).abs() < 1e-6,
            "{:?}",
            dflash.points
        );
    }
    // The crashed config has no points; the baseline is marked.
    assert!(chart
        .series
        .iter()
        .find(|s| s.name == "tp1-ddtree-b8")
        .unwrap()
        .points
        .is_empty());
    assert!(chart
        .series
        .iter()
        .any(|s| s.name == "tp1-baseline" && s.baseline));
    for (w, h) in [(120, 40), (80, 24)] {
        let text = screen(&render(&mut app, w, h));
        assert!(
            text.contains("output tok/s · code 1k · phase tp1"),
            "{text}"
        );
        assert!(text.contains("tp1-baseline (baseline)"), "{text}");
        assert!(text.contains("concurrency"), "{text}");
    }
    // `v` changes the value in place: the speedup of the baseline is 1.
    press(&mut app, KeyCode::Char('v'));
    press(&mut app, KeyCode::Char('v'));
    assert_eq!(app.ui.overlay, Overlay::Chart);
    let chart = app
        .grid
        .chart(&app.view, app.value_mode(), app.ui.sel_config, 0)
        .unwrap();
    let base = chart.series.iter().find(|s| s.baseline).unwrap();
    assert!(
        base.points.iter().all(|p| (p.1 - 1.0).abs() < 1e-9),
        "{chart:?}"
    );
    // Any other key closes it.
    press(&mut app, KeyCode::Char('x'));
    assert_eq!(app.ui.overlay, Overlay::None);
    // In ASCII mode the chart is ASCII too.
    let (mut ascii, _rx2) = live_ascii(crash_story().view());
    press(&mut ascii, KeyCode::Char('g'));
    press(&mut ascii, KeyCode::Char('c'));
    let text = screen(&render(&mut ascii, 80, 24));
    assert!(text.is_ascii(), "{text}");
    // Each series its own marker, named in the legend, drawn at its points.
    for (marker, name) in [
        ("o", "tp1-baseline (baseline)"),
        ("+", "tp1-dflash"),
        ("x", "tp1-ddtree-b4"),
    ] {
        assert!(text.contains(&format!(" {marker} {name}")), "{text}");
        let plotted = text
            .lines()
            .filter(|l| !l.contains(name))
            .any(|l| l.contains(marker));
        assert!(plotted, "{marker} not plotted: {text}");
    }
}

#[test]
fn a_speedup_inside_the_measured_spread_is_marked_as_noise() {
    let mut view = crash_story().view();
    let id = "tp1-dflash/code-ctx1024-c1".to_string();
    let mut r = view.records[&id].clone();
    r.spread = Some(crate::model::Spread {
        n: 3,
        median: 131.2,
        min: 90.0,
        max: 180.0,
        spread_pct: 70.0,
    });
    view.records.insert(id, r);
    let (mut app, _rx) = live(view);
    while !matches!(app.ui.value, crate::view::grid::ValueMode::Speedup(_)) {
        press(&mut app, KeyCode::Char('v'));
    }
    let dflash = app.grid.config_index("tp1-dflash").unwrap();
    let b4 = app.grid.config_index("tp1-ddtree-b4").unwrap();
    let mode = app.value_mode();
    // 1.60x against the baseline, inside a 70 % spread: not a speedup one can claim.
    match app.grid.cell(&app.view, mode, dflash, 0) {
        crate::view::grid::CellView::Value { text, tone } => {
            assert_eq!(text, "≈1.60x");
            assert_eq!(tone, crate::view::grid::Tone::Plain);
        }
        other => panic!("{other:?}"),
    }
    // Without repetitions nothing changes.
    match app.grid.cell(&app.view, mode, b4, 0) {
        crate::view::grid::CellView::Value { text, .. } => assert_eq!(text, "1.90x"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn configs_side_by_side_are_all_shown_and_a_skip_goes_to_the_selected_one() {
    let mut s = Story::new();
    s.gpus(8, &[0, 1, 2]);
    // Three TP1 configs start, each on a GPU of its own, and each runs a cell.
    for (gpu, id) in ["tp1-baseline", "tp1-dflash", "tp1-ddtree-b4"]
        .iter()
        .enumerate()
    {
        s.config(id);
        if let Some(Event::ConfigStarting { gpus, .. }) = s
            .events
            .iter_mut()
            .rev()
            .find(|e| matches!(e, Event::ConfigStarting { .. }))
        {
            *gpus = vec![gpu as u32];
        }
        let first = s.cells(id)[0].clone();
        s.start(&first);
        s.log(id, &format!("Decode batch of {id}"), LogMark::Plain);
    }
    let view = s.view();
    assert_eq!(view.live_configs().count(), 3);
    assert_eq!(view.running.len(), 3);
    assert_eq!(view.owner_of(1), Some("tp1-dflash"));
    let (mut app, mut rx) = live(view);
    let text = screen(&render(&mut app, 160, 45));
    assert!(text.contains("3 configs side by side"), "{text}");
    // Every running config's row is marked, each GPU says whose it is, and
    // each log line whose it is.
    let marked = text
        .lines()
        .filter(|l| l.contains('▶') && l.contains("tp1-"))
        .count();
    assert!(marked >= 3, "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("tp1-ddtree-b4") && l.contains('2') && l.contains('%')),
        "GPU 2's owner:\n{text}"
    );
    assert!(
        text.contains("tp1-dflash · Decode batch of tp1-dflash"),
        "{text}"
    );
    // A skip acts on the selected config when it runs.
    press(&mut app, KeyCode::Char('g'));
    press(&mut app, KeyCode::Down);
    assert_eq!(app.grid.configs[app.ui.sel_config].id, "tp1-dflash");
    press(&mut app, KeyCode::Char('s'));
    // The question names the config the skip goes to.
    assert!(
        matches!(&app.ui.overlay, Overlay::Confirm { what, .. } if what == "skip the rest of tp1-dflash"),
        "{:?}",
        app.ui.overlay
    );
    press(&mut app, KeyCode::Char('y'));
    assert_eq!(
        rx.try_recv().map(|r| r.command).ok(),
        Some(Command::SkipConfig {
            config: Some("tp1-dflash".into())
        })
    );
    assert!(app
        .ui
        .flash
        .as_ref()
        .is_some_and(|f| f.text.contains("tp1-dflash")));
}

#[test]
fn after_the_end_r_and_shift_r_ask_then_run_the_retry() {
    let story = crash_story();
    let failed: Vec<String> = {
        let v = story.view();
        let mut f: Vec<String> = v
            .records
            .values()
            .filter(|r| r.status == Status::Failed)
            .map(|r| r.cell.clone())
            .collect();
        f.sort();
        f
    };
    assert!(failed.len() > 1);
    let open = || {
        App::new(
            story.view(),
            Mode::ReadOnly,
            PathBuf::from("runs/demo"),
            Keymap::default(),
            Theme::dark(),
            look(),
        )
    };
    let asked = |app: &App| match &app.ui.overlay {
        Overlay::Confirm { what, .. } => what.clone(),
        other => panic!("no question: {other:?}"),
    };
    // `r` on the crashed config's row: its failed cells, named and counted.
    let mut app = open();
    press(&mut app, KeyCode::Char('g'));
    for _ in 0..3 {
        press(&mut app, KeyCode::Down);
    }
    assert_eq!(app.grid.configs[app.ui.sel_config].id, "tp1-ddtree-b8");
    for _ in 0..8 {
        press(&mut app, KeyCode::Char('h'));
    }
    assert_eq!(app.ui.sel_col, None);
    press(&mut app, KeyCode::Char('r'));
    assert_eq!(
        asked(&app),
        format!(
            "retry the {} failed cells of tp1-ddtree-b8 on a fresh server",
            failed
                .iter()
                .filter(|c| c.starts_with("tp1-ddtree-b8/"))
                .count()
        )
    );
    let text = screen(&render(&mut app, 120, 40));
    assert!(text.contains("failed cells of tp1-ddtree-b8"), "{text}");
    // Any other key is no: nothing runs.
    press(&mut app, KeyCode::Char('j'));
    assert_eq!(app.ui.overlay, Overlay::None);
    assert!(!app.exit && app.then_retry.is_none());
    // `R`: every failed cell; yes leaves the view with the retry to run.
    press(&mut app, KeyCode::Char('R'));
    assert_eq!(
        asked(&app),
        format!(
            "retry all {} failed cells on fresh servers ({} configs)",
            failed.len(),
            story
                .view()
                .records
                .values()
                .filter(|r| r.status == Status::Failed)
                .map(|r| r.config.clone())
                .collect::<std::collections::BTreeSet<_>>()
                .len()
        )
    );
    press(&mut app, KeyCode::Char('y'));
    assert!(app.exit);
    assert_eq!(app.then_retry, Some(vec!["failed".to_string()]));
    // `r` on one failed cell: that cell.
    let mut app = open();
    press(&mut app, KeyCode::Char('g'));
    for _ in 0..3 {
        press(&mut app, KeyCode::Down);
    }
    press(&mut app, KeyCode::Right);
    let cell = app.selected_record().map(|r| r.cell.clone()).unwrap();
    press(&mut app, KeyCode::Char('r'));
    assert_eq!(asked(&app), format!("retry {cell} on a fresh server"));
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.then_retry, Some(vec![cell]));
    // On an ok cell: refused, no question.
    let mut app = open();
    press(&mut app, KeyCode::Char('g'));
    press(&mut app, KeyCode::Char('r'));
    assert_eq!(app.ui.overlay, Overlay::None);
    assert!(!app.exit);
    assert_eq!(app.ui.flash.as_ref().map(|f| f.level), Some(Level::Warn));

    // The sweep's own dashboard once it has ended: the same.
    let (mut app, _rx) = live(story.view());
    app.update(Action::EngineDone);
    press(&mut app, KeyCode::Char('R'));
    press(&mut app, KeyCode::Char('y'));
    assert_eq!(app.then_retry, Some(vec!["failed".to_string()]));

    // While it runs, `R` queues every failed cell for the end of the sweep.
    let (mut app, mut rx) = live(story.view());
    press(&mut app, KeyCode::Char('R'));
    let mut queued = Vec::new();
    while let Ok(r) = rx.try_recv() {
        match r.command {
            Command::Retry { target } => queued.push(target),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(queued, failed);
    assert!(!app.exit && app.then_retry.is_none());
}

/// Server log lines reach the view a batch at a time, not one wake-up each;
/// a failure line goes at once with those before it.
#[tokio::test(start_paused = true)]
async fn log_lines_reach_the_view_in_batches_and_a_failure_at_once() {
    use crate::tui::terminal::Input;
    let (logs, rx_logs) = tokio::sync::broadcast::channel(64);
    let (tx, rx) = std::sync::mpsc::sync_channel(64);
    tokio::spawn(super::forward_logs(rx_logs, tx));
    let line = |text: &str, mark| Event::Log {
        config: "c".into(),
        line: text.into(),
        mark,
    };
    let lines_of = |input: Input| match input {
        Input::Logs(batch) => batch
            .iter()
            .map(|e| match e {
                Event::Log { line, .. } => line.clone(),
                _ => String::new(),
            })
            .collect::<Vec<_>>(),
        _ => panic!("not a batch of log lines"),
    };
    for i in 0..5 {
        logs.send(line(&format!("plain {i}"), LogMark::Plain))
            .unwrap();
    }
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(rx.try_recv().is_err(), "plain lines wait for their batch");
    tokio::time::sleep(super::LOG_BATCH_WAIT).await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        lines_of(rx.try_recv().unwrap()),
        ["plain 0", "plain 1", "plain 2", "plain 3", "plain 4"]
    );
    logs.send(line("plain 5", LogMark::Plain)).unwrap();
    logs.send(line("CUDA error", LogMark::Failure)).unwrap();
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(lines_of(rx.try_recv().unwrap()), ["plain 5", "CUDA error"]);
}
