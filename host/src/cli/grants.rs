//! `airlock grants add|remove|list|revoke`: which services an agent may use when Airlock
//! runs with grants (`airlock serve --access grants`, or an embedder's
//! `AccessMode::Grants`), and the policy approvals a person asked to be remembered.

use std::process::ExitCode;

use anyhow::bail;
use clap::Subcommand;
use serde_json::json;

use super::Cli;
use super::common::{load_config, open_stores};

/// `airlock grants …` (the agent is the global `--agent`).
#[derive(Debug, Subcommand)]
pub enum GrantsCommand {
    /// Grant a service to --agent.
    Add {
        /// The service.
        service: String,
    },
    /// Revoke --agent's grant of a service.
    Remove {
        /// The service.
        service: String,
    },
    /// List the services granted to --agent and its remembered approvals.
    List,
    /// Forget a remembered approval (its id is in `grants list`): the next call it
    /// covered asks again.
    Revoke {
        /// The approval's id.
        id: i64,
    },
}

/// Runs `airlock grants`.
pub fn run(cli: &Cli, command: &GrantsCommand) -> anyhow::Result<ExitCode> {
    let stores = open_stores(cli)?;
    let agent = &cli.agent;
    match command {
        GrantsCommand::Add { service } => {
            if !load_config(cli)?.servers.contains_key(service) {
                bail!("no service named \"{service}\"");
            }
            let new = stores.grant(agent, service)?;
            print(
                cli,
                json!({"agent": agent, "service": service, "granted": true, "changed": new}),
                || println!("granted \"{service}\" to agent \"{agent}\""),
            );
        }
        GrantsCommand::Remove { service } => {
            let had = stores.revoke(agent, service)?;
            print(
                cli,
                json!({"agent": agent, "service": service, "granted": false, "changed": had}),
                || {
                    if had {
                        println!("revoked agent \"{agent}\"'s grant of \"{service}\"")
                    } else {
                        println!("agent \"{agent}\" had no grant of \"{service}\"")
                    }
                },
            );
        }
        GrantsCommand::List => {
            let services = stores.grants(agent)?;
            let approvals = stores.approvals(Some(agent))?;
            print(
                cli,
                json!({"agent": agent, "services": services, "approvals": approvals}),
                || {
                    if services.is_empty() && approvals.is_empty() {
                        println!("agent \"{agent}\" holds no grants");
                    }
                    for s in &services {
                        println!("{s}");
                    }
                    for a in &approvals {
                        let expiry = a.expires_at.map_or("until revoked".to_string(), |t| {
                            format!("until {}", millis_utc(t))
                        });
                        println!(
                            "approval {}: service {} tool {} arguments {} (policy {}, rule {}; {expiry})",
                            a.id, a.service, a.tool, a.arguments, a.plugin, a.rule
                        );
                    }
                },
            );
        }
        GrantsCommand::Revoke { id } => {
            let had = stores.revoke_approval(*id)?;
            if !had {
                bail!("no remembered approval with id {id} (see `airlock grants list`)");
            }
            print(cli, json!({"id": id, "revoked": true}), || {
                println!("forgot approval {id}; the calls it covered ask again")
            });
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Unix milliseconds as an RFC 3339 UTC time.
fn millis_utc(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || format!("{ms} ms"),
        |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    )
}

fn print(cli: &Cli, value: serde_json::Value, text: impl FnOnce()) {
    if cli.json {
        println!("{value}");
    } else {
        text();
    }
}
