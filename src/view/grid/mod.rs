//! The results grid as a model: rows are configs grouped by phase, columns are
//! workload × context × concurrency, and what each cell shows for the chosen
//! value. The dashboard (navigation and drawing) and the exports all read it, so
//! a cell says the same thing everywhere.

use std::collections::HashMap;

use super::state::ViewState;
use crate::model::{Better, CellRecord, FailureKind, Metric, Metrics, Status, Unit, METRICS};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Column {
    pub workload: String,
    pub context: u64,
    pub concurrency: u32,
}

impl Column {
    fn of(r: &CellRecord) -> Column {
        Column {
            workload: r.workload.clone(),
            context: r.context_tokens,
            concurrency: r.concurrency,
        }
    }

    /// `8k c4`, `32760 c1`.
    pub fn label(&self) -> String {
        format!("{} c{}", context_label(self.context), self.concurrency)
    }
}

pub fn context_label(tokens: u64) -> String {
    if tokens >= 1024 && tokens.is_multiple_of(1024) {
        format!("{}k", tokens / 1024)
    } else {
        tokens.to_string()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigRow {
    pub id: String,
    pub phase: String,
    pub baseline: bool,
}

/// A displayed row: a phase heading or a config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    Phase(String),
    Config(usize),
}

#[derive(Debug, Clone, Default)]
pub struct Grid {
    pub columns: Vec<Column>,
    pub configs: Vec<ConfigRow>,
    /// Phase headings and configs in plan order (what exports show).
    pub rows: Vec<Row>,
    /// The rows the dashboard shows, after [`Grid::arrange`]: filtered and
    /// sorted; every row until then.
    pub shown: Vec<Row>,
    /// (config, column) → cell id.
    cells: HashMap<(String, usize), String>,
    /// phase → its baseline config.
    baselines: HashMap<String, String>,
}

impl Grid {
    /// From the plan when there is one (every planned cell has its place from the
    /// start), else from the records.
    pub fn build(v: &ViewState) -> Grid {
        let mut g = Grid::default();
        let mut col_index: HashMap<Column, usize> = HashMap::new();
        let mut add_col = |g: &mut Grid, c: Column| -> usize {
            *col_index.entry(c.clone()).or_insert_with(|| {
                g.columns.push(c);
                g.columns.len() - 1
            })
        };
        match &v.plan {
            Some(plan) => {
                for cell in &plan.cells {
                    let i = add_col(
                        &mut g,
                        Column {
                            workload: cell.workload.clone(),
                            context: cell.context_tokens,
                            concurrency: cell.concurrency,
                        },
                    );
                    g.cells.insert((cell.config.clone(), i), cell.id.clone());
                }
                for phase in &plan.phases {
                    g.rows.push(Row::Phase(phase.id.clone()));
                    for id in &phase.configs {
                        let baseline = plan.config(id).is_some_and(|c| c.baseline);
                        if baseline {
                            g.baselines.insert(phase.id.clone(), id.clone());
                        }
                        g.rows.push(Row::Config(g.configs.len()));
                        g.configs.push(ConfigRow {
                            id: id.clone(),
                            phase: phase.id.clone(),
                            baseline,
                        });
                    }
                }
            }
            None => {
                let mut records: Vec<&CellRecord> = v.records.values().collect();
                records.sort_by(|a, b| {
                    (&a.workload, a.context_tokens, a.concurrency, &a.started_at).cmp(&(
                        &b.workload,
                        b.context_tokens,
                        b.concurrency,
                        &b.started_at,
                    ))
                });
                for r in &records {
                    add_col(&mut g, Column::of(r));
                }
                records.sort_by_key(|r| r.started_at);
                let mut phases: Vec<(String, Vec<String>)> = Vec::new();
                for r in &records {
                    let i = col_index[&Column::of(r)];
                    g.cells.insert((r.config.clone(), i), r.cell.clone());
                    match phases.iter_mut().find(|(p, _)| *p == r.phase) {
                        Some((_, configs)) => {
                            if !configs.contains(&r.config) {
                                configs.push(r.config.clone());
                            }
                        }
                        None => phases.push((r.phase.clone(), vec![r.config.clone()])),
                    }
                }
                for (phase, configs) in phases {
                    g.rows.push(Row::Phase(phase.clone()));
                    for id in configs {
                        g.rows.push(Row::Config(g.configs.len()));
                        g.configs.push(ConfigRow {
                            id,
                            phase: phase.clone(),
                            baseline: false,
                        });
                    }
                }
            }
        }
        g.shown = g.rows.clone();
        g
    }

    /// Choose and order the rows the dashboard shows: configs whose id
    /// contains the filter text, only those with a failed cell, one phase;
    /// within each phase, sorted by the value in a column (best first, cells
    /// without a value last). Phase headings stay over their configs.
    pub fn arrange(&mut self, v: &ViewState, a: &Arrange, mode: ValueMode) {
        let needle = a.name.to_lowercase();
        // One pass over the records, not one per config.
        let failing: std::collections::HashSet<&str> = if a.failures_only {
            v.records
                .values()
                .filter(|r| r.status == Status::Failed)
                .map(|r| r.config.as_str())
                .collect()
        } else {
            Default::default()
        };
        let keep = |i: usize| {
            let c = &self.configs[i];
            (needle.is_empty() || c.id.to_lowercase().contains(&needle))
                && a.phase.as_ref().is_none_or(|p| *p == c.phase)
                && (!a.failures_only || failing.contains(c.id.as_str()))
        };
        let mut shown = Vec::with_capacity(self.rows.len());
        let mut i = 0;
        while i < self.rows.len() {
            let Row::Phase(phase) = &self.rows[i] else {
                i += 1;
                continue;
            };
            let mut configs: Vec<usize> = Vec::new();
            i += 1;
            while let Some(Row::Config(c)) = self.rows.get(i) {
                if keep(*c) {
                    configs.push(*c);
                }
                i += 1;
            }
            if let Some(col) = a.sort_by {
                let key = |c: usize| self.sort_key(v, mode, c, col);
                // Stable: equal values keep the plan's order.
                configs.sort_by(|x, y| key(*y).total_cmp(&key(*x)));
            }
            if !configs.is_empty() {
                shown.push(Row::Phase(phase.clone()));
                shown.extend(configs.into_iter().map(Row::Config));
            }
        }
        self.shown = shown;
    }

    /// Configs in the order shown (for moving the selection).
    pub fn shown_configs(&self) -> impl Iterator<Item = usize> + '_ {
        self.shown.iter().filter_map(|r| match r {
            Row::Config(c) => Some(*c),
            Row::Phase(_) => None,
        })
    }

    /// Higher sorts first: the value turned so that better is larger, then
    /// failed cells, then cells without a record.
    fn sort_key(&self, v: &ViewState, mode: ValueMode, config: usize, col: usize) -> f64 {
        let Some(r) = self
            .cell_id(&self.configs[config].id, col)
            .and_then(|id| v.records.get(id))
        else {
            return f64::NEG_INFINITY;
        };
        let metric = mode.metric();
        match (
            r.status,
            r.metrics.as_ref().and_then(|m| metric.value(m).number()),
        ) {
            (Status::Ok, Some(x)) if metric.better == Better::Lower => -x,
            (Status::Ok, Some(x)) => x,
            _ => f64::MIN,
        }
    }

    pub fn cell_id(&self, config: &str, col: usize) -> Option<&str> {
        self.cells
            .get(&(config.to_string(), col))
            .map(String::as_str)
    }

    /// The shown row of a config (0 when it is filtered out).
    pub fn display_row(&self, config: usize) -> usize {
        self.shown
            .iter()
            .position(|r| *r == Row::Config(config))
            .unwrap_or(0)
    }

    pub fn config_index(&self, id: &str) -> Option<usize> {
        self.configs.iter().position(|c| c.id == id)
    }

    /// The record of the phase's baseline config in the same column.
    fn baseline_record<'a>(
        &self,
        v: &'a ViewState,
        phase: &str,
        col: usize,
    ) -> Option<&'a CellRecord> {
        let base = self.baselines.get(phase)?;
        v.records.get(self.cell_id(base, col)?)
    }

    /// The selected cell's workload charted across its phase: the value
    /// against concurrency (the columns of its workload and context), or
    /// against context when it has one concurrency only; a series per config
    /// of the phase, failed and pending cells left out.
    pub fn chart(
        &self,
        v: &ViewState,
        mode: ValueMode,
        config: usize,
        col: usize,
    ) -> Option<Chart> {
        let row = self.configs.get(config)?;
        let at = self.columns.get(col)?;
        let by_concurrency: Vec<usize> = (0..self.columns.len())
            .filter(|&c| {
                let k = &self.columns[c];
                k.workload == at.workload && k.context == at.context
            })
            .collect();
        let by_context = by_concurrency.len() <= 1;
        let (cols, x_label, x_of): (Vec<usize>, &str, fn(&Column) -> f64) = if by_context {
            let by_context = (0..self.columns.len())
                .filter(|&c| {
                    let k = &self.columns[c];
                    k.workload == at.workload && k.concurrency == at.concurrency
                })
                .collect();
            (by_context, "context (tokens)", |k| k.context as f64)
        } else {
            (by_concurrency, "concurrency", |k| f64::from(k.concurrency))
        };
        let base = self.baselines.get(&row.phase);
        let mut series = Vec::new();
        for (i, cfg) in self.configs.iter().enumerate() {
            if cfg.phase != row.phase {
                continue;
            }
            let points: Vec<(f64, f64)> = cols
                .iter()
                .filter_map(|&c| {
                    let r = v.records.get(self.cell_id(&cfg.id, c)?)?;
                    let m = r.metrics.as_ref().filter(|_| r.status == Status::Ok)?;
                    let metric = mode.metric();
                    let value = metric.value(m).number()?;
                    let y = match mode {
                        ValueMode::Metric(_) => value,
                        ValueMode::Speedup(_) => {
                            let b = self.baseline_record(v, &row.phase, c)?;
                            let b = b.metrics.as_ref().filter(|_| b.status == Status::Ok)?;
                            let b = metric.value(b).number().filter(|b| *b > 0.0)?;
                            value / b
                        }
                    };
                    Some((x_of(&self.columns[c]), y))
                })
                .collect();
            series.push(ChartSeries {
                config: i,
                name: cfg.id.clone(),
                baseline: base == Some(&cfg.id),
                points,
            });
        }
        let what = if by_context {
            format!("{} c{}", at.workload, at.concurrency)
        } else {
            format!("{} {}", at.workload, context_label(at.context))
        };
        Some(Chart {
            title: format!("{} · {what} · phase {}", mode.title(), row.phase),
            x_label: x_label.to_string(),
            y_label: mode.title(),
            xs: cols.iter().map(|&c| x_of(&self.columns[c])).collect(),
            series,
        })
    }

    /// What one cell shows.
    pub fn cell(&self, v: &ViewState, mode: ValueMode, config: usize, col: usize) -> CellView {
        let Some(row) = self.configs.get(config) else {
            return CellView::Absent;
        };
        let Some(id) = self.cell_id(&row.id, col) else {
            return CellView::Absent;
        };
        if v.is_running(id) {
            return CellView::Running;
        }
        if v.retry_queued.contains(id) || v.retry_queued.contains(&row.id) {
            return CellView::Queued;
        }
        let Some(r) = v.records.get(id) else {
            return if v.excluded.contains(&row.id) {
                CellView::Excluded
            } else {
                CellView::Pending
            };
        };
        let base_record = self
            .baseline_record(v, &row.phase, col)
            .filter(|b| b.status == Status::Ok);
        let base = base_record.and_then(|b| b.metrics.as_ref());
        let shown = CellView::of_record(r, mode, base, row.baseline);
        // A speedup inside the measured noise of either cell (their
        // repetitions' spread) is not one: marked `≈`, not coloured.
        match (mode, shown, base_record) {
            (ValueMode::Speedup(m), CellView::Value { text, tone }, Some(b)) if !row.baseline => {
                let noise = crate::model::Spread::band(r.spread, b.spread);
                let ratio = match (r.metrics.as_ref(), b.metrics.as_ref()) {
                    (Some(x), Some(y)) => match (m.value(x).number(), m.value(y).number()) {
                        (Some(x), Some(y)) if y > 0.0 => Some(x / y),
                        _ => None,
                    },
                    _ => None,
                };
                match (noise, ratio) {
                    (Some(n), Some(q)) if ((q - 1.0) * 100.0).abs() <= n => CellView::Value {
                        text: format!("≈{text}"),
                        tone: Tone::Plain,
                    },
                    _ => CellView::Value { text, tone },
                }
            }
            (_, shown, _) => shown,
        }
    }
}

