//! What the dashboard says must be so: the config the header names, whose
//! log the pane shows, the alert line beside a pause another viewer made,
//! an excluded config's cells once the sweep has ended, and no ETA before
//! there is a pace to give one.

use super::*;

/// The first line of the screen.
fn header(app: &mut App) -> String {
    let text = screen(&render(app, 120, 40));
    text.lines().next().unwrap_or_default().to_string()
}

/// A live app on `dir` (its `logs/` read for a config that does not run).
fn live_in(view: ViewState, dir: PathBuf) -> (App, mpsc::Receiver<Request>) {
    let (tx, rx) = mpsc::channel(16);
    let mut app = App::new(
        view,
        Mode::Live { commands: tx },
        dir,
        Keymap::default(),
        Theme::dark(),
        look(),
    );
    let now = Timestamp::from_unix_ms(app.view.latest_at.unix_ms() + 2000);
    app.update(Action::Tick(now));
    (app, rx)
}

/// The demo run to its end with tp4-dflash crashed, then `run --resume DIR
/// --retry failed` running tp4-dflash again.
fn retry_story() -> Story {
    let mut s = crash_story();
    s.run_ok("tp1-ddtree-b12", 1.7, Some(4.0))
        .run_ok("tp4-baseline", 3.1, None)
        .run_crash("tp4-dflash")
        .run_ok("tp4-ddtree-b4", 4.0, Some(4.2));
    let t = s.tick();
    s.events.push(Event::SweepFinished {
        at: t,
        ok: 35,
        failed: 21,
        skipped: 0,
    });
    let t = s.tick();
    s.events.push(Event::SweepStarted {
        at: t,
        plan: s.plan.name.clone(),
        run_dir: "runs/demo-20250601-100000".into(),
        configs: s.plan.configs.len(),
        cells: s.plan.cells.len(),
        already_done: 49,
    });
    s.events.push(Event::Action {
        at: t,
        action: "retry".into(),
        target: Some("tp4-dflash".into()),
        source: "command line (--retry failed)".into(),
    });
    s
}

#[test]
fn a_retry_counts_its_config_in_the_plan_and_the_ended_sweep_names_none() {
    let mut s = retry_story();
    s.config("tp4-dflash");
    let first = s.cells("tp4-dflash")[0].clone();
    s.start(&first);
    let (mut app, _rx) = live(s.view());
    let during = header(&mut app);
    assert!(during.contains("config 7/8 tp4-dflash"), "{during}");
    // The retry runs through; the sweep finishes.
    let mut s = retry_story();
    s.run_ok("tp4-dflash", 3.3, Some(3.9));
    let t = s.tick();
    s.events.push(Event::SweepFinished {
        at: t,
        ok: 42,
        failed: 14,
        skipped: 0,
    });
    let (mut app, _rx) = live(s.view());
    app.update(Action::EngineDone);
    let after = header(&mut app);
    assert!(after.contains(" FINISHED "), "{after}");
    assert!(
        !after.contains("tp4-dflash") && !after.contains("7/8") && !after.contains("phase"),
        "no config runs after the end: {after}"
    );
    assert!(after.contains("8 configs"), "{after}");
}

#[test]
fn a_shards_config_is_counted_in_the_plan_the_grid_shows() {
    // A sweep directory's shard counts its own part of the plan (2 of 3);
    // the view shows the whole plan, where tp4-dflash is 7 of 8.
    let mut s = Story::new();
    let t = s.tick();
    s.events.push(Event::ConfigStarting {
        at: t,
        config: "tp4-dflash".into(),
        phase: "tp4".into(),
        index: 2,
        total: 3,
        command: "sweeptop sim-server --port 41231 --tp 4".into(),
        attempt: 1,
        gpus: vec![0, 1, 2, 3],
    });
    let (mut app, _rx) = live(s.view());
    let h = header(&mut app);
    assert!(h.contains("config 7/8 tp4-dflash"), "{h}");
}

