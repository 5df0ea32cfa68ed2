//! The `airlock` binary: parses the command line and runs it.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = airlock_host::cli::Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("AIRLOCK_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"))
        // rmcp logs OAuth authorization codes at debug level; they never reach our log.
        .add_directive(
            "rmcp::transport::auth=info"
                .parse()
                .expect("a valid directive"),
        );
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
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
