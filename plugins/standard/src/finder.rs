//! [`Finder`]: the redaction matcher's search, with a vector prefilter inside the sandbox.
//!
//! Natively, `regex-automata` finds where a match may start with Teddy, an SSSE3/AVX2 or
//! NEON scan for many short literals at once. WebAssembly has no such path in
//! `aho-corasick`, so inside the sandbox the same regex falls back to its lazy DFA,
//! byte by byte, and redaction ran about ten times slower than native. Built for
//! `wasm32` with `simd128`, [`Finder`] adds the missing piece: every pattern's prefix
//! literals (from `regex-syntax`'s extractor) are fingerprinted by their first bytes'
//! nibbles, sixteen haystack positions are tested at a time with `i8x16.swizzle`, and
//! the regex runs anchored only where a prefix is really present. Where the literals do
//! not bound every match (a pattern that can start anywhere, or too many prefixes to pay)
//! the regex searches alone, as it does natively. Either way the matches are the regex's
//! own: leftmost-first, over the whole set of patterns.

use regex_automata::meta::{FindMatches, Regex};
use regex_automata::{Anchored, Input, Match};
use regex_syntax::hir::literal::{ExtractKind, Extractor};

/// How many leading bytes of each prefix the fingerprint covers, at most.
const MAX_WIDTH: usize = 3;
/// Beyond this many distinct fingerprints the scan stops too often to pay.
const MAX_FINGERPRINTS: usize = 64;
/// One-byte fingerprints pay only when there are very few of them.
const MAX_ONE_BYTE: usize = 4;
/// Fingerprints are spread over this many buckets (one bit each in the tables).
const BUCKETS: usize = 8;
/// Failed anchored searches in a row after which one unanchored search takes over.
const MISSES_BEFORE_SCAN: u32 = 4;
/// Whether this build scans with the vector prefilter.
const VECTOR_SCAN: bool = cfg!(all(target_arch = "wasm32", target_feature = "simd128"));

/// Searches a set of patterns (leftmost-first, the rule is the pattern's id).
#[derive(Debug)]
pub struct Finder {
    regex: Regex,
    prefilter: Option<Prefilter>,
}

impl Finder {
    /// Compiles `sources` into one matcher, with the vector prefilter where this build
    /// has one and the patterns allow it.
    pub fn new(sources: &[String]) -> Result<Finder, String> {
        Finder::build(sources, VECTOR_SCAN)
    }

    /// Like [`Finder::new`], with the prefilter whenever the patterns allow it (scanning
    /// one position at a time where there are no vectors): for tests that compare it with
    /// the regex alone.
    pub fn with_prefilter(sources: &[String]) -> Result<Finder, String> {
        Finder::build(sources, true)
    }

    fn build(sources: &[String], prefilter: bool) -> Result<Finder, String> {
        let regex = Regex::new_many(sources)
            .map_err(|e| format!("cannot build the redaction matcher: {e}"))?;
        let prefilter = if prefilter {
            Prefilter::new(sources)
        } else {
            None
        };
        Ok(Finder { regex, prefilter })
    }

    /// Whether this finder scans with the prefilter.
    pub fn prefiltered(&self) -> bool {
        self.prefilter.is_some()
    }

    /// Whether any pattern matches somewhere in `text`.
    pub fn is_match(&self, text: &str) -> bool {
        self.find_iter(text).next().is_some()
    }

    /// Every match in `text`, leftmost-first, as the regex's own iterator gives them.
    pub fn find_iter<'f, 'h>(&'f self, text: &'h str) -> Matches<'f, 'h> {
        match &self.prefilter {
            None => Matches::Plain(self.regex.find_iter(text)),
            Some(prefilter) => Matches::Filtered {
                regex: &self.regex,
                prefilter,
                text,
                at: 0,
                misses: 0,
            },
        }
    }
}

