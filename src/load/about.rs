//! What a server says about itself once it is up: the model it serves (and
//! where from), its context length and its version, read where its kind
//! keeps them (`server.kind`). Any of them may be missing: a notice and a
//! null, never a failure.

use std::time::Duration;

use crate::plan::Preset;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct About {
    /// The first model id `/v1/models` lists.
    pub model: Option<String>,
    /// Where it was loaded from (vLLM's `root`).
    pub model_root: Option<String>,
    pub context: Option<u64>,
    /// Requests it serves at once, each with `context` of its own
    /// (llama.cpp's slots), when it says.
    pub slots: Option<u64>,
    pub version: Option<String>,
    /// What the server said that cannot be true, in words with its value
    /// (a context of 0 tokens): left unknown, to be said as a notice.
    pub refused: Vec<String>,
}

/// The longest context a served model can have, in tokens; beyond it (or
/// at 0) the server's figure is a broken one, not a limit.
pub const MAX_CONTEXT: u64 = 1 << 27;

/// A context length the server reported, kept when it can be true.
fn context_of(said: u64, from: &str, refused: &mut Vec<String>) -> Option<u64> {
    if (1..=MAX_CONTEXT).contains(&said) {
        return Some(said);
    }
    refused.push(format!(
        "the server's context length {said} tokens ({from}) cannot be true: taken as unknown (set limits.context in the plan)"
    ));
    None
}

/// GET a JSON document; `None` on any failure.
async fn get_json(client: &reqwest::Client, url: String) -> Option<serde_json::Value> {
    let resp = super::endpoints::get_ok(client, &url, Duration::from_secs(10)).await?;
    let bytes = super::endpoints::read_capped(resp, super::endpoints::MAX_JSON_BODY)
        .await
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// A figure at `pointer`: a string or a number, trimmed to a sane length (a
/// path's).
fn text_at(v: &serde_json::Value, pointer: &str) -> Option<String> {
    match v.pointer(pointer)? {
        serde_json::Value::String(s) if !s.trim().is_empty() => {
            Some(s.trim().chars().take(1024).collect())
        }
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Ask the server about itself: `/v1/models` first, then the places its
/// preset names for the context and the version.
pub async fn about(client: &reqwest::Client, base: &str, preset: &Preset) -> About {
    let mut out = About::default();
    if let Some(v) = get_json(client, format!("{base}/v1/models")).await {
        if let Some(m) = v.pointer("/data/0") {
            let s = |k: &str| m.get(k).and_then(|x| x.as_str()).map(str::to_string);
            out.model = s("id");
            out.model_root = s("root");
            out.context = m
                .get("max_model_len")
                .and_then(|x| x.as_u64())
                .and_then(|n| context_of(n, "/v1/models max_model_len", &mut out.refused));
        }
    }
    let mut pages: Vec<(&str, serde_json::Value)> = Vec::new();
    // Each page once, however many figures it holds.
    let wanted = [
        preset.context,
        preset.version,
        preset.model_path,
        preset.slots,
    ];
    for (path, _) in wanted.iter().flat_map(|list| list.iter()) {
        if !pages.iter().any(|(p, _)| p == path) {
            let v = get_json(client, format!("{base}{path}"))
                .await
                .unwrap_or(serde_json::Value::Null);
            pages.push((path, v));
        }
    }
    // The first of `list` the pages hold, with the page it is on.
    let find = |list: &[(&'static str, &str)]| {
        list.iter().find_map(|(path, pointer)| {
            pages
                .iter()
                .find(|(p, _)| p == path)
                .and_then(|(_, v)| text_at(v, pointer))
                .map(|text| (*path, text))
        })
    };
    if out.context.is_none() {
        if let Some((path, said)) = find(preset.context) {
            let said = said.parse().ok();
            out.context = said.and_then(|n| context_of(n, path, &mut out.refused));
        }
    }
    out.version = find(preset.version).map(|(_, text)| text.chars().take(80).collect());
    if out.model_root.is_none() {
        out.model_root = find(preset.model_path).map(|(_, text)| text);
    }
    out.slots = find(preset.slots)
        .and_then(|(_, n)| n.parse().ok())
        .filter(|n| (1..=1 << 16).contains(n));
    out
}

impl About {
    /// Its requests take `cache_prompt` (llama.cpp, known by its slots).
    pub fn per_request_cache(&self) -> bool {
        self.slots.is_some()
    }

    /// What a server whose requests each get one slot's share of its
    /// context must be told as: the context prompts are planned against.
    pub fn slots_note(&self) -> Option<String> {
        match (self.slots, self.context) {
            (Some(slots @ 2..), Some(n)) => Some(format!("the server serves {slots} requests at once, each with {n} tokens of context of its own (one slot's share): prompts are planned against {n}")),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_read_as_text_or_numbers() {
        let v = serde_json::json!({"version": "0.32.0", "n": 2048, "e": "  ", "o": {}});
        assert_eq!(text_at(&v, "/version").as_deref(), Some("0.32.0"));
        assert_eq!(text_at(&v, "/n").as_deref(), Some("2048"));
        assert_eq!(text_at(&v, "/e"), None);
        assert_eq!(text_at(&v, "/o"), None);
        assert_eq!(text_at(&v, "/missing"), None);
        let long = serde_json::json!({"v": "x".repeat(5000)});
        assert_eq!(text_at(&long, "/v").unwrap().len(), 1024);
    }

    #[test]
    fn a_context_that_cannot_be_true_is_unknown_and_said() {
        let mut refused = Vec::new();
        assert_eq!(context_of(4096, "x", &mut refused), Some(4096));
        assert!(refused.is_empty());
        assert_eq!(
            context_of(0, "/v1/models max_model_len", &mut refused),
            None
        );
        assert_eq!(context_of(u64::MAX, "/props", &mut refused), None);
        assert_eq!(refused.len(), 2);
        assert!(refused[0].contains("context length 0 tokens (/v1/models max_model_len)"));
        assert!(refused[0].contains("limits.context"));
    }
}
