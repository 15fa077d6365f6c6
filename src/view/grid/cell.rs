//! What one grid cell shows, the same in every view: a value for the chosen
//! [`ValueMode`] toned against the phase's baseline, a failure's badge and
//! label, a warning's mark, or where the cell stands (pending, running…).

use crate::model::{Better, CellRecord, FailureKind, Metric, Metrics, Status, Unit, METRICS};

/// What a grid cell shows.
#[derive(Debug, Clone, PartialEq)]
pub enum CellView {
    /// The plan has no such cell.
    Absent,
    Pending,
    /// Pending, its config waiting for a prepare step (how far, when known).
    Preparing(Option<u8>),
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
            CellView::Preparing(_) => "preparing",
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
                            // The value with its mark, never the mark alone.
                            _ => format!("{text} {}", w.kind.badge()),
                        };
                        let words = match (w.kind, r.spread) {
                            (FailureKind::ShortOutput, _) => format!("short {mark}"),
                            (FailureKind::Noisy, Some(sp)) => {
                                format!("noisy ±{:.0}%", sp.spread_pct / 2.0)
                            }
                            (FailureKind::Noisy, None) => mark.clone(),
                            _ => w.kind.badge().to_string(),
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

    /// A cell just over a warning's threshold keeps its value, with the
    /// mark beside it (or a star where the column is narrow), never the mark
    /// alone.
    #[test]
    fn a_flagged_cell_shows_its_value_with_the_mark() {
        let mut r = crate::model::sample_record("c/w-ctx1-c1", Status::Ok, "");
        r.warnings = vec![crate::model::Failure::new(
            FailureKind::ClockGap,
            crate::model::FailureSource::Client,
            "mean TTFT 40.0 ms here, 14.9 ms by the server's own clock",
        )];
        let cv = CellView::of_record(&r, ValueMode::default(), None, false);
        assert_eq!(
            cv,
            CellView::Flagged {
                value: "66.7".into(),
                mark: "66.7 GAP".into(),
                badge: "GAP".into(),
                label: "66.7 GAP".into(),
            }
        );
    }
}