/// The matches of a [`Finder`] in one text.
pub enum Matches<'f, 'h> {
    /// The regex searches alone.
    Plain(FindMatches<'f, 'h>),
    /// The prefilter proposes starts; the regex confirms each, anchored.
    Filtered {
        regex: &'f Regex,
        prefilter: &'f Prefilter,
        text: &'h str,
        at: usize,
        /// Anchored searches that failed since the last match.
        misses: u32,
    },
}

impl Iterator for Matches<'_, '_> {
    type Item = Match;

    fn next(&mut self) -> Option<Match> {
        match self {
            Matches::Plain(matches) => matches.next(),
            Matches::Filtered {
                regex,
                prefilter,
                text,
                at,
                misses,
            } => loop {
                // Every match starts with one of the prefixes, so the first start where
                // an anchored search succeeds is the leftmost match, and its pattern is
                // the one leftmost-first picks there. No match is empty (a pattern that
                // can match empty has an empty prefix, and gets no prefilter).
                let start = prefilter.next_start(text.as_bytes(), *at)?;
                if *misses >= MISSES_BEFORE_SCAN {
                    // A failed anchored search may have read to the end of the text (a
                    // `BEGIN … PRIVATE KEY` header with no END): after a few in a row,
                    // one unanchored search finds the next match or proves there is
                    // none, in one pass, as the regex alone would.
                    *misses = 0;
                    let Some(m) = regex.search(&Input::new(*text).range(start..)) else {
                        *at = text.len();
                        return None;
                    };
                    *at = m.end();
                    return Some(m);
                }
                let input = Input::new(*text).range(start..).anchored(Anchored::Yes);
                match regex.search(&input) {
                    Some(m) => {
                        *misses = 0;
                        *at = m.end();
                        return Some(m);
                    }
                    None => {
                        *misses += 1;
                        *at = start + 1;
                    }
                }
            },
        }
    }
}

/// Nibble tables for the first `width` bytes of every prefix, and the exact prefixes.
#[derive(Debug)]
pub struct Prefilter {
    width: usize,
    /// `low[k][n]`: the buckets with a prefix whose byte `k` has low nibble `n`.
    low: [[u8; 16]; MAX_WIDTH],
    /// `high[k][n]`: the same for the high nibble.
    high: [[u8; 16]; MAX_WIDTH],
    /// The fingerprints (first `width` bytes, big-endian), sorted, to confirm a hit.
    keys: Vec<u32>,
}

impl Prefilter {
    /// The prefilter for `sources`, or `None` when their prefix literals do not bound
    /// every match (or would stop the scan too often).
    fn new(sources: &[String]) -> Option<Prefilter> {
        let mut extractor = Extractor::new();
        extractor.kind(ExtractKind::Prefix);
        let mut prefixes: Vec<Vec<u8>> = Vec::new();
        for source in sources {
            let hir = regex_syntax::Parser::new().parse(source).ok()?;
            let seq = extractor.extract(&hir);
            for literal in seq.literals()? {
                prefixes.push(literal.as_bytes().to_vec());
            }
        }
        let width = prefixes.iter().map(Vec::len).min()?.min(MAX_WIDTH);
        if width == 0 {
            return None;
        }
        let mut keys: Vec<u32> = prefixes.iter().map(|p| key(&p[..width])).collect();
        keys.sort_unstable();
        keys.dedup();
        if keys.len() > MAX_FINGERPRINTS || (width == 1 && keys.len() > MAX_ONE_BYTE) {
            return None;
        }
        let mut low = [[0u8; 16]; MAX_WIDTH];
        let mut high = [[0u8; 16]; MAX_WIDTH];
        // Neighbours in sorted order share leading bytes: keeping them in one bucket
        // keeps the buckets' nibble sets small.
        for (i, &k) in keys.iter().enumerate() {
            let bucket = 1u8 << (i * BUCKETS / keys.len());
            for (byte, (low, high)) in bytes_of(k, width)
                .into_iter()
                .zip(low.iter_mut().zip(high.iter_mut()))
            {
                low[usize::from(byte & 0x0F)] |= bucket;
                high[usize::from(byte >> 4)] |= bucket;
            }
        }
        Some(Prefilter {
            width,
            low,
            high,
            keys,
        })
    }