/// A workload across a phase's configs, for the dashboard's chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// The x values of the columns charted, ascending.
    pub xs: Vec<f64>,
    pub series: Vec<ChartSeries>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChartSeries {
    /// Index into `Grid::configs`.
    pub config: usize,
    pub name: String,
    pub baseline: bool,
    pub points: Vec<(f64, f64)>,
}

/// Which configs the dashboard's grid shows, and in what order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Arrange {
    /// Only configs whose id contains this (case-insensitively); `/` in the grid.
    pub name: String,
    /// Only configs with a failed cell.
    pub failures_only: bool,
    /// Only this phase.
    pub phase: Option<String>,
    /// Sort each phase's configs by the value in this column, best first.
    pub sort_by: Option<usize>,
}

impl Arrange {
    pub fn is_plain(&self) -> bool {
        *self == Arrange::default()
    }
}

/// What a grid cell shows.
#[derive(Debug, Clone, PartialEq)]
pub enum CellView {
    /// The plan has no such cell.
    Absent,
    Pending,
    Running,
    Queued,
    Excluded,
    Skipped,
    /// `badge` always fits a column (`CTX 400`, `ILL-INSTR`); `label` says
    /// more when there is room (`ctx 400: 32,808 > 32,768`).
    Failed {
        badge: String,
        label: String,
        /// The server crashed (severity 3): drawn apart from request-level
        /// failures such as a context overflow.
        crash: bool,
    },
    Value {
        text: String,
        tone: Tone,
    },
    /// An `ok` cell whose value must be read with its warning (requests that
    /// returned fewer tokens than asked). `mark` is the warning in a few
    /// characters (`197/512`: tokens got/asked), `badge` when even that does
    /// not fit (`SHORT`), `label` all of it (`175.0 short 197/512`).
    Flagged {
        value: String,
        mark: String,
        badge: String,
        label: String,
    },
}

