//! The retention stage: the redacted text is kept (id, size, digest, owner) and its
//! preview returned; the bytes reach the store on the retention writer's thread.

use std::sync::Arc;

use crate::airlock::outputs::Outputs;
use crate::results::{Prepared, Retained};

/// Keeps processed results (see [`Outputs`]).
pub(super) struct Retain {
    pub(super) outputs: Arc<Outputs>,
}

impl Retain {
    /// Keeps `prepared` for `service`: its record and preview.
    pub(super) async fn keep(&self, service: &str, prepared: Prepared) -> (Retained, String) {
        let retain = tracing::info_span!(
            "retain",
            airlock.output_id = tracing::field::Empty,
            airlock.result.size = tracing::field::Empty,
        );
        let stage = std::time::Instant::now();
        let (retained, preview) =
            tracing::Instrument::instrument(self.outputs.keep(service, prepared), retain.clone())
                .await;
        crate::telemetry::stage_done("retain", stage);
        tracing::record_all!(
            retain,
            airlock.output_id = retained.output_id.as_deref(),
            airlock.result.size = retained.size as u64,
        );
        (retained, preview)
    }
}
