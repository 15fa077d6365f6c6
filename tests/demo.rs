//! The demo sweep end to end, through the real binary and the simulated server.

use crate::common;

use std::time::Duration;

use common::*;

#[test]
fn demo_records_ok_crashed_and_overflowed_cells_and_exports_them() {
    let dir = scratch("demo");
    let out_dir = dir.join("run");
    let tag = format!("demo-{}", std::process::id());
    let mut cmd = sweeptop(&tag);
    cmd.args(["demo", "--headless", "--out"]).arg(&out_dir);
    let out = run_with_deadline(cmd, Duration::from_secs(180));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("sweep finished"), "{stdout}");

    let results = results(&out_dir);
    let cells = by_cell(&results);
    let planned = plan_cells(&out_dir.join("plan.toml"));
    assert_eq!(planned.len(), 56);
    for id in &planned {
        assert_eq!(
            cells.get(id).map(Vec::len),
            Some(1),
            "cell {id} must be recorded exactly once"
        );
    }
    let mut ok = 0;
    let mut with_gpu = 0;
    for r in &results {
        assert_result_line(r);
        if r["status"] == "ok" {
            ok += 1;
            let m = &r["metrics"];
            assert!(m["output_tokens"].as_u64().unwrap() > 0, "{r}");
            assert!(m["output_tok_s"].as_f64().unwrap() > 0.0, "{r}");
            assert!(m["ttft_ms_p50"].as_f64().unwrap() > 0.0, "{r}");
            // GPU figures come from the samples of the measured requests'
            // window (most demo cells measure for less than the 1 s sampling
            // interval and have none: null, never another moment's).
            if let Some(peak) = m["gpu_mem_peak_mib"].as_u64() {
                assert!(peak > 0, "{r}");
                assert!(m["gpu_util_mean"].as_f64().is_some(), "{r}");
                with_gpu += 1;
            }
        } else {
            assert!(r["metrics"].is_null(), "{r}");
        }
    }
    assert!(ok >= 30, "expected most cells ok, got {ok}");
    assert!(with_gpu >= 1, "no ok cell has GPU figures");
    // DDTree budgets 8 and 12 crash: every one of their cells is failed with the cause.
    for config in ["tp1-ddtree-b8", "tp1-ddtree-b12"] {
        let rs: Vec<_> = results.iter().filter(|r| r["config"] == config).collect();
        assert_eq!(rs.len(), 7);
        for r in rs {
            assert_eq!(r["status"], "failed", "{r}");
            assert_eq!(r["failure"]["kind"], "cuda_illegal_instruction", "{r}");
        }
        let first = results.iter().find(|r| r["config"] == config).unwrap();
        let evidence = first["failure"]["evidence"].as_array().unwrap();
        assert!(
            evidence.iter().any(|l| l
                .as_str()
                .unwrap()
                .contains("an illegal instruction was encountered")),
            "{first}"
        );
    }
    // The long document sent as is meets the server's own 400.
    let overflow: Vec<_> = results
        .iter()
        .filter(|r| r["failure"]["kind"] == "context_overflow")
        .collect();
    assert!(!overflow.is_empty());
    assert!(overflow.iter().any(|r| r["failure"]["source"] == "http"));
    // Prompts hit their targets exactly against the server's tokenizer.
    for (cell, want) in [
        ("tp1-baseline/code-ctx1024-c1", 1024.0),
        ("tp4-dflash/code-ctx8192-c4", 8192.0),
    ] {
        assert_eq!(
            cells[cell][0]["metrics"]["prompt_tokens_mean"].as_f64(),
            Some(want),
            "{cell}"
        );
    }
    // The near-limit code cell is clamped: max_tokens 48 + margin 16 under 32768.
    let clamped = &cells["tp1-baseline/code-ctx32768-c1"][0];
    assert_eq!(clamped["status"], "ok", "{clamped}");
    assert_eq!(
        clamped["metrics"]["prompt_tokens_mean"].as_f64(),
        Some(32704.0),
        "{clamped}"
    );
    // Every ok cell's raw request timelines are kept, and recomputing the
    // figures from them gives what results.jsonl says.
    for r in results.iter().filter(|r| r["status"] == "ok") {
        let cell = r["cell"].as_str().unwrap();
        let base = out_dir
            .join("requests")
            .join(format!("{}.jsonl", cell.replace('/', "__")));
        let gz = base.with_extension("jsonl.gz");
        let path = if base.exists() { base } else { gz };
        let records =
            sweeptop::store::read_requests(&path).unwrap_or_else(|e| panic!("{cell}: {e}"));
        let m = &r["metrics"];
        assert_eq!(
            records.len() as u64,
            m["requests"].as_u64().unwrap(),
            "{cell}"
        );
        let again = sweeptop::load::metrics::compute(&records, 1);
        assert_eq!(
            again.output_tokens,
            m["output_tokens"].as_u64().unwrap(),
            "{cell}"
        );
        assert_eq!(Some(again.ttft_ms_p50), m["ttft_ms_p50"].as_f64(), "{cell}");
        assert_eq!(again.itl_ms_p99, m["itl_ms_p99"].as_f64(), "{cell}");
        assert_eq!(
            again.prompt_tokens_mean,
            m["prompt_tokens_mean"].as_f64(),
            "{cell}"
        );
    }
    // The other configs ran on fresh servers after the crash.
    assert_eq!(cells["tp1-ddtree-b4/code-ctx1024-c1"][0]["status"], "ok");
    assert_eq!(cells["tp4-baseline/code-ctx1024-c1"][0]["status"], "ok");
    // Logs were captured per config.
    let log = std::fs::read_to_string(out_dir.join("logs/tp1-ddtree-b8.log")).unwrap();
    assert!(log.contains("CUDA error: an illegal instruction was encountered"));
    assert!(
        tagged_processes(&tag).is_empty(),
        "a server process outlived the sweep"
    );

    // Export: CSV and JSON one record per cell, Markdown as the grid.
    let csv = run_with_deadline(
        {
            let mut c = sweeptop(&tag);
            c.args(["export"]).arg(&out_dir).args(["--format", "csv"]);
            c
        },
        Duration::from_secs(30),
    );
    assert!(csv.status.success());
    let csv = String::from_utf8(csv.stdout).unwrap();
    assert_eq!(csv.lines().count(), 57);
    assert!(csv
        .lines()
        .next()
        .unwrap()
        .starts_with("cell,config,phase,workload,context_tokens,concurrency,status,failure_kind"));
    let md_path = dir.join("grid.md");
    let md = run_with_deadline(
        {
            let mut c = sweeptop(&tag);
            c.args(["export"])
                .arg(&out_dir)
                .args(["--format", "md", "-o"])
                .arg(&md_path);
            c
        },
        Duration::from_secs(30),
    );
    assert!(md.status.success());
    let md = std::fs::read_to_string(&md_path).unwrap();
    let b8_row = md
        .lines()
        .find(|l| l.contains("| tp1-ddtree-b8 |"))
        .unwrap();
    assert!(b8_row.contains("ILL-INSTR"), "{b8_row}");
    assert!(md.contains("ctx 400: "), "{md}");
    let json = run_with_deadline(
        {
            let mut c = sweeptop(&tag);
            c.args(["export"]).arg(&out_dir).args(["--format", "json"]);
            c
        },
        Duration::from_secs(30),
    );
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 56);
    let _ = std::fs::remove_dir_all(&dir);
}
