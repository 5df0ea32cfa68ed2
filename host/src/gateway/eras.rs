//! What the downstream side owes each protocol era: the revisions `airlock serve` speaks
//! (2026-07-28 and every handshake-era one, on one endpoint), and the typed result shapes
//! a 2026-07-28 client validates — `resultType` on every result, `ttlMs` and `cacheScope`
//! on every list, items in a deterministic order.
//!
//! rmcp negotiates the era per request (a `server/discover` or a request carrying its
//! protocol version in `_meta` is 2026-07-28; an `initialize` opens a handshake-era
//! session) and strips `resultType: "complete"` for handshake-era peers, so the handler
//! builds every result once, in the 2026-07-28 shape.

use std::borrow::Cow;

use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{CacheScope, ProtocolVersion, ResultType};
use rmcp::service::RequestContext;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The newest revision Airlock speaks; every known revision up to it is served.
pub const NEWEST: ProtocolVersion = ProtocolVersion::V_2026_07_28;

/// The revisions `airlock serve` speaks, oldest first (what `server/discover` lists and
/// `initialize` may agree to).
pub fn supported_versions() -> Cow<'static, [ProtocolVersion]> {
    Cow::Borrowed(ProtocolVersion::known_up_to(&NEWEST))
}

/// Whether a request is of the 2026-07-28 era: it declares that revision (or a later one)
/// in its `_meta`, or came on a connection that negotiated it.
pub fn is_stateless(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v.as_str() >= NEWEST.as_str())
}

/// How long a client may keep a listing without asking again. Airlock's listings follow
/// its upstreams' and its own grants, which change without notice to a client that holds
/// no session; so a listing is stale at once.
pub const LIST_TTL_MS: u64 = 0;

/// Who may cache a listing: anyone when every agent sees the same one, only the asking
/// agent's client when it is filtered per agent (grants, or upstream sessions per agent).
pub fn cache_scope(per_agent: bool) -> CacheScope {
    if per_agent {
        CacheScope::Private
    } else {
        CacheScope::Public
    }
}

/// A result's discriminator, set when the result was parsed from JSON that lacked it.
pub fn complete(result_type: &mut Option<ResultType>) {
    result_type.get_or_insert(ResultType::COMPLETE);
}

/// Listing items as rmcp types, in order of `key` (a tool's or prompt's `name`, a
/// resource's `uri`, a template's `uriTemplate`), so two identical listings are equal
/// byte for byte whatever order the upstreams answered in.
pub fn sorted_items<T: DeserializeOwned>(
    mut items: Vec<Value>,
    key: &str,
) -> Result<Vec<T>, McpError> {
    items.sort_by(|a, b| {
        let a = a.get(key).and_then(Value::as_str).unwrap_or_default();
        let b = b.get(key).and_then(Value::as_str).unwrap_or_default();
        a.cmp(b)
    });
    typed_items(items)
}

/// Listing items as rmcp types, in the order given.
pub fn typed_items<T: DeserializeOwned>(items: Vec<Value>) -> Result<Vec<T>, McpError> {
    serde_json::from_value(Value::Array(items)).map_err(|e| {
        McpError::internal_error(format!("a listing does not fit the MCP model: {e}"), None)
    })
}

/// A complete list result (`with_all_items`) with its cache hints.
macro_rules! listing {
    ($result:ty, $items:expr, $scope:expr) => {{
        let mut result = <$result>::with_all_items($items);
        result.ttl_ms = Some($crate::gateway::eras::LIST_TTL_MS);
        result.cache_scope = Some($scope);
        result
    }};
}
pub(crate) use listing;

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ListToolsResult, Tool};
    use serde_json::json;

    #[test]
    fn listings_are_sorted_and_carry_every_field_2026_07_28_requires() {
        let items = vec![
            json!({"name": "b", "inputSchema": {"type": "object"}}),
            json!({"name": "a", "inputSchema": {"type": "object"}}),
        ];
        let tools: Vec<Tool> = sorted_items(items, "name").unwrap();
        let result = listing!(ListToolsResult, tools, cache_scope(true));
        let value = serde_json::to_value(&result).unwrap();
        assert_eq!(value["resultType"], "complete");
        assert_eq!(value["ttlMs"], 0);
        assert_eq!(value["cacheScope"], "private");
        assert_eq!(value["tools"][0]["name"], "a");
        assert_eq!(value["tools"][1]["name"], "b");
    }

    #[test]
    fn the_newest_revision_is_served_beside_every_handshake_era_one() {
        let versions: Vec<String> = supported_versions()
            .iter()
            .map(|v| v.as_str().to_string())
            .collect();
        assert_eq!(
            versions,
            [
                "2024-11-05",
                "2025-03-26",
                "2025-06-18",
                "2025-11-25",
                "2026-07-28"
            ]
        );
    }
}