    /// The first position at or after `from` where a prefix begins.
    fn next_start(&self, hay: &[u8], from: usize) -> Option<usize> {
        let last = hay.len().checked_sub(self.width)?;
        let mut at = from;
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        {
            let found = match self.width {
                1 => self.scan_vectors::<1>(hay, &mut at),
                2 => self.scan_vectors::<2>(hay, &mut at),
                _ => self.scan_vectors::<3>(hay, &mut at),
            };
            if found.is_some() {
                return found;
            }
        }
        while at <= last {
            if self.fingerprint(hay, at) && self.confirm(hay, at) {
                return Some(at);
            }
            at += 1;
        }
        None
    }

    /// Whether the bytes at `at` match some bucket's nibbles in every position.
    fn fingerprint(&self, hay: &[u8], at: usize) -> bool {
        let mut buckets = 0xFF;
        for k in 0..self.width {
            let byte = hay[at + k];
            buckets &= self.low[k][usize::from(byte & 0x0F)] & self.high[k][usize::from(byte >> 4)];
        }
        buckets != 0
    }

    /// Whether a prefix really begins at `at` (the nibble test admits near misses).
    fn confirm(&self, hay: &[u8], at: usize) -> bool {
        self.keys
            .binary_search(&key(&hay[at..at + self.width]))
            .is_ok()
    }

    /// Tests sixteen positions at a time while a whole block and its `W - 1` following
    /// bytes are in `hay`; leaves `at` where the one-at-a-time loop must go on.
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    fn scan_vectors<const W: usize>(&self, hay: &[u8], at: &mut usize) -> Option<usize> {
        use core::arch::wasm32::*;
        let load = |table: &[u8; 16]| {
            // SAFETY: `table` is 16 readable bytes; v128 loads need no alignment.
            unsafe { v128_load(table.as_ptr().cast::<v128>()) }
        };
        let low: [v128; W] = core::array::from_fn(|k| load(&self.low[k]));
        let high: [v128; W] = core::array::from_fn(|k| load(&self.high[k]));
        let nibble = u8x16_splat(0x0F);
        while *at + 16 + (W - 1) <= hay.len() {
            let mut hits = u8x16_splat(0xFF);
            for k in 0..W {
                // SAFETY: the loop condition keeps bytes `at + k .. at + k + 16` in `hay`.
                let bytes = unsafe { v128_load(hay.as_ptr().add(*at + k).cast::<v128>()) };
                let lo = i8x16_swizzle(low[k], v128_and(bytes, nibble));
                let hi = i8x16_swizzle(high[k], u8x16_shr(bytes, 4));
                hits = v128_and(hits, v128_and(lo, hi));
            }
            if v128_any_true(hits) {
                let mut lanes = u8x16_bitmask(u8x16_ne(hits, u8x16_splat(0)));
                while lanes != 0 {
                    let lane = lanes.trailing_zeros() as usize;
                    if self.confirm(hay, *at + lane) {
                        return Some(*at + lane);
                    }
                    lanes &= lanes - 1;
                }
            }
            *at += 16;
        }
        None
    }
}

/// The first (up to [`MAX_WIDTH`]) bytes of a prefix as one number, big-endian.
fn key(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0, |k, &b| (k << 8) | u32::from(b))
}

