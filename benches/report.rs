//! How big and how fast `sweeptop report` is for a large run: 2,000 cells
//! (20 configs × 10 contexts × 10 concurrencies, a tenth of them failed),
//! built in memory from a real result line, rendered with the plan.
//!
//! Run: `cargo bench --bench report`. Prints the page size and the best of
//! five render times.

use std::sync::Arc;
use std::time::Instant;

use sweeptop::export::report::{html, RunReport};
use sweeptop::export::Servers;
use sweeptop::model::{CellRecord, Status};
use sweeptop::plan::Plan;

/// A real ok record (the demo's first), the template of every cell.
const OK_LINE: &str = include_str!("report_ok_line.json");

fn main() {
    let plan_text = r#"
name = "big"
[server]
command = "server {port} {budget}"
port = "auto"
[[workloads]]
id = "code"
contexts = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 100000, 120000, 128000]
concurrency = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
[[phases]]
id = "tp8"
matrix = { budget = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20] }
"#;
    let plan = Arc::new(Plan::parse(std::path::Path::new("big.toml"), plan_text).expect("plan"));
    let template: CellRecord = serde_json::from_str(OK_LINE.trim()).expect("record");
    let failed: CellRecord = {
        let mut r = template.clone();
        r.status = Status::Failed;
        r.metrics = None;
        r.failure = Some(sweeptop::model::Failure::new(
            sweeptop::model::FailureKind::CudaIllegalInstruction,
            sweeptop::model::FailureSource::ServerLog,
            "RuntimeError: CUDA error: an illegal instruction was encountered",
        ));
        r
    };
    let records: Vec<CellRecord> = plan
        .cells
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut r = if i % 10 == 9 {
                failed.clone()
            } else {
                template.clone()
            };
            r.cell = c.id.clone();
            r.config = c.config.clone();
            r.phase = c.phase.clone();
            r.workload = c.workload.clone();
            r.context_tokens = c.context_tokens;
            r.concurrency = c.concurrency;
            if let Some(m) = r.metrics.as_mut() {
                m.output_tok_s *= 1.0 + (i % 37) as f64 / 10.0;
            }
            r
        })
        .collect();
    let run = RunReport {
        dir: "runs/big".into(),
        plan: Some(plan.clone()),
        meta: None,
        records,
        servers: Servers::new(),
        prepared: Vec::new(),
    };
    let mut best = f64::MAX;
    let mut size = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let page = html(std::slice::from_ref(&run));
        best = best.min(t.elapsed().as_secs_f64());
        size = page.len();
    }
    println!(
        "report of {} cells: {:.0} KB, rendered in {:.1} ms (best of 5)",
        run.records.len(),
        size as f64 / 1024.0,
        best * 1000.0
    );
}
