//! Prompts of a target length: an instruction from the workload's source, padded
//! with natural filler text and measured with the server's tokenizer.

use std::path::Path;

use super::tags::Tags;
use super::{LoadError, PromptSourceError};
use crate::plan::builtin_prompt as builtin;

/// Natural text used to pad prompts to their target length.
const FILLER: &str =
    "The committee met on a grey Tuesday morning to review the quarterly figures. \
Revenue had grown in every region except the north, where a long winter delayed construction. \
Several members asked whether the new warehouse would open on schedule, and the operations lead \
explained that the remaining work was mostly electrical and could proceed indoors. The discussion \
then turned to hiring: two teams had lost senior engineers to competitors, and the recruiters \
reported that candidates now expected more flexible schedules. A proposal to open a small office \
near the university was received warmly but deferred until the budget review. Later, the finance \
director walked through the cash position, noting that payments from two large customers had \
arrived late but in full. She recommended keeping a larger reserve through the spring. The meeting \
closed with a short presentation about the river restoration project that the company sponsors, \
including photographs of the new footbridge and the first otters seen there in twenty years. ";

/// The instructions of a workload's prompt source (one per prompt; cycled).
pub fn load_source(spec: &str) -> Result<Vec<String>, LoadError> {
    use PromptSourceError as E;
    let read = |path: &str| {
        std::fs::read_to_string(Path::new(path)).map_err(|err| E::Read {
            path: path.to_string(),
            err,
        })
    };
    match spec.split_once(':') {
        Some(("builtin", name)) => builtin(name)
            .map(|s| vec![s.to_string()])
            .ok_or_else(|| E::UnknownBuiltin(name.to_string()).into()),
        Some(("file", path)) => {
            let text = read(path)?;
            if text.trim().is_empty() {
                return Err(E::Empty(path.to_string()).into());
            }
            Ok(vec![text])
        }
        Some(("jsonl", path)) => {
            let text = read(path)?;
            let mut out = Vec::new();
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let v: serde_json::Value =
                    serde_json::from_str(line).map_err(|err| E::BadLine {
                        path: path.to_string(),
                        line: i + 1,
                        err,
                    })?;
                let p = v
                    .get("prompt")
                    .and_then(|p| p.as_str())
                    .map(str::to_string)
                    .or_else(|| {
                        // A chat: join the messages' contents.
                        v.get("messages").and_then(|m| m.as_array()).map(|msgs| {
                            msgs.iter()
                                .filter_map(|m| m.get("content").and_then(|c| c.as_str()))
                                .collect::<Vec<_>>()
                                .join("\n\n")
                        })
                    })
                    .or_else(|| v.as_str().map(str::to_string))
                    .ok_or_else(|| E::NotAPrompt {
                        path: path.to_string(),
                        line: i + 1,
                    })?;
                out.push(p);
            }
            if out.is_empty() {
                return Err(E::NoPrompts(path.to_string()).into());
            }
            Ok(out)
        }
        _ => Err(E::BadSpec(spec.to_string()).into()),
    }
}

/// The words filler is made of, repeated as far as needed.
fn filler_words(n: usize) -> String {
    let words: Vec<&str> = FILLER.split_whitespace().collect();
    let mut out = String::with_capacity(n * 7);
    for i in 0..n {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(words[i % words.len()]);
    }
    out
}

/// A prompt body with `n` filler words before the instruction.
pub fn compose(instruction: &str, n: usize) -> String {
    compose_padded(instruction, n, 0)
}

/// [`compose`] with `pad` single marks (` .`, one token in most vocabularies)
/// after the filler: the last step to an exact length when a word is too much.
fn compose_padded(instruction: &str, n: usize, pad: usize) -> String {
    if n == 0 && pad == 0 {
        instruction.to_string()
    } else {
        format!("{}{}\n\n{}", filler_words(n), " .".repeat(pad), instruction)
    }
}

/// The most marks tried to close the last gap.
const MAX_PAD: u64 = 8;

/// Whether `tokens` can be a tokenizer's count of a text of `words` words and
/// `bytes` bytes: a token holds at most about four words' worth of text in
/// any vocabulary, and at least one byte, give or take the special tokens or
/// chat template a server adds (at most 512, as [`super::tokenizer`] allows).
fn plausible(words: usize, bytes: usize, tokens: u64) -> bool {
    let (words, bytes) = (words as u64, bytes as u64);
    tokens > 0 && tokens.saturating_mul(4) >= words && tokens <= bytes + 512
}

/// How a fitted prompt is made from its instruction: `words` filler words,
/// then `pad` marks. Kept instead of the text where a fit is remembered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Recipe {
    pub words: usize,
    pub pad: usize,
}

impl Recipe {
    pub fn text(&self, instruction: &str) -> String {
        compose_padded(instruction, self.words, self.pad)
    }
}

/// Find the filler length whose token count, with a request's tag in place,
/// is the largest not above `target`, using `measure` (the server's
/// tokenizer). Returns the body (without the tag) and its count.
pub async fn fit<F, Fut>(
    instruction: &str,
    target: u64,
    tags: &Tags,
    measure: F,
) -> Result<(String, u64), LoadError>
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = Result<u64, LoadError>>,
{
    let (recipe, n) = fit_recipe(instruction, target, tags, measure).await?;
    Ok((recipe.text(instruction), n))
}

