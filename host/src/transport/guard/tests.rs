use tokio::io::AsyncReadExt;

use super::*;

async fn through(input: &[u8], max: usize) -> Vec<String> {
    let mut guard = FrameGuard::new(input, max);
    let mut out = Vec::new();
    guard.read_to_end(&mut out).await.unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn good_lines_pass_and_bad_answers_become_errors_for_their_id() {
    let mut input = Vec::new();
    input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
    input.extend_from_slice(b"not json at all\n");
    input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"t\":\"\xff\"}}\n");
    let deep = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":\"r3\",\"result\":{}{}}}\n",
        "[".repeat(500),
        "]".repeat(500)
    );
    input.extend_from_slice(deep.as_bytes());
    input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}\n");
    let lines = through(&input, 1 << 20).await;
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(lines[0].contains("\"id\":1") && lines[0].contains("result"));
    let bad_utf8: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
    assert_eq!(bad_utf8["id"], 2);
    assert_eq!(bad_utf8["error"]["code"], UNREADABLE_ANSWER);
    let deep: serde_json::Value = serde_json::from_str(&lines[2]).unwrap();
    assert_eq!(deep["id"], "r3");
    assert!(
        deep["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot be decoded")
    );
    assert!(lines[3].contains("\"id\":4"));
}

#[tokio::test]
async fn an_over_long_answer_is_cut_off_and_named() {
    let mut input = Vec::new();
    input.extend_from_slice(
        b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"",
    );
    input.extend(std::iter::repeat_n(b'x', 3 << 20));
    input.extend_from_slice(b"\"}]}}\n{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{}}\n");
    let lines = through(&input, 2 << 20).await;
    assert_eq!(
        lines.len(),
        2,
        "{:?}",
        lines.iter().map(|l| l.len()).collect::<Vec<_>>()
    );
    let cut: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(cut["id"], 7);
    assert!(cut["error"]["message"].as_str().unwrap().contains("2 MiB"));
    assert!(lines[1].contains("\"id\":8"));
}

#[tokio::test]
async fn requests_and_notifications_that_break_are_dropped_not_answered() {
    let input =
        b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"roots/list\",\"params\":{\"x\":\"\xff\"}}\n";
    assert!(through(input, 1 << 20).await.is_empty());
}
