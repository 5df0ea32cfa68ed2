//! The `airlock` binary: parses the command line and runs it.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    airlock_host::alloc::pin_mmap_threshold();
    let cli = airlock_host::cli::Cli::parse();
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{Layer, filter::FilterExt};
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
    // Every record, from every crate, is scrubbed of the secrets Airlock knows.
    let stderr = || airlock_host::secrets::ScrubbingWriter::new(std::io::stderr());
    let format = tracing_subscriber::fmt::layer().with_writer(stderr);
    let format = match cli.log_format {
        airlock_host::cli::LogFormat::Text => format.boxed(),
        airlock_host::cli::LogFormat::Json => format
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .boxed(),
    };
    tracing_subscriber::registry()
        .with(format.with_filter(wanted.and(guard)))
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("airlock: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(airlock_host::cli::run(cli));
    // Background tasks (stderr readers, closed sessions) must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}
