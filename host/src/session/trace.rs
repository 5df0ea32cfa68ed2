//! W3C trace context on the wire to a server (SEP-414): the caller's `traceparent` and
//! `tracestate` go into the upstream request's `_meta`, so the server's spans join the
//! caller's trace. A value that is not a valid `traceparent` is dropped, never passed on.

use rmcp::model::RequestParamsMeta;

use crate::telemetry::traceparent::Traceparent;

/// The longest `tracestate` passed on (the W3C limit: 32 members of at most 256 bytes
/// would be more, but 512 bytes is what a propagator must accept).
const MAX_TRACESTATE: usize = 512;

/// A caller's position in a distributed trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    traceparent: String,
    tracestate: Option<String>,
}

impl TraceContext {
    /// A trace context from a `traceparent` (and optional `tracestate`); `None` when the
    /// `traceparent` is not a valid W3C one (`VERSION-TRACEID-PARENTID-FLAGS`, lower-case
    /// hex, ids not all zero, version not `ff`). An over-long `tracestate` is dropped.
    pub fn new(traceparent: &str, tracestate: Option<&str>) -> Option<TraceContext> {
        let traceparent = traceparent.trim();
        if !valid_traceparent(traceparent) {
            return None;
        }
        let tracestate = tracestate
            .map(str::trim)
            .filter(|s| !s.is_empty() && s.len() <= MAX_TRACESTATE && s.is_ascii())
            .map(str::to_string);
        Some(TraceContext {
            traceparent: traceparent.to_string(),
            tracestate,
        })
    }

    /// A context Airlock made itself (a span's own): well-formed by construction, so
    /// not checked again.
    pub(crate) fn own(traceparent: String, tracestate: Option<String>) -> TraceContext {
        debug_assert!(valid_traceparent(&traceparent), "{traceparent}");
        TraceContext {
            traceparent,
            tracestate,
        }
    }

    /// The `traceparent` value.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The `tracestate` value, if any.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// Writes this context into a request's `_meta`.
    pub(super) fn stamp(&self, params: &mut impl RequestParamsMeta) {
        params.set_traceparent(&self.traceparent);
        if let Some(state) = &self.tracestate {
            params.set_tracestate(state);
        }
    }
}

fn valid_traceparent(value: &str) -> bool {
    Traceparent::parse(value).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn a_valid_traceparent_is_kept_and_stamped_into_meta() {
        let trace = TraceContext::new(GOOD, Some("vendor=abc")).unwrap();
        let mut params = rmcp::model::CallToolRequestParams::new("echo");
        trace.stamp(&mut params);
        let meta = serde_json::to_value(&params).unwrap()["_meta"].clone();
        assert_eq!(meta["traceparent"], GOOD);
        assert_eq!(meta["tracestate"], "vendor=abc");
    }

    #[test]
    fn malformed_traceparents_are_dropped() {
        for bad in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00-secret-token-01",
        ] {
            assert_eq!(TraceContext::new(bad, None), None, "{bad}");
        }
        let later = "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra";
        assert!(TraceContext::new(later, None).is_some());
    }
}
