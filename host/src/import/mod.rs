//! Importing MCP server definitions from other MCP clients.
//!
//! [`scan`] reads the files where Claude Code, Cursor, Codex, Gemini CLI, VS Code and
//! Muse Code keep their MCP servers and turns every entry into a [`Candidate`]: a
//! validated, normalized definition ready to be previewed and written into Airlock's own
//! config by the caller. This module only ever *reads* other clients' files.
//!
//! How a definition is translated:
//!
//! - **Env and header values** are resolved against Airlock's own environment: `${VAR}`,
//!   `${env:VAR}`, `${VAR:-default}` anywhere in the value, and `$VAR` as the whole value.
//!   An unset variable leaves the value empty and adds a repair reason; so does a VS Code
//!   `${input:ID}` prompt, which Airlock cannot answer.
//! - **Command, args and url** keep their references to variables that are set, rewritten
//!   to Airlock's own `${VAR}` form (Airlock expands them when it loads its config), so a
//!   secret passed by reference never lands in the config as plain text; a reference to
//!   an unset variable is dropped with a repair reason. `${workspaceFolder}` and
//!   `${userHome}` are replaced by the paths. `cwd` is resolved fully (Airlock does not
//!   expand it) and must be absolute.
//! - **Secrets**: an env var or header is secret when its name looks like a credential
//!   ([`crate::secrets::looks_like_credential`]), when its value was resolved (wholly or
//!   partly) from a variable of Airlock's environment (the source used a reference so as
//!   not to write the value down), or when the value holds a well-known provider token.
//!   Secret env values of local servers are imported (marked [`ImportedValue::secret`]);
//!   remote servers arrive disabled *without* their secret headers. Credentials typed into
//!   args (options and variables named like credentials, `Name: value` headers, provider
//!   tokens, and passwords or credential query parameters of urls of any scheme) or into a
//!   url are replaced by `REDACTED`.
//! - **Airlock itself**: an entry that runs `airlock … serve` (a client registering
//!   Airlock's gateway, as the README tells users to do) is not a candidate: importing it
//!   would make Airlock one of its own servers. It is listed in [`Scan::skipped`] with why.
//! - **Problems**: a malformed entry becomes an [`ImportProblem`] and the other entries of
//!   the same file still import; a file that does not parse is one problem. Missing files
//!   are skipped silently.
//!
//! Secret values appear only in [`ImportedValue::value`]: never in problems, notes, repair
//! reasons or `Debug` output. Use [`Candidate::masked`] for previews.
//!
//! Layer 6 (operator). May import: `config`, `secrets`.

mod auth;
mod clients;
mod credentials;
mod jsonc;
mod names;
mod normalize;
mod parse;
mod references;

use std::collections::HashSet;
use std::fmt;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use names::{sanitize_name, unique_name, valid_name};
use normalize::normalize;
use parse::parse;

#[cfg(test)]
use crate::secrets::MASK;

/// Which client a definition came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Client {
    /// Claude Code (`~/.claude.json`, `.mcp.json`).
    ClaudeCode,
    /// Cursor (`~/.cursor/mcp.json`, `.cursor/mcp.json`).
    Cursor,
    /// OpenAI Codex CLI (`$CODEX_HOME/config.toml` or `~/.codex/config.toml`).
    Codex,
    /// Gemini CLI (`~/.gemini/settings.json`, `.gemini/settings.json`).
    Gemini,
    /// VS Code (`.vscode/mcp.json`).
    Vscode,
    /// Muse Code (`~/.muse/settings.json`, `.muse/settings.json`).
    MuseCode,
}

impl Client {
    /// Every client, in the order [`scan`] visits them.
    pub const ALL: [Client; 6] = [
        Client::ClaudeCode,
        Client::Cursor,
        Client::Codex,
        Client::Gemini,
        Client::Vscode,
        Client::MuseCode,
    ];

    /// The client's name as used on the command line: `claude-code`, `cursor`, `codex`,
    /// `gemini`, `vscode` or `muse-code`.
    pub fn name(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude-code",
            Client::Cursor => "cursor",
            Client::Codex => "codex",
            Client::Gemini => "gemini",
            Client::Vscode => "vscode",
            Client::MuseCode => "muse-code",
        }
    }

    /// Parses a client name (see [`Client::name`]; ASCII case is ignored). The error lists
    /// the valid names.
    pub fn parse(s: &str) -> Result<Client, UnknownClient> {
        let wanted = s.trim();
        Client::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(wanted))
            .ok_or_else(|| UnknownClient {
                name: wanted.to_string(),
            })
    }
}

