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
//! - **Problems**: a malformed entry becomes an [`ImportProblem`] and the other entries of
//!   the same file still import; a file that does not parse is one problem. Missing files
//!   are skipped silently.
//!
//! Secret values appear only in [`ImportedValue::value`]: never in problems, notes, repair
//! reasons or `Debug` output. Use [`Candidate::masked`] for previews.

mod clients;

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::secrets::looks_like_credential;
use clients::{Format, RawEntry};

/// What replaces a credential typed into args or a url.
const REDACTED: &str = "REDACTED";

/// What [`Candidate::masked`] shows instead of a secret value.
const MASK: &str = "••••••";

/// Longest server name kept, in characters.
const MAX_NAME: usize = 64;

/// Entry fields the normalizer understands (Gemini also has `timeout`); anything else is
/// reported in a note as not imported.
const KNOWN_FIELDS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "httpUrl",
    "headers",
    "http_headers",
    "env_http_headers",
    "type",
    "transport",
    "disabled",
    "enabled",
    "startup_timeout_sec",
    "startup_timeout_ms",
    "tool_timeout_sec",
    "bearer_token_env_var",
    "envFile",
];

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
    pub fn parse(s: &str) -> Result<Client, String> {
        let wanted = s.trim();
        Client::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(wanted))
            .ok_or_else(|| {
                format!(
                    "unknown client {wanted:?}; expected one of: {}",
                    Client::ALL.map(Client::name).join(", ")
                )
            })
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

/// One env var or header value after resolution.
///
/// `Debug` shows secret values as `••••••`; only the `value` field itself (and
/// serialization) carries them.
#[derive(Clone, PartialEq, Eq, serde::Serialize)]
pub struct ImportedValue {
    /// The resolved value; empty when a reference in it could not be resolved.
    pub value: String,
    /// Whether the value is a credential.
    pub secret: bool,
}

impl fmt::Debug for ImportedValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = if self.secret && !self.value.is_empty() {
            MASK
        } else {
            self.value.as_str()
        };
        f.debug_struct("ImportedValue")
            .field("value", &shown)
            .field("secret", &self.secret)
            .finish()
    }
}

/// How Airlock would reach an imported server.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ImportedTransport {
    /// A local process over stdin/stdout.
    Stdio {
        /// The program; references to set variables are kept as `${VAR}` for Airlock to expand.
        command: String,
        /// Its arguments (references to set variables kept as `${VAR}`; typed credentials `REDACTED`).
        args: Vec<String>,
        /// Absolute working folder, if the source set one.
        cwd: Option<String>,
        /// Environment variables, resolved.
        env: BTreeMap<String, ImportedValue>,
    },
    /// A remote server over streamable HTTP (SSE sources included).
    Http {
        /// The endpoint (references to set variables kept as `${VAR}`; typed credentials `REDACTED`).
        url: String,
        /// Non-secret headers, resolved. Secret headers are never imported.
        headers: BTreeMap<String, ImportedValue>,
    },
}

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
        fn mask(values: &mut BTreeMap<String, ImportedValue>) {
            for v in values.values_mut() {
                if v.secret && !v.value.is_empty() {
                    v.value = MASK.to_string();
                }
            }
        }
        let mut copy = self.clone();
        match &mut copy.transport {
            ImportedTransport::Stdio { env, .. } => mask(env),
            ImportedTransport::Http { headers, .. } => mask(headers),
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

/// The result of [`scan`].
#[derive(Debug, Clone, Default)]
pub struct Scan {
    /// Importable servers, by client (in [`Client::ALL`] order), user file before
    /// workspace file, then entry key.
    pub candidates: Vec<Candidate>,
    /// Files and entries that could not be read.
    pub problems: Vec<ImportProblem>,
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
                Err(message) => {
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
                    Ok(candidate) => {
                        taken.insert(name);
                        out.candidates.push(candidate);
                    }
                    Err(message) => out.problems.push(problem(Some(raw.key.clone()), message)),
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Parsing files

/// Parses a whole file to JSON. Error messages never quote the file's content.
fn parse(text: &str, format: Format) -> Result<Value, String> {
    match format {
        Format::Json => {
            serde_json::from_str(&strip_jsonc(text)).map_err(|e| format!("invalid JSON: {e}"))
        }
        Format::Toml => {
            let table: toml::Table = toml::from_str(text).map_err(|e| {
                // The error's `Display` quotes the offending line, which may hold a
                // secret: build the message from its parts instead.
                let message = e.message().trim().replace('\n', "; ");
                match e.span() {
                    Some(span) => {
                        let (line, column) = line_column(text, span.start);
                        format!("invalid TOML at line {line} column {column}: {message}")
                    }
                    None => format!("invalid TOML: {message}"),
                }
            })?;
            serde_json::to_value(table).map_err(|e| format!("cannot convert the TOML: {e}"))
        }
    }
}

/// 1-based line and column (in bytes) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..offset.min(text.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = match before.iter().rposition(|&b| b == b'\n') {
        Some(newline) => before.len() - newline,
        None => before.len() + 1,
    };
    (line, column)
}

/// Blanks out `//` and `/* */` comments and trailing commas (JSONC, as written by VS Code
/// and Gemini users), keeping every other byte where it was so parser positions still
/// match the file. A leading byte-order mark is dropped.
fn strip_jsonc(text: &str) -> String {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut bytes = text.as_bytes().to_vec();
    let n = bytes.len();
    // Pass 1: comments.
    let (mut i, mut in_string) = (0, false);
    while i < n {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
        } else if b == b'"' {
            in_string = true;
            i += 1;
        } else if b == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < n && bytes[i] != b'\n' {
                bytes[i] = b' ';
                i += 1;
            }
        } else if b == b'/' && bytes.get(i + 1) == Some(&b'*') {
            bytes[i] = b' ';
            bytes[i + 1] = b' ';
            i += 2;
            while i < n && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
                if bytes[i] != b'\n' {
                    bytes[i] = b' ';
                }
                i += 1;
            }
            for _ in 0..2 {
                if i < n {
                    bytes[i] = b' ';
                    i += 1;
                }
            }
        } else {
            i += 1;
        }
    }
    // Pass 2: trailing commas.
    let (mut i, mut in_string) = (0, false);
    while i < n {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b',' {
            let next = bytes[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
            if matches!(next, Some(b'}') | Some(b']')) {
                bytes[i] = b' ';
            }
        }
        i += 1;
    }
    // Only whole ASCII-delimited runs were blanked, so this is still UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// How a JSON value is described in messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

// ---------------------------------------------------------------------------------------
// Names

/// Whether `name` can be used as is: `^[A-Za-z0-9_-]{1,64}$`.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `key` with every other character replaced by `_`, cut to 64 characters.
fn sanitize_name(key: &str) -> String {
    let name: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_NAME)
        .collect();
    if name.is_empty() {
        "server".to_string()
    } else {
        name
    }
}

/// `base`, or `base-2`, `base-3`… (cut to stay within 64 characters), whichever is free.
fn unique_name(base: &str, taken: &HashSet<String>) -> String {
    if !taken.contains(base) {
        return base.to_string();
    }
    let mut n = 2u32;
    loop {
        let suffix = format!("-{n}");
        let stem: String = base.chars().take(MAX_NAME - suffix.len()).collect();
        let name = format!("{stem}{suffix}");
        if !taken.contains(&name) {
            return name;
        }
        n += 1;
    }
}

// ---------------------------------------------------------------------------------------
// The entry normalizer (shared by every client)

/// Where a server is reached, as declared by the entry.
enum Endpoint {
    Command(String),
    Url(String),
}

/// A header to import: its name, its raw value and, when it was synthesized from another
/// field (Codex `bearer_token_env_var`, `env_http_headers`), that field.
struct HeaderDef {
    name: String,
    raw: String,
    origin: Option<String>,
}

