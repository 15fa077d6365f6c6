//! Which plan settings differ between the runs compared: a workload whose
//! requests changed (`max_tokens` 16 in one run, 128 in the other) measures
//! something else under the same cell id, so its cells are not comparable.
//! The server commands and the matrix may differ: that is what a comparison
//! is for.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::plan::{Plan, Workload};

/// One workload setting that is not the same in a later run as in the first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SettingDiff {
    pub workload: String,
    pub setting: String,
    /// Its value in the first run's plan, and in `run`'s.
    pub first: String,
    pub run: String,
    pub value: String,
}

/// What the settings check found across the runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Settings {
    pub differ: Vec<SettingDiff>,
    /// Runs whose plan could not be read: their settings are not checked.
    pub unchecked: Vec<String>,
}

impl Settings {
    /// Whether `workload`'s cells measure the same thing in every run.
    pub fn same(&self, workload: &str) -> bool {
        !self.differ.iter().any(|d| d.workload == workload)
    }

    /// The workloads whose settings differ, each once, in order.
    pub fn changed(&self) -> BTreeSet<&str> {
        self.differ.iter().map(|d| d.workload.as_str()).collect()
    }
}

/// A workload's settings that decide what one of its cells measures, as
/// text. Its contexts and concurrencies are the matrix (each cell id says
/// its own), so they are left out.
fn settings(w: &Workload) -> Vec<(&'static str, String)> {
    let opt = |v: Option<f64>| v.map_or_else(|| "none".to_string(), |v| v.to_string());
    vec![
        ("prompt", w.prompt.clone()),
        ("requests", w.requests.to_string()),
        ("max_tokens", w.max_tokens.to_string()),
        ("warmup", w.warmup.to_string()),
        ("repeats", w.repeats.to_string()),
        ("rate", opt(w.rate)),
        ("duration_s", opt(w.duration_s)),
        ("overflow", format!("{:?}", w.overflow).to_lowercase()),
        ("cache", format!("{:?}", w.cache).to_lowercase()),
    ]
}

/// The workload settings each later run's plan holds otherwise than the
/// first's (workloads in both), and the runs with no plan to check.
pub fn compare_settings(runs: &[(&str, Option<&Plan>)]) -> Settings {
    let mut out = Settings::default();
    let Some((_, first)) = runs.first() else {
        return out;
    };
    let Some(first) = first else {
        out.unchecked = runs.iter().map(|(n, _)| n.to_string()).collect();
        return out;
    };
    for (name, plan) in &runs[1..] {
        let Some(plan) = plan else {
            out.unchecked.push(name.to_string());
            continue;
        };
        for w in &first.workloads {
            let Some(other) = plan.workloads.iter().find(|o| o.id == w.id) else {
                continue;
            };
            for ((setting, a), (_, b)) in settings(w).into_iter().zip(settings(other)) {
                if a != b {
                    out.differ.push(SettingDiff {
                        workload: w.id.clone(),
                        setting: setting.to_string(),
                        first: a,
                        run: name.to_string(),
                        value: b,
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn plan(max_tokens: u32, extra: &str) -> Plan {
        let text = format!(
            r#"
name = "t"
[server]
command = "serve --port {{port}}"
port = 30000
[[workloads]]
id = "code"
contexts = [128]
concurrency = [1]
max_tokens = {max_tokens}
{extra}
[[workloads]]
id = "chat"
contexts = [128]
concurrency = [1]
[[phases]]
id = "p"
"#
        );
        Plan::parse(Path::new("t.toml"), &text).unwrap()
    }

    #[test]
    fn a_workload_asking_for_something_else_is_said_with_both_values() {
        let (a, b) = (plan(16, ""), plan(128, "cache = \"warm\""));
        let s = compare_settings(&[("runs/a", Some(&a)), ("runs/b", Some(&b))]);
        assert_eq!(s.differ.len(), 2, "{s:?}");
        assert_eq!(
            s.differ[0],
            SettingDiff {
                workload: "code".into(),
                setting: "max_tokens".into(),
                first: "16".into(),
                run: "runs/b".into(),
                value: "128".into(),
            }
        );
        assert_eq!(s.differ[1].setting, "cache");
        assert!(!s.same("code") && s.same("chat"));
        assert_eq!(s.changed().into_iter().collect::<Vec<_>>(), vec!["code"]);
        // The same plan twice: nothing differs; a run without a plan is
        // said as unchecked.
        let same = compare_settings(&[("a", Some(&a)), ("b", Some(&a)), ("c", None)]);
        assert!(same.differ.is_empty());
        assert_eq!(same.unchecked, vec!["c"]);
    }
}
