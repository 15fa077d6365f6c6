//! `sweeptop report`: one self-contained HTML file from a real run, checked
//! as text (every ok cell's number as results.jsonl has it, every failure,
//! charts, no external fetch) and, where Chromium is installed (`.ci/run`
//! installs it and sets SWEEPTOP_REQUIRE_BROWSER=1), loaded in a headless
//! browser: the DOM has the charts, no console error, a screenshot is taken.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH")?
                .to_str()?
                .split(':')
                .map(|d| Path::new(d).join(name))
                .find(|p| p.is_file())
        })
}

#[test]
fn the_report_is_one_file_with_the_runs_numbers_charts_and_failures() {
    let dir = scratch("report");
    let tag = format!("report-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    // Two healthy configs and a crashing one, at two concurrencies.
    let plan = tiny_plan_with_crash(&["base", "fast"])
        .replace("concurrency = [1]", "concurrency = [1, 2]");
    let (run, _) = run_plan(&dir, &tag, &plan, Duration::from_secs(120));
    let out = dir.join("report.html");
    let mut cmd = sweeptop(&tag);
    cmd.arg("report").arg(&run).arg("-o").arg(&out);
    let done = run_with_deadline(cmd, Duration::from_secs(30));
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let page = std::fs::read_to_string(&out).unwrap();
    assert!(page.len() < 1 << 20, "{} bytes", page.len());
    // Self-contained: nothing to fetch, no script.
    for outside in ["http://", "https://", "<script", "<link", "src="] {
        let hits: Vec<&str> = page.matches(outside).collect();
        // The SVG namespace is a name, not a fetch.
        let allowed = if outside == "http://" {
            page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
        } else {
            0
        };
        assert_eq!(hits.len(), allowed, "{outside} in the report");
    }
    // Every ok cell's output tok/s, as the grid writes it from results.jsonl.
    let records = results(&run);
    let mut ok = 0;
    for r in &records {
        if r["status"] == "ok" {
            let v = r["metrics"]["output_tok_s"].as_f64().unwrap();
            let shown = sweeptop::model::rate_label(v);
            assert!(page.contains(&format!(">{shown}</td>")), "{shown} missing");
            ok += 1;
        } else {
            let cell = r["cell"].as_str().unwrap();
            assert!(page.contains(cell), "failed cell {cell} missing");
        }
    }
    assert_eq!(ok, 4, "{records:?}");
    assert!(page.contains("ILL-INSTR"));
    let charts = page.matches("<svg").count();
    assert!(charts >= 5, "{charts} charts");

    let browser = chromium();
    if browser.is_none() && std::env::var_os("SWEEPTOP_REQUIRE_BROWSER").is_some() {
        panic!("SWEEPTOP_REQUIRE_BROWSER is set but no chromium is on PATH");
    }
    let Some(browser) = browser else {
        eprintln!("no chromium on PATH: the browser half of this test did not run");
        return;
    };
    let url = format!("file://{}", out.display());
    let headless = |extra: &[&str]| {
        let mut c = Command::new(&browser);
        c.args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.join("chromium").display()
        ))
        .args(extra)
        .arg(&url);
        run_with_deadline(c, Duration::from_secs(90))
    };
    let dom = headless(&["--dump-dom"]);
    let dom_text = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    assert_eq!(
        dom_text.matches("<svg").count(),
        charts,
        "the charts are in the loaded page"
    );
    assert!(dom_text.contains("<polyline"), "lines are drawn");
    let log = String::from_utf8_lossy(&dom.stderr);
    assert!(
        !log.lines()
            .any(|l| l.contains("CONSOLE") && l.to_lowercase().contains("error")),
        "console errors:\n{log}"
    );
    let png = dir.join("report.png");
    let shot = headless(&[
        &format!("--screenshot={}", png.display()),
        "--window-size=1280,2000",
    ]);
    assert!(
        shot.status.success(),
        "{}",
        String::from_utf8_lossy(&shot.stderr)
    );
    let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
    assert!(size > 20_000, "screenshot of {size} bytes");
    let _ = std::fs::remove_dir_all(&dir);
}
