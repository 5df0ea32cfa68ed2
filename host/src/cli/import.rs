//! `airlock import`: preview the servers other MCP clients define (changing nothing),
//! then `--apply NAME…` or `--apply all` within ten minutes to import a selection.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use serde_json::json;

use super::Cli;
use super::common::project_dir;
use crate::config::Scope;
use crate::config::process_env;
use crate::import::{Candidate, Client, ImportSources, ImportedTransport, Scan};
use crate::servers::{Draft, GivenValue, ImportPreview, PREVIEW_TTL_SECS};

/// `airlock import` arguments.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Only this client: claude-code, cursor, codex, gemini, vscode or muse-code.
    #[arg(long = "from", value_name = "CLIENT")]
    pub from: Option<String>,
    /// The project folder whose client files to read (default: the current folder).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Import these entries of the last preview (or `all`).
    #[arg(long, num_args = 1.., value_name = "NAME")]
    pub apply: Vec<String>,
    /// Where imported servers go: user or project.
    #[arg(long, default_value = "user")]
    pub scope: String,
}

/// The random key preview digests are keyed with, kept in the secret store (created on
/// first use), so the digests saved in the registry (they cover secret values) cannot be
/// brute-forced offline. Read once per command.
fn preview_key(servers: &crate::servers::Servers) -> anyhow::Result<String> {
    const KEY: &str = "import-preview-key";
    let store = servers.store();
    if let Some(k) = store.get(KEY)? {
        return Ok(k);
    }
    let k = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    store.put(KEY, &k)?;
    Ok(k)
}

/// A candidate's digest keyed with [`preview_key`].
fn keyed_digest(key: &str, c: &Candidate) -> String {
    crate::digest::sha256(format!("{key}:{}", c.digest()).as_bytes())
}

fn home() -> anyhow::Result<PathBuf> {
    std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .map(PathBuf::from)
        .context("cannot find the home folder: HOME is not set")
}

/// Runs `airlock import`.
pub async fn run(cli: &Cli, args: &ImportArgs) -> anyhow::Result<ExitCode> {
    let only = args
        .from
        .as_deref()
        .map(Client::parse)
        .transpose()
        .map_err(|e| anyhow!(e))?;
    let scope = Scope::parse(&args.scope)?;
    let workspace = match &args.workspace {
        Some(w) => {
            std::path::absolute(w).with_context(|| format!("--workspace {}", w.display()))?
        }
        None => project_dir()?,
    };
    if !workspace.is_dir() {
        bail!("--workspace \"{}\" is not a folder", workspace.display());
    }
    let home = home()?;
    let scan = crate::import::scan(&ImportSources {
        home: &home,
        workspace: Some(&workspace),
        env: &process_env,
        only,
    });
    let request = json!({"from": only.map(|c| c.name()), "workspace": workspace});
    // Project-scope imports belong to the workspace they were read from.
    let servers = super::common::open_servers_for(cli, &workspace)?;
    if args.apply.is_empty() {
        preview(cli, &servers, &scan, &request)
    } else {
        apply(cli, &servers, &scan, &request, &args.apply, scope)
    }
}

