//! Tests of the JSONC stripper (and of line/column positions).

use serde_json::Value;

use crate::import::jsonc::strip_jsonc;
use crate::import::parse::line_column;

#[test]
fn jsonc_comments_and_trailing_commas_are_accepted() {
    let text = "{\n  // a comment with \"quotes\"\n  \"url\": \"https://x//y /* not a comment */\", /* block\n comment */\n  \"a\": [1, 2,],\n}\n";
    let value: Value = serde_json::from_str(&strip_jsonc(text)).unwrap();
    assert_eq!(
        value,
        serde_json::json!({"url": "https://x//y /* not a comment */", "a": [1, 2]})
    );
    assert_eq!(line_column("ab\ncd", 4), (2, 2));
}
