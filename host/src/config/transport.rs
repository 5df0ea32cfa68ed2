//! [`Transport`]: how Airlock reaches a server, in one shape for every place that holds
//! one — a loaded config ([`TransportConfig`], plain values), a registry row (stored
//! values or secret references), a draft from the CLI or an import ([`TaggedValue`]s).
//! Only the type of the env/header values differs between them.

use super::Auth;
use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::secrets::{MASK, looks_like_credential, url_credentials};

/// How a server is reached; `V` is what an env var or header value is at this stage.
#[derive(Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Transport<V> {
    /// A local process spoken to over stdin/stdout.
    Stdio {
        /// The program (bare name looked up on PATH and fallback folders, or a path).
        command: String,
        /// Its arguments, passed one by one (never through a shell).
        args: Vec<String>,
        /// Extra environment variables.
        env: BTreeMap<String, V>,
    },
    /// A remote server over streamable HTTP (with the legacy SSE fallback).
    Http {
        /// The endpoint URL.
        url: String,
        /// Extra headers on every request.
        headers: BTreeMap<String, V>,
        /// How the server authenticates Airlock beyond the headers.
        auth: Auth,
    },
}

/// A loaded server's transport: every value expanded and resolved.
pub type TransportConfig = Transport<String>;

impl<V> Transport<V> {
    /// `stdio` or `http`.
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }

    /// Whether this is a stdio transport.
    pub fn is_stdio(&self) -> bool {
        matches!(self, Transport::Stdio { .. })
    }

    /// The env vars (stdio) or headers (http).
    pub fn values(&self) -> &BTreeMap<String, V> {
        match self {
            Transport::Stdio { env, .. } => env,
            Transport::Http { headers, .. } => headers,
        }
    }

    /// The env vars (stdio) or headers (http), to change.
    pub fn values_mut(&mut self) -> &mut BTreeMap<String, V> {
        match self {
            Transport::Stdio { env, .. } => env,
            Transport::Http { headers, .. } => headers,
        }
    }

    /// The same transport with every value passed through `f` (given its name).
    pub fn map_values<W>(self, mut f: impl FnMut(&str, V) -> W) -> Transport<W> {
        let map = |values: BTreeMap<String, V>, f: &mut dyn FnMut(&str, V) -> W| {
            values
                .into_iter()
                .map(|(k, v)| {
                    let w = f(&k, v);
                    (k, w)
                })
                .collect()
        };
        match self {
            Transport::Stdio { command, args, env } => Transport::Stdio {
                command,
                args,
                env: map(env, &mut f),
            },
            Transport::Http { url, headers, auth } => Transport::Http {
                url,
                headers: map(headers, &mut f),
                auth,
            },
        }
    }

    /// Like [`Transport::map_values`] with a fallible `f`; the first error wins.
    pub fn try_map_values<W, E>(
        self,
        mut f: impl FnMut(&str, V) -> Result<W, E>,
    ) -> Result<Transport<W>, E> {
        let mut failed = None;
        let mapped = self.map_values(|k, v| match f(k, v) {
            Ok(w) => Some(w),
            Err(e) => {
                failed.get_or_insert(e);
                None
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(mapped.map_values(|_, w| w.expect("no error was seen")))
    }

    /// A borrowing view with the same shape.
    pub fn as_ref(&self) -> Transport<&V> {
        match self {
            Transport::Stdio { command, args, env } => Transport::Stdio {
                command: command.clone(),
                args: args.clone(),
                env: env.iter().map(|(k, v)| (k.clone(), v)).collect(),
            },
            Transport::Http { url, headers, auth } => Transport::Http {
                url: url.clone(),
                headers: headers.iter().map(|(k, v)| (k.clone(), v)).collect(),
                auth: auth.clone(),
            },
        }
    }
}

/// What a value shows in `Debug` output: secret values never appear.
pub trait MaskedDebug {
    /// Writes the value, or [`MASK`] when the value (named `name`) is secret.
    fn fmt_masked(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

impl MaskedDebug for String {
    fn fmt_masked(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if looks_like_credential(name) && !self.is_empty() {
            f.write_str(MASK)
        } else {
            write!(f, "{self:?}")
        }
    }
}

impl<T: MaskedDebug> MaskedDebug for &T {
    fn fmt_masked(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (*self).fmt_masked(name, f)
    }
}

struct Masked<'a, V>(&'a BTreeMap<String, V>);

impl<V: MaskedDebug> fmt::Debug for Masked<'_, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct One<'a, V>(&'a str, &'a V);
        impl<V: MaskedDebug> fmt::Debug for One<'_, V> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.1.fmt_masked(self.0, f)
            }
        }
        f.debug_map()
            .entries(self.0.iter().map(|(k, v)| (k, One(k, v))))
            .finish()
    }
}

/// A URL with the credentials written into it masked.
fn masked_url(url: &str) -> String {
    let mut shown = url.to_string();
    for (_, value) in url_credentials(url) {
        shown = shown.replace(&value, MASK);
    }
    shown
}

impl<V: MaskedDebug> fmt::Debug for Transport<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transport::Stdio { command, args, env } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &Masked(env))
                .finish(),
            Transport::Http { url, headers, auth } => f
                .debug_struct("Http")
                .field("url", &masked_url(url))
                .field("headers", &Masked(headers))
                .field("auth", auth)
                .finish(),
        }
    }
}

/// A value given for an env var or header (by the CLI, or found by an import), and
/// whether it is secret. `Debug` shows secret values as [`MASK`].
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct TaggedValue {
    /// The value (in an edit, empty for a secret means "keep the stored one"; in an
    /// import, empty when a reference could not be resolved).
    pub value: String,
    /// Whether it is a credential (kept in the secret store).
    pub secret: bool,
}

impl TaggedValue {
    /// A plain value.
    pub fn plain(value: impl Into<String>) -> Self {
        TaggedValue {
            value: value.into(),
            secret: false,
        }
    }

    /// A secret value.
    pub fn secret(value: impl Into<String>) -> Self {
        TaggedValue {
            value: value.into(),
            secret: true,
        }
    }

    /// A copy for display: a non-empty secret value replaced by [`MASK`].
    pub fn masked(&self) -> TaggedValue {
        if self.secret && !self.value.is_empty() {
            TaggedValue::secret(MASK)
        } else {
            self.clone()
        }
    }
}

impl fmt::Debug for TaggedValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = if self.secret && !self.value.is_empty() {
            MASK
        } else {
            self.value.as_str()
        };
        f.debug_struct("TaggedValue")
            .field("value", &shown)
            .field("secret", &self.secret)
            .finish()
    }
}

impl MaskedDebug for TaggedValue {
    fn fmt_masked(&self, _name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}
