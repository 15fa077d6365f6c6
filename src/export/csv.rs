//! The CSV export: one row per cell, every field of its record, every metric
//! of the table and what its config benchmarked, in columns that keep their
//! places as columns are added (scripts read them by position too).

use super::{Axes, Servers};
use crate::model::text;
use crate::model::{CellRecord, Failure, Metric, ServerMeta, METRICS};

/// A column of the record itself: its name and how a record's cell is written.
type RecordColumn = (&'static str, fn(&CellRecord) -> String);

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
