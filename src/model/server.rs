//! What was benchmarked, per config: the server (kind, version), the model
//! (path, a hash of its `config.json`), the command, the machine (host, GPUs,
//! driver, CUDA) and sweeptop's version. Recorded when the server is ready;
//! shown in the config details and carried into every export.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerMeta {
    /// `server.kind`: vllm, sglang, llamacpp, tgi or openai.
    pub kind: String,
    /// As the server reports it (`/version`, `/get_server_info`, …).
    pub version: Option<String>,
    /// The model id the requests send.
    pub model: String,
    /// Where the server loaded it from, when it says.
    pub model_path: Option<String>,
    /// SHA-256 of `<model_path>/config.json`, when it is a readable file here.
    pub model_config_sha256: Option<String>,
    /// SHA-256 of the model file's first 16 MiB when the model is one file
    /// (a GGUF: its header, metadata and vocabulary), readable here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_file_head_sha256: Option<String>,
    /// The launch command, placeholders filled.
    pub command: String,
    pub host: String,
    /// The config's GPUs as NVML names them (`0: NVIDIA H200`).
    pub gpus: Vec<String>,
    pub driver: Option<String>,
    pub cuda: Option<String>,
    pub sweeptop_version: String,
}

impl ServerMeta {
    /// `vllm 0.32.0`, `sglang (version unknown)`.
    pub fn server_label(&self) -> String {
        match &self.version {
            Some(v) => format!("{} {v}", self.kind),
            None => format!("{} (version unknown)", self.kind),
        }
    }

    /// The rows a details view or a report shows: (name, value), missing
    /// ones as `unknown`.
    pub fn rows(&self) -> Vec<(&'static str, String)> {
        let or = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
        let gpus = if self.gpus.is_empty() {
            "none seen".to_string()
        } else {
            self.gpus.join(", ")
        };
        vec![
            ("server", self.server_label()),
            ("model", self.model.clone()),
            ("model path", or(&self.model_path)),
            match &self.model_file_head_sha256 {
                Some(h) => ("model file sha256 (first 16 MiB)", h.clone()),
                None => ("config.json sha256", or(&self.model_config_sha256)),
            },
            ("command", self.command.clone()),
            ("host", self.host.clone()),
            ("GPUs", gpus),
            (
                "driver / CUDA",
                format!("{} / {}", or(&self.driver), or(&self.cuda)),
            ),
            ("sweeptop", self.sweeptop_version.clone()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_fields_read_as_unknown() {
        let m: ServerMeta = serde_json::from_str(r#"{"kind":"vllm","model":"tiny"}"#).unwrap();
        assert_eq!(m.server_label(), "vllm (version unknown)");
        let rows = m.rows();
        assert!(rows.contains(&("driver / CUDA", "unknown / unknown".into())));
        assert!(rows.contains(&("GPUs", "none seen".into())));
    }
}
