//! The `airlock` binary: parses the command line and runs it.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    airlock_host::alloc::pin_mmap_threshold();
    let cli = airlock_host::cli::Cli::parse();
    let runtime = match cli.runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("airlock: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let telemetry = airlock_host::cli::logging::settings(&cli).and_then(|settings| {
        airlock_host::cli::logging::init(&cli, &settings, runtime.handle().clone())
    });
    let telemetry = match telemetry {
        Ok(telemetry) => telemetry,
        Err(e) => {
            eprintln!("airlock: {}", airlock_host::cli::error_message(&e));
            return ExitCode::from(2);
        }
    };
    let code = runtime.block_on(airlock_host::cli::run(cli));
    // The last spans leave before the runtime their requests run on stops.
    telemetry.finish();
    // Background tasks (stderr readers, closed sessions) must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}