/// A client name Airlock does not import from; the message lists those it does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown client {name:?}; expected one of: {}", Client::ALL.map(Client::name).join(", "))]
pub struct UnknownClient {
    /// The name given.
    pub name: String,
}

/// What is wrong with one file or entry, in words that never quote a secret value;
/// [`ImportProblem`] names the client, the file and the entry around it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EntryError(pub String);

impl From<String> for EntryError {
    fn from(message: String) -> Self {
        EntryError(message)
    }
}

impl From<&str> for EntryError {
    fn from(message: &str) -> Self {
        EntryError(message.to_string())
    }
}

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where to look for other clients' definitions.
#[derive(Clone, Copy)]
pub struct ImportSources<'a> {
    /// The user's home folder (user-level files live under it).
    pub home: &'a Path,
    /// The workspace (project) folder, if any; its files are read after the user's.
    pub workspace: Option<&'a Path>,
    /// Airlock's own environment: resolves `${VAR}` references and `CODEX_HOME`.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Read only this client's files.
    pub only: Option<Client>,
}

/// One env var or header value after resolution (empty when a reference in it could
/// not be resolved). `Debug` shows secret values as `••••••`; only the `value` field
/// itself (and serialization) carries them.
pub type ImportedValue = crate::config::TaggedValue;

/// How Airlock would reach an imported server: a local process (command and args keep
/// references to set variables as `${VAR}`, typed credentials are `REDACTED`; env values
/// resolved), or a remote server over streamable HTTP, SSE sources included (the url
/// likewise; only non-secret headers, resolved — secret headers are never imported —
/// and the source's OAuth client without its secret).
pub type ImportedTransport = crate::config::Transport<ImportedValue>;

/// One server found in another client's file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Candidate {
    /// The entry's key, sanitized to `[A-Za-z0-9_-]{1,64}` (others become `_`); when an
    /// earlier candidate already has the name, a suffix `-2`, `-3`… is added (with a note).
    pub name: String,
    /// The client whose file it came from.
    pub client: Client,
    /// The file it came from.
    pub source: PathBuf,
    /// How to reach it.
    pub transport: ImportedTransport,
    /// Absolute working folder of a local server, if the source set one.
    pub cwd: Option<String>,
    /// `false` for entries disabled in the source and for remote entries whose
    /// credentials were not imported.
    pub enabled: bool,
    /// Per-call timeout: Codex `tool_timeout_sec`, Gemini `timeout` (ms, rounded up).
    pub tool_timeout_secs: Option<u64>,
    /// Startup timeout: Codex `startup_timeout_sec` (or `startup_timeout_ms`).
    pub startup_timeout_secs: Option<u64>,
    /// Why the entry needs repair before it works (never containing secret values).
    pub repair: Vec<String>,
    /// Informational notes (never containing secret values).
    pub notes: Vec<String>,
}

impl Candidate {
    /// A stable hex SHA-256 of everything in the candidate, secret values included: a
    /// different digest between preview and apply means the source changed.
    pub fn digest(&self) -> String {
        let doc = serde_json::json!({
            "name": self.name,
            "client": self.client,
            "source": self.source.to_string_lossy(),
            "transport": self.transport,
            "cwd": self.cwd,
            "enabled": self.enabled,
            "tool_timeout_secs": self.tool_timeout_secs,
            "startup_timeout_secs": self.startup_timeout_secs,
            "repair": self.repair,
            "notes": self.notes,
        });
        hex::encode(Sha256::digest(doc.to_string().as_bytes()))
    }

    /// A copy for previews: every non-empty secret value replaced by `••••••`.
    pub fn masked(&self) -> Candidate {
        let mut copy = self.clone();
        for v in copy.transport.values_mut().values_mut() {
            *v = v.masked();
        }
        copy
    }
}

/// A file or entry that could not be read; the rest still import.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ImportProblem {
    /// The client whose file it is.
    pub client: Client,
    /// The file.
    pub source: PathBuf,
    /// The entry's key, or `None` when the whole file (or a whole map in it) is at fault.
    pub entry: Option<String>,
    /// What is wrong (never containing secret values).
    pub message: String,
}

