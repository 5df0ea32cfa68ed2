//! [`KnownSecrets`]: the secret values one service must never let out, with the names
//! they are known by, and the host's two scrub paths over them — text and JSON. The
//! plugin redaction chain is the first line of defence for results; this is what the
//! host applies to everything that cannot pass through a plugin (diagnostics, logs,
//! messages while a plugin is failing).

use std::borrow::Cow;
use std::sync::Arc;

use aho_corasick::{AhoCorasick, MatchKind};
use serde_json::Value;

/// Values shorter than this are never scrubbed: they would shred ordinary text.
pub const MIN_SCRUBBED_LEN: usize = 4;

/// One known secret: the name it is known by (an env var, a header, `oauth access
/// token`…) and its value.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct KnownSecret {
    /// Where the value comes from; it names the marker, never the value.
    pub name: String,
    /// The secret value itself.
    pub value: String,
}

impl std::fmt::Debug for KnownSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}=••••••", self.name)
    }
}

#[derive(Default)]
struct Table {
    entries: Vec<KnownSecret>,
    /// Indexes of the entries long enough to scrub, in pattern order.
    scrubbed: Vec<usize>,
    matcher: Option<AhoCorasick>,
}

impl Table {
    fn build(mut entries: Vec<KnownSecret>) -> Table {
        entries.retain(|e| !e.value.is_empty());
        let mut seen = std::collections::HashSet::new();
        entries.retain(|e| seen.insert((e.name.clone(), e.value.clone())));
        let scrubbed: Vec<usize> = (0..entries.len())
            .filter(|&i| entries[i].value.len() >= MIN_SCRUBBED_LEN)
            .collect();
        let matcher = (!scrubbed.is_empty()).then(|| {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(scrubbed.iter().map(|&i| entries[i].value.as_bytes()))
                .expect("literal secret patterns always build")
        });
        Table {
            entries,
            scrubbed,
            matcher,
        }
    }
}

/// The known secrets of one service (or of the whole host). Cheap to clone: clones
/// share one table and one compiled matcher. `Debug` never shows a value.
#[derive(Clone, Default)]
pub struct KnownSecrets {
    table: Arc<Table>,
}

impl std::fmt::Debug for KnownSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.table.entries.iter()).finish()
    }
}

impl PartialEq for KnownSecrets {
    fn eq(&self, other: &Self) -> bool {
        self.table.entries == other.table.entries
    }
}

impl FromIterator<(String, String)> for KnownSecrets {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> Self {
        KnownSecrets::from_entries(
            iter.into_iter()
                .map(|(name, value)| KnownSecret { name, value })
                .collect(),
        )
    }
}

impl KnownSecrets {
    /// No secrets.
    pub fn new() -> Self {
        KnownSecrets::default()
    }

    fn from_entries(entries: Vec<KnownSecret>) -> Self {
        KnownSecrets {
            table: Arc::new(Table::build(entries)),
        }
    }

    /// These secrets plus `name = value` (ignored when empty or already known).
    pub fn with(&self, name: &str, value: &str) -> Self {
        if value.is_empty()
            || self
                .table
                .entries
                .iter()
                .any(|e| e.name == name && e.value == value)
        {
            return self.clone();
        }
        let mut entries = self.table.entries.clone();
        entries.push(KnownSecret {
            name: name.to_string(),
            value: value.to_string(),
        });
        KnownSecrets::from_entries(entries)
    }

    /// These secrets plus every one of `other`'s whose value is not already known.
    pub fn union(&self, other: &KnownSecrets) -> Self {
        let mut entries = self.table.entries.clone();
        for e in &other.table.entries {
            if !entries.iter().any(|mine| mine.value == e.value) {
                entries.push(e.clone());
            }
        }
        KnownSecrets::from_entries(entries)
    }

    /// Every secret, in the order they were learned.
    pub fn iter(&self) -> impl Iterator<Item = &KnownSecret> {
        self.table.entries.iter()
    }

    /// How many secrets are known.
    pub fn len(&self) -> usize {
        self.table.entries.len()
    }

    /// Whether none is known.
    pub fn is_empty(&self) -> bool {
        self.table.entries.is_empty()
    }

    /// Whether `text` holds any known value (of scrubbable length).
    pub fn appears_in(&self, text: &str) -> bool {
        self.table
            .matcher
            .as_ref()
            .is_some_and(|m| m.is_match(text))
    }

    /// `text` with every known value replaced by `[REDACTED:secret:NAME]`, in one pass
    /// (the longest value wins where two overlap). Borrows when nothing matched.
    pub fn scrub<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let Some(matcher) = &self.table.matcher else {
            return Cow::Borrowed(text);
        };
        let mut found = matcher.find_iter(text).peekable();
        if found.peek().is_none() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for m in found {
            out.push_str(&text[last..m.start()]);
            let entry = &self.table.entries[self.table.scrubbed[m.pattern().as_usize()]];
            out.push_str("[REDACTED:secret:");
            out.push_str(&entry.name);
            out.push(']');
            last = m.end();
        }
        out.push_str(&text[last..]);
        Cow::Owned(out)
    }

    /// [`KnownSecrets::scrub`] into an owned string.
    pub fn scrub_owned(&self, text: &str) -> String {
        self.scrub(text).into_owned()
    }

    /// Scrubs every string in `value` (object keys included), in place. Returns how many
    /// strings changed.
    pub fn scrub_json(&self, value: &mut Value) -> usize {
        if self.table.matcher.is_none() {
            return 0;
        }
        match value {
            Value::String(s) => match self.scrub(s) {
                Cow::Owned(new) => {
                    *s = new;
                    1
                }
                Cow::Borrowed(_) => 0,
            },
            Value::Array(items) => items.iter_mut().map(|v| self.scrub_json(v)).sum(),
            Value::Object(map) => {
                let mut changed = 0;
                if map.keys().any(|k| self.appears_in(k)) {
                    let old = std::mem::take(map);
                    for (k, v) in old {
                        let key = self.scrub_owned(&k);
                        changed += usize::from(key != k);
                        map.insert(key, v);
                    }
                }
                changed + map.values_mut().map(|v| self.scrub_json(v)).sum::<usize>()
            }
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests;
