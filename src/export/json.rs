//! The JSON export: the records as they are stored, each with what its config
//! benchmarked and its plan axes.

use super::{Axes, Servers};
use crate::model::text;
use crate::model::CellRecord;

/// The records as a JSON list, each with a `server` object (null when the
/// run did not record one).
pub(super) fn json(records: &[CellRecord], servers: &Servers, axes: &Axes) -> String {
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