fn preview(
    cli: &Cli,
    servers: &crate::servers::Servers,
    scan: &Scan,
    request: &serde_json::Value,
) -> anyhow::Result<ExitCode> {
    let key = preview_key(servers)?;
    let entries: BTreeMap<String, String> = scan
        .candidates
        .iter()
        .map(|c| (c.name.clone(), keyed_digest(&key, c)))
        .collect();
    servers.save_import_preview(request, &entries)?;
    let masked: Vec<Candidate> = scan.candidates.iter().map(Candidate::masked).collect();
    if cli.json {
        println!(
            "{}",
            json!({
                "candidates": masked,
                "problems": scan.problems,
                "skipped": scan.skipped,
                "files_read": scan.files_read,
                "expires_in_secs": PREVIEW_TTL_SECS,
            })
        );
        return Ok(ExitCode::SUCCESS);
    }
    if masked.is_empty() && scan.problems.is_empty() && scan.skipped.is_empty() {
        println!("No MCP servers found in other clients' files.");
    }
    for c in &masked {
        print_candidate(c);
    }
    for s in &scan.skipped {
        println!(
            "{}  (from {}, {}): not imported: {}",
            s.name,
            s.client.name(),
            s.source.display(),
            s.reason
        );
    }
    for p in &scan.problems {
        eprintln!("airlock: skipped: {p}");
    }
    if !masked.is_empty() {
        println!(
            "\nNothing was changed. To import, run within 10 minutes: airlock import --apply NAME… (or --apply all), with the same --from/--workspace."
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints one (masked) candidate of a preview.
fn print_candidate(c: &Candidate) {
    println!(
        "{}  (from {}, {})",
        c.name,
        c.client.name(),
        c.source.display()
    );
    match &c.transport {
        ImportedTransport::Stdio { command, args, env } => {
            println!("    command: {command}");
            if !args.is_empty() {
                println!(
                    "    args:    {}",
                    serde_json::to_string(args).expect("json")
                );
            }
            if let Some(cwd) = &c.cwd {
                println!("    cwd:     {cwd}");
            }
            for (k, v) in env {
                let tag = if v.secret { " (secret)" } else { "" };
                println!("    env:     {k}={}{tag}", v.value);
            }
        }
        ImportedTransport::Http { url, headers, .. } => {
            println!("    url:     {url}");
            for (k, v) in headers {
                let tag = if v.secret { " (secret)" } else { "" };
                println!("    header:  {k}: {}{tag}", v.value);
            }
        }
    }
    if !c.enabled {
        println!("    arrives disabled");
    }
    if let Some(t) = c.tool_timeout_secs {
        println!("    tool timeout: {t} s");
    }
    for r in &c.repair {
        println!("    needs repair: {r}");
    }
    for n in &c.notes {
        println!("    note: {n}");
    }
}

fn apply(
    cli: &Cli,
    servers: &crate::servers::Servers,
    scan: &Scan,
    request: &serde_json::Value,
    names: &[String],
    scope: Scope,
) -> anyhow::Result<ExitCode> {
    let preview = servers.import_preview(request)?;
    if let Some(s) = scan
        .skipped
        .iter()
        .find(|s| names.contains(&s.name) && !preview.entries.contains_key(&s.name))
    {
        bail!(
            "\"{}\" (from {}, {}) is not imported: {}",
            s.name,
            s.client.name(),
            s.source.display(),
            s.reason
        );
    }
    let selected = selection(&preview, names)?;
    let key = preview_key(servers)?;
    let mut imported = Vec::new();
    let mut failed = Vec::new();
    for name in selected {
        let current = scan.candidates.iter().find(|c| c.name == name);
        let outcome = match current {
            None => Err(anyhow!(
                "\"{name}\" is no longer in its source file; run `airlock import` again"
            )),
            Some(c) if keyed_digest(&key, c) != preview.entries[&name] => Err(anyhow!(
                "\"{name}\" changed in \"{}\" since the preview; run `airlock import` again",
                c.source.display()
            )),
            Some(c) => servers
                .add(draft(c, scope), &process_env)
                .map(|_| c)
                .with_context(|| format!("\"{name}\"")),
        };
        match outcome {
            Ok(c) => imported.push(json!({
                "name": c.name,
                "client": c.client.name(),
                "enabled": c.enabled,
                "repair": c.repair,
            })),
            Err(e) => failed.push(super::error_message(&e)),
        }
    }
    print_applied(cli, &imported, &failed);
    Ok(if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The preview entries `--apply` names (every entry for `all`).
fn selection(preview: &ImportPreview, names: &[String]) -> anyhow::Result<Vec<String>> {
    Ok(if names.iter().any(|n| n == "all") {
        preview.entries.keys().cloned().collect()
    } else {
        for n in names {
            if !preview.entries.contains_key(n) {
                bail!(
                    "\"{n}\" was not in the import preview (entries: {})",
                    preview
                        .entries
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        names.to_vec()
    })
}

/// Prints what `--apply` imported and what it could not.
fn print_applied(cli: &Cli, imported: &[serde_json::Value], failed: &[String]) {
    if cli.json {
        println!(
            "{}",
            json!({"ok": failed.is_empty(), "imported": imported, "failed": failed})
        );
    } else {
        for i in imported {
            let state = if i["enabled"] == true {
                ""
            } else {
                " (disabled)"
            };
            println!(
                "Imported {}{state} from {}.",
                i["name"].as_str().unwrap_or("?"),
                i["client"].as_str().unwrap_or("?")
            );
            for r in i["repair"].as_array().into_iter().flatten() {
                println!("    needs repair: {}", r.as_str().unwrap_or(""));
            }
        }
        for e in failed {
            eprintln!("airlock: not imported: {e}");
        }
        if !imported.is_empty() {
            println!("Run `airlock servers test NAME` to offer an imported server's tools.");
        }
    }
}

/// The registry draft for a candidate. Secret values that could not be resolved stay
/// empty and plain (the entry is marked for repair); the rest go to the secret store.
fn draft(c: &Candidate, scope: Scope) -> Draft {
    let transport = c.transport.clone().map_values(|_, v| GivenValue {
        secret: v.secret && !v.value.is_empty(),
        value: v.value,
    });
    let cwd = c.cwd.clone();
    Draft {
        name: c.name.clone(),
        scope,
        label: None,
        description: None,
        transport,
        cwd,
        enabled: c.enabled,
        startup_timeout_secs: c.startup_timeout_secs.map(|s| s as f64),
        tool_timeout_secs: c.tool_timeout_secs.map(|s| s as f64),
        repair: c.repair.clone(),
        origin: format!("imported from {} ({})", c.client.name(), c.source.display()),
    }
}
