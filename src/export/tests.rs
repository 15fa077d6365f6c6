//! Every export holds every metric and what was benchmarked, keeps its CSV
//! columns in place, and makes hostile server text inert.

use super::*;
use crate::model::{sample_metrics, sample_record, Metric, Status, METRICS};

fn record(cell: &str, status: Status) -> CellRecord {
    sample_record(cell, status, "=cmd, \"quoted\"\nsecond line")
}

#[test]
fn what_was_benchmarked_reaches_every_export_made_inert() {
    let records = vec![record("a/code-ctx1024-c1", Status::Ok)];
    let mut servers = Servers::new();
    servers.insert(
        "a".into(),
        ServerMeta {
            kind: "vllm".into(),
            version: Some("=HYPERLINK(\"x\")\u{1b}[31m|0.32".into()),
            model: "tiny".into(),
            model_config_sha256: Some("ab12".into()),
            gpus: vec!["0: NVIDIA H200".into(), "1: NVIDIA H200".into()],
            cuda: Some("12.4".into()),
            sweeptop_version: "0.1.0".into(),
            ..ServerMeta::default()
        },
    );
    let csv_text = csv(&records, &servers, &Axes::default());
    let mut rows = ::csv::Reader::from_reader(csv_text.as_bytes());
    let header = rows.headers().unwrap().clone();
    let row = rows.records().next().unwrap().unwrap();
    let get = |k: &str| &row[header.iter().position(|h| h == k).unwrap()];
    assert_eq!(get("server_kind"), "vllm");
    assert!(get("server_version").starts_with("'="), "{csv_text}");
    assert_eq!(get("gpu_names"), "0: NVIDIA H200; 1: NVIDIA H200");
    assert_eq!(get("cuda_version"), "12.4");
    let json: serde_json::Value =
        serde_json::from_str(&render(Format::Json, None, &records, &servers)).unwrap();
    assert_eq!(json[0]["server"]["model_config_sha256"], "ab12");
    let md = markdown(None, &records, &servers);
    assert!(md.contains("## What was benchmarked"), "{md}");
    assert!(md.contains("| a | vllm =HYPERLINK"), "{md}");
    assert!(!md.contains('\u{1b}'), "{md}");
    assert!(md.contains("\\|0.32"), "{md}");
    // A record whose config has no server meta: empty cells, a null.
    let json: serde_json::Value =
        serde_json::from_str(&render(Format::Json, None, &records, &Servers::new())).unwrap();
    assert!(json[0]["server"].is_null());
}

#[test]
fn markdown_never_passes_a_servers_text_through_as_html() {
    let mut failed = sample_record(
        "b/code-ctx1024-c1",
        Status::Failed,
        "<svg/onload=alert(1)> & more",
    );
    failed.cell = "b/<img src=x onerror=y>".into();
    let mut servers = Servers::new();
    servers.insert(
        "b".into(),
        ServerMeta {
            kind: "vllm".into(),
            version: Some("</title><script>alert(1)</script>".into()),
            model: "<b>tiny</b>".into(),
            ..ServerMeta::default()
        },
    );
    let md = markdown(None, &[failed], &servers);
    for raw in ["<svg", "<script", "</title", "<img", "<b>"] {
        assert!(!md.contains(raw), "{raw} in\n{md}");
    }
    assert!(
        md.contains("&lt;svg/onload=alert(1)&gt; &amp; more"),
        "{md}"
    );
    assert!(md.contains("&lt;/title&gt;&lt;script&gt;"), "{md}");
}

#[test]
fn every_metric_appears_in_every_export() {
    let records = vec![
        record("a/code-ctx1024-c1", Status::Ok),
        record("b/code-ctx1024-c1", Status::Failed),
    ];
    let m = sample_metrics();
    let csv_text = csv(&records, &Servers::new(), &Axes::default());
    let mut reader = ::csv::Reader::from_reader(csv_text.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_string)
        .collect();
    let rows: Vec<::csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 2, "{csv_text}");
    let json: serde_json::Value =
        serde_json::from_str(&render(Format::Json, None, &records, &Servers::new())).unwrap();
    let md = markdown(None, &records, &Servers::new());
    for metric in METRICS {
        let col = header.iter().position(|h| h == metric.key);
        let col = col.unwrap_or_else(|| panic!("CSV lacks {}", metric.key));
        assert_eq!(rows[0][col], metric.exact(&m), "{}", metric.key);
        assert!(
            json[0]["metrics"].get(metric.key).is_some(),
            "JSON lacks {}",
            metric.key
        );
        assert!(
            md.contains(&format!(" {} |", metric.label())),
            "MD lacks {}",
            metric.key
        );
        assert!(
            md.contains(&format!(" {} |", metric.human(&m))),
            "MD lacks {}",
            metric.key
        );
    }
    // A message with commas, quotes and a newline stays one field, made
    // inert for a spreadsheet (a leading `'`) and shown on one line.
    let msg = header.iter().position(|h| h == "failure_message").unwrap();
    assert_eq!(&rows[1][msg], "'=cmd, \"quoted\" second line");
}