/// Validates one raw entry and turns it into a candidate named `name`. `Err` is a problem
/// with the entry (the message never quotes secret values).
fn normalize(
    client: Client,
    source: &Path,
    name: &str,
    sources: &ImportSources<'_>,
    raw: &RawEntry,
    notes: Vec<String>,
) -> Result<Candidate, String> {
    let Value::Object(map) = &raw.value else {
        return Err(format!(
            "the entry must be an object, got {}",
            kind(&raw.value)
        ));
    };

    // --- Shape: everything that can make the entry malformed is checked first. ---
    let command = match map.get("command") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.trim().is_empty() => {
            return Err("\"command\" must not be empty".into());
        }
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(format!("\"command\" must be a string, got {}", kind(other)));
        }
    };
    let mut notes = notes;
    let url = match (opt_string(map, "url")?, opt_string(map, "httpUrl")?) {
        (Some(_), Some(http)) => {
            notes.push("both \"url\" and \"httpUrl\" are set; \"httpUrl\" was used".into());
            Some(http)
        }
        (url, http) => http.or(url),
    };
    if url.as_deref().is_some_and(|u| u.trim().is_empty()) {
        return Err("\"url\" must not be empty".into());
    }
    let declared = match (opt_string(map, "type")?, opt_string(map, "transport")?) {
        (Some(t), _) | (None, Some(t)) => Some(t),
        (None, None) => None,
    };
    let declared_remote = match declared.as_deref() {
        None => None,
        Some("stdio") => Some(false),
        Some("http" | "streamable-http" | "streamableHttp" | "streamable_http") => Some(true),
        Some("sse") => {
            notes.push(
                "the source uses SSE; Airlock speaks streamable HTTP and falls back to SSE".into(),
            );
            Some(true)
        }
        Some(other) => {
            return Err(format!(
                "\"type\" must be \"stdio\", \"http\", \"sse\" or \"streamable-http\", got {other:?}"
            ));
        }
    };
    let endpoint = match (command, url, declared_remote) {
        (Some(_), Some(_), _) => {
            return Err("both \"command\" and \"url\" are set; an entry needs exactly one".into());
        }
        (None, None, _) => return Err("neither \"command\" nor \"url\" is set".into()),
        (Some(_), None, Some(true)) => {
            return Err(
                "\"type\" says remote, but the entry has a \"command\" and no \"url\"".into(),
            );
        }
        (None, Some(_), Some(false)) => {
            return Err(
                "\"type\" is \"stdio\", but the entry has a \"url\" and no \"command\"".into(),
            );
        }
        (Some(command), None, _) => Endpoint::Command(command),
        (None, Some(url), _) => Endpoint::Url(url),
    };
    let args = string_list(map, "args")?;
    let env = string_map(map, "env")?;
    if let Some((bad, _)) = env
        .iter()
        .find(|(k, _)| k.is_empty() || k.contains('=') || k.contains('\0'))
    {
        return Err(format!("\"env\" has an invalid variable name {bad:?}"));
    }
    let mut headers = Vec::new();
    for field in ["headers", "http_headers"] {
        for (header, value) in string_map(map, field)? {
            headers.push(HeaderDef {
                name: header,
                raw: value,
                origin: None,
            });
        }
    }
    for (header, var) in string_map(map, "env_http_headers")? {
        if !is_var_name(&var) {
            return Err(format!(
                "\"env_http_headers\" must map header names to environment variable names; {header:?} does not"
            ));
        }
        headers.push(HeaderDef {
            name: header,
            raw: format!("${{{var}}}"),
            origin: Some(format!("env_http_headers {var}")),
        });
    }
    if let Some(var) = opt_string(map, "bearer_token_env_var")? {
        if !is_var_name(&var) {
            return Err("\"bearer_token_env_var\" must name an environment variable".into());
        }
        headers.push(HeaderDef {
            name: "Authorization".into(),
            raw: format!("Bearer ${{{var}}}"),
            origin: Some(format!("bearer_token_env_var {var}")),
        });
    }
    let cwd = opt_string(map, "cwd")?;
    let disabled =
        opt_bool(map, "disabled")? == Some(true) || opt_bool(map, "enabled")? == Some(false);
    let env_file = opt_string(map, "envFile")?;

    // --- Translation. ---
    let mut r = Resolver {
        env: sources.env,
        home: sources.home,
        workspace: sources.workspace,
        repair: Vec::new(),
        notes,
    };
    if disabled {
        r.notes
            .push("disabled in the source; imported disabled".into());
    }
    if let Some(file) = env_file {
        r.notes.push(format!(
            "\"envFile\" ({file}) was not imported; copy the variables it sets into env"
        ));
    }
    let unknown: Vec<String> = map
        .keys()
        .filter(|k| {
            !KNOWN_FIELDS.contains(&k.as_str())
                && !(client == Client::Gemini && k.as_str() == "timeout")
        })
        .map(|k| format!("{k:?}"))
        .collect();
    if !unknown.is_empty() {
        let noun = if unknown.len() == 1 {
            "field"
        } else {
            "fields"
        };
        r.notes
            .push(format!("not imported: {noun} {}", unknown.join(", ")));
    }
    let mut tool_timeout_secs = seconds(map, "tool_timeout_sec", 1.0, &mut r.notes);
    if tool_timeout_secs.is_none() && client == Client::Gemini {
        tool_timeout_secs = seconds(map, "timeout", 1000.0, &mut r.notes);
    }
    let mut startup_timeout_secs = seconds(map, "startup_timeout_sec", 1.0, &mut r.notes);
    if startup_timeout_secs.is_none() {
        startup_timeout_secs = seconds(map, "startup_timeout_ms", 1000.0, &mut r.notes);
    }

    let mut credentials_withheld = false;
    let transport = match endpoint {
        Endpoint::Command(command) => {
            let cwd = match cwd {
                None => None,
                Some(raw) => match r.path("cwd", &raw) {
                    Some(path) if Path::new(&path).is_absolute() => Some(path),
                    Some(path) => {
                        return Err(format!("\"cwd\" must be an absolute path, got {path:?}"));
                    }
                    None => None,
                },
            };
            let command = r.template("command", &command);
            let mut args: Vec<String> = args
                .iter()
                .enumerate()
                .map(|(i, a)| r.template(&format!("args[{i}]"), a))
                .collect();
            for i in scrub_args(&mut args) {
                r.repair.push(format!(
                    "args[{i}] looked like a credential typed into the command line and was replaced with {REDACTED}; pass it through an env var instead"
                ));
            }
            let mut imported = BTreeMap::new();
            for (key, raw) in &env {
                let value = r.imported(key, raw);
                imported.insert(key.clone(), value);
            }
            if !headers.is_empty() {
                r.notes
                    .push("headers only apply to remote servers and were not imported".into());
            }
            ImportedTransport::Stdio {
                command,
                args,
                cwd,
                env: imported,
            }
        }
        Endpoint::Url(url) => {
            let url = r.template("url", &url);
            let lower = url.to_ascii_lowercase();
            if !url.is_empty()
                && !url.starts_with("${")
                && !(lower.starts_with("http://") || lower.starts_with("https://"))
            {
                return Err("\"url\" must start with http:// or https://".into());
            }
            let (url, url_credentials) = scrub_url(&url);
            for what in url_credentials {
                credentials_withheld = true;
                r.repair.push(format!(
                    "credentials not imported: {what} was replaced with {REDACTED}; set the real url with `airlock servers edit {name}`"
                ));
            }
            let mut imported = BTreeMap::new();
            for header in headers {
                let value = r.imported(&header.name, &header.raw);
                if value.secret {
                    credentials_withheld = true;
                    let what = match &header.origin {
                        Some(origin) => format!("header {} (from {origin})", header.name),
                        None => format!("header {}", header.name),
                    };
                    r.repair.push(format!(
                        "credentials not imported: {what}; set it with `airlock servers edit {name} --header ...`"
                    ));
                } else if imported.insert(header.name.clone(), value).is_some() {
                    r.notes.push(format!(
                        "header {} is set more than once; the last definition was used",
                        header.name
                    ));
                }
            }
            let ignored: Vec<&str> = [
                ("args", !args.is_empty()),
                ("env", !env.is_empty()),
                ("cwd", cwd.is_some()),
            ]
            .into_iter()
            .filter_map(|(field, present)| present.then_some(field))
            .collect();
            if !ignored.is_empty() {
                r.notes.push(format!(
                    "{} only apply to local servers and were not imported",
                    ignored.join(", ")
                ));
            }
            ImportedTransport::Http {
                url,
                headers: imported,
            }
        }
    };

    Ok(Candidate {
        name: name.to_string(),
        client,
        source: source.to_path_buf(),
        transport,
        enabled: !disabled && !credentials_withheld,
        tool_timeout_secs,
        startup_timeout_secs,
        repair: r.repair,
        notes: r.notes,
    })
}

/// An optional string field.
fn opt_string(map: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("\"{key}\" must be a string, got {}", kind(other))),
    }
}

/// An optional boolean field.
fn opt_bool(map: &Map<String, Value>, key: &str) -> Result<Option<bool>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(format!(
            "\"{key}\" must be true or false, got {}",
            kind(other)
        )),
    }
}

/// An optional array of strings (absent: empty).
fn string_list(map: &Map<String, Value>, key: &str) -> Result<Vec<String>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) => Ok(s.clone()),
                other => Err(format!(
                    "\"{key}\" must be an array of strings; item {i} is {}",
                    kind(other)
                )),
            })
            .collect(),
        Some(other) => Err(format!(
            "\"{key}\" must be an array of strings, got {}",
            kind(other)
        )),
    }
}

/// An optional object of strings (absent: empty), in key order.
fn string_map(map: &Map<String, Value>, key: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = match map.get(key) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(entries)) => entries
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(format!(
                    "\"{key}\" must be an object of strings; {k:?} is {}",
                    kind(other)
                )),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(other) => {
            return Err(format!(
                "\"{key}\" must be an object of strings, got {}",
                kind(other)
            ));
        }
    };
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// A positive duration field in units of `1/per_second` seconds, rounded up to seconds.
/// Anything else is noted and ignored.
fn seconds(
    map: &Map<String, Value>,
    key: &str,
    per_second: f64,
    notes: &mut Vec<String>,
) -> Option<u64> {
    let value = map.get(key)?;
    match value.as_f64() {
        Some(n) if n.is_finite() && n > 0.0 => Some((n / per_second).ceil() as u64),
        _ => {
            notes.push(format!(
                "\"{key}\" is not a positive number and was ignored"
            ));
            None
        }
    }
}

// ---------------------------------------------------------------------------------------
// References

/// A piece of a string that may hold `${…}` references.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Segment<'t> {
    /// Literal text.
    Text(&'t str),
    /// `${NAME}`, `${env:NAME}`, `${NAME:-default}` or a whole-value `$NAME`.
    Env {
        name: &'t str,
        default: Option<&'t str>,
    },
    /// VS Code's `${input:ID}` prompt.
    Input(&'t str),
    /// `${workspaceFolder}` / `${workspaceRoot}`.
    Workspace,
    /// `${userHome}`.
    Home,
    /// `${…}` with something Airlock cannot expand.
    Unsupported(&'t str),
    /// A `${` without its `}`.
    Unterminated,
}

/// Splits `text` at its `${…}` references.
fn segments(text: &str) -> Vec<Segment<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        if start > 0 {
            out.push(Segment::Text(&rest[..start]));
        }
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) => {
                out.push(reference(&after[..end]));
                rest = &after[end + 1..];
            }
            None => {
                out.push(Segment::Unterminated);
                rest = "";
            }
        }
    }
    if !rest.is_empty() {
        out.push(Segment::Text(rest));
    }
    out
}

/// Classifies the inside of one `${…}`.
fn reference(inner: &str) -> Segment<'_> {
    if let Some(id) = inner.strip_prefix("input:") {
        return Segment::Input(id);
    }
    match inner {
        "workspaceFolder" | "workspaceRoot" => return Segment::Workspace,
        "userHome" => return Segment::Home,
        _ => {}
    }
    let body = inner.strip_prefix("env:").unwrap_or(inner);
    let (name, default) = match body.split_once(":-") {
        Some((name, default)) => (name, Some(default)),
        None => (body, None),
    };
    if is_var_name(name) {
        Segment::Env { name, default }
    } else {
        Segment::Unsupported(inner)
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A resolved env or header value.
struct Resolved {
    /// The value; empty when something in it could not be resolved.
    text: String,
    /// Whether every reference in it was resolved.
    complete: bool,
    /// Whether it referenced a variable named like a credential.
    credential_ref: bool,
    /// Whether some of it came from a variable set in Airlock's environment (defaults
    /// written in the source do not count).
    from_env: bool,
}

/// Resolves references against Airlock's environment, collecting repair reasons and notes
/// for one entry.
struct Resolver<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    home: &'a Path,
    workspace: Option<&'a Path>,
    repair: Vec<String>,
    notes: Vec<String>,
}

