//! `${…}` references: splitting a value into [`Segment`]s and the [`Resolver`] that
//! resolves them against Airlock's environment (or keeps them as `${VAR}` templates),
//! classifying values as secret and collecting repair reasons.

use std::path::Path;

use crate::secrets::looks_like_credential;

use super::ImportedValue;
use super::credentials::contains_provider_token;

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
pub(super) fn is_var_name(name: &str) -> bool {
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
pub(super) struct Resolver<'a> {
    pub(super) env: &'a dyn Fn(&str) -> Option<String>,
    pub(super) home: &'a Path,
    pub(super) workspace: Option<&'a Path>,
    pub(super) repair: Vec<String>,
    pub(super) notes: Vec<String>,
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
    pub(super) fn imported(&mut self, name: &str, raw: &str) -> ImportedValue {
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
    pub(super) fn template(&mut self, field: &str, raw: &str) -> String {
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
    pub(super) fn path(&mut self, field: &str, raw: &str) -> Option<String> {
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
