//! Measuring prompts: the server's own tokenizer (`POST /tokenize`) when it has
//! one, else a local `tokenizer.json` the plan names, else an estimate.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::endpoints::{tokenize, usage_prompt_tokens, TokenizeField};
use super::tags::Tags;
use super::LoadError;

/// A local Hugging Face tokenizer.
#[derive(Clone)]
pub struct LocalTokenizer(Arc<tokenizers::Tokenizer>, PathBuf);

impl LocalTokenizer {
    pub fn load(path: &Path) -> Result<LocalTokenizer, LoadError> {
        tokenizers::Tokenizer::from_file(path)
            .map(|t| LocalTokenizer(Arc::new(t), path.to_path_buf()))
            .map_err(|err| LoadError::Tokenizer {
                path: path.to_path_buf(),
                err,
            })
    }

    /// Tokens of a prompt as the server will see it (special tokens included).
    pub fn count(&self, text: &str) -> Result<u64, LoadError> {
        self.0
            .encode(text, true)
            .map(|e| e.len() as u64)
            .map_err(|err| LoadError::Tokenizer {
                path: self.1.clone(),
                err,
            })
    }
}

/// How prompts are measured for one server.
#[derive(Clone)]
pub enum Measure {
    Server {
        client: reqwest::Client,
        target: super::Target,
        /// How its `/tokenize` takes a text.
        field: TokenizeField,
        /// What the server's own count of a request's prompt
        /// (`usage.prompt_tokens`) adds to `/tokenize`'s: special tokens
        /// (a BOS) or a chat template's, measured once per server.
        offset: i64,
    },
    Local(LocalTokenizer),
    /// About four characters per token; the result line's `prompt_tokens_mean`
    /// (from `usage`) still says what was really sent.
    Estimate,
}

impl Measure {
    /// The server's `/tokenize` if it answers, else the local tokenizer, else an
    /// estimate; with a notice when it is not the server's own. `/tokenize` is
    /// checked once against the prompt tokens the server counts for a real
    /// request, and the difference kept (a BOS or a template the server adds
    /// and `/tokenize` leaves out), so prompts are as long as the server says
    /// in `usage`.
    pub async fn choose(
        client: &reqwest::Client,
        target: &super::Target,
        local: Option<&Path>,
        setting: &str,
    ) -> (Measure, Option<String>) {
        let probe = Tags::default().apply(0, "Hello, how are you today?");
        // The request's own shape first; llama.cpp wants `content`.
        let mut answer = tokenize(client, target, TokenizeField::Request, &probe).await;
        let mut field = TokenizeField::Request;
        if answer.is_err() {
            if let Ok(n) = tokenize(client, target, TokenizeField::Content, &probe).await {
                (answer, field) = (Ok(n), TokenizeField::Content);
            }
        }
        let why = match answer {
            Ok(counted) => {
                let (offset, notice) = match usage_prompt_tokens(client, target, &probe).await {
                    // A sane difference is special tokens or a template; anything
                    // else is a server we do not understand: trust /tokenize.
                    Ok(used) if used.abs_diff(counted) <= 512 => (used as i64 - counted as i64, None),
                    Ok(used) => (0, Some(format!("the server counts {used} prompt tokens where /tokenize counts {counted}; prompts are measured with /tokenize"))),
                    Err(e) => (0, Some(format!("{e}; prompts are measured with /tokenize alone"))),
                };
                let server = Measure::Server {
                    client: client.clone(),
                    target: target.clone(),
                    field,
                    offset,
                };
                return (server, notice);
            }
            Err(e) => e,
        };
        match local.map(LocalTokenizer::load) {
            Some(Ok(t)) => (Measure::Local(t), Some(format!("no server tokenizer ({why}); measuring prompts with the tokenizer {setting} names"))),
            Some(Err(e)) => (Measure::Estimate, Some(format!("no server tokenizer ({why}) and {e}; prompt lengths are estimated (~4 characters per token)"))),
            None => (Measure::Estimate, Some(format!("no server tokenizer ({why}); prompt lengths are estimated (~4 characters per token); name a tokenizer.json with {setting}"))),
        }
    }

    pub async fn count(&self, text: &str) -> Result<u64, LoadError> {
        match self {
            Measure::Server {
                client,
                target,
                field,
                offset,
            } => tokenize(client, target, *field, text)
                .await
                .map(|n| n.saturating_add_signed(*offset)),
            Measure::Local(t) => t.count(text),
            Measure::Estimate => Ok((text.len() / 4) as u64),
        }
    }

    /// The request tags that cost the same with this tokenizer
    /// ([`Tags::calibrate`]); an estimate keeps the digits, silently.
    pub async fn tags(&self) -> (Tags, Option<String>) {
        if matches!(self, Measure::Estimate) {
            return (Tags::default(), None);
        }
        Tags::calibrate(|text| {
            let m = self.clone();
            async move { m.count(&text).await }
        })
        .await
    }

    /// Fit an instruction to `target` tokens. On a measuring error the estimate
    /// is used and the error returned, so the caller can stop asking.
    pub async fn fit(
        &self,
        instruction: &str,
        target: u64,
        tags: &Tags,
    ) -> (String, u64, Option<LoadError>) {
        let fitted = super::prompt::fit(instruction, target, tags, |text| {
            let m = self.clone();
            async move { m.count(&text).await }
        })
        .await;
        match fitted {
            Ok((text, n)) => (text, n, None),
            Err(e) => {
                let estimate = |text: String| async move { Ok((text.len() / 4) as u64) };
                let (text, n) = super::prompt::fit(instruction, target, tags, estimate)
                    .await
                    .unwrap_or_default();
                (text, n, Some(e))
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A word-level tokenizer written by hand: every word or punctuation run is
    /// one token (unknown words map to [UNK], which still counts).
    pub const WORDS_JSON: &str = r#"{
      "version": "1.0",
      "truncation": null, "padding": null, "added_tokens": [],
      "normalizer": null,
      "pre_tokenizer": {"type": "Whitespace"},
      "post_processor": null, "decoder": null,
      "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "the": 1}, "unk_token": "[UNK]"}
    }"#;

    #[test]
    fn counts_with_a_tokenizer_json() {
        let dir = std::env::temp_dir().join(format!("sweeptop-tok-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("tokenizer.json");
        std::fs::write(&p, WORDS_JSON).unwrap();
        let t = LocalTokenizer::load(&p).unwrap();
        assert_eq!(t.count("the cat sat.").unwrap(), 4);
        std::fs::write(&p, "{ not a tokenizer").unwrap();
        let err = LocalTokenizer::load(&p).err().unwrap().to_string();
        assert!(err.contains("tokenizer.json"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