/// [`fit`], returning how the body is made instead of the body.
pub async fn fit_recipe<F, Fut>(
    instruction: &str,
    target: u64,
    tags: &Tags,
    mut measure: F,
) -> Result<(Recipe, u64), LoadError>
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = Result<u64, LoadError>>,
{
    // Every count is checked before it steers the fit: a tokenizer that
    // answers 0 or 1 for any text would otherwise grow the prompt without end.
    let mut measure = |text: String| {
        let (words, bytes) = (text.split_whitespace().count(), text.len());
        let counted = measure(text);
        async move {
            let tokens = counted.await?;
            plausible(words, bytes, tokens)
                .then_some(tokens)
                .ok_or(LoadError::Nonsense {
                    words,
                    bytes,
                    tokens,
                })
        }
    };
    let tags = &tags.measuring();
    let with_nonce = |n: usize| tags.apply(0, &compose(instruction, n));
    let base = measure(with_nonce(0)).await?;
    if base >= target {
        return Ok((Recipe::default(), base));
    }
    // Secant steps on tokens(n), then a walk of single words to land exactly.
    let (mut lo_n, mut lo_t) = (0usize, base);
    let mut n = ((target - base) as f64 / 1.3).max(1.0) as usize;
    let mut best = (0usize, base);
    for _ in 0..12 {
        let t = measure(with_nonce(n)).await?;
        if t <= target && t >= best.1 {
            best = (n, t);
        }
        if t == target {
            break;
        }
        let slope = if n != lo_n {
            ((t as f64 - lo_t as f64) / (n as f64 - lo_n as f64)).max(0.05)
        } else {
            1.3
        };
        let next = n as f64 + (target as f64 - t as f64) / slope;
        let next = next.round().max(0.0) as usize;
        lo_n = n;
        lo_t = t;
        if next == n {
            // Rounding stalled: step by one word towards the target.
            n = if t < target {
                n + 1
            } else {
                n.saturating_sub(1)
            };
        } else {
            n = next;
        }
    }
    // A word too many or too few: close the gap with marks.
    if best.1 < target && best.0 > 0 {
        for pad in 1..=(target - best.1).min(MAX_PAD) as usize {
            let recipe = Recipe { words: best.0, pad };
            let t = measure(tags.apply(0, &recipe.text(instruction))).await?;
            if t == target {
                return Ok((recipe, t));
            }
            if t > target {
                break;
            }
        }
    }
    let recipe = Recipe {
        words: best.0,
        pad: 0,
    };
    Ok((recipe, best.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fits_exactly_with_a_word_tokenizer() {
        for target in [40u64, 1000, 8192, 32000] {
            let tags = Tags::default();
            let (text, count) = fit(
                builtin("code").unwrap(),
                target,
                &tags,
                |t: String| async move { Ok(t.split_whitespace().count() as u64) },
            )
            .await
            .unwrap();
            assert_eq!(count, target);
            assert_eq!(
                tags.apply(9, &text).split_whitespace().count() as u64,
                target
            );
            let end = tags.at(crate::load::tags::Place::End);
            assert_eq!(
                end.apply(9, &text).split_whitespace().count() as u64,
                target
            );
        }
    }

    #[tokio::test]
    async fn fits_below_with_a_coarser_tokenizer() {
        // ~1.5 tokens per word, never exactly divisible: lands at most one word under.
        let (_, count) = fit("q", 5001, &Tags::default(), |t: String| async move {
            Ok(t.split_whitespace()
                .map(|w| 1 + (w.len() as u64 > 5) as u64)
                .sum())
        })
        .await
        .unwrap();
        assert!((4999..=5001).contains(&count), "{count}");
    }

    #[tokio::test]
    async fn a_tokenizer_that_cannot_count_is_an_error_not_a_reason_to_grow() {
        // What a llama.cpp /tokenize sent the wrong field answers (no tokens),
        // a liar that answers 1, and one that answers a fraction of a token
        // per word: each is refused before the prompt grows past the text
        // the count was asked of.
        for (name, per_word) in [("zero", 0.0), ("one", -1.0), ("tenth", 0.1)] {
            let longest = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let seen = longest.clone();
            let got = fit("q", 4096, &Tags::default(), move |t: String| {
                seen.fetch_max(t.len(), std::sync::atomic::Ordering::Relaxed);
                let words = t.split_whitespace().count() as f64;
                async move {
                    Ok(if per_word < 0.0 {
                        1
                    } else {
                        (words * per_word) as u64
                    })
                }
            })
            .await;
            let err = got.expect_err(name).to_string();
            assert!(
                err.contains("not a count to fit prompts with"),
                "{name}: {err}"
            );
            // 4096 tokens of English are ~20 kB; nothing near that was built.
            let longest = longest.load(std::sync::atomic::Ordering::Relaxed);
            assert!(longest < 25_000, "{name}: measured a {longest}-byte text");
        }
    }

    #[test]
    fn loads_jsonl_prompts() {
        let dir = std::env::temp_dir().join(format!("sweeptop-prompt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("p.jsonl");
        std::fs::write(
            &p,
            "{\"prompt\": \"a b\"}\n\n{\"messages\": [{\"role\":\"user\",\"content\":\"c\"}]}\n",
        )
        .unwrap();
        let got = load_source(&format!("jsonl:{}", p.display())).unwrap();
        assert_eq!(got, vec!["a b", "c"]);
        std::fs::write(&p, "{\"prompt\": \"a b\"}\nnot json\n").unwrap();
        let err = load_source(&format!("jsonl:{}", p.display())).unwrap_err();
        assert!(err.to_string().contains("p.jsonl:2:"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
