//! Per-client knowledge: where each MCP client keeps its server definitions and how to pull
//! the raw `(key, value)` entries out of a parsed file. Everything after that — validation,
//! `${VAR}` resolution, secrets, scrubbing — is shared and lives in the sibling modules.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::parse::{Format, kind};
use super::{Client, ImportSources};

/// Whose file it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    /// Under the home folder.
    User,
    /// Under the workspace folder.
    Workspace,
}

/// One file a client may have.
#[derive(Debug, Clone)]
pub(super) struct Location {
    pub path: PathBuf,
    pub format: Format,
    pub scope: Scope,
}

/// One server definition as found in a file, before validation.
#[derive(Debug, Clone)]
pub(super) struct RawEntry {
    /// The key the entry is stored under.
    pub key: String,
    /// The entry itself (TOML already converted to JSON).
    pub value: Value,
    /// Informational notes about where in the file it came from.
    pub notes: Vec<String>,
}

/// The files `client` may keep definitions in: user file(s) first, then workspace file(s).
pub(super) fn locations(client: Client, sources: &ImportSources<'_>) -> Vec<Location> {
    let home = sources.home;
    let workspace = sources.workspace;
    let json = |path: PathBuf, scope: Scope| Location {
        path,
        format: Format::Json,
        scope,
    };
    // (file under the home folder, file under the workspace folder)
    let (user, project) = match client {
        Client::ClaudeCode => (Some(".claude.json"), Some(".mcp.json")),
        Client::Cursor => (Some(".cursor/mcp.json"), Some(".cursor/mcp.json")),
        Client::Gemini => (Some(".gemini/settings.json"), Some(".gemini/settings.json")),
        Client::MuseCode => (Some(".muse/settings.json"), Some(".muse/settings.json")),
        Client::Vscode => (None, Some(".vscode/mcp.json")),
        Client::Codex => {
            let dir = match (sources.env)("CODEX_HOME") {
                Some(dir) if !dir.trim().is_empty() => PathBuf::from(dir),
                _ => home.join(".codex"),
            };
            return vec![Location {
                path: dir.join("config.toml"),
                format: Format::Toml,
                scope: Scope::User,
            }];
        }
    };
    let mut out = Vec::new();
    if let Some(user) = user {
        out.push(json(home.join(user), Scope::User));
    }
    if let (Some(project), Some(ws)) = (project, workspace) {
        out.push(json(ws.join(project), Scope::Workspace));
    }
    out
}

/// The raw entries of one parsed file, plus problems with the file as a whole (entries
/// that could still be found are returned alongside them).
pub(super) fn entries(
    client: Client,
    location: &Location,
    doc: &Value,
    workspace: Option<&Path>,
) -> (Vec<RawEntry>, Vec<String>) {
    let Value::Object(root) = doc else {
        let what = match location.format {
            Format::Json => "a JSON object",
            Format::Toml => "a TOML table",
        };
        return (
            Vec::new(),
            vec![format!(
                "expected {what} at the top level, got {}",
                kind(doc)
            )],
        );
    };
    let mut problems = Vec::new();
    let entries = match client {
        Client::ClaudeCode => claude(root, location.scope, workspace, &mut problems),
        Client::Cursor | Client::Gemini => server_map(root, "mcpServers", &mut problems),
        Client::Codex => server_map(root, "mcp_servers", &mut problems),
        Client::Vscode => server_map(root, "servers", &mut problems),
        Client::MuseCode => muse(root, &mut problems),
    };
    (entries, problems)
}

/// The entries of the map under `key` (absent or null: none), sorted by key.
fn server_map(root: &Map<String, Value>, key: &str, problems: &mut Vec<String>) -> Vec<RawEntry> {
    match root.get(key) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(map)) => {
            let mut out: Vec<RawEntry> = map
                .iter()
                .map(|(k, v)| RawEntry {
                    key: k.clone(),
                    value: v.clone(),
                    notes: Vec::new(),
                })
                .collect();
            out.sort_by(|a, b| a.key.cmp(&b.key));
            out
        }
        Some(other) => {
            problems.push(format!("\"{key}\" must be an object, got {}", kind(other)));
            Vec::new()
        }
    }
}

/// Claude Code: the top-level `mcpServers`, and — in the user file only — the
/// `projects.<workspace>.mcpServers` of the project whose key is the workspace path.
fn claude(
    root: &Map<String, Value>,
    scope: Scope,
    workspace: Option<&Path>,
    problems: &mut Vec<String>,
) -> Vec<RawEntry> {
    let mut out = server_map(root, "mcpServers", problems);
    if scope != Scope::User {
        return out;
    }
    let (Some(ws), Some(Value::Object(projects))) = (workspace, root.get("projects")) else {
        return out;
    };
    let canonical = ws.canonicalize().ok();
    let project = projects.iter().find(|(key, _)| {
        let key = Path::new(key.as_str());
        key == ws || canonical.as_deref() == Some(key)
    });
    if let Some((key, Value::Object(project))) = project {
        let mut scoped = Vec::new();
        let found = server_map(project, "mcpServers", &mut scoped);
        problems.extend(scoped.into_iter().map(|p| format!("project {key:?}: {p}")));
        out.extend(found.into_iter().map(|mut e| {
            e.notes
                .push(format!("defined for project {key:?} in this file"));
            e
        }));
    }
    out
}

/// Muse Code: `mcpServers`, plus the legacy `mcp_servers` map of the same file. A name in
/// both keeps the `mcpServers` definition. Sorted by key.
fn muse(root: &Map<String, Value>, problems: &mut Vec<String>) -> Vec<RawEntry> {
    let mut out = server_map(root, "mcpServers", problems);
    for mut legacy in server_map(root, "mcp_servers", problems) {
        if let Some(current) = out.iter_mut().find(|e| e.key == legacy.key) {
            current.notes.push(
                "also defined in the legacy \"mcp_servers\" map of this file; the \"mcpServers\" definition wins"
                    .to_string(),
            );
        } else {
            legacy
                .notes
                .push("from the legacy \"mcp_servers\" map".to_string());
            out.push(legacy);
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}