impl CellView {
    /// The cell in words, for any view without symbols of its own (exports,
    /// progress lines); a failed cell says all it can.
    pub fn label(&self) -> &str {
        match self {
            CellView::Absent => "",
            CellView::Pending => "·",
            CellView::Running => "running",
            CellView::Queued => "queued",
            CellView::Excluded => "excl",
            CellView::Skipped => "skip",
            CellView::Failed { label, .. } => label,
            CellView::Value { text, .. } => text,
            CellView::Flagged { label, .. } => label,
        }
    }

    /// A recorded cell as it shows in any view, for `mode` (`base`: the
    /// phase baseline's metrics in the same column, if it has some).
    pub fn of_record(
        r: &CellRecord,
        mode: ValueMode,
        base: Option<&Metrics>,
        is_baseline: bool,
    ) -> CellView {
        match r.status {
            Status::Skipped => CellView::Skipped,
            Status::Failed => match &r.failure {
                Some(f) => CellView::Failed {
                    badge: f.kind.badge().to_string(),
                    label: f.label(),
                    crash: f.kind.severity() >= 3,
                },
                None => CellView::Failed {
                    badge: "FAILED".into(),
                    label: "failed".into(),
                    crash: false,
                },
            },
            Status::Ok => match &r.metrics {
                Some(m) => match (mode.show(m, base, is_baseline), r.warnings.first()) {
                    (CellView::Value { text, .. }, Some(w)) => {
                        let mark = match (w.kind, m.output_tokens_asked) {
                            (FailureKind::ShortOutput, Some(asked)) => {
                                format!("{}/{asked}", m.output_tokens)
                            }
                            // The median still shows, marked as noisy.
                            (FailureKind::Noisy, _) => format!("~{text}"),
                            _ => w.kind.badge().to_string(),
                        };
                        let words = match (w.kind, r.spread) {
                            (FailureKind::ShortOutput, _) => format!("short {mark}"),
                            (FailureKind::Noisy, Some(sp)) => {
                                format!("noisy ±{:.0}%", sp.spread_pct / 2.0)
                            }
                            _ => mark.clone(),
                        };
                        CellView::Flagged {
                            label: format!("{text} {words}"),
                            value: text,
                            mark,
                            badge: w.kind.badge().to_string(),
                        }
                    }
                    (shown, _) => shown,
                },
                None => CellView::Value {
                    text: "ok".into(),
                    tone: Tone::Plain,
                },
            },
        }
    }
}

