//! [`SearchIndex`]: the lower-cased text every tool is searched by, one field at a time
//! laid end to end, so each query word costs one vectorized substring scan per field over
//! the whole catalog instead of one scan per tool.

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

    /// Sets `best[i] = score` for every tool `i` whose field holds `word`.
    fn mark(&self, finder: &memmem::Finder<'_>, score: u8, best: &mut [u8]) {
        let mut from = 0;
        while let Some(found) = finder.find(&self.text.as_bytes()[from..]) {
            let at = from + found;
            let tool = self
                .ends
                .partition_point(|&end| end < at + finder.needle().len());
            best[tool] = score;
            // The rest of this tool's text cannot change its mark: skip to the next tool.
            from = self.ends[tool] + 1;
            if from >= self.text.len() {
                break;
            }
        }
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
        for word in query.split_whitespace().map(str::to_lowercase) {
            best.fill(0);
            let finder = memmem::Finder::new(word.as_bytes());
            // Lowest weight first, so a better field overwrites a worse one.
            self.descriptions.mark(&finder, 1, &mut best);
            self.ids.mark(&finder, 2, &mut best);
            self.names.mark(&finder, 3, &mut best);
            let mut any = false;
            for (score, &b) in total.iter_mut().zip(&best) {
                *score = match (*score, b) {
                    (Some(s), 1..) => {
                        any = true;
                        Some(s + u32::from(b))
                    }
                    _ => None,
                };
            }
            if !any {
                break;
            }
        }
        total
    }
}

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
}
