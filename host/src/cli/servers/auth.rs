//! `airlock servers auth` and `logout`: OAuth authorization (opening a browser) and
//! forgetting the tokens.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use serde_json::json;

use super::print;
use crate::cli::Cli;
use crate::config::{Auth, ConfigSources, ServerConfig, TransportConfig, process_env};
use crate::servers::Servers;

/// Runs `airlock servers auth`.
pub(super) async fn auth(
    cli: &Cli,
    servers: &Servers,
    sources: &ConfigSources,
    name: &str,
    wait: u64,
) -> anyhow::Result<ExitCode> {
    let config = servers.load_config(sources, &process_env)?;
    let (url, auth) = oauth_target(config.servers.get(name), name)?;
    servers
        .authorize(
            name,
            &cli.agent,
            &url,
            &auth,
            &open_in_browser,
            Duration::from_secs(wait),
        )
        .await?;
    print(
        cli,
        json!({"ok": true, "authorized": name}),
        || match &auth {
            Auth::ClientCredentials(_) => println!(
                "\"{name}\" uses client credentials: a token was granted and stored. Airlock gets new ones by itself."
            ),
            Auth::OAuth(client) if client.per_agent => println!(
                "Authorized \"{name}\" for agent \"{}\" (its own tokens, in the secret store; Airlock refreshes them silently).",
                cli.agent
            ),
            _ => println!(
                "Authorized \"{name}\". Tokens are in the secret store; Airlock refreshes them silently."
            ),
        },
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs `airlock servers logout`.
pub(super) fn logout(
    cli: &Cli,
    servers: &Servers,
    sources: &ConfigSources,
    name: &str,
) -> anyhow::Result<ExitCode> {
    // The service's auth says whose tokens these are; a service no longer configured
    // (or not using OAuth) still has its shared tokens forgotten.
    let config = servers.load_config(sources, &process_env)?;
    let auth = match config.servers.get(name).map(|s| &s.transport) {
        Some(TransportConfig::Http { auth, .. }) => auth.clone(),
        _ => Auth::None,
    };
    let had = servers.logout(name, &cli.agent, &auth)?;
    print(cli, json!({"ok": true, "forgot_tokens": had}), || {
        if had {
            println!("Forgot the OAuth tokens of \"{name}\".");
        } else {
            println!("\"{name}\" had no stored OAuth tokens.");
        }
    });
    Ok(ExitCode::SUCCESS)
}

fn oauth_target(server: Option<&ServerConfig>, name: &str) -> anyhow::Result<(String, Auth)> {
    match server.map(|s| &s.transport) {
        Some(TransportConfig::Http { url, auth, .. }) if *auth != Auth::None => {
            Ok((url.clone(), auth.clone()))
        }
        Some(_) => bail!(
            "server \"{name}\" does not use OAuth (only http servers with an \"auth\" setting do)"
        ),
        None => bail!("no server named \"{name}\""),
    }
}

/// Opens `url` for the user: `$AIRLOCK_BROWSER URL` when set, else the platform's
/// opener; when none works, prints it to the terminal (never to the log).
fn open_in_browser(url: &str) -> std::io::Result<()> {
    let candidates: Vec<String> = match std::env::var("AIRLOCK_BROWSER") {
        Ok(b) if !b.is_empty() => vec![b],
        _ if cfg!(target_os = "macos") => vec!["open".into()],
        _ => vec!["xdg-open".into()],
    };
    for program in candidates {
        let status = std::process::Command::new(&program)
            .arg(url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .status();
        if matches!(status, Ok(s) if s.success()) {
            eprintln!("Opened the authorization page with {program}; waiting for it to finish…");
            return Ok(());
        }
    }
    eprintln!("Open this address in a browser to authorize Airlock:\n\n  {url}\n");
    Ok(())
}
