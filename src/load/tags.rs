//! Each request's own tag (`Ref 4 7 1 9 0 3. `), which makes its prompt unique
//! so a prefix cache cannot serve it (at the prompt's start: a cold cell), or
//! lets the prompts share everything before it (at the end: a warm cell).
//!
//! A tag must cost the same number of tokens for every request, or prompt
//! lengths drift by a token or two: a small BPE merges some digit pairs and
//! not others. So the symbols are chosen per server: each candidate is
//! measured once with the server's tokenizer and only those of the commonest
//! cost are kept. The numbering starts at a random point per run, so two runs
//! (or a resumed one) against the same server never send the same prompt.

use std::future::Future;
use std::sync::Arc;

use super::client::JsonText;
use super::LoadError;

/// Symbols in a tag.
const WIDTH: u32 = 6;
/// Candidate symbols, in the order they are preferred.
const CANDIDATES: &str = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// The fewest symbols a tag may use (10⁶ distinct tags at [`WIDTH`]).
const MIN_SYMBOLS: usize = 10;
/// Text measured after each candidate tag (the start of a prompt body).
const PROBE_BODY: &str = "The committee met on a grey Tuesday morning.";

/// Where the tag goes in a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Before the body: no two prompts share a prefix (cold cache).
    Start,
    /// After the body: prompts of one body share all of it (warm cache).
    End,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tags {
    symbols: Arc<[char]>,
    /// Where the numbering starts (random per run).
    offset: u64,
    pub place: Place,
}

impl Default for Tags {
    /// Digits, numbered from a random point, at the start.
    fn default() -> Tags {
        Tags::new(CANDIDATES.chars().take(10).collect(), random_offset())
    }
}

impl Tags {
    fn new(symbols: Vec<char>, offset: u64) -> Tags {
        Tags {
            symbols: symbols.into(),
            offset,
            place: Place::Start,
        }
    }

    /// The tag prompts are measured with. Its symbols cost what every
    /// tag's do (that is what calibration keeps), so its count stands for
    /// every request's; numbered from zero, it is the same text for every
    /// server of a tokenizer, whose counts can then be shared.
    pub fn measuring(&self) -> Tags {
        Tags {
            offset: 0,
            ..self.clone()
        }
    }

    /// The same tags in another place.
    pub fn at(&self, place: Place) -> Tags {
        Tags {
            place,
            ..self.clone()
        }
    }

    /// How many distinct tags there are.
    fn space(&self) -> u64 {
        (self.symbols.len() as u64).saturating_pow(WIDTH).max(1)
    }

    /// The `i`-th request's tag: `Ref 4 7 1 9 0 3.`.
    pub fn tag(&self, i: u64) -> String {
        let k = self.symbols.len().max(1) as u64;
        let mut n = self.offset.wrapping_add(i) % self.space();
        let mut digits = [' '; WIDTH as usize];
        for d in digits.iter_mut().rev() {
            *d = self.symbols.get((n % k) as usize).copied().unwrap_or('0');
            n /= k;
        }
        let mut s = String::from("Ref");
        for d in digits {
            s.push(' ');
            s.push(d);
        }
        s.push('.');
        s
    }

    /// The `i`-th request's prompt: `body` with its tag in place.
    pub fn apply(&self, i: u64, body: &str) -> String {
        let (before, after) = self.around(i);
        format!("{before}{body}{after}")
    }

    /// What goes before and after the `i`-th request's prompt, encoded for a
    /// request: the request's body is written around an encoded prompt
    /// without copying it first.
    pub fn around_json(&self, i: u64) -> [JsonText; 2] {
        let (before, after) = self.around(i);
        [JsonText::new(&before), JsonText::new(&after)]
    }

    /// What goes before and after the `i`-th request's prompt.
    fn around(&self, i: u64) -> (String, String) {
        match self.place {
            Place::Start => (format!("{} ", self.tag(i)), String::new()),
            Place::End => (String::new(), format!("\n\n{}", self.tag(i))),
        }
    }

