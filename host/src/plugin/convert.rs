//! Conversion between MCP wire JSON and the contract's types. The code is the guest
//! SDK's (`guest-sdk/src/mcp_json.rs`), compiled here against the host's bindings, so
//! host and plugins share one wire form.

#[path = "../../../guest-sdk/src/mcp_json.rs"]
mod shared;

pub use shared::*;

use super::bindings::airlock::adapter::types::{
    BlobResource, EmbeddedResource, MediaBlock, ResourceContents, ResourceLink, TextBlock,
    TextResource, UnknownBlock,
};
use super::{ContentBlock, Tool, ToolResult};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_block_round_trips_and_unknown_blocks_survive() {
        let result = json!({
            "content": [
                {"type": "text", "text": "hi", "annotations": {"priority": 1}},
                {"type": "image", "data": "AAA=", "mimeType": "image/png"},
                {"type": "audio", "data": "BBB=", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "file:///a", "name": "a", "size": 3},
                {"type": "resource", "resource": {"uri": "mem://t", "text": "body", "mimeType": "text/plain"}},
                {"type": "resource", "resource": {"uri": "mem://b", "blob": "Q0Q=", "mimeType": "application/pdf"}},
                {"type": "hologram", "depth": 3},
                {"type": "image"}
            ],
            "structuredContent": {"a": 1},
            "isError": true
        });
        let parsed = result_from_mcp(&result);
        assert_eq!(parsed.content.len(), 8);
        assert!(parsed.is_error);
        assert!(matches!(&parsed.content[6], ContentBlock::Unknown(u) if u.kind == "hologram"));
        assert!(matches!(&parsed.content[7], ContentBlock::Unknown(u) if u.kind == "image"));
        let back = result_to_mcp(&parsed);
        assert_eq!(back["content"], result["content"]);
        assert_eq!(back["structuredContent"], json!({"a": 1}));
    }
}