impl Resolver<'_> {
    /// Fully resolves an env or header value (`field` names it in repair reasons). An
    /// unresolvable reference empties the value.
    fn value(&mut self, field: &str, raw: &str) -> Resolved {
        let whole = raw
            .strip_prefix('$')
            .filter(|name| is_var_name(name))
            .map(|name| {
                vec![Segment::Env {
                    name,
                    default: None,
                }]
            });
        let mut text = String::new();
        let mut complete = true;
        let mut credential_ref = false;
        let mut from_env = false;
        for segment in whole.unwrap_or_else(|| segments(raw)) {
            match segment {
                Segment::Text(t) => text.push_str(t),
                Segment::Env { name, default } => {
                    credential_ref |= looks_like_credential(name);
                    match ((self.env)(name), default) {
                        (Some(v), _) => {
                            from_env = true;
                            text.push_str(&v);
                        }
                        (None, Some(d)) => text.push_str(d),
                        (None, None) => {
                            self.missing(name, field);
                            complete = false;
                        }
                    }
                }
                other => match self.path_segment(field, other) {
                    Some(p) => text.push_str(&p),
                    None => complete = false,
                },
            }
        }
        if !complete {
            text.clear();
        }
        Resolved {
            text,
            complete,
            credential_ref,
            from_env,
        }
    }

    /// An env or header value, resolved and classified: secret when `name` looks like a
    /// credential, when it references such a variable, when any of it was resolved from
    /// Airlock's environment (whatever the names: a `DATABASE_URL` passed by reference may
    /// hold a password) or when it holds a provider token. Values written literally in the
    /// source (a `${VAR:-default}` whose variable is unset included) keep the name and
    /// token rules.
    fn imported(&mut self, name: &str, raw: &str) -> ImportedValue {
        let resolved = self.value(name, raw);
        let secret = looks_like_credential(name)
            || resolved.credential_ref
            || resolved.from_env
            || contains_provider_token(raw)
            || contains_provider_token(&resolved.text);
        ImportedValue {
            value: resolved.text,
            secret,
        }
    }

    /// A command, arg or url: a reference to a variable that is set stays, as `${NAME}`,
    /// for Airlock to expand when it loads its config (so a secret passed by reference is
    /// never written down); an unset one with a default becomes the default; paths are
    /// substituted. Anything else — an unset variable, a VS Code input — is dropped from
    /// the text with a repair reason (Airlock refuses a config naming an unset variable).
    fn template(&mut self, field: &str, raw: &str) -> String {
        let mut text = String::new();
        for segment in segments(raw) {
            match segment {
                Segment::Text(t) => text.push_str(t),
                Segment::Env { name, default } => match ((self.env)(name), default) {
                    (Some(_), _) => {
                        text.push_str("${");
                        text.push_str(name);
                        text.push('}');
                    }
                    (None, Some(d)) => text.push_str(d),
                    (None, None) => self.missing(name, field),
                },
                other => {
                    if let Some(p) = self.path_segment(field, other) {
                        text.push_str(&p);
                    }
                }
            }
        }
        text
    }

    /// A path (`cwd`): `~` expanded, references resolved. `None` when unresolvable.
    fn path(&mut self, field: &str, raw: &str) -> Option<String> {
        let expanded = if raw == "~" {
            self.home.to_string_lossy().into_owned()
        } else if let Some(rest) = raw.strip_prefix("~/") {
            self.home.join(rest).to_string_lossy().into_owned()
        } else {
            raw.to_string()
        };
        let resolved = self.value(field, &expanded);
        resolved.complete.then_some(resolved.text)
    }

    /// The non-env segments: the folder for `${workspaceFolder}` / `${userHome}`, or a
    /// repair reason and `None`.
    fn path_segment(&mut self, field: &str, segment: Segment<'_>) -> Option<String> {
        let reason = match segment {
            Segment::Text(t) => return Some(t.to_string()),
            Segment::Home => return Some(self.home.to_string_lossy().into_owned()),
            Segment::Workspace => match self.workspace {
                Some(ws) => return Some(ws.to_string_lossy().into_owned()),
                None => {
                    format!("{field} uses ${{workspaceFolder}} but no workspace folder was given")
                }
            },
            Segment::Env { name, .. } => {
                // Not reached: callers handle env references themselves.
                format!("{field} uses ${{{name}}}, which Airlock cannot expand here")
            }
            Segment::Input(id) => format!(
                "{field} uses the VS Code input ${{input:{id}}}, which Airlock cannot prompt for; set the value yourself"
            ),
            Segment::Unsupported(inner) => {
                format!("{field} uses ${{{inner}}}, which Airlock cannot expand")
            }
            Segment::Unterminated => format!("{field} has a \"${{\" without a closing \"}}\""),
        };
        self.repair.push(reason);
        None
    }

    /// Records an unset variable.
    fn missing(&mut self, name: &str, field: &str) {
        self.repair.push(format!(
            "env {name} for {field} is not set in Airlock's environment"
        ));
    }
}

// ---------------------------------------------------------------------------------------
// Credentials typed into args and urls

/// Whether `word` is a well-known provider token: `sk-`, `ghp_`, `gho_`, `github_pat_`,
/// `xoxb-`, `xoxp-`, `glpat-` followed by at least 16 token characters including a digit,
/// or `AKIA` followed by 16 upper-case letters and digits.
fn is_provider_token(word: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "sk-",
        "ghp_",
        "gho_",
        "github_pat_",
        "xoxb-",
        "xoxp-",
        "glpat-",
    ];
    if let Some(rest) = word.strip_prefix("AKIA") {
        return rest.len() == 16
            && rest
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    }
    PREFIXES.iter().any(|prefix| {
        word.strip_prefix(prefix).is_some_and(|rest| {
            rest.len() >= 16
                && rest.bytes().any(|b| b.is_ascii_digit())
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
    })
}

/// Whether any word of `text` is a provider token.
fn contains_provider_token(text: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .any(is_provider_token)
}

/// Whether an option or variable name in args names a credential (and not, say, a file
/// holding one, or the name of the variable to read it from).
fn credential_name(name: &str) -> bool {
    const NOT_SECRET_SUFFIXES: &[&str] = &[
        "_FILE",
        "_PATH",
        "_DIR",
        "_ENV",
        "_VAR",
        "_URL",
        "_URI",
        "_TYPE",
        "_MODE",
        "_METHOD",
        "_PROVIDER",
        "_STDIN",
        "_SERVER",
        "_HOST",
        "_PORT",
        "_ENDPOINT",
        "_SCOPE",
        "_SCOPES",
        "_NAME",
    ];
    const NOT_SECRET_PREFIXES: &[&str] = &[
        "NO_", "DISABLE_", "ENABLE_", "SKIP_", "REQUIRE_", "USE_", "MAX_", "MIN_",
    ];
    let upper = name.to_ascii_uppercase().replace('-', "_");
    looks_like_credential(name)
        && !NOT_SECRET_SUFFIXES.iter().any(|s| upper.ends_with(s))
        && !NOT_SECRET_PREFIXES.iter().any(|p| upper.starts_with(p))
        && !(upper.contains("AUTHOR") && !upper.contains("AUTHORIZATION"))
}

/// Whether `value`, given to a credential-named option, plausibly is the credential
/// itself: not empty, not a reference, path, url, number or boolean word.
fn plausible_secret(value: &str) -> bool {
    let v = value.trim();
    if v.is_empty() || v.contains("${") || v.starts_with(['/', '.', '~']) || v.contains("://") {
        return false;
    }
    if v.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return false;
    }
    const WORDS: &[&str] = &["true", "false", "yes", "no", "none", "null", "on", "off"];
    if WORDS.iter().any(|w| v.eq_ignore_ascii_case(w)) {
        return false;
    }
    if v.contains(char::is_whitespace) {
        let scheme = v.split_whitespace().next().unwrap_or("");
        return ["bearer", "basic", "token"]
            .iter()
            .any(|s| scheme.eq_ignore_ascii_case(s));
    }
    true
}

/// Replaces credentials typed into `args` with `REDACTED` and returns their positions:
/// `--api-key=X` / `--token X` (options named like credentials), `NAME=X` and `Name: X`
/// (variables and headers named like credentials, as passed to `docker -e` or
/// `mcp-remote --header`), bare provider tokens, and passwords and credential query
/// parameters of urls (`https://mcp.example/sse?token=X`, `postgresql://user:X@host/db`).
/// The value of an `--option=value` gets the same treatment as a bare arg:
/// `--header=Authorization: Bearer X`, `--env=API_KEY=X`, `--url=https://…?token=X`.
fn scrub_args(args: &mut [String]) -> Vec<usize> {
    let mut scrubbed = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].clone();
        if arg.len() > 1 && arg.starts_with('-') {
            let flag = arg.trim_start_matches('-');
            if let Some((name, value)) = flag.split_once('=') {
                let replacement = if (credential_name(name) && plausible_secret(value))
                    || (!value.contains("${") && contains_provider_token(value))
                {
                    Some(REDACTED.to_string())
                } else {
                    // The value may itself be a header, a variable or a url.
                    scrub_bare(value)
                };
                if let Some(replacement) = replacement {
                    let keep = &arg[..arg.len() - value.len()];
                    args[i] = format!("{keep}{replacement}");
                    scrubbed.push(i);
                }
            } else if credential_name(flag)
                && let Some(next) = args.get(i + 1)
                && !next.starts_with('-')
                && plausible_secret(next)
                // A plain word after a switch is more likely a subcommand than a secret.
                && !next.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')
            {
                args[i + 1] = REDACTED.to_string();
                scrubbed.push(i + 1);
                i += 2;
                continue;
            }
        } else if let Some(replacement) = scrub_bare(&arg) {
            args[i] = replacement;
            scrubbed.push(i);
        }
        i += 1;
    }
    scrubbed
}

/// Whether `name` can be a variable or header name in an arg: `[A-Za-z0-9_-]+`.
fn arg_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The scrubbed form of an arg that is not an option (or of the value of an
/// `--option=value`), if it holds a credential: credentials in a url it holds (see
/// [`scrub_url`]), `NAME=X` or `Name: X` with a name like a credential, or a provider
/// token (then the whole arg is replaced).
fn scrub_bare(arg: &str) -> Option<String> {
    // Urls first: `scrub_url` leaves the parts holding references alone by itself.
    let (text, url_credentials) = scrub_url(arg);
    let changed = !url_credentials.is_empty();
    if text.contains("${") {
        return changed.then_some(text);
    }
    if let Some((name, value)) = text.split_once('=')
        && arg_name(name)
        && credential_name(name)
        && plausible_secret(value)
    {
        return Some(format!("{name}={REDACTED}"));
    }
    if let Some((name, value)) = text.split_once(':')
        && arg_name(name)
        && credential_name(name)
        && plausible_secret(value)
    {
        return Some(format!("{name}: {REDACTED}"));
    }
    if contains_provider_token(&text) {
        return Some(REDACTED.to_string());
    }
    changed.then_some(text)
}

/// Replaces credentials typed into the urls in `text` — a password in the user info, a
/// provider token as the user name, query parameters named like credentials or holding
/// provider tokens — with `REDACTED`. Any scheme is understood (`https`, `postgresql`,
/// `redis`…). A url runs from its `scheme://` to the first whitespace, and the text around
/// urls is kept as is, so `text` may be a url field or an arg holding urls
/// (`DATABASE_URL=postgres://…`). Parts holding `${…}` references are left alone. Returns
/// the text and a description of each replaced part (never its value).
fn scrub_url(text: &str) -> (String, Vec<String>) {
    let mut found = Vec::new();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, after) = rest.split_at(at + 3);
        let end = after.find(char::is_whitespace).unwrap_or(after.len());
        out.push_str(head);
        out.push_str(&scrub_url_body(&after[..end], &mut found));
        rest = &after[end..];
    }
    out.push_str(rest);
    (out, found)
}