    /// Tags whose symbols all cost the same with this server's tokenizer
    /// (`count`): each candidate is measured in a whole tag before a prompt's
    /// start, and those of the commonest count kept. A measuring error, or
    /// too few symbols of one cost, keeps the digits, with a notice.
    pub async fn calibrate<F, Fut>(mut count: F) -> (Tags, Option<String>)
    where
        F: FnMut(String) -> Fut,
        Fut: Future<Output = Result<u64, LoadError>>,
    {
        let mut costs: Vec<(char, u64)> = Vec::new();
        for c in CANDIDATES.chars() {
            let probe = Tags::new(vec![c], 0).apply(0, PROBE_BODY);
            match count(probe).await {
                Ok(n) => costs.push((c, n)),
                Err(e) => {
                    return (
                        Tags::default(),
                        Some(format!("request tags not checked against the tokenizer ({e}): prompt lengths may differ by a token")),
                    )
                }
            }
        }
        let symbols = commonest(&costs);
        if symbols.len() < MIN_SYMBOLS {
            return (
                Tags::default(),
                Some(format!("fewer than {MIN_SYMBOLS} tag symbols cost the same with this tokenizer: prompt lengths may differ by a token")),
            );
        }
        (Tags::new(symbols, random_offset()), None)
    }
}

/// The symbols of the commonest cost, in candidate order (ties: the cost
/// met first).
fn commonest(costs: &[(char, u64)]) -> Vec<char> {
    let mut best: Option<(u64, usize)> = None;
    for (_, n) in costs {
        let count = costs.iter().filter(|(_, m)| m == n).count();
        if best.is_none_or(|(_, c)| count > c) {
            best = Some((*n, count));
        }
    }
    let Some((cost, _)) = best else {
        return Vec::new();
    };
    costs
        .iter()
        .filter(|(_, n)| *n == cost)
        .map(|(c, _)| *c)
        .collect()
}

/// A start for the numbering that differs between runs.
fn random_offset() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(d.as_nanos());
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_distinct_fixed_width_and_placed() {
        let t = Tags::new(CANDIDATES.chars().take(10).collect(), 0);
        assert_eq!(t.tag(0), "Ref 0 0 0 0 0 0.");
        assert_eq!(t.tag(471_903), "Ref 4 7 1 9 0 3.");
        assert_eq!(t.apply(17, "body"), "Ref 0 0 0 0 1 7. body");
        assert_eq!(
            t.at(Place::End).apply(17, "body"),
            "body\n\nRef 0 0 0 0 1 7."
        );
        // Encoded for a request, the same text.
        let body = JsonText::new("a \"quoted\"\nbody\u{1}é");
        for t in [t.clone(), t.at(Place::End)] {
            let [before, after] = t.around_json(5);
            let joined = JsonText::join(&[&before, &body, &after]);
            assert_eq!(joined.text(), t.apply(5, &body.text()));
        }
        // Numbering wraps within the space, never panics.
        let wrapped = Tags::new(vec!['a', 'b'], u64::MAX);
        assert_eq!(wrapped.tag(1).len(), t.tag(1).len());
        let mut seen = std::collections::HashSet::new();
        for i in 0..1000 {
            assert!(seen.insert(t.tag(i)));
        }
        // Two runs start at different points.
        assert_ne!(Tags::default().tag(0), Tags::default().tag(0));
    }

    #[test]
    fn the_commonest_cost_wins() {
        let costs: Vec<(char, u64)> = "0123456789jnq"
            .chars()
            .map(|c| (c, if "jnq".contains(c) { 14 } else { 11 }))
            .collect();
        assert_eq!(commonest(&costs), "0123456789".chars().collect::<Vec<_>>());
        assert!(commonest(&[]).is_empty());
    }

    #[tokio::test]
    async fn calibration_keeps_the_symbols_a_tokenizer_splits_alike() {
        // A word-level tokenizer that knows the digits and `A`..`E`: every
        // other symbol is [UNK] too, so all cost one token and all are kept.
        let dir = std::env::temp_dir().join(format!("sweeptop-tags-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("tokenizer.json");
        std::fs::write(&p, super::super::tokenizer::tests::WORDS_JSON).unwrap();
        let m = super::super::tokenizer::LocalTokenizer::load(&p).unwrap();
        let (tags, notice) = Tags::calibrate(|text| {
            let m = m.clone();
            async move { m.count(&text) }
        })
        .await;
        assert_eq!(notice, None);
        assert_eq!(tags.symbols.len(), CANDIDATES.len());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
