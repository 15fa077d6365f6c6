//! What can go wrong before or around a request: the server's address, a
//! connection, measuring a prompt, reading a prompt source. A request that was
//! sent and failed is a [`crate::model::RequestError`] instead, recorded with
//! the request.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A base URL the client cannot use (only `http://host[:port][/prefix]`).
    #[error("{url}: {why}")]
    BadUrl { url: String, why: String },
    #[error("connect to {addr}: {err}")]
    Connect { addr: String, err: std::io::Error },
    #[error("HTTP handshake with {addr}: {err}")]
    Handshake { addr: String, err: hyper::Error },
    /// The server's `POST /tokenize` did not give a count.
    #[error("tokenize: {0}")]
    Tokenize(String),
    /// A local `tokenizer.json` that cannot be loaded or used.
    #[error("tokenizer {path}: {err}", path = path.display())]
    Tokenizer {
        path: PathBuf,
        err: tokenizers::Error,
    },
    /// A workload's prompt source that cannot be read.
    #[error("{0}")]
    PromptSource(String),
}
