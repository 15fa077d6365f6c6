//! Measuring prompts: the server's own tokenizer (`POST /tokenize`) when it has
//! one, else a local `tokenizer.json` the plan names, else an estimate.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

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
        /// What servers of the same model counted before it, where it
        /// counts as they did.
        book: Option<Arc<Mutex<Book>>>,
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
        books: Option<&CountBooks>,
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
                let (book, changed) = match books {
                    Some(b) => b.open(client, target, field).await,
                    None => (None, None),
                };
                let server = Measure::Server {
                    client: client.clone(),
                    target: target.clone(),
                    field,
                    offset,
                    book,
                };
                let notice = match (notice, changed) {
                    (Some(a), Some(b)) => Some(format!("{a}; {b}")),
                    (a, b) => a.or(b),
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
                book,
            } => {
                let key = TextKey::of(text);
                let known = book
                    .as_ref()
                    .and_then(|b| lock(b).counts.get(&key).copied());
                let n = match known {
                    Some(n) => n,
                    None => {
                        let n = tokenize(client, target, *field, text).await?;
                        if let Some(b) = book {
                            lock(b).keep(key, text, n);
                        }
                        n
                    }
                };
                Ok(n.saturating_add_signed(*offset))
            }
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
        // A fit is made of counts alone: where the book holds it, the counts
        // it was made of were this server's too (the book was checked
        // against it), and it is made again without measuring anything.
        let remembered = match self {
            Measure::Server {
                offset,
                book: Some(book),
                ..
            } => Some((FitKey::of(instruction, target, tags, *offset), book)),
            _ => None,
        };
        if let Some((key, book)) = &remembered {
            if let Some(&(recipe, n)) = lock(book).fits.get(key) {
                return (recipe.text(instruction), n, None);
            }
        }
        let fitted = super::prompt::fit_recipe(instruction, target, tags, |text| {
            let m = self.clone();
            async move { m.count(&text).await }
        })
        .await;
        match fitted {
            Ok((recipe, n)) => {
                if let Some((key, book)) = remembered {
                    let mut book = lock(book);
                    if book.fits.len() < BOOK_MAX {
                        book.fits.insert(key, (recipe, n));
                    }
                }
                (recipe.text(instruction), n, None)
            }
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

/// What servers' tokenizers counted, kept for the servers after them: a
/// sweep starts the same model again for config after config, and fitting
/// its prompts again is dozens of `/tokenize` calls of up to a context's
/// worth of text each. A book is kept per model, API and `/tokenize` shape;
/// a new server is read from it only once it counts the book's longest text
/// as the book says (else the book starts afresh, and a notice says why).
#[derive(Default)]
pub struct CountBooks(Mutex<HashMap<BookKey, Arc<Mutex<Book>>>>);

#[derive(Clone, PartialEq, Eq, Hash)]
struct BookKey {
    model: String,
    api: crate::plan::Api,
    field: TokenizeField,
}

/// The most counts a book keeps.
const BOOK_MAX: usize = 100_000;

/// A text as a book knows it: its hash and its length.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct TextKey(u64, usize);

impl TextKey {
    fn of(text: &str) -> TextKey {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut h);
        TextKey(h.finish(), text.len())
    }
}

/// A fit as a book knows it: the instruction, the target, the tag prompts
/// are measured with, and the server's offset (fits count with it).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct FitKey {
    instruction: TextKey,
    target: u64,
    tag: TextKey,
    offset: i64,
}

impl FitKey {
    fn of(instruction: &str, target: u64, tags: &Tags, offset: i64) -> FitKey {
        FitKey {
            instruction: TextKey::of(instruction),
            target,
            tag: TextKey::of(&tags.measuring().apply(0, "")),
            offset,
        }
    }
}

/// The `/tokenize` counts (without the server's offset) of one model's
/// servers, and the prompt fits made of them.
#[derive(Default)]
pub struct Book {
    counts: HashMap<TextKey, u64>,
    fits: HashMap<FitKey, (super::prompt::Recipe, u64)>,
    /// The longest text counted, and its count: what a new server is
    /// checked with.
    longest: Option<(String, u64)>,
}