/// The `width` bytes a key was made of.
fn bytes_of(key: u32, width: usize) -> Vec<u8> {
    (0..width)
        .map(|k| (key >> (8 * (width - 1 - k))) as u8)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources(patterns: &[&str]) -> Vec<String> {
        patterns.iter().map(|p| p.to_string()).collect()
    }

    fn spans(finder: &Finder, text: &str) -> Vec<(usize, usize, usize)> {
        finder
            .find_iter(text)
            .map(|m| (m.start(), m.end(), m.pattern().as_usize()))
            .collect()
    }

    #[test]
    fn the_prefilter_finds_what_the_regex_finds() {
        let patterns = sources(&[
            "hunter2hunter2",
            r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
            r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{20,}",
            r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
        ]);
        let filtered = Finder::with_prefilter(&patterns).unwrap();
        assert!(filtered.prefiltered());
        let plain = Finder::build(&patterns, false).unwrap();
        let token = format!("ghp_{}", "a".repeat(36));
        let text = format!(
            "xhunter2hunter2 {token} x{token} AKIAABCDEFGHIJKLMNOP sk-{} -----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY----- ünïcødé sk-short gh",
            "b".repeat(24)
        );
        let expected = spans(&plain, &text);
        assert_eq!(expected.len(), 5, "{expected:?}");
        // At every offset, so matches fall on every lane and at the very end.
        for cut in 0..text.len() {
            if text.is_char_boundary(cut) {
                assert_eq!(
                    spans(&filtered, &text[cut..]),
                    spans(&plain, &text[cut..]),
                    "from {cut}"
                );
            }
        }
    }

    /// Headers with no END make every anchored search at them read to the end of the
    /// text; the matches are still the regex's own, and near misses (dash runs) too.
    #[test]
    fn private_key_headers_without_an_end_and_dash_runs() {
        let patterns: Vec<String> = crate::redaction::BUILTIN_PATTERNS
            .iter()
            .map(|(_, re)| re.to_string())
            .collect();
        let filtered = Finder::with_prefilter(&patterns).unwrap();
        let plain = Finder::build(&patterns, false).unwrap();
        let token = format!("ghp_{}", "c".repeat(36));
        let mut text = String::new();
        for i in 0..50 {
            text.push_str("-----BEGIN RSA PRIVATE KEY-----\n|---|-----|\n");
            if i % 10 == 9 {
                text.push_str(&token);
                text.push('\n');
            }
        }
        text.push_str("-----BEGIN EC PRIVATE KEY-----\nabc\n-----END EC PRIVATE KEY-----");
        let expected = spans(&plain, &text);
        assert_eq!(spans(&filtered, &text), expected);
        assert_eq!(
            expected.len(),
            1,
            "the first header runs to the only END: {expected:?}"
        );
        let without_end = text.replace("-----END", "-----FIN");
        assert_eq!(spans(&filtered, &without_end), spans(&plain, &without_end));
        assert_eq!(spans(&plain, &without_end).len(), 5);
    }

    #[test]
    fn the_builtin_patterns_with_a_secret_are_prefiltered() {
        let mut patterns = vec!["a-secret-value".to_string()];
        patterns.extend(
            crate::redaction::BUILTIN_PATTERNS
                .iter()
                .map(|(_, re)| re.to_string()),
        );
        let finder = Finder::with_prefilter(&patterns).unwrap();
        let prefilter = finder.prefilter.as_ref().expect("prefiltered");
        assert_eq!(prefilter.width, 3);
        assert!(prefilter.keys.len() <= 20, "{}", prefilter.keys.len());
    }

    #[test]
    fn patterns_that_can_start_anywhere_get_no_prefilter() {
        for patterns in [
            vec![r"\d{3}-\d{4}"],
            vec!["secret", "x*"],
            vec!["a", "b", "c", "d", "e"],
        ] {
            let finder = Finder::with_prefilter(&sources(&patterns)).unwrap();
            assert!(!finder.prefiltered(), "{patterns:?}");
        }
        assert!(
            Finder::with_prefilter(&sources(&["ab", "x"]))
                .unwrap()
                .prefiltered()
        );
    }
}