impl fmt::Display for ImportProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {:?}", self.client, self.source)?;
        if let Some(entry) = &self.entry {
            write!(f, ", server {entry:?}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ImportProblem {}

/// An entry that is left out on purpose, with why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    /// The entry's key in its file.
    pub name: String,
    /// The client whose file it is.
    pub client: Client,
    /// The file.
    pub source: PathBuf,
    /// Why it is not imported.
    pub reason: String,
}

/// Why an entry registering Airlock's own gateway is not imported.
pub const AIRLOCK_ITSELF: &str = "it runs `airlock serve`, Airlock itself: importing it would make Airlock one of its own servers";

/// Whether `candidate` runs Airlock's own gateway: a local server whose command is an
/// `airlock` executable (or this very program) with `serve` among its arguments.
fn is_airlock_itself(candidate: &Candidate) -> bool {
    let ImportedTransport::Stdio { command, args, .. } = &candidate.transport else {
        return false;
    };
    let program = Path::new(command);
    let named_airlock = program
        .file_stem()
        .is_some_and(|stem| stem.eq_ignore_ascii_case("airlock"));
    let this_program = std::env::current_exe()
        .ok()
        .and_then(|me| me.canonicalize().ok())
        .is_some_and(|me| program.canonicalize().ok().as_ref() == Some(&me));
    (named_airlock || this_program) && args.iter().any(|a| a == "serve")
}

/// The result of [`scan`].
#[derive(Debug, Clone, Default)]
pub struct Scan {
    /// Importable servers, by client (in [`Client::ALL`] order), user file before
    /// workspace file, then entry key.
    pub candidates: Vec<Candidate>,
    /// Files and entries that could not be read.
    pub problems: Vec<ImportProblem>,
    /// Entries left out on purpose (Airlock's own registration).
    pub skipped: Vec<Skipped>,
    /// Every file that existed and was read (parsable or not).
    pub files_read: Vec<PathBuf>,
}

/// Reads every known client file under `sources` and returns the candidates found. Missing
/// files are skipped silently; unreadable or malformed files and entries become
/// [`ImportProblem`]s. Never writes anything.
pub fn scan(sources: &ImportSources<'_>) -> Scan {
    let mut out = Scan::default();
    let mut taken: HashSet<String> = HashSet::new();
    let mut seen: HashSet<PathBuf> = HashSet::new();
    for client in Client::ALL {
        if sources.only.is_some_and(|only| only != client) {
            continue;
        }
        for location in clients::locations(client, sources) {
            let path = location.path.clone();
            let problem = |entry: Option<String>, message: String| ImportProblem {
                client,
                source: path.clone(),
                entry,
                message,
            };
            let text = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                    continue;
                }
                Err(e) => {
                    out.problems
                        .push(problem(None, format!("cannot read the file: {e}")));
                    continue;
                }
            };
            // The workspace may be the home folder: read each file once.
            if !seen.insert(path.canonicalize().unwrap_or_else(|_| path.clone())) {
                continue;
            }
            out.files_read.push(path.clone());
            let doc = match parse(&text, location.format) {
                Ok(doc) => doc,
                Err(EntryError(message)) => {
                    out.problems.push(problem(None, message));
                    continue;
                }
            };
            let (entries, file_problems) =
                clients::entries(client, &location, &doc, sources.workspace);
            out.problems
                .extend(file_problems.into_iter().map(|m| problem(None, m)));
            for raw in entries {
                let mut notes = Vec::new();
                let base = if valid_name(&raw.key) {
                    raw.key.clone()
                } else {
                    let sanitized = sanitize_name(&raw.key);
                    notes.push(format!("renamed from {:?}", raw.key));
                    sanitized
                };
                let name = unique_name(&base, &taken);
                if name != base {
                    notes.push(format!(
                        "renamed from {base:?} to {name:?}: an earlier imported server already uses that name"
                    ));
                }
                notes.extend(raw.notes.iter().cloned());
                match normalize(client, &path, &name, sources, &raw, notes) {
                    Ok(candidate) if is_airlock_itself(&candidate) => {
                        out.skipped.push(Skipped {
                            name: raw.key.clone(),
                            client,
                            source: path.clone(),
                            reason: AIRLOCK_ITSELF.to_string(),
                        });
                    }
                    Ok(candidate) => {
                        taken.insert(name);
                        out.candidates.push(candidate);
                    }
                    Err(EntryError(message)) => {
                        out.problems.push(problem(Some(raw.key.clone()), message))
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