/// Every hostile string as a failure message, in every export: no
/// control, escape or direction character, no cell a spreadsheet would
/// run, and the JSON still holds the message exactly.
#[test]
fn hostile_server_text_is_inert_in_every_export() {
    let dangerous = |c: char| c.is_control() && c != '\n' || ('\u{202A}'..='\u{202E}').contains(&c);
    for (i, hostile) in crate::model::text::HOSTILE.iter().enumerate() {
        let records = vec![sample_record(
            &format!("a/code-ctx1024-c{i}"),
            Status::Failed,
            hostile,
        )];
        let csv_text = csv(&records, &Servers::new(), &Axes::default());
        assert!(
            !csv_text.chars().any(dangerous),
            "{hostile:?} → {csv_text:?}"
        );
        let mut reader = ::csv::Reader::from_reader(csv_text.as_bytes());
        for row in reader.records() {
            for cell in row.unwrap().iter() {
                assert!(
                    !cell.trim_start().starts_with(['=', '+', '-', '@']),
                    "{hostile:?} → {cell:?}"
                );
            }
        }
        let md = markdown(None, &records, &Servers::new());
        assert!(!md.chars().any(dangerous), "{hostile:?} → {md:?}");
        let json = render(Format::Json, None, &records, &Servers::new());
        assert!(!json.chars().any(dangerous), "{hostile:?} → {json:?}");
        let back: Vec<CellRecord> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, records);
    }
}

#[test]
fn csv_columns_keep_their_places() {
    // The columns as users' scripts have read them since the first CSV.
    let first = "cell,config,phase,workload,context_tokens,concurrency,status,failure_kind,\
failure_source,failure_message,requests,failed_requests,short_requests,output_tokens,\
duration_s,output_tok_s,request_per_s,decode_tok_s_p50,ttft_ms_p50,ttft_ms_p90,ttft_ms_p99,\
itl_ms_p50,itl_ms_p99,tpot_ms_p50,e2e_ms_p50,e2e_ms_p99,prompt_tokens_mean,tokens_estimated,\
accept_len,gpu_mem_peak_mib,gpu_util_mean,started_at,finished_at";
    let header = csv(&[], &Servers::new(), &Axes::default());
    assert!(header.starts_with(first), "{header}");
    assert!(
        header.trim_end().ends_with(
            ",decode_tok_s_mean,ttft_ms_mean,itl_ms_p90,itl_ms_mean,\
output_tokens_asked,prompt_tokens_min,prompt_tokens_max,warning_kind,warning_message,\
server_requests,server_ttft_ms_mean,server_itl_ms_mean,server_e2e_ms_mean,server_queue_ms_mean,\
prefix_cache_hit_pct,server_kind,server_version,model_path,model_config_sha256,gpu_names,\
driver_version,cuda_version,host,sweeptop_version,repetitions,spread_pct,client_lag_ms_p99,\
coalesced_reads"
        ),
        "{header}"
    );
}

#[test]
fn each_plan_axis_is_a_column_and_a_json_field() {
    let plan = Plan::parse(
        std::path::Path::new(crate::plan::DEMO_PATH),
        crate::plan::DEMO_PLAN,
    )
    .unwrap();
    let cell = plan
        .cells
        .iter()
        .find(|c| c.config == "tp1-ddtree-b8")
        .unwrap();
    let records = vec![crate::model::sample_record(&cell.id, Status::Ok, "")];
    let records: Vec<CellRecord> = records
        .into_iter()
        .map(|mut r| {
            r.config = cell.config.clone();
            r
        })
        .collect();
    let plan = Some(Arc::new(plan));
    let csv_text = render(Format::Csv, plan.clone(), &records, &Servers::new());
    let mut rows = ::csv::Reader::from_reader(csv_text.as_bytes());
    let head = rows.headers().unwrap().clone();
    // After every fixed column, in plan order.
    let n = head.len();
    let tail: Vec<&str> = head.iter().skip(n - 3).collect();
    assert_eq!(tail, ["tp", "method", "budget"]);
    let row = rows.records().next().unwrap().unwrap();
    let tail: Vec<&str> = row.iter().skip(n - 3).collect();
    assert_eq!(tail, ["1", "ddtree", "8"]);
    let json = render(Format::Json, plan, &records, &Servers::new());
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v[0]["axes"]["method"], "ddtree");
    assert_eq!(v[0]["axes"]["budget"], "8");
}

#[test]
fn markdown_is_the_dashboards_grid() {
    let records = vec![
        record("a/code-ctx1024-c1", Status::Ok),
        record("b/code-ctx1024-c1", Status::Failed),
    ];
    let md = markdown(None, &records, &Servers::new());
    assert!(md.contains("| phase | config | code 1k c1 |"), "{md}");
    let out = Metric::by_key("output_tok_s").unwrap();
    assert!(
        md.contains(&format!("| tp1 | a | {} |", out.compact(&sample_metrics()))),
        "{md}"
    );
    assert!(md.contains("| tp1 | b | ILL-INSTR |"), "{md}");
    assert!(
        md.contains(
            "| b/code-ctx1024-c1 | cuda_illegal_instruction | =cmd, \"quoted\" second line |"
        ),
        "{md}"
    );
    // What a pull request needs besides the values: what was measured
    // and when, the speedup and the latency tables.
    assert!(
        md.contains(concat!("sweeptop ", env!("CARGO_PKG_VERSION"))),
        "{md}"
    );
    assert!(md.contains("measured 20"), "{md}");
    for table in [
        "Speedup vs the phase baseline (output tok/s) per cell.",
        "TTFT p50 per cell.",
        "ITL p50 per cell.",
    ] {
        assert!(md.contains(table), "{table}\n{md}");
    }
}
