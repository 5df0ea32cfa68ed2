//! The read-only listings: `airlock tools`, `status`, `resources`, `read-resource`,
//! `prompts` and `get-prompt`.

use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Value, json};

use super::Cli;
use super::common::{load_config, start};
use super::render;

/// Runs `airlock tools`.
pub(super) async fn tools(cli: &Cli, search: Option<&str>) -> anyhow::Result<ExitCode> {
    let airlock = start(cli, load_config(cli)?, false).await?;
    let tools = match search {
        Some(q) => airlock.catalog().search(q),
        None => airlock.catalog().tools(),
    };
    let tools: Vec<&crate::CatalogTool> = tools.iter().collect();
    render::tools(cli.json, &tools, &airlock.services().status());
    airlock.close().await;
    Ok(ExitCode::SUCCESS)
}

/// Runs `airlock status`.
pub(super) async fn status(cli: &Cli) -> anyhow::Result<ExitCode> {
    let airlock = start(cli, load_config(cli)?, false).await?;
    render::status(cli.json, &airlock.services().status());
    airlock.close().await;
    Ok(ExitCode::SUCCESS)
}

/// Runs `airlock resources`.
pub(super) async fn resources(cli: &Cli, service: Option<&str>) -> anyhow::Result<ExitCode> {
    let airlock = start(cli, load_config(cli)?, false).await?;
    let outcome = airlock
        .resources()
        .list_resources(&cli.agent, service)
        .await
        .map(|r| json!({"resources": r}));
    airlock.close().await;
    Ok(render::value(cli.json, outcome))
}

/// Runs `airlock read-resource`.
pub(super) async fn read_resource(cli: &Cli, service: &str, uri: &str) -> anyhow::Result<ExitCode> {
    let airlock = start(cli, load_config(cli)?, false).await?;
    let outcome = airlock
        .resources()
        .read_resource(&cli.agent, service, uri)
        .await;
    airlock.close().await;
    Ok(render::value(cli.json, outcome))
}

/// Runs `airlock prompts`.
pub(super) async fn prompts(cli: &Cli, service: Option<&str>) -> anyhow::Result<ExitCode> {
    let airlock = start(cli, load_config(cli)?, false).await?;
    let outcome = airlock
        .resources()
        .list_prompts(&cli.agent, service)
        .await
        .map(|p| json!({"prompts": p}));
    airlock.close().await;
    Ok(render::value(cli.json, outcome))
}

/// Runs `airlock get-prompt`.
pub(super) async fn get_prompt(
    cli: &Cli,
    service: &str,
    name: &str,
    args: &str,
) -> anyhow::Result<ExitCode> {
    let arguments: Value = serde_json::from_str(args).context("--args is not valid JSON")?;
    let airlock = start(cli, load_config(cli)?, false).await?;
    let outcome = airlock
        .resources()
        .get_prompt(&cli.agent, service, name, arguments)
        .await;
    airlock.close().await;
    Ok(render::value(cli.json, outcome))
}