/// One url after its `scheme://`, with its credentials replaced (see [`scrub_url`]); each
/// replaced part is described in `found`.
fn scrub_url_body(body: &str, found: &mut Vec<String>) -> String {
    let authority_end = body.find(['/', '?', '#']).unwrap_or(body.len());
    let (authority, tail) = body.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) if !userinfo.contains("${") => match userinfo.split_once(':') {
            Some((user, password)) if !password.is_empty() => {
                found.push("the password in the url".to_string());
                format!("{user}:{REDACTED}@{host}")
            }
            _ if contains_provider_token(userinfo) => {
                found.push("the user name in the url".to_string());
                format!("{REDACTED}@{host}")
            }
            _ => authority.to_string(),
        },
        _ => authority.to_string(),
    };
    let (before_fragment, fragment) = match tail.split_once('#') {
        Some((before, fragment)) => (before, Some(fragment)),
        None => (tail, None),
    };
    let (path, query) = match before_fragment.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (before_fragment, None),
    };
    let mut out = format!("{authority}{path}");
    if let Some(query) = query {
        let params: Vec<String> = query
            .split('&')
            .map(|param| match param.split_once('=') {
                Some((key, value))
                    if !value.is_empty()
                        && !value.contains("${")
                        && (credential_name(key) || contains_provider_token(value)) =>
                {
                    found.push(format!("url query parameter {key}"));
                    format!("{key}={REDACTED}")
                }
                _ => param.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::fs;

    /// The text of a fixture under `tests/fixtures/import/`.
    macro_rules! fixture {
        ($name:literal) => {
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../tests/fixtures/import/",
                $name
            ))
        };
    }

    fn put(root: &Path, rel: &str, text: &str) -> PathBuf {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
        path
    }

    fn env_of(pairs: &[(&str, &str)]) -> Box<dyn Fn(&str) -> Option<String>> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Box::new(move |name: &str| map.get(name).cloned())
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn scan_in(
        home: &Path,
        workspace: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
        only: Option<Client>,
    ) -> Scan {
        scan(&ImportSources {
            home,
            workspace,
            env,
            only,
        })
    }

    fn names(out: &Scan) -> Vec<&str> {
        out.candidates.iter().map(|c| c.name.as_str()).collect()
    }

    fn find<'s>(out: &'s Scan, name: &str) -> &'s Candidate {
        out.candidates
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no candidate {name:?} in {:?}", names(out)))
    }

    fn problem<'s>(out: &'s Scan, entry: &str) -> &'s ImportProblem {
        out.problems
            .iter()
            .find(|p| p.entry.as_deref() == Some(entry))
            .unwrap_or_else(|| panic!("no problem for {entry:?} in {:?}", out.problems))
    }

    fn val(value: &str, secret: bool) -> ImportedValue {
        ImportedValue {
            value: value.to_string(),
            secret,
        }
    }

    fn args(c: &Candidate) -> Vec<&str> {
        match &c.transport {
            ImportedTransport::Stdio { args, .. } => args.iter().map(String::as_str).collect(),
            other => panic!("{} is not stdio: {other:?}", c.name),
        }
    }

    fn env(c: &Candidate) -> &BTreeMap<String, ImportedValue> {
        match &c.transport {
            ImportedTransport::Stdio { env, .. } => env,
            other => panic!("{} is not stdio: {other:?}", c.name),
        }
    }

    fn cwd(c: &Candidate) -> Option<&str> {
        match &c.transport {
            ImportedTransport::Stdio { cwd, .. } => cwd.as_deref(),
            other => panic!("{} is not stdio: {other:?}", c.name),
        }
    }

    fn url(c: &Candidate) -> &str {
        match &c.transport {
            ImportedTransport::Http { url, .. } => url,
            other => panic!("{} is not http: {other:?}", c.name),
        }
    }

    fn headers(c: &Candidate) -> &BTreeMap<String, ImportedValue> {
        match &c.transport {
            ImportedTransport::Http { headers, .. } => headers,
            other => panic!("{} is not http: {other:?}", c.name),
        }
    }

    fn values(pairs: &[(&str, &str, bool)]) -> BTreeMap<String, ImportedValue> {
        pairs
            .iter()
            .map(|(k, v, secret)| (k.to_string(), val(v, *secret)))
            .collect()
    }

    // --- Clients ---

    #[test]
    fn client_names_parse_and_serialize() {
        for client in Client::ALL {
            assert_eq!(Client::parse(client.name()), Ok(client));
            assert_eq!(
                serde_json::to_string(&client).unwrap(),
                format!("\"{}\"", client.name())
            );
        }
        assert_eq!(Client::parse(" Muse-Code "), Ok(Client::MuseCode));
        let err = Client::parse("zed").unwrap_err();
        assert!(
            err.contains("claude-code, cursor, codex, gemini, vscode, muse-code"),
            "{err}"
        );
    }

    // --- Rule 1: references ---

    #[test]
    fn env_references_resolve_from_airlocks_environment() {
        let home = tempfile::tempdir().unwrap();
        put(
            home.path(),
            ".cursor/mcp.json",
            r#"{"mcpServers": {"s": {"command": "srv", "env": {
                "A": "${ALPHA}", "B": "${env:BETA}", "C": "$GAMMA",
                "D": "prefix-${ALPHA}-suffix", "E": "$NOT_SET_VAR",
                "F": "${MISSING:-fallback}", "G": "literal $GAMMA"
            }}}}"#,
        );
        let vars = env_of(&[("ALPHA", "1"), ("BETA", "2"), ("GAMMA", "3")]);
        let out = scan_in(home.path(), None, &*vars, None);
        let s = find(&out, "s");
        // Whatever came from Airlock's environment is secret; an unset variable, a default
        // written in the file and literal text are not.
        assert_eq!(
            env(s),
            &values(&[
                ("A", "1", true),
                ("B", "2", true),
                ("C", "3", true),
                ("D", "prefix-1-suffix", true),
                ("E", "", false),
                ("F", "fallback", false),
                ("G", "literal $GAMMA", false),
            ])
        );
        assert_eq!(
            s.repair,
            ["env NOT_SET_VAR for E is not set in Airlock's environment"]
        );
        assert!(s.enabled);
    }

    #[test]
    fn args_and_urls_keep_references_to_set_variables_in_airlock_form() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        put(
            home.path(),
            ".cursor/mcp.json",
            r#"{"mcpServers": {
                "local": {"command": "srv", "args": ["--dir", "${env:DATA_DIR}", "${workspaceFolder}/x", "${UNSET_ARG}"]},
                "remote": {"url": "https://${MCP_HOST}/mcp"},
                "kept": {"url": "https://${env:MCP_BASE}/mcp"}
            }}"#,
        );
        let vars = env_of(&[("DATA_DIR", "/data"), ("MCP_BASE", "mcp.example")]);
        let out = scan_in(home.path(), Some(ws.path()), &*vars, None);
        let local = find(&out, "local");
        let in_ws = format!("{}/x", ws.path().display());
        assert_eq!(args(local), ["--dir", "${DATA_DIR}", in_ws.as_str(), ""]);
        assert_eq!(
            local.repair,
            ["env UNSET_ARG for args[3] is not set in Airlock's environment"]
        );
        let remote = find(&out, "remote");
        assert_eq!(url(remote), "https:///mcp");
        let kept = find(&out, "kept");
        assert_eq!(url(kept), "https://${MCP_BASE}/mcp");
        assert!(kept.repair.is_empty() && kept.enabled);
        assert_eq!(
            remote.repair,
            ["env MCP_HOST for url is not set in Airlock's environment"]
        );
    }

    #[test]
    fn codex_bearer_token_env_var_becomes_a_withheld_authorization_header() {
        // The header Airlock would send…
        let vars = env_of(&[("REMOTE_TOKEN", "abc")]);
        let mut r = Resolver {
            env: &*vars,
            home: Path::new("/home/u"),
            workspace: None,
            repair: Vec::new(),
            notes: Vec::new(),
        };
        assert_eq!(
            r.imported("Authorization", "Bearer ${REMOTE_TOKEN}"),
            val("Bearer abc", true)
        );
        assert!(r.repair.is_empty());

        // …is a credential, so a remote entry arrives disabled without it.
        let home = tempfile::tempdir().unwrap();
        let codex_home = tempfile::tempdir().unwrap();
        let file = put(
            codex_home.path(),
            "config.toml",
            "[mcp_servers.remote]\nurl = \"https://example.com/mcp\"\nbearer_token_env_var = \"REMOTE_TOKEN\"\n",
        );
        let dir = codex_home.path().to_str().unwrap().to_string();
        let withheld = "credentials not imported: header Authorization (from bearer_token_env_var REMOTE_TOKEN); set it with `airlock servers edit remote --header ...`";

        let vars = env_of(&[("CODEX_HOME", dir.as_str()), ("REMOTE_TOKEN", "abc")]);
        let out = scan_in(home.path(), None, &*vars, None);
        assert_eq!(out.files_read, [file.clone()]);
        let remote = find(&out, "remote");
        assert!(!remote.enabled);
        assert!(headers(remote).is_empty());
        assert_eq!(remote.repair, [withheld]);

        let vars = env_of(&[("CODEX_HOME", dir.as_str())]);
        let out = scan_in(home.path(), None, &*vars, None);
        assert_eq!(
            find(&out, "remote").repair,
            [
                "env REMOTE_TOKEN for Authorization is not set in Airlock's environment",
                withheld
            ]
        );
    }

    // --- Rule 2: secrets by name ---

    #[test]
    fn credential_like_names_and_values_are_secret() {
        let home = tempfile::tempdir().unwrap();
        put(
            home.path(),
            ".cursor/mcp.json",
            r#"{"mcpServers": {"s": {"command": "srv", "env": {
                "GITHUB_TOKEN": "abc", "NODE_ENV": "production", "db-password": "pw",
                "PLAIN": "${SERVICE_TOKEN}", "OTHER": "ghp_abcdefghijklmnop0123456789",
                "client_secret": "cs", "X_AUTH": "a", "SIGNING_PRIVATE_KEY": "k"
            }}}}"#,
        );
        let vars = env_of(&[("SERVICE_TOKEN", "svc")]);
        let out = scan_in(home.path(), None, &*vars, None);
        let secret: Vec<(&str, bool)> = env(find(&out, "s"))
            .iter()
            .map(|(k, v)| (k.as_str(), v.secret))
            .collect();
        assert_eq!(
            secret,
            [
                ("GITHUB_TOKEN", true),
                ("NODE_ENV", false),
                ("OTHER", true),
                ("PLAIN", true),
                ("SIGNING_PRIVATE_KEY", true),
                ("X_AUTH", true),
                ("client_secret", true),
                ("db-password", true),
            ]
        );
        assert_eq!(env(find(&out, "s"))["PLAIN"], val("svc", true));
    }

    #[test]
    fn values_resolved_from_env_references_are_secret_and_masked() {
        let vars = env_of(&[
            ("DATABASE_URL", "postgres://u:pw@h/db"),
            ("DB_HOST", "db.internal"),
        ]);
        let mut r = Resolver {
            env: &*vars,
            home: Path::new("/home/u"),
            workspace: None,
            repair: Vec::new(),
            notes: Vec::new(),
        };
        assert_eq!(
            r.imported("DATABASE_URL", "${DATABASE_URL}"),
            val("postgres://u:pw@h/db", true)
        );
        assert_eq!(
            r.imported("DATABASE_URL", "$DATABASE_URL"),
            val("postgres://u:pw@h/db", true)
        );
        assert!(r.repair.is_empty());

        let home = tempfile::tempdir().unwrap();
        put(
            home.path(),
            ".cursor/mcp.json",
            r#"{"mcpServers": {"db": {"command": "srv", "env": {
                "DATABASE_URL": "${DATABASE_URL}", "DSN": "postgres://${env:DB_HOST}/app",
                "REGION": "eu", "FALLBACK": "${UNSET_VAR:-plain}"
            }}}}"#,
        );
        let out = scan_in(home.path(), None, &*vars, None);
        let db = find(&out, "db");
        assert!(db.enabled && db.repair.is_empty(), "{db:?}");
        assert_eq!(
            env(db),
            &values(&[
                ("DATABASE_URL", "postgres://u:pw@h/db", true),
                ("DSN", "postgres://db.internal/app", true),
                ("FALLBACK", "plain", false),
                ("REGION", "eu", false),
            ])
        );
        assert_eq!(
            env(&db.masked()),
            &values(&[
                ("DATABASE_URL", MASK, true),
                ("DSN", MASK, true),
                ("FALLBACK", "plain", false),
                ("REGION", "eu", false),
            ])
        );
        let shown = format!("{out:?}{:?}", db.masked());
        assert!(!shown.contains("u:pw@h"), "{shown}");
        assert!(!shown.contains("db.internal"), "{shown}");
    }

    #[test]
    fn literal_non_credential_values_stay_plain() {
        let home = tempfile::tempdir().unwrap();
        put(
            home.path(),
            ".cursor/mcp.json",
            r#"{"mcpServers": {"s": {"command": "srv", "env": {
                "DATABASE_URL": "postgres://localhost/dev", "NODE_ENV": "production",
                "GREETING": "${UNSET_GREETING:-hello}", "PRICE": "literal $5"
            }}}}"#,
        );
        let out = scan_in(home.path(), None, &no_env, None);
        let s = find(&out, "s");
        assert_eq!(
            env(s),
            &values(&[
                ("DATABASE_URL", "postgres://localhost/dev", false),
                ("GREETING", "hello", false),
                ("NODE_ENV", "production", false),
                ("PRICE", "literal $5", false),
            ])
        );
        assert_eq!(&s.masked(), s, "nothing to mask");
        assert!(s.enabled && s.repair.is_empty());
    }

    #[test]
    fn remote_headers_resolved_from_env_references_are_withheld() {
        let home = tempfile::tempdir().unwrap();
        put(
            home.path(),
            ".cursor/mcp.json",
            r#"{"mcpServers": {"r": {"url": "https://r.example/mcp", "headers": {
                "X-Tenant": "${TENANT_ID}", "X-Client": "cursor"}}}}"#,
        );
        let vars = env_of(&[("TENANT_ID", "acme-tenant-42")]);
        let out = scan_in(home.path(), None, &*vars, None);
        let r = find(&out, "r");
        assert!(!r.enabled);
        assert_eq!(headers(r), &values(&[("X-Client", "cursor", false)]));
        assert_eq!(
            r.repair,
            [
                "credentials not imported: header X-Tenant; set it with `airlock servers edit r --header ...`"
            ]
        );
        assert!(!format!("{out:?}").contains("acme-tenant-42"));
    }

    // --- Rule 3: credentials typed into args ---

    #[test]
    fn credentials_typed_into_args_are_scrubbed() {
        let mut list: Vec<String> = [
            "--api-key=abc123XYZ",
            "--token",
            "s3cr3tValue",
            "--port",
            "8080",
            "/home/me/data",
            "--password=hunter2",
            "sk-proj0123456789abcdefXYZ",
            "GITHUB_TOKEN=ghp_abcdefghijklmnop0123",
            "--header",
            "Authorization: Bearer abc123",
            "--max-tokens",
            "1000",
            "--token-file",
            "/run/secrets/token",
            "AKIAIOSFODNN7EXAMPLE",
            "--verbose",
            "--client-secret",
            "${CLIENT_SECRET}",
            "--log-level=debug",
            "--auth",
            "stdio",
            "https://example.com/mcp",
            "--author",
            "Jane Doe",
        ]
        .map(String::from)
        .to_vec();
        let scrubbed = scrub_args(&mut list);
        assert_eq!(scrubbed, [0, 2, 6, 7, 8, 10, 15]);
        assert_eq!(
            list,
            [
                "--api-key=REDACTED",
                "--token",
                "REDACTED",
                "--port",
                "8080",
                "/home/me/data",
                "--password=REDACTED",
                "REDACTED",
                "GITHUB_TOKEN=REDACTED",
                "--header",
                "Authorization: REDACTED",
                "--max-tokens",
                "1000",
                "--token-file",
                "/run/secrets/token",
                "REDACTED",
                "--verbose",
                "--client-secret",
                "${CLIENT_SECRET}",
                "--log-level=debug",
                "--auth",
                "stdio",
                "https://example.com/mcp",
                "--author",
                "Jane Doe",
            ]
        );
    }

    #[test]
    fn scrubbed_args_are_reported_by_position_only() {
        let home = tempfile::tempdir().unwrap();
        put(
            home.path(),
            ".cursor/mcp.json",
            r#"{"mcpServers": {"s": {"command": "srv", "args": ["serve", "--password", "Hunter2Hunter2"]}}}"#,
        );
        let out = scan_in(home.path(), None, &no_env, None);
        let s = find(&out, "s");
        assert_eq!(args(s), ["serve", "--password", "REDACTED"]);
        assert_eq!(
            s.repair,
            [
                "args[2] looked like a credential typed into the command line and was replaced with REDACTED; pass it through an env var instead"
            ]
        );
        assert!(!format!("{out:?}").contains("Hunter2"));
    }

    #[test]
    fn url_args_with_credentials_are_scrubbed() {
        let mut list: Vec<String> = [
            "https://mcp.x/sse?token=abc123def456",
            "https://user:pass@host/x",
            "postgresql://u:pw@h/db",
            "--url=https://mcp.x/sse?region=eu&api_key=k3yk3y",
            "DATABASE_URL=postgres://app:s3cret@db.internal:5432/app",
            "--dsn",
            "redis://:hunter2@cache:6379/0",
            "https://mcp.x/sse?key=${API_KEY}",
            "https://example.com/mcp?author=jane&page=2",
            "postgresql://localhost/dev",
            "--db=postgresql://app@localhost/dev",
            "--port=8080",
            "/srv/data",
            "--author",
            "Jane Doe",
        ]
        .map(String::from)
        .to_vec();
        let scrubbed = scrub_args(&mut list);
        assert_eq!(scrubbed, [0, 1, 2, 3, 4, 6]);
        assert_eq!(
            list,
            [
                "https://mcp.x/sse?token=REDACTED",
                "https://user:REDACTED@host/x",
                "postgresql://u:REDACTED@h/db",
                "--url=https://mcp.x/sse?region=eu&api_key=REDACTED",
                "DATABASE_URL=postgres://app:REDACTED@db.internal:5432/app",
                "--dsn",
                "redis://:REDACTED@cache:6379/0",
                "https://mcp.x/sse?key=${API_KEY}",
                "https://example.com/mcp?author=jane&page=2",
                "postgresql://localhost/dev",
                "--db=postgresql://app@localhost/dev",
                "--port=8080",
                "/srv/data",
                "--author",
                "Jane Doe",
            ]
        );
    }

    #[test]
    fn option_values_holding_headers_variables_or_tokens_are_scrubbed() {
        let mut list: Vec<String> = [
            "--header=Authorization: Bearer abc123",
            "--header=X-Api-Key: k3yValue",
            "--env=API_KEY=abc123",
            "--set=db-password=hunter2",
            "--config=ghp_abcdefghijklmnop0123456789",
            "--header=Accept: application/json",
            "--header=Authorization: Bearer ${GITHUB_TOKEN}",
            "--env=NODE_ENV=production",
            "--env=TOKEN_FILE=/run/secrets/token",
            "--author=Jane Doe",
        ]
        .map(String::from)
        .to_vec();
        let scrubbed = scrub_args(&mut list);
        assert_eq!(scrubbed, [0, 1, 2, 3, 4]);
        assert_eq!(
            list,
            [
                "--header=Authorization: REDACTED",
                "--header=X-Api-Key: REDACTED",
                "--env=API_KEY=REDACTED",
                "--set=db-password=REDACTED",
                "--config=REDACTED",
                "--header=Accept: application/json",
                "--header=Authorization: Bearer ${GITHUB_TOKEN}",
                "--env=NODE_ENV=production",
                "--env=TOKEN_FILE=/run/secrets/token",
                "--author=Jane Doe",
            ]
        );
    }

    #[test]
    fn url_and_header_args_are_reported_by_position_only() {
        let home = tempfile::tempdir().unwrap();
        put(
            home.path(),
            ".cursor/mcp.json",
            r#"{"mcpServers": {"s": {"command": "mcp-remote", "args": [
                "--sse", "https://mcp.x/sse?token=abc123def456", "postgresql://u:Pw0rdXYZ@h/db",
                "--header=Authorization: Bearer Tok3nXYZ"]}}}"#,
        );
        let out = scan_in(home.path(), None, &no_env, None);
        let s = find(&out, "s");
        assert_eq!(
            args(s),
            [
                "--sse",
                "https://mcp.x/sse?token=REDACTED",
                "postgresql://u:REDACTED@h/db",
                "--header=Authorization: REDACTED",
            ]
        );
        let reason = |i: usize| {
            format!(
                "args[{i}] looked like a credential typed into the command line and was replaced with REDACTED; pass it through an env var instead"
            )
        };
        assert_eq!(s.repair, [reason(1), reason(2), reason(3)]);
        let shown = format!("{out:?}");
        for secret in ["abc123def456", "Pw0rdXYZ", "Tok3nXYZ"] {
            assert!(!shown.contains(secret), "{secret} leaked: {shown}");
        }
    }

    // --- Rule 4: remote entries ---

    #[test]
    fn remote_entries_arrive_disabled_without_credentials() {
        let home = tempfile::tempdir().unwrap();
        put(
            home.path(),
            ".cursor/mcp.json",
            r#"{"mcpServers": {
                "secret-headers": {"url": "https://a.example/mcp", "headers": {
                    "Authorization": "Bearer abc", "X-Api-Key": "k", "Accept": "application/json"}},
                "plain": {"type": "http", "url": "https://b.example/mcp", "headers": {"X-Region": "eu"}},
                "query": {"url": "https://c.example/mcp?api_key=abc123&region=eu"}
            }}"#,
        );
        let out = scan_in(home.path(), None, &no_env, None);

        let s = find(&out, "secret-headers");
        assert!(!s.enabled);
        assert_eq!(
            headers(s),
            &values(&[("Accept", "application/json", false)])
        );
        assert_eq!(
            s.repair,
            [
                "credentials not imported: header Authorization; set it with `airlock servers edit secret-headers --header ...`",
                "credentials not imported: header X-Api-Key; set it with `airlock servers edit secret-headers --header ...`",
            ]
        );

        let plain = find(&out, "plain");
        assert!(plain.enabled);
        assert!(plain.repair.is_empty());
        assert_eq!(headers(plain), &values(&[("X-Region", "eu", false)]));

        let query = find(&out, "query");
        assert!(!query.enabled);
        assert_eq!(
            url(query),
            "https://c.example/mcp?api_key=REDACTED&region=eu"
        );
        assert_eq!(query.repair.len(), 1);
        assert!(
            query.repair[0].starts_with("credentials not imported: url query parameter api_key"),
            "{:?}",
            query.repair
        );
        assert!(!format!("{out:?}").contains("abc123"));
    }

    #[test]
    fn url_credentials_are_scrubbed() {
        assert_eq!(
            scrub_url("https://user:pw@h.example/p?x=1&token=t0k#frag"),
            (
                "https://user:REDACTED@h.example/p?x=1&token=REDACTED#frag".to_string(),
                vec![
                    "the password in the url".to_string(),
                    "url query parameter token".to_string()
                ]
            )
        );
        assert_eq!(
            scrub_url("https://h.example/mcp?key=${API_KEY}"),
            ("https://h.example/mcp?key=${API_KEY}".to_string(), vec![])
        );
    }

    #[test]
    fn scrub_url_understands_any_scheme_and_urls_inside_text() {
        assert_eq!(
            scrub_url("postgresql://u:pw@h/db"),
            (
                "postgresql://u:REDACTED@h/db".to_string(),
                vec!["the password in the url".to_string()]
            )
        );
        assert_eq!(
            scrub_url(
                "DSN=mysql://root:pw@db/app primary, see https://docs.example/x?access_token=t0k"
            ),
            (
                "DSN=mysql://root:REDACTED@db/app primary, see https://docs.example/x?access_token=REDACTED"
                    .to_string(),
                vec![
                    "the password in the url".to_string(),
                    "url query parameter access_token".to_string()
                ]
            )
        );
        // Query parameters merely mentioning a credential word are left alone.
        assert_eq!(
            scrub_url("https://example.com/mcp?author=jane&token_type=bearer"),
            (
                "https://example.com/mcp?author=jane&token_type=bearer".to_string(),
                vec![]
            )
        );
        assert_eq!(
            scrub_url("no url here: just text"),
            ("no url here: just text".to_string(), vec![])
        );
    }

    // --- Rule 5: disabled in the source ---

    #[test]
    fn entries_disabled_in_the_source_import_disabled() {
        let home = tempfile::tempdir().unwrap();
        put(
            home.path(),
            ".cursor/mcp.json",
            r#"{"mcpServers": {
                "a": {"command": "x", "disabled": true},
                "b": {"command": "y", "enabled": false},
                "c": {"command": "z", "disabled": false}
            }}"#,
        );
        let out = scan_in(home.path(), None, &no_env, None);
        for name in ["a", "b"] {
            let c = find(&out, name);
            assert!(!c.enabled, "{name}");
            assert_eq!(c.notes, ["disabled in the source; imported disabled"]);
        }
        let c = find(&out, "c");
        assert!(c.enabled);
        assert!(c.notes.is_empty());
    }

    // --- Rule 6: malformed entries and files ---

    #[test]
    fn malformed_entries_become_problems_and_the_rest_import() {
        let home = tempfile::tempdir().unwrap();
        let file = put(
            home.path(),
            ".cursor/mcp.json",
            r#"{"mcpServers": {
                "no-endpoint": {"args": []},
                "both": {"command": "x", "url": "https://x.example"},
                "cmd-number": {"command": 5},
                "args-not-strings": {"command": "x", "args": ["a", 1]},
                "env-not-strings": {"command": "x", "env": {"A": true}},
                "relative": {"command": "x", "cwd": "rel/dir"},
                "ftp": {"url": "ftp://x.example"},
                "not-object": "just a string",
                "good": {"command": "x"}
            }}"#,
        );
        let out = scan_in(home.path(), None, &no_env, None);
        assert_eq!(names(&out), ["good"]);
        assert_eq!(out.problems.len(), 8, "{:?}", out.problems);
        for p in &out.problems {
            assert_eq!(p.client, Client::Cursor);
            assert_eq!(p.source, file);
        }
        let expect = [
            ("no-endpoint", "neither \"command\" nor \"url\" is set"),
            (
                "both",
                "both \"command\" and \"url\" are set; an entry needs exactly one",
            ),
            ("cmd-number", "\"command\" must be a string, got a number"),
            (
                "args-not-strings",
                "\"args\" must be an array of strings; item 1 is a number",
            ),
            (
                "env-not-strings",
                "\"env\" must be an object of strings; \"A\" is a boolean",
            ),
            (
                "relative",
                "\"cwd\" must be an absolute path, got \"rel/dir\"",
            ),
            ("ftp", "\"url\" must start with http:// or https://"),
            ("not-object", "the entry must be an object, got a string"),
        ];
        for (entry, message) in expect {
            assert_eq!(problem(&out, entry).message, message, "{entry}");
        }
        assert_eq!(
            problem(&out, "args-not-strings").to_string(),
            format!(
                "cursor: {file:?}, server \"args-not-strings\": \"args\" must be an array of strings; item 1 is a number"
            )
        );
    }

    #[test]
    fn unparsable_files_are_one_problem_each_and_quote_no_secrets() {
        let home = tempfile::tempdir().unwrap();
        let json = put(
            home.path(),
            ".cursor/mcp.json",
            fixture!("malformed.invalid.json"),
        );
        let toml = put(
            home.path(),
            ".codex/config.toml",
            fixture!("malformed.invalid.toml"),
        );
        put(
            home.path(),
            ".gemini/settings.json",
            r#"{"mcpServers": {"fine": {"command": "x"}}}"#,
        );
        let out = scan_in(home.path(), None, &no_env, None);
        assert_eq!(names(&out), ["fine"]);
        assert_eq!(out.files_read.len(), 3);
        assert!(out.files_read.contains(&json) && out.files_read.contains(&toml));
        assert_eq!(out.problems.len(), 2, "{:?}", out.problems);
        let cursor = &out.problems[0];
        assert_eq!(
            (cursor.client, &cursor.source, &cursor.entry),
            (Client::Cursor, &json, &None)
        );
        assert!(
            cursor.message.starts_with("invalid JSON: "),
            "{}",
            cursor.message
        );
        let codex = &out.problems[1];
        assert_eq!(
            (codex.client, &codex.source, &codex.entry),
            (Client::Codex, &toml, &None)
        );
        assert!(
            codex.message.starts_with("invalid TOML at line "),
            "{}",
            codex.message
        );
        for p in &out.problems {
            assert!(!p.to_string().contains("ghp_"), "{p}");
            assert!(!format!("{p:?}").contains("ghp_"), "{p:?}");
        }
    }

    #[test]
    fn missing_files_are_skipped_silently() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let out = scan_in(home.path(), Some(ws.path()), &no_env, None);
        assert!(out.candidates.is_empty());
        assert!(out.problems.is_empty());
        assert!(out.files_read.is_empty());
    }

    #[test]
    fn a_map_of_the_wrong_type_is_a_file_problem() {
        let home = tempfile::tempdir().unwrap();
        let file = put(home.path(), ".cursor/mcp.json", r#"{"mcpServers": []}"#);
        put(home.path(), ".gemini/settings.json", "[1, 2]");
        let out = scan_in(home.path(), None, &no_env, None);
        assert_eq!(out.problems.len(), 2);
        assert_eq!(out.problems[0].source, file);
        assert_eq!(out.problems[0].entry, None);
        assert_eq!(
            out.problems[0].message,
            "\"mcpServers\" must be an object, got an array"
        );
        assert_eq!(
            out.problems[1].message,
            "expected a JSON object at the top level, got an array"
        );
    }

    // --- Rule 7: names ---

    #[test]
    fn names_are_sanitized_and_deduplicated() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let long = "a".repeat(70);
        put(
            home.path(),
            ".cursor/mcp.json",
            &format!(
                r#"{{"mcpServers": {{"my server!": {{"command": "x"}}, "ok_name-1": {{"command": "x"}}, "{long}": {{"command": "x"}}}}}}"#
            ),
        );
        put(
            ws.path(),
            ".cursor/mcp.json",
            r#"{"mcpServers": {"my_server_": {"command": "x"}, "ok_name-1": {"command": "x"}}}"#,
        );
        let out = scan_in(home.path(), Some(ws.path()), &no_env, None);
        let cut = "a".repeat(64);
        assert_eq!(
            names(&out),
            [
                cut.as_str(),
                "my_server_",
                "ok_name-1",
                "my_server_-2",
                "ok_name-1-2"
            ]
        );
        assert_eq!(find(&out, &cut).notes, [format!("renamed from {long:?}")]);
        assert_eq!(
            find(&out, "my_server_").notes,
            ["renamed from \"my server!\""]
        );
        assert!(find(&out, "ok_name-1").notes.is_empty());
        assert_eq!(
            find(&out, "my_server_-2").notes,
            [
                "renamed from \"my_server_\" to \"my_server_-2\": an earlier imported server already uses that name"
            ]
        );

        let taken: HashSet<String> = ["a", "a-2", cut.as_str()].map(String::from).into();
        assert_eq!(unique_name("a", &taken), "a-3");
        assert_eq!(unique_name("b", &taken), "b");
        let bumped = unique_name(&cut, &taken);
        assert_eq!(bumped, format!("{}-2", "a".repeat(62)));
        assert!(valid_name(&bumped));
        assert_eq!(sanitize_name(""), "server");
        assert_eq!(sanitize_name("héllo.world"), "h_llo_world");
    }

    // --- Rule 8: secrets never leak; masking ---

    #[test]
    fn secrets_stay_out_of_messages_and_debug_and_are_masked() {
        let home = tempfile::tempdir().unwrap();
        put(
            home.path(),
            ".cursor/mcp.json",
            r#"{"mcpServers": {
                "leaky": {"command": "srv", "args": ["--token", "Sup3rSecretArg"], "env": {
                    "GITHUB_TOKEN": "ghp_SECRETvalue0123456789abcd", "EMPTY_TOKEN": "${UNSET_SECRET_VAR}", "MODE": "fast"}},
                "bad": {"command": "srv", "env": {"API_TOKEN": "Sup3rSecretEnv", "N": 1}}
            }}"#,
        );
        let out = scan_in(home.path(), None, &no_env, None);
        let shown = format!(
            "{out:?}{}",
            out.problems
                .iter()
                .map(|p| p.to_string())
                .collect::<String>()
        );
        for secret in ["Sup3rSecret", "ghp_SECRETvalue"] {
            assert!(!shown.contains(secret), "{secret} leaked: {shown}");
        }
        let leaky = find(&out, "leaky");
        assert_eq!(
            env(leaky)["GITHUB_TOKEN"],
            val("ghp_SECRETvalue0123456789abcd", true)
        );
        let masked = leaky.masked();
        assert_eq!(
            env(&masked),
            &values(&[
                ("EMPTY_TOKEN", "", true),
                ("GITHUB_TOKEN", "••••••", true),
                ("MODE", "fast", false),
            ])
        );
        assert_eq!(
            env(leaky)["GITHUB_TOKEN"].value,
            "ghp_SECRETvalue0123456789abcd",
            "masking must not touch the original"
        );
        assert_ne!(masked.digest(), leaky.digest());
    }

    #[test]
    fn digest_is_stable_and_covers_secret_values() {
        let home = tempfile::tempdir().unwrap();
        let write = |token: &str| {
            put(
                home.path(),
                ".cursor/mcp.json",
                &format!(
                    r#"{{"mcpServers": {{"s": {{"command": "x", "env": {{"API_TOKEN": "{token}"}}}}}}}}"#
                ),
            );
            scan_in(home.path(), None, &no_env, None).candidates[0].digest()
        };
        let first = write("one");
        assert_eq!(first.len(), 64);
        assert!(first.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(write("one"), first);
        assert_ne!(write("two"), first);
    }

    // --- Rule 9: order ---

    #[test]
    fn order_is_client_then_user_before_workspace_then_key() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let entry = |names: &[&str]| {
            names
                .iter()
                .map(|n| format!(r#""{n}": {{"command": "x"}}"#))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let h = home.path();
        let w = ws.path();
        put(
            h,
            ".claude.json",
            &format!(r#"{{"mcpServers": {{{}}}}}"#, entry(&["b", "a"])),
        );
        put(
            w,
            ".mcp.json",
            &format!(r#"{{"mcpServers": {{{}}}}}"#, entry(&["c"])),
        );
        put(
            h,
            ".cursor/mcp.json",
            &format!(r#"{{"mcpServers": {{{}}}}}"#, entry(&["z"])),
        );
        put(
            w,
            ".cursor/mcp.json",
            &format!(r#"{{"mcpServers": {{{}}}}}"#, entry(&["y"])),
        );
        put(
            h,
            ".codex/config.toml",
            "[mcp_servers.m]\ncommand = \"x\"\n",
        );
        put(
            h,
            ".gemini/settings.json",
            &format!(r#"{{"mcpServers": {{{}}}}}"#, entry(&["g"])),
        );
        put(
            w,
            ".vscode/mcp.json",
            &format!(r#"{{"servers": {{{}}}}}"#, entry(&["v"])),
        );
        put(
            h,
            ".muse/settings.json",
            &format!(r#"{{"mcpServers": {{{}}}}}"#, entry(&["u"])),
        );
        put(
            w,
            ".muse/settings.json",
            &format!(r#"{{"mcpServers": {{{}}}}}"#, entry(&["t"])),
        );

        let out = scan_in(h, Some(w), &no_env, None);
        assert!(out.problems.is_empty(), "{:?}", out.problems);
        assert_eq!(
            names(&out),
            ["a", "b", "c", "z", "y", "m", "g", "v", "u", "t"]
        );
        let clients: Vec<Client> = out.candidates.iter().map(|c| c.client).collect();
        use Client::*;
        assert_eq!(
            clients,
            [
                ClaudeCode, ClaudeCode, ClaudeCode, Cursor, Cursor, Codex, Gemini, Vscode,
                MuseCode, MuseCode
            ]
        );
        assert_eq!(out.files_read.len(), 9);

        let only = scan_in(h, Some(w), &no_env, Some(Client::Gemini));
        assert_eq!(names(&only), ["g"]);
        assert_eq!(only.files_read, [h.join(".gemini/settings.json")]);
    }

    #[test]
    fn a_workspace_that_is_the_home_folder_is_read_once() {
        let home = tempfile::tempdir().unwrap();
        put(
            home.path(),
            ".cursor/mcp.json",
            r#"{"mcpServers": {"s": {"command": "x"}}}"#,
        );
        let out = scan_in(home.path(), Some(home.path()), &no_env, None);
        assert_eq!(names(&out), ["s"]);
        assert_eq!(out.files_read.len(), 1);
    }

    #[test]
    fn jsonc_comments_and_trailing_commas_are_accepted() {
        let text = "{\n  // a comment with \"quotes\"\n  \"url\": \"https://x//y /* not a comment */\", /* block\n comment */\n  \"a\": [1, 2,],\n}\n";
        let value: Value = serde_json::from_str(&strip_jsonc(text)).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"url": "https://x//y /* not a comment */", "a": [1, 2]})
        );
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
    }

    // --- One test per client's fixtures ---

    #[test]
    fn claude_code_fixtures() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let ws_key = ws.path().to_str().unwrap();
        let user = put(
            home.path(),
            ".claude.json",
            &fixture!("claude-code.home.claude.json").replace("__WORKSPACE__", ws_key),
        );
        let project = put(
            ws.path(),
            ".mcp.json",
            fixture!("claude-code.workspace.mcp.json"),
        );
        let vars = env_of(&[("GITHUB_TOKEN", "ghp_fromEnvironment0123456789")]);
        let out = scan_in(home.path(), Some(ws.path()), &*vars, None);
        assert_eq!(
            names(&out),
            [
                "github",
                "linear",
                "my_server_",
                "postgres",
                "filesystem",
                "sentry"
            ]
        );
        assert_eq!(out.files_read, [user.clone(), project.clone()]);

        let github = find(&out, "github");
        assert_eq!((github.client, &github.source), (Client::ClaudeCode, &user));
        assert_eq!(
            github.transport,
            ImportedTransport::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "@modelcontextprotocol/server-github".into()],
                cwd: None,
                env: values(&[(
                    "GITHUB_PERSONAL_ACCESS_TOKEN",
                    "ghp_fromEnvironment0123456789",
                    true
                )]),
            }
        );
        assert!(github.enabled && github.repair.is_empty());

        let linear = find(&out, "linear");
        assert!(!linear.enabled);
        assert_eq!(url(linear), "https://mcp.linear.app/mcp");
        assert_eq!(
            headers(linear),
            &values(&[("X-Client-Name", "claude-code", false)])
        );
        assert_eq!(
            linear.repair,
            [
                "credentials not imported: header Authorization; set it with `airlock servers edit linear --header ...`"
            ]
        );

        let renamed = find(&out, "my_server_");
        assert_eq!(renamed.notes, ["renamed from \"my server!\""]);
        assert_eq!(args(renamed), ["--port", "8080", "--api-key=REDACTED"]);
        assert_eq!(renamed.repair.len(), 1);
        assert!(renamed.repair[0].starts_with("args[2] looked like a credential"));

        let postgres = find(&out, "postgres");
        assert_eq!(postgres.source, user);
        assert_eq!(
            postgres.notes,
            [format!("defined for project {ws_key:?} in this file")]
        );
        assert_eq!(
            args(postgres),
            [
                "-y",
                "@modelcontextprotocol/server-postgres",
                "postgresql://dev:REDACTED@localhost/dev"
            ]
        );
        assert_eq!(
            postgres.repair,
            [
                "args[2] looked like a credential typed into the command line and was replaced with REDACTED; pass it through an env var instead"
            ]
        );
        assert!(!format!("{out:?}").contains("devpass"));

        let filesystem = find(&out, "filesystem");
        assert_eq!(filesystem.source, project);
        assert_eq!(
            args(filesystem),
            [
                "-y",
                "@modelcontextprotocol/server-filesystem",
                "/srv/project"
            ]
        );

        let sentry = find(&out, "sentry");
        assert_eq!(url(sentry), "https://mcp.sentry.dev/sse");
        assert!(sentry.enabled && sentry.repair.is_empty());
        assert!(sentry.notes[0].starts_with("the source uses SSE"));

        assert_eq!(out.problems.len(), 2, "{:?}", out.problems);
        let broken = problem(&out, "broken-args");
        assert_eq!(broken.source, user);
        assert_eq!(
            broken.message,
            "\"args\" must be an array of strings, got a string"
        );
        let both = problem(&out, "both-command-and-url");
        assert_eq!(both.source, project);
        assert!(both.message.starts_with("both \"command\" and \"url\""));

        // Without a workspace, only the user-level servers are read.
        let out = scan_in(home.path(), None, &*vars, None);
        assert_eq!(names(&out), ["github", "linear", "my_server_"]);
    }

    #[test]
    fn cursor_fixtures() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let user = put(
            home.path(),
            ".cursor/mcp.json",
            fixture!("cursor.home.mcp.json"),
        );
        let project = put(
            ws.path(),
            ".cursor/mcp.json",
            fixture!("cursor.workspace.mcp.json"),
        );
        let out = scan_in(home.path(), Some(ws.path()), &no_env, None);
        assert_eq!(
            names(&out),
            ["brave-search", "context7", "slack", "project-db"]
        );

        assert_eq!(
            env(find(&out, "brave-search")),
            &values(&[
                ("BRAVE_API_KEY", "BSA-example-not-a-real-key", true),
                ("LOG_LEVEL", "info", false),
            ])
        );

        let context7 = find(&out, "context7");
        assert!(!context7.enabled);
        assert!(headers(context7).is_empty());
        assert_eq!(
            context7.repair,
            [
                "credentials not imported: header CONTEXT7_API_KEY; set it with `airlock servers edit context7 --header ...`"
            ]
        );

        let slack = find(&out, "slack");
        assert_eq!(
            args(slack),
            [
                "-y",
                "@modelcontextprotocol/server-slack",
                "--token",
                "REDACTED"
            ]
        );
        assert_eq!(env(slack), &values(&[("SLACK_TEAM_ID", "", false)]));
        assert_eq!(
            slack.repair,
            [
                "args[3] looked like a credential typed into the command line and was replaced with REDACTED; pass it through an env var instead",
                "env SLACK_TEAM_ID for SLACK_TEAM_ID is not set in Airlock's environment",
            ]
        );

        let db = find(&out, "project-db");
        assert_eq!(db.source, project);
        assert_eq!(cwd(db), Some("/srv/app"));
        assert_eq!(
            args(db),
            ["mcp-server-sqlite", "--db-path", "/srv/app/dev.db"]
        );

        assert_eq!(out.problems.len(), 2, "{:?}", out.problems);
        let bad_env = problem(&out, "bad-env");
        assert_eq!(bad_env.source, user);
        assert_eq!(
            bad_env.message,
            "\"env\" must be an object of strings; \"PORT\" is a number"
        );
        assert_eq!(
            problem(&out, "relative-cwd").message,
            "\"cwd\" must be an absolute path, got \"./tools\""
        );
        assert!(!format!("{out:?}").contains("xoxb-"));
    }

    #[test]
    fn codex_fixture() {
        let home = tempfile::tempdir().unwrap();
        let codex_home = tempfile::tempdir().unwrap();
        let file = put(
            codex_home.path(),
            "config.toml",
            fixture!("codex.config.toml"),
        );
        let dir = codex_home.path().to_str().unwrap().to_string();
        let vars = env_of(&[
            ("CODEX_HOME", dir.as_str()),
            ("DOCS_TOKEN", "docs-secret-value"),
        ]);
        let out = scan_in(home.path(), None, &*vars, None);
        assert_eq!(out.files_read, [file.clone()]);
        assert_eq!(names(&out), ["docs", "figma", "old"]);

        let docs = find(&out, "docs");
        assert_eq!((docs.client, &docs.source), (Client::Codex, &file));
        assert_eq!(args(docs), ["-y", "mcp-server-docs", "--api-key=REDACTED"]);
        assert_eq!(
            env(docs),
            &values(&[
                ("DOCS_API_TOKEN", "docs-secret-value", true),
                ("LOG_LEVEL", "info", false),
            ])
        );
        assert_eq!(docs.startup_timeout_secs, Some(20));
        assert_eq!(docs.tool_timeout_secs, Some(91));
        assert_eq!(docs.repair.len(), 1);
        assert!(docs.repair[0].starts_with("args[2] looked like a credential"));

        let figma = find(&out, "figma");
        assert!(!figma.enabled);
        assert_eq!(url(figma), "https://mcp.figma.com/mcp");
        assert_eq!(headers(figma), &values(&[("X-Figma-Region", "eu", false)]));
        assert_eq!(
            figma.repair,
            [
                "env FIGMA_TOKEN for Authorization is not set in Airlock's environment",
                "credentials not imported: header Authorization (from bearer_token_env_var FIGMA_TOKEN); set it with `airlock servers edit figma --header ...`",
            ]
        );

        let old = find(&out, "old");
        assert!(!old.enabled);
        assert_eq!(old.notes, ["disabled in the source; imported disabled"]);

        assert_eq!(out.problems.len(), 2, "{:?}", out.problems);
        assert_eq!(
            problem(&out, "badurl").message,
            "\"url\" must start with http:// or https://"
        );
        assert_eq!(
            problem(&out, "nocmd").message,
            "neither \"command\" nor \"url\" is set"
        );

        // Without CODEX_HOME the file is looked for under the home folder.
        let default = put(
            home.path(),
            ".codex/config.toml",
            fixture!("codex.config.toml"),
        );
        let out = scan_in(home.path(), None, &no_env, Some(Client::Codex));
        assert_eq!(out.files_read, [default]);
        assert_eq!(names(&out), ["docs", "figma", "old"]);
    }

    #[test]
    fn gemini_fixtures() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        put(
            home.path(),
            ".gemini/settings.json",
            fixture!("gemini.home.settings.json"),
        );
        let project = put(
            ws.path(),
            ".gemini/settings.json",
            fixture!("gemini.workspace.settings.json"),
        );
        let vars = env_of(&[
            ("DB_CONNECTION_STRING", "postgres://db"),
            ("EXTERNAL_API_KEY", "ext-key-value"),
        ]);
        let out = scan_in(home.path(), Some(ws.path()), &*vars, None);
        assert_eq!(
            names(&out),
            [
                "httpServer",
                "pythonTools",
                "sseServer",
                "trusted",
                "pythonTools-2"
            ]
        );

        let http = find(&out, "httpServer");
        assert_eq!(url(http), "http://localhost:3000/mcp");
        assert_eq!(http.tool_timeout_secs, Some(5));
        assert!(http.enabled);

        let python = find(&out, "pythonTools");
        assert_eq!(
            env(python),
            &values(&[
                ("API_KEY", "ext-key-value", true),
                ("DATABASE_URL", "postgres://db", true),
            ])
        );
        assert_eq!(cwd(python), Some("/srv/mcp-servers/python"));
        assert_eq!(args(python), ["-m", "my_mcp_server", "--port", "8080"]);
        assert_eq!(python.tool_timeout_secs, Some(16), "15500 ms rounds up");
        assert!(python.repair.is_empty());

        let sse = find(&out, "sseServer");
        assert!(!sse.enabled);
        assert_eq!(headers(sse), &values(&[("X-Client", "gemini", false)]));
        assert_eq!(
            sse.repair,
            [
                "credentials not imported: header X-Api-Key; set it with `airlock servers edit sseServer --header ...`"
            ]
        );

        assert_eq!(
            find(&out, "trusted").notes,
            ["not imported: field \"trust\""]
        );

        let second = find(&out, "pythonTools-2");
        assert_eq!(second.source, project);
        assert_eq!(cwd(second), Some("/srv/project"));
        assert_eq!(
            second.notes,
            [
                "renamed from \"pythonTools\" to \"pythonTools-2\": an earlier imported server already uses that name"
            ]
        );

        assert_eq!(out.problems.len(), 1, "{:?}", out.problems);
        assert_eq!(
            problem(&out, "nothing").message,
            "neither \"command\" nor \"url\" is set"
        );
    }

    #[test]
    fn vscode_fixture() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let file = put(
            ws.path(),
            ".vscode/mcp.json",
            fixture!("vscode.workspace.mcp.json"),
        );
        let out = scan_in(home.path(), Some(ws.path()), &no_env, None);
        assert_eq!(out.files_read, [file.clone()]);
        assert_eq!(names(&out), ["fetch", "github", "perplexity"]);

        assert_eq!(args(find(&out, "fetch")), ["mcp-server-fetch"]);

        let github = find(&out, "github");
        assert!(!github.enabled);
        assert!(headers(github).is_empty());
        assert_eq!(
            github.repair,
            [
                "env GITHUB_TOKEN for Authorization is not set in Airlock's environment",
                "credentials not imported: header Authorization; set it with `airlock servers edit github --header ...`",
            ]
        );

        let perplexity = find(&out, "perplexity");
        assert_eq!(
            env(perplexity),
            &values(&[("PERPLEXITY_API_KEY", "", true)])
        );
        assert_eq!(
            perplexity.repair,
            [
                "PERPLEXITY_API_KEY uses the VS Code input ${input:perplexity-key}, which Airlock cannot prompt for; set the value yourself"
            ]
        );
        assert_eq!(
            perplexity.notes,
            [
                "\"envFile\" (${workspaceFolder}/.env) was not imported; copy the variables it sets into env"
            ]
        );

        assert_eq!(out.problems.len(), 1, "{:?}", out.problems);
        let websocket = problem(&out, "websocket");
        assert_eq!(websocket.client, Client::Vscode);
        assert_eq!(
            websocket.message,
            "\"type\" must be \"stdio\", \"http\", \"sse\" or \"streamable-http\", got \"websocket\""
        );

        // VS Code has no user-level file here: nothing without a workspace.
        let out = scan_in(home.path(), None, &no_env, None);
        assert!(out.files_read.is_empty());
    }

    #[test]
    fn muse_code_fixtures() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let user = put(
            home.path(),
            ".muse/settings.json",
            fixture!("muse-code.home.settings.json"),
        );
        let project = put(
            ws.path(),
            ".muse/settings.json",
            fixture!("muse-code.workspace.settings.json"),
        );
        let out = scan_in(home.path(), Some(ws.path()), &no_env, None);
        assert_eq!(names(&out), ["legacy-only", "notes", "search", "builder"]);

        let legacy = find(&out, "legacy-only");
        assert!(!legacy.enabled);
        assert_eq!(
            legacy.notes,
            [
                "from the legacy \"mcp_servers\" map",
                "disabled in the source; imported disabled",
            ]
        );

        let notes = find(&out, "notes");
        assert_eq!(
            notes.transport,
            ImportedTransport::Stdio {
                command: "muse-notes".into(),
                args: vec!["--dir".into(), "/home/user/notes".into()],
                cwd: None,
                env: BTreeMap::new(),
            }
        );
        assert_eq!(
            notes.notes,
            [
                "also defined in the legacy \"mcp_servers\" map of this file; the \"mcpServers\" definition wins"
            ]
        );

        let search = find(&out, "search");
        assert_eq!(url(search), "https://search.example.com/mcp");
        assert!(search.enabled);

        let builder = find(&out, "builder");
        assert_eq!(builder.source, project);
        assert_eq!(cwd(builder), Some("/srv/project"));

        assert_eq!(out.problems.len(), 2, "{:?}", out.problems);
        let broken = problem(&out, "legacy-broken");
        assert_eq!(broken.source, user);
        assert_eq!(broken.message, "\"command\" must be a string, got an array");
        let file_level = out.problems.iter().find(|p| p.entry.is_none()).unwrap();
        assert_eq!(file_level.source, project);
        assert_eq!(
            file_level.message,
            "\"mcp_servers\" must be an object, got a string"
        );
    }
}
