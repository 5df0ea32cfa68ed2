//! The processing stage: the content plugin converts the server's blocks, the
//! redaction chain removes known secrets and configured patterns (fail-closed: any
//! failure fails the call, so an unredacted result never leaves), and the retained text
//! is prepared (its digest and preview) — all in one blocking section, off the async
//! worker role.

use super::resolve::Resolved;
use crate::error::{CallError, ErrorCode};
use crate::mcp::ToolResult;
use crate::plugin::{RedactionMark, ToolResult as WitResult, convert};
use crate::results::{self, Prepared};
use crate::secrets::KnownSecrets;
use crate::telemetry::CallTrace;

/// A result converted and redacted, in the contract's form (what the result policy
/// sees), with its redaction marks and its retained text prepared.
pub(super) struct Processed {
    pub(super) result: WitResult,
    pub(super) marks: Vec<RedactionMark>,
    pub(super) prepared: Prepared,
}

/// Runs a service's content and redaction plugins on results.
pub(super) struct Process {
    /// The agent the retained text is kept for.
    pub(super) agent: String,
    /// The preview size.
    pub(super) preview: usize,
    /// The service's known secrets as they are now (connecting may have just learned
    /// one, an OAuth access token).
    pub(super) known: KnownSecrets,
    /// The call's trace, where the plugins' stages are recorded.
    pub(super) trace: CallTrace,
}

impl Process {
    /// Converts and redacts `result` with `found`'s plugins.
    pub(super) async fn run(
        &self,
        found: &Resolved,
        result: ToolResult,
    ) -> Result<Processed, CallError> {
        let (agent, preview) = (self.agent.clone(), self.preview);
        found
            .pipeline
            .process_then(result, &self.known, self.trace.clone(), move |processed| {
                let text = convert::result_text(&processed.result);
                let prepared =
                    results::prepare(Some(&agent), text, !processed.marks.is_empty(), preview);
                Processed {
                    result: processed.result,
                    marks: processed.marks,
                    prepared,
                }
            })
            .await
            .map_err(|e| {
                CallError::new(
                    ErrorCode::AdapterError,
                    self.known.scrub_owned(&e.to_string()),
                )
            })
    }

    /// Converts and redacts a result a policy put in the place of the server's.
    pub(super) async fn run_replacement(
        &self,
        found: &Resolved,
        replacement: WitResult,
    ) -> Result<Processed, CallError> {
        self.run(found, crate::plugin::result_from_wit(replacement))
            .await
    }
}
