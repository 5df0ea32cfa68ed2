//! JSON helpers: content blocks, results and tools in their MCP wire form, and a walk
//! over every string of a JSON document. The same source is compiled into the host
//! (`airlock_host::plugin::convert`), so both sides of the sandbox agree on the wire
//! form.

#[path = "mcp_json.rs"]
mod shared;

pub use shared::*;

use crate::{
    BlobResource, ContentBlock, EmbeddedResource, MediaBlock, ResourceContents, ResourceLink,
    TextBlock, TextResource, Tool, ToolResult, UnknownBlock,
};