impl Book {
    fn keep(&mut self, key: TextKey, text: &str, n: u64) {
        if self.counts.len() < BOOK_MAX {
            self.counts.insert(key, n);
        }
        if self
            .longest
            .as_ref()
            .is_none_or(|(t, _)| t.len() < text.len())
        {
            self.longest = Some((text.to_string(), n));
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl CountBooks {
    /// The book a server's counts are read from and kept in, once the
    /// server counts the book's longest text as the book does; with a
    /// notice where it did not (the book starts afresh). No book where the
    /// check could not be made.
    async fn open(
        &self,
        client: &reqwest::Client,
        target: &super::Target,
        field: TokenizeField,
    ) -> (Option<Arc<Mutex<Book>>>, Option<String>) {
        let key = BookKey {
            model: target.model.clone(),
            api: target.api,
            field,
        };
        let book = lock(&self.0).entry(key).or_default().clone();
        let kept = lock(&book).longest.clone();
        let Some((text, kept)) = kept else {
            return (Some(book), None);
        };
        match tokenize(client, target, field, &text).await {
            Ok(n) if n == kept => (Some(book), None),
            Ok(n) => {
                *lock(&book) = Book::default();
                let notice = format!(
                    "this server's /tokenize counts {n} tokens in a text an earlier server of {} counted {kept} in; its prompts are measured afresh",
                    target.model
                );
                (Some(book), Some(notice))
            }
            Err(_) => (None, None),
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

#[cfg(test)]
mod books {
    use super::*;
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A `/tokenize` that counts `per_word` tokens a word, and the calls it took.
    fn tokenize_server(per_word: u64) -> (super::super::Target, Arc<AtomicU64>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let calls = Arc::new(AtomicU64::new(0));
        let c = calls.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let mut got = Vec::new();
                let mut buf = [0u8; 65536];
                let body = loop {
                    let n = s.read(&mut buf).unwrap_or(0);
                    if n == 0 {
                        break None;
                    }
                    got.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&got).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len: usize = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if got.len() >= end + 4 + len {
                            break Some(got[end + 4..end + 4 + len].to_vec());
                        }
                    }
                };
                let Some(body) = body else { continue };
                c.fetch_add(1, Ordering::SeqCst);
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                let words = v["prompt"].as_str().unwrap().split_whitespace().count() as u64;
                let reply = format!("{{\"count\":{}}}", words * per_word);
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                    reply.len()
                );
            }
        });
        let target = super::super::Target {
            base: format!("http://127.0.0.1:{port}"),
            api: crate::plan::Api::Completions,
            model: "m".into(),
            cache_prompt: None,
        };
        (target, calls)
    }

    async fn measure(
        books: &CountBooks,
        per_word: u64,
    ) -> (Measure, Option<String>, Arc<AtomicU64>) {
        let (target, calls) = tokenize_server(per_word);
        let client = reqwest::Client::new();
        let (book, notice) = books.open(&client, &target, TokenizeField::Request).await;
        assert!(book.is_some());
        let m = Measure::Server {
            client,
            target,
            field: TokenizeField::Request,
            offset: 0,
            book,
        };
        (m, notice, calls)
    }

    #[tokio::test]
    async fn a_server_of_the_same_tokenizer_reads_what_the_one_before_counted() {
        let books = CountBooks::default();
        let long = "a b c d e f g h";
        let (first, notice, calls) = measure(&books, 1).await;
        assert_eq!(notice, None);
        assert_eq!(first.count("a b c").await.unwrap(), 3);
        assert_eq!(first.count(long).await.unwrap(), 8);
        assert_eq!(first.count("a b c").await.unwrap(), 3);
        assert_eq!(calls.load(Ordering::SeqCst), 2, "a text counted once");

        // The next server is checked with the longest text, then read from the book.
        let (second, notice, calls) = measure(&books, 1).await;
        assert_eq!(notice, None);
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the check");
        assert_eq!(second.count("a b c").await.unwrap(), 3);
        assert_eq!(second.count(long).await.unwrap(), 8);
        assert_eq!(calls.load(Ordering::SeqCst), 1, "nothing asked again");

        // A server of the same name that counts otherwise: said, and measured afresh.
        let (third, notice, calls) = measure(&books, 2).await;
        let notice = notice.expect("a notice");
        assert!(notice.contains("16") && notice.contains('8'), "{notice}");
        assert_eq!(third.count("a b c").await.unwrap(), 6);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_fit_is_made_again_from_the_book_without_a_count() {
        let books = CountBooks::default();
        let tags = Tags::default();
        let (first, _, calls) = measure(&books, 1).await;
        let fitted = first.fit("Summarise the text.", 500, &tags).await;
        assert_eq!((fitted.1, fitted.2.is_none()), (500, true));
        assert!(calls.load(Ordering::SeqCst) > 2, "measured by the server");

        // The next server of the tokenizer: only the book's check is asked.
        let (second, _, calls) = measure(&books, 1).await;
        let again = second.fit("Summarise the text.", 500, &tags).await;
        assert_eq!((again.0 == fitted.0, again.1), (true, 500));
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the check alone");
        // Another target, or the same with another offset, is measured.
        let other = second.fit("Summarise the text.", 300, &tags).await;
        assert_eq!(other.1, 300);
        let asked = calls.load(Ordering::SeqCst);
        assert!(asked > 1);
        let Measure::Server {
            client,
            target,
            field,
            book,
            ..
        } = second
        else {
            unreachable!()
        };
        let offset = Measure::Server {
            client,
            target,
            field,
            offset: 1,
            book,
        };
        let shifted = offset.fit("Summarise the text.", 500, &tags).await;
        assert_eq!(shifted.1, 500);
        assert_ne!(
            shifted.0, fitted.0,
            "a word less for the token the server adds"
        );
    }
}
