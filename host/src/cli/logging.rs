//! The binary's `tracing` subscriber: log lines to stderr (text, or JSON with
//! `--log-format json`), every one scrubbed of the secrets Airlock knows; and, when
//! `[telemetry]` or `OTEL_EXPORTER_OTLP_ENDPOINT` names a collector, Airlock's spans
//! exported over OTLP/HTTP (then JSON lines carry their trace and span ids).

use anyhow::Context;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, filter::FilterExt};

use super::{Cli, LogFormat};
use crate::config::process_env;
use crate::telemetry::{Settings, export, logs::WithTraceIds};

/// What must outlive the command: the span export, flushed by [`Telemetry::finish`].
pub struct Telemetry {
    export: Option<export::SpanExport>,
}

impl Telemetry {
    /// Sends the spans still queued and stops the exporter. Blocking: call it from the
    /// main thread, after the command has run and before the runtime stops.
    pub fn finish(self) {
        if let Some(export) = self.export
            && let Err(e) = export.shutdown()
        {
            tracing::warn!("could not send the last spans to the OTLP collector: {e}");
        }
    }
}

/// The telemetry settings the config files (`--config`, the user and project files)
/// and the `OTEL_*` variables give.
pub fn settings(cli: &Cli) -> anyhow::Result<Settings> {
    let sources = super::common::config_sources(cli)?;
    Ok(crate::config::load_telemetry(&sources, &process_env)?)
}

/// Installs the process's subscriber. Spans are exported when `settings` names an
/// endpoint; their requests run on `runtime`.
pub fn init(
    cli: &Cli,
    settings: &Settings,
    runtime: tokio::runtime::Handle,
) -> anyhow::Result<Telemetry> {
    let wanted = tracing_subscriber::EnvFilter::try_from_env("AIRLOCK_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // rmcp logs whole protocol messages (unredacted results, OAuth codes) at debug and
    // trace: those levels of rmcp never reach Airlock's log, whatever AIRLOCK_LOG says.
    // wasmtime and cranelift trace every compilation step: kept at info too.
    let guard = tracing_subscriber::filter::filter_fn(|meta| {
        let noisy = ["rmcp", "wasmtime", "cranelift"]
            .iter()
            .any(|t| meta.target().starts_with(t));
        !(noisy && *meta.level() > tracing::Level::INFO)
    });
    let export = match settings.exports() {
        true => Some(export::SpanExport::start(settings, runtime)?),
        false => None,
    };
    // Every record, from every crate, is scrubbed of the secrets Airlock knows.
    let stderr = || crate::secrets::ScrubbingWriter::new(std::io::stderr());
    let format = tracing_subscriber::fmt::layer().with_writer(stderr);
    let mut slot = None;
    let format = match cli.log_format {
        LogFormat::Text => format.boxed(),
        LogFormat::Json => {
            let json = format.json().with_current_span(true).with_span_list(false);
            if export.is_some() {
                let (with_ids, filled) = WithTraceIds::new(
                    tracing_subscriber::fmt::format()
                        .json()
                        .with_current_span(true)
                        .with_span_list(false),
                );
                slot = Some(filled);
                json.event_format(with_ids).boxed()
            } else {
                json.boxed()
            }
        }
    };
    let logs = tracing_subscriber::registry().with(format.with_filter(wanted.and(guard)));
    // No exporter, no span layer: an absent layer (`Option::None`) would still enable
    // every span, and each call would pay for a dozen spans no one reads.
    let dispatch = match &export {
        Some(export) => tracing::Dispatch::new(logs.with(export.layer())),
        None => tracing::Dispatch::new(logs),
    };
    if let Some(slot) = slot {
        let _ = slot.set(dispatch.downgrade());
    }
    // As the process's default, with `log` records (from crates that use `log`) too.
    dispatch
        .try_init()
        .context("cannot install the log subscriber")?;
    Ok(Telemetry { export })
}
