//! Token counting with a real tokenizer (tiktoken's o200k_base by default, cl100k_base selectable).
//!
//! Each encoding's BPE tables are loaded once per process (about 150 ms) and shared.
//! A text's count is computed once: counts are cached by the blake3 of the text, so a message that passes several
//! gateways, or is measured in both LESS and verbatim mode, is tokenized a single time. The cache is split in
//! [`SHARDS`] maps by the digest's first byte, each behind its own lock, so threads counting different texts do not
//! wait on one another.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};

use serde::{Deserialize, Serialize};
use tiktoken_rs::CoreBPE;

/// A tokenizer encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// GPT-4o family; the default.
    #[default]
    O200kBase,
    /// GPT-4 / GPT-3.5 family.
    Cl100kBase,
}

impl Encoding {
    /// Both encodings.
    pub const ALL: [Encoding; 2] = [Encoding::O200kBase, Encoding::Cl100kBase];

    /// The tiktoken name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }

    fn bpe(self) -> &'static CoreBPE {
        match self {
            Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Encoding {
    type Err = String;

    fn from_str(text: &str) -> Result<Encoding, String> {
        Encoding::ALL
            .into_iter()
            .find(|e| e.as_str() == text)
            .ok_or_else(|| format!("unknown encoding {text:?}; expected o200k_base or cl100k_base"))
    }
}

/// Counts tokens of one encoding, caching each distinct text's count.
pub struct TokenCounter {
    encoding: Encoding,
    // Invariant: every entry maps blake3(text) to the token count of text under `encoding`, in the shard of the
    // digest's first byte.
    shards: [Mutex<HashMap<[u8; 32], u32>>; SHARDS],
    n_hits: AtomicU64,
    n_misses: AtomicU64,
}

/// Cache entries kept at most; each is 36 bytes plus map overhead, about 4 MiB at the cap. A shard that reaches its
/// share of it is cleared.
const MAX_CACHED: usize = 1 << 16;

/// The cache's shards (a power of two, at most 256: a shard is picked by the digest's first byte).
const SHARDS: usize = 16;

/// Cache effectiveness, for tests and `lessrt bench`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    /// Counts answered from the cache.
    pub n_hits: u64,
    /// Counts computed by the tokenizer.
    pub n_misses: u64,
}

static O200K: LazyLock<TokenCounter> = LazyLock::new(|| TokenCounter::new(Encoding::O200kBase));
static CL100K: LazyLock<TokenCounter> = LazyLock::new(|| TokenCounter::new(Encoding::Cl100kBase));

impl TokenCounter {
    /// The process-wide counter of `encoding`.
    pub fn shared(encoding: Encoding) -> &'static TokenCounter {
        match encoding {
            Encoding::O200kBase => &O200K,
            Encoding::Cl100kBase => &CL100K,
        }
    }

    /// A counter with its own cache (the BPE tables are still shared).
    pub fn new(encoding: Encoding) -> TokenCounter {
        TokenCounter {
            encoding,
            shards: std::array::from_fn(|_| Mutex::default()),
            n_hits: AtomicU64::new(0),
            n_misses: AtomicU64::new(0),
        }
    }

    /// The encoding counted.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// The number of tokens in `text`, as tiktoken's `encode_ordinary` counts them (special-token text is text).
    pub fn count(&self, text: &str) -> u32 {
        let key = *blake3::hash(text.as_bytes()).as_bytes();
        if let Some(&n) = self.lock(&key).get(&key) {
            self.n_hits.fetch_add(1, Ordering::Relaxed);
            return n;
        }
        // Tokenize outside the lock: another thread counting the same text at the same time only costs a
        // duplicate computation, never a wrong count.
        let n = self.count_uncached(text);
        self.n_misses.fetch_add(1, Ordering::Relaxed);
        let mut cache = self.lock(&key);
        if cache.len() >= MAX_CACHED / SHARDS {
            cache.clear();
        }
        cache.insert(key, n);
        n
    }

    /// The number of tokens in `text`, without the cache.
    pub fn count_uncached(&self, text: &str) -> u32 {
        u32::try_from(self.encoding.bpe().count_ordinary(text)).unwrap_or(u32::MAX)
    }

    /// Hits and misses so far.
    pub fn stats(&self) -> CacheStats {
        CacheStats { n_hits: self.n_hits.load(Ordering::Relaxed), n_misses: self.n_misses.load(Ordering::Relaxed) }
    }

    /// The shard of `key`, locked.
    fn lock(&self, key: &[u8; 32]) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], u32>> {
        // A map is always consistent between statements, so a panic elsewhere cannot leave it half-written.
        self.shards[usize::from(key[0]) % SHARDS].lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCounter").field("encoding", &self.encoding).field("stats", &self.stats()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_world_is_two_tokens_in_both_encodings() {
        for encoding in Encoding::ALL {
            assert_eq!(TokenCounter::new(encoding).count("hello world"), 2, "{encoding}");
        }
    }

    #[test]
    fn encodings_differ_where_tiktoken_says_they_do() {
        // o200k_base has a larger vocabulary with more non-Latin merges than cl100k_base.
        let text = "Привет, мир! Token counting is the ground truth of the ledger.";
        let o200k = TokenCounter::new(Encoding::O200kBase).count(text);
        let cl100k = TokenCounter::new(Encoding::Cl100kBase).count(text);
        assert!(o200k < cl100k, "o200k packs Cyrillic tighter: {o200k} vs {cl100k}");
    }

    #[test]
    fn a_text_is_tokenized_once() {
        let counter = TokenCounter::new(Encoding::O200kBase);
        let text = "the deploy target is beta-02";
        let first = counter.count(text);
        let second = counter.count(text);
        assert_eq!(first, second);
        assert_eq!(counter.stats(), CacheStats { n_hits: 1, n_misses: 1 });
        counter.count("another text");
        assert_eq!(counter.stats().n_misses, 2);
    }

    #[test]
    fn the_cache_stays_bounded_and_counts_alike_from_many_threads() {
        let counter = TokenCounter::new(Encoding::O200kBase);
        let texts: Vec<String> = (0..MAX_CACHED + 4096).map(|i| format!("text {i}")).collect();
        std::thread::scope(|scope| {
            for chunk in texts.chunks(texts.len() / 4 + 1) {
                let counter = &counter;
                scope.spawn(move || {
                    for text in chunk {
                        assert_eq!(counter.count(text), counter.count_uncached(text), "{text}");
                    }
                });
            }
        });
        let cached: usize = counter.shards.iter().map(|s| s.lock().expect("shard").len()).sum();
        assert!(cached <= MAX_CACHED, "{cached} entries");
        assert!(counter.shards.iter().all(|s| !s.lock().expect("shard").is_empty()), "every shard is used");
        assert_eq!(counter.stats().n_misses, texts.len() as u64);
    }

    #[test]
    fn special_token_text_is_counted_as_text() {
        let counter = TokenCounter::new(Encoding::Cl100kBase);
        assert!(counter.count("<|endoftext|>") > 1);
    }
}