/// How a value compares with the phase's baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Plain,
    Baseline,
    Better,
    Worse,
}

/// The value the grid shows for ok cells (`v` cycles): the metrics the table
/// marks for the grid, and the speedup against the phase's baseline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueMode {
    Metric(&'static Metric),
    /// A metric (the grid's first: output tok/s) as a ratio to the phase
    /// baseline's in the same column.
    Speedup(&'static Metric),
}

impl Default for ValueMode {
    fn default() -> ValueMode {
        ValueMode::all()[0]
    }
}

impl ValueMode {
    /// Every mode in cycling order: the grid metrics in table order, the
    /// speedup right after the throughput values.
    pub fn all() -> Vec<ValueMode> {
        let grid: Vec<&'static Metric> = METRICS.iter().filter(|m| m.grid).collect();
        let after = grid
            .iter()
            .rposition(|m| m.unit == Unit::TokensPerSecond)
            .map_or(grid.len(), |i| i + 1);
        let first = grid.first().copied();
        let mut all: Vec<ValueMode> = grid.into_iter().map(ValueMode::Metric).collect();
        if let Some(m) = first {
            all.insert(after, ValueMode::Speedup(m));
        }
        all
    }

    /// The speedup against the phase baseline.
    pub fn speedup() -> ValueMode {
        ValueMode::all()
            .into_iter()
            .find(|m| matches!(m, ValueMode::Speedup(_)))
            .unwrap_or_default()
    }

    pub fn next(self) -> ValueMode {
        let all = ValueMode::all();
        let i = all.iter().position(|m| *m == self).unwrap_or(0);
        all[(i + 1) % all.len()]
    }

    pub fn title(self) -> String {
        match self {
            ValueMode::Metric(m) => m.label(),
            ValueMode::Speedup(m) => format!("speedup vs the phase baseline ({})", m.label()),
        }
    }

    /// The same value at another statistic (`p90`, `p99`) where the metric
    /// table has it; unchanged for a value that has only one (output tok/s,
    /// acceptance length) and for speedups.
    pub fn at_stat(self, stat: &str) -> ValueMode {
        let ValueMode::Metric(m) = self else {
            return self;
        };
        METRICS
            .iter()
            .find(|x| x.family == m.family && x.stat == stat && x.unit == m.unit)
            .map_or(self, ValueMode::Metric)
    }

    pub(crate) fn metric(self) -> &'static Metric {
        match self {
            ValueMode::Metric(m) | ValueMode::Speedup(m) => m,
        }
    }

    fn show(self, m: &Metrics, base: Option<&Metrics>, is_baseline: bool) -> CellView {
        let metric = self.metric();
        let value = metric.value(m).number();
        let base_value = base
            .and_then(|b| metric.value(b).number())
            .filter(|b| *b > 0.0);
        let ratio = match (value, base_value) {
            (Some(v), Some(b)) => Some(v / b),
            _ => None,
        };
        let tone = if is_baseline {
            Tone::Baseline
        } else {
            match (ratio, metric.better) {
                (Some(r), Better::Higher | Better::Lower) => {
                    let r = if metric.better == Better::Lower {
                        1.0 / r
                    } else {
                        r
                    };
                    if r >= 1.05 {
                        Tone::Better
                    } else if r <= 0.95 {
                        Tone::Worse
                    } else {
                        Tone::Plain
                    }
                }
                _ => Tone::Plain,
            }
        };
        let text = match self {
            ValueMode::Speedup(_) => match ratio {
                Some(r) => format!("{r:.2}x"),
                None => "n/a".into(),
            },
            ValueMode::Metric(metric) => metric.compact(m),
        };
        CellView::Value { text, tone }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(tok_s: f64, ttft: f64) -> Metrics {
        Metrics {
            output_tok_s: tok_s,
            decode_tok_s_p50: Some(tok_s / 2.0),
            ttft_ms_p50: ttft,
            accept_len: None,
            ..crate::model::sample_metrics()
        }
    }

    fn mode(key: &str) -> ValueMode {
        ValueMode::Metric(Metric::by_key(key).unwrap())
    }

    fn speedup() -> ValueMode {
        ValueMode::Speedup(Metric::by_key("output_tok_s").unwrap())
    }

    fn value(text: &str, tone: Tone) -> CellView {
        CellView::Value {
            text: text.into(),
            tone,
        }
    }

    #[test]
    fn values_are_toned_against_the_baseline() {
        let base = metrics(100.0, 50.0);
        let fast = metrics(150.0, 100.0);
        let same = metrics(102.0, 50.0);
        let out = mode("output_tok_s");
        assert_eq!(
            out.show(&fast, Some(&base), false),
            value("150.0", Tone::Better)
        );
        assert_eq!(
            speedup().show(&fast, Some(&base), false),
            value("1.50x", Tone::Better)
        );
        // TTFT: lower is better, so twice the TTFT is worse.
        let ttft = mode("ttft_ms_p50");
        assert_eq!(
            ttft.show(&fast, Some(&base), false),
            value("100ms", Tone::Worse)
        );
        assert_eq!(
            out.show(&same, Some(&base), false),
            value("102.0", Tone::Plain)
        );
        assert_eq!(
            speedup().show(&base, Some(&base), true),
            value("1.00x", Tone::Baseline)
        );
        let accept = mode("accept_len");
        assert_eq!(accept.show(&fast, None, false), value("n/a", Tone::Plain));
    }

    #[test]
    fn latency_values_can_be_read_at_p90_and_p99() {
        let ttft = mode("ttft_ms_p50");
        assert_eq!(ttft.at_stat("p99"), mode("ttft_ms_p99"));
        assert_eq!(ttft.at_stat("p90").title(), "TTFT p90");
        assert_eq!(mode("itl_ms_p50").at_stat("p99"), mode("itl_ms_p99"));
        // Values with one statistic stay as they are.
        assert_eq!(mode("output_tok_s").at_stat("p99"), mode("output_tok_s"));
        assert_eq!(speedup().at_stat("p99"), speedup());
    }

    #[test]
    fn modes_come_from_the_metric_table() {
        let titles: Vec<String> = ValueMode::all().into_iter().map(ValueMode::title).collect();
        assert_eq!(
            titles,
            [
                "output tok/s",
                "decode tok/s p50",
                "speedup vs the phase baseline (output tok/s)",
                "TTFT p50",
                "ITL p50",
                "acceptance length",
            ]
        );
        let last = *ValueMode::all().last().unwrap();
        assert_eq!(last.next(), ValueMode::default());
    }

    #[test]
    fn a_failed_cell_has_a_badge_and_a_label() {
        use crate::model::{ContextNumbers, Failure, FailureKind, FailureSource, Timestamp};
        let failure = Failure::new(
            FailureKind::ContextOverflow,
            FailureSource::Http,
            "too long",
        )
        .with_context(Some(ContextNumbers {
            limit: Some(32768),
            prompt_tokens: Some(32552),
            output_tokens: Some(256),
            total_tokens: None,
        }));
        let r = CellRecord {
            cell: "c/w-ctx1-c1".into(),
            config: "c".into(),
            phase: "p".into(),
            workload: "w".into(),
            context_tokens: 1,
            concurrency: 1,
            status: Status::Failed,
            failure: Some(failure),
            metrics: None,
            started_at: Timestamp::default(),
            finished_at: Timestamp::default(),
            warnings: Vec::new(),
            repetitions: Vec::new(),
            spread: None,
            beside: Vec::new(),
            gpus: Vec::new(),
        };
        let cv = CellView::of_record(&r, ValueMode::default(), None, false);
        assert_eq!(
            cv,
            CellView::Failed {
                badge: "CTX 400".into(),
                label: "ctx 400: 32,808 > 32,768".into(),
                crash: false,
            }
        );
        assert_eq!(cv.label(), "ctx 400: 32,808 > 32,768");
    }

    #[test]
    fn labels_stay_short() {
        assert_eq!(context_label(32768), "32k");
        assert_eq!(context_label(32760), "32760");
    }

    /// An ok cell with short outputs shows its warning over its value:
    /// got/asked in the grid, all of it in words for exports and lines.
    #[test]
    fn an_ok_cell_with_short_outputs_is_flagged() {
        let mut r = crate::model::sample_record("c/w-ctx1-c1", Status::Ok, "");
        assert!(matches!(
            CellView::of_record(&r, ValueMode::default(), None, false),
            CellView::Value { .. }
        ));
        r.warnings = vec![crate::model::Failure::new(
            FailureKind::ShortOutput,
            crate::model::FailureSource::Client,
            "1 of 4 requests returned fewer tokens than the 32 asked",
        )];
        let cv = CellView::of_record(&r, ValueMode::default(), None, false);
        assert_eq!(
            cv,
            CellView::Flagged {
                value: "66.7".into(),
                mark: "100/128".into(),
                badge: "SHORT".into(),
                label: "66.7 short 100/128".into(),
            }
        );
        assert_eq!(cv.label(), "66.7 short 100/128");
        let line = crate::view::text::outcome(&r);
        assert!(
            line.starts_with("ok  66.7 tok/s")
                && line.ends_with("SHORT 1 of 4 requests returned fewer tokens than the 32 asked"),
            "{line}"
        );
    }

    #[test]
    fn a_noisy_cell_shows_its_median_marked() {
        let mut r = crate::model::sample_record("c/w-ctx1-c1", Status::Ok, "");
        r.spread = Some(crate::model::Spread {
            n: 3,
            median: 66.7,
            min: 60.0,
            max: 70.0,
            spread_pct: 15.0,
        });
        r.warnings = vec![crate::model::Failure::new(
            FailureKind::Noisy,
            crate::model::FailureSource::Client,
            "3 repetitions spread 15.0 %",
        )];
        let cv = CellView::of_record(&r, ValueMode::default(), None, false);
        assert_eq!(
            cv,
            CellView::Flagged {
                value: "66.7".into(),
                mark: "~66.7".into(),
                badge: "NOISY".into(),
                label: "66.7 noisy ±8%".into(),
            }
        );
    }
}
