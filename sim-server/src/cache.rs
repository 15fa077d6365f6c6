//! The prefix cache, as vLLM and SGLang keep one: a prompt's full blocks of
//! [`BLOCK`] tokens, each hashed with everything before it, are remembered; a
//! later prompt that starts with the same blocks finds them cached. Its hits
//! and lookups are the counters `/metrics` exports, and `/reset_prefix_cache`
//! (vLLM) or `/flush_cache` (SGLang) empties it.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};

/// Tokens per cache block (vLLM's default on GPUs).
pub const BLOCK: usize = 16;
/// Blocks remembered before the cache starts afresh (bounded memory).
const MAX_BLOCKS: usize = 1 << 20;

#[derive(Debug, Default)]
pub struct PrefixCache {
    blocks: HashSet<u64>,
}

impl PrefixCache {
    /// Look a prompt up and remember its blocks: how many of its tokens were
    /// found cached (whole leading blocks, never the last token, which the
    /// engine always computes).
    pub fn lookup(&mut self, ids: &[u32]) -> u64 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        let mut hit_blocks = 0usize;
        let mut missed = false;
        let full = ids.len().saturating_sub(1) / BLOCK;
        for block in ids.chunks(BLOCK).take(full) {
            block.hash(&mut hasher);
            let key = hasher.finish();
            if !missed && self.blocks.contains(&key) {
                hit_blocks += 1;
            } else {
                missed = true;
                if self.blocks.len() >= MAX_BLOCKS {
                    self.blocks.clear();
                }
                self.blocks.insert(key);
            }
        }
        (hit_blocks * BLOCK) as u64
    }

    pub fn clear(&mut self) {
        self.blocks.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_leading_blocks_hit_and_a_different_start_misses() {
        let mut c = PrefixCache::default();
        let a: Vec<u32> = (0..100).collect();
        assert_eq!(c.lookup(&a), 0);
        // The same prompt: every whole block before the last token.
        assert_eq!(c.lookup(&a), 96);
        // A different first token: nothing after it can hit.
        let mut b = a.clone();
        b[0] = 999;
        assert_eq!(c.lookup(&b), 0);
        // A shared start of 40 tokens: two whole blocks.
        let mut d: Vec<u32> = (0..40).collect();
        d.extend(500..560);
        assert_eq!(c.lookup(&d), 32);
        c.clear();
        assert_eq!(c.lookup(&a), 0);
    }
}
