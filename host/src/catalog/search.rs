//! [`SearchIndex`]: the lower-cased text every tool is searched by, one field at a time
//! laid end to end. The first query word costs one vectorized substring scan per field
//! over the whole catalog instead of one scan per tool; each later word looks only at
//! the tools still in the running, once they are few.

use memchr::memmem;

/// One searchable field of every tool, in catalog order, separated by newlines (a query
/// word never holds whitespace, so a match never spans two tools).
#[derive(Debug, Default)]
struct Field {
    text: String,
    /// `ends[i]`: where tool `i`'s text ends in `text`.
    ends: Vec<usize>,
}

impl Field {
    fn push(&mut self, value: &str) {
        self.text.push_str(&value.to_lowercase());
        self.ends.push(self.text.len());
        self.text.push('\n');
    }

    /// Sets `best[i] = score` for every tool `i` whose field holds the finder's word: one
    /// pass over the field, matches mapped to tools in order.
    fn mark(&self, finder: &memmem::Finder<'_>, score: u8, best: &mut [u8]) {
        let len = finder.needle().len();
        let mut tool = 0;
        for at in finder.find_iter(self.text.as_bytes()) {
            while self.ends[tool] < at + len {
                tool += 1;
            }
            best[tool] = score;
        }
    }

    /// Tool `i`'s text.
    fn of(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] + 1 };
        &self.text.as_bytes()[start..self.ends[i]]
    }
}

/// The search text of a whole catalog, by field: qualified names (weight 3), service and
/// raw names (2), descriptions (1).
#[derive(Debug, Default)]
pub(super) struct SearchIndex {
    names: Field,
    ids: Field,
    descriptions: Field,
}

impl SearchIndex {
    /// Builds the index of `tools`: (qualified name, service, raw name, description), in
    /// catalog order.
    pub fn build<'a>(tools: impl Iterator<Item = (&'a str, &'a str, &'a str, &'a str)>) -> Self {
        let mut index = SearchIndex::default();
        for (name, service, raw_name, description) in tools {
            index.names.push(name);
            index.ids.push(&format!("{service} {raw_name}"));
            index.descriptions.push(description);
        }
        index
    }

    /// The score of each tool for `query` (catalog order): `None` unless every word of
    /// the query is in one of its fields; otherwise the sum over words of the weight of
    /// the best field holding it.
    pub fn scores(&self, query: &str) -> Vec<Option<u32>> {
        let count = self.names.ends.len();
        let mut total: Vec<Option<u32>> = vec![Some(0); count];
        let mut best = vec![0u8; count];
        // The tools every word so far matched (`None`: all of them).
        let mut running: Option<Vec<usize>> = None;
        for word in query.split_whitespace().map(str::to_lowercase) {
            let finder = memmem::Finder::new(word.as_bytes());
            match &running {
                Some(few) if few.len() <= count / FEW => {
                    for &i in few {
                        best[i] = self.best_field(i, &finder);
                    }
                }
                _ => {
                    best.fill(0);
                    // Lowest weight first, so a better field overwrites a worse one.
                    self.descriptions.mark(&finder, 1, &mut best);
                    self.ids.mark(&finder, 2, &mut best);
                    self.names.mark(&finder, 3, &mut best);
                }
            }
            let mut still = Vec::new();
            let mut keep = |i: usize, total: &mut [Option<u32>]| {
                total[i] = match (total[i], best[i]) {
                    (Some(s), b @ 1..) => {
                        still.push(i);
                        Some(s + u32::from(b))
                    }
                    _ => None,
                };
            };
            match &running {
                Some(few) => few.iter().for_each(|&i| keep(i, &mut total)),
                None => (0..count).for_each(|i| keep(i, &mut total)),
            }
            if still.is_empty() {
                break;
            }
            running = Some(still);
        }
        total
    }

    /// The weight of tool `i`'s best field holding the finder's word (0: none does).
    fn best_field(&self, i: usize, finder: &memmem::Finder<'_>) -> u8 {
        if finder.find(self.names.of(i)).is_some() {
            3
        } else if finder.find(self.ids.of(i)).is_some() {
            2
        } else if finder.find(self.descriptions.of(i)).is_some() {
            1
        } else {
            0
        }
    }
}

/// Once at most 1/`FEW` of the catalog is still in the running, later words look at
/// those tools one by one instead of scanning every field whole.
const FEW: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_score_by_their_best_field_and_must_all_match() {
        let index = SearchIndex::build(
            [
                ("mcp__fs__read_file", "fs", "read_file", "Reads a file"),
                ("mcp__db__query", "db", "query", "Runs a read-only query"),
                ("mcp__web__fetch", "web", "fetch", "Fetches a page"),
            ]
            .into_iter(),
        );
        assert_eq!(index.scores("read"), vec![Some(3), Some(1), None]);
        assert_eq!(index.scores("READ query"), vec![None, Some(4), None]);
        assert_eq!(index.scores(""), vec![Some(0); 3]);
        assert_eq!(index.scores("file mcp"), vec![Some(6), None, None]);
        assert_eq!(index.scores("fetch page"), vec![None, None, Some(4)]);
        // The last tool's text ends the field: a match there is found too.
        assert_eq!(index.scores("page"), vec![None, None, Some(1)]);
    }

    #[test]
    fn later_words_checked_tool_by_tool_score_as_a_full_scan_would() {
        let tools: Vec<(String, String, String, String)> = (0..100)
            .map(|i| {
                (
                    format!("mcp__s{}__op_{i}", i % 10),
                    format!("s{}", i % 10),
                    format!("op_{i}"),
                    format!("does thing {i} on s{}", i % 10),
                )
            })
            .collect();
        let index = SearchIndex::build(
            tools
                .iter()
                .map(|(a, b, c, d)| (a.as_str(), b.as_str(), c.as_str(), d.as_str())),
        );
        // "op_42" leaves one tool in the running; "thing" and "s2" are then checked on it
        // alone, with the same weights a whole scan gives.
        let scores = index.scores("op_42 thing s2");
        let hits: Vec<(usize, u32)> = scores
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((i, (*s)?)))
            .collect();
        assert_eq!(hits, vec![(42, 3 + 1 + 3)]);
        assert_eq!(index.scores("op_42 thing s3").iter().flatten().count(), 0);
    }
}
