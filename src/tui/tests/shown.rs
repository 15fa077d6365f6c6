//! What the dashboard says must be so: the config the header names, and no
//! ETA before there is a pace to give one.

use super::*;

/// The first line of the screen.
fn header(app: &mut App) -> String {
    let text = screen(&render(app, 120, 40));
    text.lines().next().unwrap_or_default().to_string()
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
