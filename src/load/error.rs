//! What can go wrong before or around a request: the server's address, a
//! connection, measuring a prompt, reading a prompt source, the server's other
//! endpoints. A request that was sent and failed is a
//! [`crate::model::RequestError`] instead, recorded with the request.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A base URL the client cannot use (only `http://host[:port][/prefix]`).
    #[error("{url}: {why}")]
    BadUrl { url: String, why: UrlProblem },
    #[error("connect to {addr}: {err}")]
    Connect { addr: String, err: std::io::Error },
    #[error("HTTP handshake with {addr}: {err}")]
    Handshake { addr: String, err: hyper::Error },
    /// The server's `POST /tokenize` did not give a count.
    #[error("tokenize: {0}")]
    Tokenize(#[source] SideError),
    /// The one request that checks `/tokenize` against the server's own
    /// count (`usage.prompt_tokens`) did not give it.
    #[error("tokenize: checking /tokenize against usage: {0}")]
    UsageCheck(#[source] SideError),
    /// A local `tokenizer.json` that cannot be loaded or used.
    #[error("tokenizer {path}: {err}", path = path.display())]
    Tokenizer {
        path: PathBuf,
        err: tokenizers::Error,
    },
    /// A tokenizer whose counts cannot be true of the text it was given
    /// (fewer tokens than a quarter of its words, or far more than its
    /// characters): prompts are never grown or cut on such a count.
    #[error("the tokenizer counts {tokens} tokens for a text of {words} words ({bytes} bytes): not a count to fit prompts with")]
    Nonsense {
        words: usize,
        bytes: usize,
        tokens: u64,
    },
    /// A workload's prompt source that cannot be read.
    #[error(transparent)]
    PromptSource(#[from] PromptSourceError),
}

/// Why a base URL is not one the client can use.
#[derive(Debug, thiserror::Error)]
pub enum UrlProblem {
    #[error("not a URL ({0})")]
    NotUrl(#[source] hyper::http::uri::InvalidUri),
    #[error("only http:// is supported, not {0}://")]
    Scheme(String),
    #[error("the URL needs http://")]
    NoScheme,
    #[error("no host in the URL")]
    NoHost,
}

/// Why one of the server's side endpoints (`/tokenize`, a non-streamed
/// request) gave no answer to use.
#[derive(Debug, thiserror::Error)]
pub enum SideError {
    #[error("{0}")]
    Send(#[source] reqwest::Error),
    #[error("HTTP {0}")]
    Status(u16),
    #[error("{0}")]
    Body(#[source] reqwest::Error),
    #[error("{0}")]
    Json(#[source] serde_json::Error),
    #[error("no `count` or `tokens` in the answer")]
    NoCount,
    #[error("0 tokens for a text of {0} bytes")]
    NoTokens(usize),
    #[error("no usage.prompt_tokens in the answer")]
    NoUsage,
    #[error("an answer over {} MiB", .0 >> 20)]
    TooLarge(usize),
}

/// Why a workload's prompt source gives no prompts.
#[derive(Debug, thiserror::Error)]
pub enum PromptSourceError {
    #[error("unknown built-in prompt `{0}`")]
    UnknownBuiltin(String),
    #[error("prompt file {path}: {err}")]
    Read { path: String, err: std::io::Error },
    #[error("prompt file {0} is empty")]
    Empty(String),
    #[error("prompt file {0} has no prompts")]
    NoPrompts(String),
    #[error("{path}:{line}: {err}")]
    BadLine {
        path: String,
        line: usize,
        err: serde_json::Error,
    },
    #[error("{path}:{line}: expected {{\"prompt\": ...}} or {{\"messages\": [...]}}")]
    NotAPrompt { path: String, line: usize },
    #[error("bad prompt source `{0}`")]
    BadSpec(String),
}
