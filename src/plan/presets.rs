//! `server.kind`: what each inference server needs so that a plan for it is a
//! few lines. A preset fills only what the plan leaves out; everything stays
//! overridable in `[server]`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, Serialize, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum ServerKind {
    /// Any OpenAI-compatible server: nothing assumed beyond `/health` and
    /// `/v1/models`; the cache flush and version endpoints are probed.
    #[default]
    Openai,
    Vllm,
    Sglang,
    Llamacpp,
    Tgi,
}

/// What a kind of server needs, and where it says what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    pub kind: ServerKind,
    /// The log line that proves readiness (besides the health check).
    pub ready_log_line: Option<&'static str>,
    /// Environment the server needs for sweeptop to do its work (set unless
    /// the plan sets the variable itself).
    pub env: &'static [(&'static str, &'static str)],
    /// Endpoints that empty the prefix cache, tried in order.
    pub flush: &'static [&'static str],
    /// Where the server says its version: (GET path, JSON pointer).
    pub version: &'static [(&'static str, &'static str)],
    /// Where the server says its context length: (GET path, JSON pointer),
    /// after `/v1/models`' `max_model_len`.
    pub context: &'static [(&'static str, &'static str)],
    /// Where it says the file it loaded the model from, when `/v1/models`
    /// has no `root`: (GET path, JSON pointer).
    pub model_path: &'static [(&'static str, &'static str)],
    /// Where it says how many requests it serves at once, each with its own
    /// share of the context (llama.cpp's slots), when the context above is
    /// one slot's: (GET path, JSON pointer).
    pub slots: &'static [(&'static str, &'static str)],
    /// Where speculative decoding's acceptance length comes from, in words.
    pub acceptance: &'static str,
}

const PRESETS: [Preset; 5] = [
    Preset {
        kind: ServerKind::Openai,
        ready_log_line: None,
        env: &[],
        flush: &["/reset_prefix_cache", "/flush_cache"],
        version: &[("/version", "/version"), ("/props", "/build_info")],
        context: &[
            ("/get_model_info", "/max_context_length"),
            ("/get_model_info", "/context_length"),
            ("/props", "/default_generation_settings/n_ctx"),
        ],
        model_path: &[("/props", "/model_path")],
        slots: &[("/props", "/total_slots")],
        acceptance: "any of vLLM's counters, SGLang's log lines or gauge",
    },
    Preset {
        kind: ServerKind::Vllm,
        ready_log_line: Some("Application startup complete."),
        // POST /reset_prefix_cache is served only in dev mode.
        env: &[("VLLM_SERVER_DEV_MODE", "1")],
        flush: &["/reset_prefix_cache"],
        version: &[("/version", "/version")],
        context: &[],
        model_path: &[],
        slots: &[],
        acceptance: "vllm:spec_decode_* counters over the cell, else its SpecDecoding log lines",
    },
    Preset {
        kind: ServerKind::Sglang,
        ready_log_line: Some("The server is fired up and ready to roll!"),
        env: &[],
        flush: &["/flush_cache"],
        version: &[("/get_server_info", "/version"), ("/version", "/version")],
        context: &[
            ("/get_model_info", "/max_context_length"),
            ("/get_model_info", "/context_length"),
        ],
        model_path: &[],
        slots: &[],
        acceptance: "`accept len` of its decode log lines, else sglang:spec_accept_length",
    },
    Preset {
        kind: ServerKind::Llamacpp,
        // "llama_server: listening on http://…" (2026), "server is listening
        // on http://…" (2024–25): printed once the model is loaded.
        ready_log_line: Some("listening on"),
        env: &[],
        flush: &[],
        version: &[("/props", "/build_info")],
        // One slot's context (`--ctx-size / --parallel` unless the KV cache
        // is unified): what a single request can use.
        context: &[("/props", "/default_generation_settings/n_ctx")],
        model_path: &[("/props", "/model_path")],
        slots: &[("/props", "/total_slots")],
        acceptance: "its `draft acceptance` log lines",
    },
    Preset {
        kind: ServerKind::Tgi,
        ready_log_line: Some("Connected"),
        env: &[],
        flush: &[],
        version: &[("/info", "/version")],
        context: &[("/info", "/max_total_tokens")],
        model_path: &[],
        slots: &[],
        acceptance: "none (TGI exports no acceptance figure)",
    },
];

impl ServerKind {
    pub fn preset(self) -> &'static Preset {
        // PRESETS is in declaration order; `presets_are_in_declaration_order` keeps it so.
        &PRESETS[self as usize]
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ServerKind::Openai => "openai",
            ServerKind::Vllm => "vllm",
            ServerKind::Sglang => "sglang",
            ServerKind::Llamacpp => "llamacpp",
            ServerKind::Tgi => "tgi",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_in_declaration_order() {
        for kind in [
            ServerKind::Openai,
            ServerKind::Vllm,
            ServerKind::Sglang,
            ServerKind::Llamacpp,
            ServerKind::Tgi,
        ] {
            assert_eq!(kind.preset().kind, kind);
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
    }
}