#[test]
fn the_log_pane_shows_the_selected_configs_log_and_says_whose_it_is() {
    let dir = std::env::temp_dir().join(format!("sweeptop-tui-picked-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join(crate::store::LOGS)).unwrap();
    std::fs::write(
        dir.join(crate::store::LOGS).join("tp1-baseline.log"),
        "baseline: a line from its file\n",
    )
    .unwrap();
    let (mut app, _rx) = live_in(running_story().view(), dir.clone());
    let log_title = |app: &mut App| {
        let text = screen(&render(app, 120, 40));
        let line = text
            .lines()
            .find(|l| l.contains("Server log"))
            .unwrap_or_default()
            .to_string();
        (line, text)
    };
    // Nothing selected: the running config, said so.
    let (title, _) = log_title(&mut app);
    assert!(title.contains("tp1-dflash (running)"), "{title}");
    // The baseline selected: its log, read from its file off this thread.
    press(&mut app, KeyCode::Up);
    finish_disk_work(&mut app);
    let (title, text) = log_title(&mut app);
    assert!(title.contains("tp1-baseline (selected)"), "{title}");
    assert!(text.contains("baseline: a line from its file"), "{text}");
    assert!(!text.contains("accept len: 3.40"), "{text}");
    // The running config's new lines do not push it away.
    app.update(Action::Event(Event::Log {
        config: "tp1-dflash".into(),
        line: "dflash: a newer line".into(),
        mark: LogMark::Plain,
    }));
    app.update(Action::Tick(Timestamp::from_unix_ms(
        app.now.unix_ms() + 1000,
    )));
    let (title, text) = log_title(&mut app);
    assert!(title.contains("tp1-baseline (selected)"), "{title}");
    assert!(!text.contains("dflash: a newer line"), "{text}");
    // The running config selected: its own lines, no one else's.
    press(&mut app, KeyCode::Down);
    let (title, text) = log_title(&mut app);
    assert!(title.contains("tp1-dflash (selected)"), "{title}");
    assert!(
        text.contains("dflash: a newer line") && text.contains("accept len: 3.40"),
        "{text}"
    );
    assert!(!text.contains("gen throughput (token/s): 82.00"), "{text}");
    // Esc in the grid: nothing selected, the running config followed again.
    press(&mut app, KeyCode::Esc);
    let (title, _) = log_title(&mut app);
    assert!(title.contains("tp1-dflash (running)"), "{title}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_killed_runs_last_config_is_read_from_its_log_file() {
    // Recorded mid-cell, its server never said stopped: `open` reads its file.
    let dir = std::env::temp_dir().join(format!("sweeptop-tui-killed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join(crate::store::LOGS)).unwrap();
    std::fs::write(
        dir.join(crate::store::LOGS).join("tp1-dflash.log"),
        "dflash: the last line it wrote\n",
    )
    .unwrap();
    let mut app = App::new(
        running_story().view(),
        Mode::ReadOnly,
        dir.clone(),
        Keymap::default(),
        Theme::dark(),
        look(),
    );
    finish_disk_work(&mut app);
    let text = screen(&render(&mut app, 120, 40));
    assert!(text.contains("tp1-dflash (selected)"), "{text}");
    assert!(text.contains("dflash: the last line it wrote"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The events of a pause (or a resume) asked for by `source`.
fn toggled(at: crate::model::Timestamp, source: &str, paused: bool) -> [Event; 2] {
    let action = Event::Action {
        at,
        action: "toggle_pause".into(),
        target: None,
        source: source.into(),
    };
    if paused {
        [action, Event::Paused { at }]
    } else {
        [action, Event::Resumed { at }]
    }
}

#[test]
fn a_pause_by_another_viewer_clears_the_resuming_message() {
    let mut s = running_story();
    let paused = toggled(s.tick(), "key", true);
    s.events.extend(paused);
    let (mut app, _rx) = live(s.view());
    press(&mut app, KeyCode::Char('p'));
    let alert = |app: &mut App| {
        let text = screen(&render(app, 120, 40));
        text.lines().nth(1).unwrap_or_default().to_string()
    };
    assert!(alert(&mut app).contains("resuming the sweep"));
    for ev in toggled(s.tick(), "key", false) {
        app.update(Action::Event(ev));
    }
    // Resumed as said: the message stays its few seconds.
    assert!(alert(&mut app).contains("resuming the sweep"));
    for ev in toggled(s.tick(), "viewer 4242", true) {
        app.update(Action::Event(ev));
    }
    let h = header(&mut app);
    // PAUSING: paused, its running cell still finishing.
    assert!(
        h.contains(" PAUS") && h.contains("by another viewer"),
        "{h}"
    );
    let line = alert(&mut app);
    assert!(!line.contains("resuming"), "{line}");
}

#[test]
fn an_excluded_configs_cells_read_excl_after_the_sweep_ends() {
    let mut s = crash_story();
    let t = s.tick();
    s.events.push(Event::Action {
        at: t,
        action: "exclude".into(),
        target: Some("tp4-ddtree-b4".into()),
        source: "key".into(),
    });
    // Reached, its cells are recorded as skipped so the run accounts for each.
    for c in s.cells("tp4-ddtree-b4") {
        s.finish(&c, Status::Skipped, None, None);
    }
    let t = s.tick();
    s.events.push(Event::SweepFinished {
        at: t,
        ok: 21,
        failed: 7,
        skipped: 7,
    });
    let (mut app, _rx) = live(s.view());
    app.update(Action::EngineDone);
    let text = screen(&render(&mut app, 120, 40));
    let row = text
        .lines()
        .find(|l| l.contains("tp4-ddtree-b4 "))
        .unwrap_or_default();
    assert_eq!(row.matches("excl").count(), 7, "{text}");
    assert!(!row.contains("skip"), "{row}");
}

#[test]
fn the_eta_waits_until_cells_were_measured() {
    let mut s = Story::new();
    s.config("tp1-baseline");
    let first = s.cells("tp1-baseline")[0].clone();
    s.start(&first)
        .finish(&first, Status::Ok, Some(metrics(82.0, 45.0, None)), None);
    let (mut app, _rx) = live(s.view());
    let h = header(&mut app);
    assert!(h.contains("ETA …") && !h.contains("ETA 0"), "{h}");
}

#[test]
fn a_running_prepare_step_is_shown_where_its_configs_wait() {
    let mut s = Story::new();
    let t = s.tick();
    s.events.push(Event::PrepareStarted {
        at: t,
        step: "model".into(),
        command: "rsync -a /data/m/ /dev/shm/m/".into(),
        creates: vec!["/dev/shm/m".into()],
        expect_bytes: Some(52_000_000_000),
        configs: vec!["tp1-baseline".into(), "tp1-dflash".into()],
    });
    let t = s.tick();
    s.events.push(Event::PrepareProgress {
        at: t,
        step: "model".into(),
        bytes: 31_200_000_000,
        expect_bytes: Some(52_000_000_000),
        rate_bps: 410e6,
        recorded: false,
    });
    let (mut app, _rx) = live(s.view());
    let text = screen(&render(&mut app, 120, 40));
    let alert = text.lines().nth(1).unwrap_or_default();
    assert!(
        alert.contains("preparing model: 31.2 GB / 52.0 GB · 410 MB/s · ETA 0:51"),
        "{text}"
    );
    for (config, waits) in [
        ("tp1-baseline ", true),
        ("tp1-dflash ", true),
        ("tp1-ddtree-b4 ", false),
    ] {
        let row = text
            .lines()
            .find(|l| l.contains(config) && !l.contains("phase"))
            .unwrap_or_default();
        assert_eq!(
            row.matches("prep 60%").count() >= 5,
            waits,
            "{config}: {row}"
        );
    }
    // Its end: the grid and the alert line go back to what they were.
    let t = s.tick();
    s.events.push(Event::PrepareEnded {
        at: t,
        step: "model".into(),
        outcome: crate::model::PrepareOutcome::Done,
        bytes: 52_000_000_000,
        duration_s: 127.0,
        message: None,
        configs: vec!["tp1-baseline".into(), "tp1-dflash".into()],
    });
    let (mut app, _rx) = live(s.view());
    let text = screen(&render(&mut app, 120, 40));
    assert!(
        !text.contains("preparing") && !text.contains("prep "),
        "{text}"
    );
    assert!(
        text.contains("prepare model: done, 52.0 GB in 2:07"),
        "{text}"
    );
}

#[test]
fn a_tall_gpu_pane_is_filled_with_history_not_left_empty() {
    // Eight GPUs, one row each: the rows to spare hold the running config's
    // GPUs' mean utilisation and memory in use, unzoomed.
    let mut s = Story::new();
    s.run_ok("tp1-baseline", 1.0, None);
    s.config("tp4-baseline");
    s.gpus(8, &[0, 1, 2, 3]);
    let (mut app, _rx) = live(s.view());
    let text = screen(&render(&mut app, 200, 50));
    assert!(text.contains("mean utilisation of GPU 0,1,2,3"), "{text}");
    assert!(text.contains("mean memory in use of GPU 0,1,2,3"), "{text}");
    // At 80×24 the pane has no rows to spare: the GPUs' rows alone.
    let text = screen(&render(&mut app, 80, 24));
    assert!(!text.contains("mean utilisation"), "{text}");
}
