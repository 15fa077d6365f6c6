//! The results as files: CSV and JSON (one record per cell, every field) and
//! Markdown (the dashboard's grid, each failure's kind and message, then every
//! metric of every cell). Columns
//! come from the metric table and the grid from [`crate::view::grid`], so an
//! export says what the dashboard says. Never recomputes a metric.

pub mod compare;
pub mod report;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use crate::model::text;
use crate::model::{CellRecord, Failure, Metric, ServerMeta, METRICS};
use crate::plan::Plan;
use crate::view::grid::{CellView, Grid, Row, ValueMode};
use crate::view::replay;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Csv,
    Json,
    Md,
}

/// A column of the record itself: its name and how a record's cell is written.
type RecordColumn = (&'static str, fn(&CellRecord) -> String);

/// What was benchmarked, by config id (the last launch's).
pub type Servers = BTreeMap<String, ServerMeta>;

/// A column of what was benchmarked (the record's config's server).
type ServerColumn = (&'static str, fn(&ServerMeta) -> String);

/// A CSV column.
enum Column {
    Record(RecordColumn),
    Metric(&'static Metric),
    Server(ServerColumn),
}

/// The CSV generation that added the server columns.
const SERVER_SINCE: u8 = 4;

/// What was benchmarked, one column each (empty when unknown).
const SERVER: &[ServerColumn] = &[
    ("server_kind", |m| m.kind.clone()),
    ("server_version", |m| m.version.clone().unwrap_or_default()),
    ("model_path", |m| m.model_path.clone().unwrap_or_default()),
    ("model_config_sha256", |m| {
        m.model_config_sha256.clone().unwrap_or_default()
    }),
    ("gpu_names", |m| m.gpus.join("; ")),
    ("driver_version", |m| m.driver.clone().unwrap_or_default()),
    ("cuda_version", |m| m.cuda.clone().unwrap_or_default()),
    ("host", |m| m.host.clone()),
    ("sweeptop_version", |m| m.sweeptop_version.clone()),
];

/// A field of a record's failure or warning; empty without one.
fn said(f: Option<&Failure>, field: impl Fn(&Failure) -> String) -> String {
    f.map(field).unwrap_or_default()
}

/// One field of each warning, joined.
fn joined(all: &[Failure], sep: &str, field: impl Fn(&Failure) -> String) -> String {
    all.iter().map(field).collect::<Vec<_>>().join(sep)
}

/// The columns of a record before its metrics.
const HEAD: &[RecordColumn] = &[
    ("cell", |r| r.cell.clone()),
    ("config", |r| r.config.clone()),
    ("phase", |r| r.phase.clone()),
    ("workload", |r| r.workload.clone()),
    ("context_tokens", |r| r.context_tokens.to_string()),
    ("concurrency", |r| r.concurrency.to_string()),
    ("status", |r| r.status.as_str().to_string()),
    ("failure_kind", |r| {
        said(r.failure.as_ref(), |f| f.kind.as_str().to_string())
    }),
    ("failure_source", |r| {
        said(r.failure.as_ref(), |f| f.source.as_str().to_string())
    }),
    ("failure_message", |r| {
        said(r.failure.as_ref(), |f| f.message.clone())
    }),
];

/// The columns of a record after the first generation's metrics.
const TAIL: &[RecordColumn] = &[
    ("started_at", |r| r.started_at.to_string()),
    ("finished_at", |r| r.finished_at.to_string()),
];

/// Record columns added later: (CSV generation, column), placed after that
/// generation's metrics.
const LATER: &[(u8, RecordColumn)] = &[
    (
        5,
        ("repetitions", |r| {
            if r.repetitions.is_empty() {
                String::new()
            } else {
                r.repetitions.len().to_string()
            }
        }),
    ),
    (
        5,
        ("spread_pct", |r| {
            r.spread
                .map(|s| format!("{:.3}", s.spread_pct))
                .unwrap_or_default()
        }),
    ),
    (
        3,
        ("warning_kind", |r| {
            joined(&r.warnings, "; ", |w| w.kind.as_str().to_string())
        }),
    ),
    (
        3,
        ("warning_message", |r| {
            joined(&r.warnings, " | ", |w| w.message.clone())
        }),
    ),
];

/// Every column of the CSV, in order: the record's, the metrics of the first
/// CSV generation, the times, then each later generation's metrics and record
/// columns (so a column never moves when columns are added).
fn columns() -> Vec<Column> {
    let generation = |g: u8| {
        let metrics = METRICS
            .iter()
            .filter(move |m| m.csv_since == g)
            .map(Column::Metric);
        let record = LATER
            .iter()
            .filter(move |(since, _)| *since == g)
            .map(|(_, c)| Column::Record(*c));
        let server = SERVER
            .iter()
            .filter(move |_| g == SERVER_SINCE)
            .map(|c| Column::Server(*c));
        metrics.chain(record).chain(server)
    };
    let later = METRICS
        .iter()
        .map(|m| m.csv_since)
        .chain(LATER.iter().map(|(g, _)| *g))
        .chain([SERVER_SINCE])
        .filter(|&g| g > 1)
        .max()
        .unwrap_or(1);
    HEAD.iter()
        .copied()
        .map(Column::Record)
        .chain(generation(1))
        .chain(TAIL.iter().copied().map(Column::Record))
        .chain((2..=later).flat_map(generation))
        .collect()
}

impl Column {
    fn name(&self) -> &'static str {
        match self {
            Column::Record((name, _)) | Column::Server((name, _)) => name,
            Column::Metric(m) => m.key,
        }
    }

    fn value(&self, r: &CellRecord, servers: &Servers) -> String {
        match self {
            // Text a server wrote reaches these (the failure message, its
            // version): made inert for terminals and spreadsheets.
            Column::Record((_, f)) => text::spreadsheet_string(f(r)),
            Column::Metric(m) => r.metrics.as_ref().map(|v| m.exact(v)).unwrap_or_default(),
            Column::Server((_, f)) => servers
                .get(&r.config)
                .map(|m| text::spreadsheet_string(f(m)))
                .unwrap_or_default(),
        }
    }
}

/// The records as `format`, each with what its config benchmarked. Markdown
/// lays them out on the plan's grid when there is a plan.
pub fn render(
    format: Format,
    plan: Option<Arc<Plan>>,
    records: &[CellRecord],
    servers: &Servers,
) -> String {
    let axes = Axes::of(plan.as_deref());
    match format {
        Format::Csv => csv(records, servers, &axes),
        Format::Json => json(records, servers, &axes),
        Format::Md => markdown(plan, records, servers),
    }
}

/// The plan's axes (`tp`, `method`, `budget`…), each config's value of each:
/// columns to group by without parsing config ids.
#[derive(Debug, Default)]
pub struct Axes {
    /// Axis names in plan order (first seen first).
    pub names: Vec<String>,
    /// config → axis → value.
    values: BTreeMap<String, indexmap::IndexMap<String, String>>,
}

impl Axes {
    pub fn of(plan: Option<&Plan>) -> Axes {
        let mut a = Axes::default();
        for c in plan.map(|p| p.configs.as_slice()).unwrap_or_default() {
            for k in c.axes.keys() {
                if !a.names.contains(k) {
                    a.names.push(k.clone());
                }
            }
            a.values.insert(c.id.clone(), c.axes.clone());
        }
        a
    }

    fn value(&self, config: &str, axis: &str) -> String {
        self.values
            .get(config)
            .and_then(|v| v.get(axis))
            .cloned()
            .unwrap_or_default()
    }
}

/// The records as a JSON list, each with a `server` object (null when the
/// run did not record one).
fn json(records: &[CellRecord], servers: &Servers, axes: &Axes) -> String {
    let list: Vec<serde_json::Value> = records
        .iter()
        .map(|r| {
            let mut v = serde_json::to_value(r).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                let server = servers
                    .get(&r.config)
                    .and_then(|m| serde_json::to_value(m).ok())
                    .unwrap_or_default();
                o.insert("server".into(), server);
                let mine: serde_json::Map<String, serde_json::Value> = axes
                    .names
                    .iter()
                    .map(|n| (n.clone(), axes.value(&r.config, n).into()))
                    .collect();
                o.insert("axes".into(), mine.into());
            }
            v
        })
        .collect();
    text::to_json_pretty(&list).unwrap_or_default() + "\n"
}

/// Every record, every column; then one column per plan axis (named by the
/// axis, `axis_NAME` when a column has that name already), last so the
/// fixed columns never move.
pub fn csv(records: &[CellRecord], servers: &Servers, axes: &Axes) -> String {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    // Writing to memory cannot fail; a row that could not be encoded is dropped.
    let columns = columns();
    let axis_names: Vec<String> = axes
        .names
        .iter()
        .map(|n| {
            if columns.iter().any(|c| c.name() == n) {
                format!("axis_{n}")
            } else {
                n.clone()
            }
        })
        .collect();
    let _ = w.write_record(
        columns
            .iter()
            .map(|c| c.name().to_string())
            .chain(axis_names.iter().cloned()),
    );
    for r in records {
        let _ = w.write_record(
            columns.iter().map(|c| c.value(r, servers)).chain(
                axes.names
                    .iter()
                    .map(|n| text::spreadsheet_string(axes.value(&r.config, n))),
            ),
        );
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

fn md_cell(s: &str) -> String {
    text::display(s).replace('|', "\\|")
}

/// One grid table in `mode` (`first`: the table the export has always
/// started with, introduced as such).
fn md_grid(
    s: &mut String,
    view: &crate::view::state::ViewState,
    grid: &Grid,
    mode: ValueMode,
    first: bool,
) {
    let title = mode.title();
    let mut chars = title.chars();
    let title: String = chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default();
    if first {
        let _ = writeln!(s, "{title} per cell (failed cells show why).\n");
    } else {
        let _ = writeln!(s, "\n{title} per cell.\n");
    }
    let mut header = String::from("| phase | config |");
    let mut rule = String::from("|---|---|");
    for c in &grid.columns {
        let _ = write!(header, " {} {} |", md_cell(&c.workload), c.label());
        rule.push_str("---:|");
    }
    let _ = writeln!(s, "{header}\n{rule}");
    for row in &grid.rows {
        let Row::Config(i) = row else { continue };
        let cfg = &grid.configs[*i];
        let _ = write!(s, "| {} | {} |", md_cell(&cfg.phase), md_cell(&cfg.id));
        for col in 0..grid.columns.len() {
            let cell = match grid.cell(view, mode, *i, col) {
                CellView::Running | CellView::Queued => CellView::Pending,
                other => other,
            };
            let _ = write!(s, " {} |", md_cell(cell.label()));
        }
        s.push('\n');
    }
}

/// A metadata line, the grid (rows: configs by phase; columns: workload ×
/// context × concurrency) with the dashboard's labels in the value, the
/// speedup and the latencies, then failures, warnings and every metric.
pub fn markdown(plan: Option<Arc<Plan>>, records: &[CellRecord], servers: &Servers) -> String {
    let view = replay::from_records(plan, records);
    let grid = Grid::build(&view);
    let mode = ValueMode::default();
    let mut s = String::new();
    if !view.plan_name.is_empty() {
        let _ = writeln!(s, "# {}\n", md_cell(&view.plan_name));
    }
    // What this is, in one paragraph: a table pasted into a pull request
    // must say what it measured.
    let mut about: Vec<String> = Vec::new();
    // Each thing once, in a stable order, named when there is any.
    let mut say = |what: &str, values: Vec<String>| {
        let set: std::collections::BTreeSet<String> = values.into_iter().collect();
        if !set.is_empty() {
            about.push(format!(
                "{what} {}",
                set.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
    };
    say(
        "server",
        servers.values().map(ServerMeta::server_label).collect(),
    );
    say("model", servers.values().map(|m| m.model.clone()).collect());
    say(
        "GPUs",
        servers
            .values()
            .flat_map(|m| m.gpus.iter())
            .map(|g| g.split_once(": ").map_or(g.as_str(), |x| x.1).to_string())
            .collect(),
    );
    say("host", servers.values().map(|m| m.host.clone()).collect());
    if let (Some(first), Some(last)) = (
        records.iter().map(|r| r.started_at).min(),
        records.iter().map(|r| r.finished_at).max(),
    ) {
        about.push(format!("measured {} to {}", first, last));
    }
    about.push(format!("sweeptop {}", env!("CARGO_PKG_VERSION")));
    let _ = writeln!(s, "{}.\n", md_cell(&about.join("; ")));
    // The value, the speedup against each phase's baseline, then latency.
    for (n, mode) in [
        Some(mode),
        Some(ValueMode::speedup()),
        Metric::by_key("ttft_ms_p50").map(ValueMode::Metric),
        Metric::by_key("itl_ms_p50").map(ValueMode::Metric),
    ]
    .into_iter()
    .flatten()
    .enumerate()
    {
        md_grid(&mut s, &view, &grid, mode, n == 0);
    }
    let mut ordered: Vec<&CellRecord> = records.iter().collect();
    ordered.sort_by(|a, b| a.cell.cmp(&b.cell));
    type Pick = fn(&CellRecord) -> &[Failure];
    let sections: [(&str, Pick); 2] = [
        ("Failures", |r| r.failure.as_slice()),
        ("Warnings (ok cells to read with care)", |r| {
            r.warnings.as_slice()
        }),
    ];
    for (title, pick) in sections {
        let said: Vec<(&CellRecord, &Failure)> = ordered
            .iter()
            .flat_map(|r| pick(r).iter().map(|f| (*r, f)))
            .collect();
        if said.is_empty() {
            continue;
        }
        let _ = writeln!(
            s,
            "\n## {title}\n\n| cell | kind | message |\n|---|---|---|"
        );
        for (r, f) in said {
            let _ = writeln!(
                s,
                "| {} | {} | {} |",
                md_cell(&r.cell),
                f.kind.as_str(),
                md_cell(&f.message)
            );
        }
    }
    let _ = writeln!(s, "\n## Every metric\n");
    let mut header = String::from("| cell | status |");
    let mut rule = String::from("|---|---|");
    for m in METRICS {
        let _ = write!(header, " {} |", md_cell(&m.label()));
        rule.push_str("---:|");
    }
    let _ = writeln!(s, "{header}\n{rule}");
    for r in ordered {
        let status = CellView::of_record(r, mode, None, false);
        let status = match &status {
            CellView::Value { .. } => r.status.as_str().to_string(),
            CellView::Flagged { mark, badge, .. } => {
                format!("ok, {} {mark}", badge.to_lowercase())
            }
            other => other.label().to_string(),
        };
        let _ = write!(s, "| {} | {} |", md_cell(&r.cell), md_cell(&status));
        for m in METRICS {
            let v = r.metrics.as_ref().map(|v| m.human(v)).unwrap_or_default();
            let _ = write!(s, " {} |", md_cell(&v));
        }
        s.push('\n');
    }
    if !servers.is_empty() {
        let _ = writeln!(s, "\n## What was benchmarked\n");
        let names: Vec<&str> = ServerMeta::default()
            .rows()
            .iter()
            .map(|(k, _)| *k)
            .collect();
        let _ = writeln!(
            s,
            "| config | {} |\n|---|{}",
            names.join(" | "),
            "---|".repeat(names.len())
        );
        for (config, meta) in servers {
            let values: Vec<String> = meta.rows().iter().map(|(_, v)| md_cell(v)).collect();
            let _ = writeln!(s, "| {} | {} |", md_cell(config), values.join(" | "));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{sample_metrics, sample_record, Metric, Status};

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
        let mut rows = csv::Reader::from_reader(csv_text.as_bytes());
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
    fn every_metric_appears_in_every_export() {
        let records = vec![
            record("a/code-ctx1024-c1", Status::Ok),
            record("b/code-ctx1024-c1", Status::Failed),
        ];
        let m = sample_metrics();
        let csv_text = csv(&records, &Servers::new(), &Axes::default());
        let mut reader = csv::Reader::from_reader(csv_text.as_bytes());
        let header: Vec<String> = reader
            .headers()
            .unwrap()
            .iter()
            .map(str::to_string)
            .collect();
        let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
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
        let dangerous =
            |c: char| c.is_control() && c != '\n' || ('\u{202A}'..='\u{202E}').contains(&c);
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
            let mut reader = csv::Reader::from_reader(csv_text.as_bytes());
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
driver_version,cuda_version,host,sweeptop_version,repetitions,spread_pct"
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
        let mut rows = csv::Reader::from_reader(csv_text.as_bytes());
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
}
