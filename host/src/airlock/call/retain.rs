//! The retention stage: the redacted text is kept (id, size, digest, owner) and its
//! preview returned; the bytes reach the store on the retention writer's thread.

use std::sync::Arc;

use crate::airlock::outputs::Outputs;
use crate::results::{Prepared, Retained};
use crate::telemetry::CallTrace;

/// Keeps processed results (see [`Outputs`]).
pub(super) struct Retain {
    pub(super) outputs: Arc<Outputs>,
}

impl Retain {
    /// Keeps `prepared` for `service`: its record and preview.
    pub(super) async fn keep(
        &self,
        service: &str,
        prepared: Prepared,
        trace: &CallTrace,
    ) -> (Retained, String) {
        let mut stage = trace.stage("retain");
        let (retained, preview) = self.outputs.keep(service, prepared).await;
        if let Some(id) = &retained.output_id {
            stage.set_str("airlock.output_id", id);
        }
        stage.set_u64("airlock.result.size", retained.size as u64);
        stage.done();
        (retained, preview)
    }
}
