//! OAuth for remote MCP servers (`auth = "oauth"`): the glue between rmcp's OAuth client
//! (`rmcp::transport::auth`) and Airlock's [`SecretStore`].
//!
//! rmcp does the protocol — metadata discovery from the 401 challenge and the well-known
//! URLs, dynamic client registration, the PKCE (S256) authorization URL, the code
//! exchange and the refresh. This module adds what a host needs around it:
//!
//! - [`authorize`]: the interactive flow, with a one-shot loopback listener on
//!   `127.0.0.1` receiving the browser's redirect;
//! - [`access_token`]: a valid token without interaction (the stored one, or a silent
//!   refresh), used when a session connects;
//! - [`client_credentials_token`]: machine-to-machine tokens (client secret or a signed
//!   JWT assertion), with no browser and no authorization step;
//! - [`exchanged_token`]: the calling agent's access token exchanged for one for the
//!   service (RFC 8693), kept in memory only;
//! - [`identity_assertion_token`]: enterprise-managed authorization (SEP-990), an ID
//!   token exchanged for an identity assertion, and that for an access token;
//! - [`Authorizations`]: the flows a call starts for an agent that must authorize a
//!   service itself, finished by a browser coming back to the gateway (or a loopback
//!   listener);
//! - [`logout`] and [`is_authorized`].
//!
//! Tokens for service `NAME` live in the secret store under `oauth:NAME`, as one JSON
//! record: the client registration (client id, optional secret, redirect URI), rmcp's
//! stored credentials (the token response, granted scopes, when it was received, the
//! issuer), when the token was obtained and when it expires, and the server URL it was
//! issued for. rmcp reads and writes that record through its `CredentialStore` trait,
//! implemented here over the secret store, so tokens are never kept only in memory.
//! (rmcp's PKCE state store stays in memory on purpose: the verifier lives only as long
//! as the one flow, in one process, and is never written to disk.)
//!
//! Nothing here logs a token, a code, a verifier or an authorization URL; tracing gets
//! the step and the service only.
//!
//! Layer 2 (reach). May import: `secrets`.

mod assertion;
mod callback;
mod exchange;
mod flow;
mod form;
mod legacy;
mod machine;
mod pending;
mod shared_flow;
mod store;

use rmcp::transport::auth::AuthError;

use crate::secrets::SecretError;

pub use assertion::identity_assertion_token;
pub use callback::server_refusal;
pub use exchange::exchanged_token;
pub use flow::{access_token, authorize, authorize_with_challenge, refresh_access_token};
pub use machine::{client_credentials_token, sign_assertion};
pub use pending::{Authorizations, FLOW_TTL, Redirect, Started};
pub use store::{is_authorized, logout};

/// A token expiring within this many seconds is refreshed before use.
pub const REFRESH_MARGIN_SECS: u64 = 60;

/// The path of the loopback redirect URI (`http://127.0.0.1:PORT/callback`).
pub const CALLBACK_PATH: &str = "/callback";

/// Longest error message kept from the server or rmcp, in characters.
const MAX_MESSAGE_CHARS: usize = 500;

/// An OAuth failure. No variant's message carries a token, an authorization code, a PKCE
/// verifier or an authorization URL.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthError {
    /// No usable stored authorization (none stored, expired without a refresh token, or
    /// the refresh was refused): the user must run `airlock servers auth NAME`.
    #[error(
        "service \"{service}\" needs authorization: run `airlock servers auth {service}` ({detail})"
    )]
    NotAuthorized {
        /// The service's name.
        service: String,
        /// Why the stored authorization cannot be used.
        detail: String,
    },
    /// A step of the flow failed (discovery, registration, the browser callback, the
    /// code exchange, the refresh…).
    #[error("OAuth for service \"{service}\" failed at {step}: {message}")]
    Flow {
        /// The service's name.
        service: String,
        /// The step that failed.
        step: &'static str,
        /// What failed (scrubbed of codes and state; never a token).
        message: String,
    },
    /// The authorization server refused a client-credentials grant. Names the config
    /// field holding the credential, never its value.
    #[error(
        "service \"{service}\": the authorization server refused the client credentials of client \"{client_id}\" (check \"auth.{field}\" in its config): {detail}"
    )]
    CredentialsRefused {
        /// The service's name.
        service: String,
        /// The client id presented.
        client_id: String,
        /// The config field holding the credential (`client_secret` or `private_key`).
        field: &'static str,
        /// What the server said.
        detail: String,
    },
    /// The secret store failed.
    #[error("OAuth token store: {0}")]
    Store(#[from] SecretError),
}

/// Opens the authorization URL for the user. The CLI passes a function that runs
/// `$AIRLOCK_BROWSER` (a command given the URL as its one argument) if set, else
/// `xdg-open`/`open`, else prints the URL to stderr (the one place the URL may be shown,
/// to the user's terminal, never through tracing).
pub type OpenUrl<'a> = &'a (dyn Fn(&str) -> std::io::Result<()> + Send + Sync);

/// What went wrong in one step of a flow (reading the callback, signing an assertion,
/// the token store's thread), in words that carry no token, code or state. The flow
/// names the service and the step around it ([`OAuthError::Flow`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StepFailure(pub String);

impl From<String> for StepFailure {
    fn from(message: String) -> Self {
        StepFailure(message)
    }
}

impl From<&str> for StepFailure {
    fn from(message: &str) -> Self {
        StepFailure(message.to_string())
    }
}

/// The name `service`'s tokens are kept under for `agent`: the service's own name, or,
/// for a service each agent authorizes itself (`per_agent = true`),
/// `NAME.agent-<16 hex digits of the agent name's SHA-256>`, which is safe in a file
/// name and a store key whatever the agent's name holds.
pub fn token_holder(service: &str, auth: &crate::config::Auth, agent: &str) -> String {
    match auth {
        crate::config::Auth::OAuth(client) if client.per_agent => {
            use sha2::Digest;
            let digest = sha2::Sha256::digest(agent.as_bytes());
            format!("{service}.agent-{}", hex::encode(&digest[..8]))
        }
        _ => service.to_string(),
    }
}

/// The HTTP header carrying `token`: `("Authorization", "Bearer TOKEN")`.
pub fn authorization_header(token: &str) -> (String, String) {
    ("Authorization".to_string(), format!("Bearer {token}"))
}

fn not_authorized(service: &str, detail: &str) -> OAuthError {
    OAuthError::NotAuthorized {
        service: service.to_string(),
        detail: detail.to_string(),
    }
}

fn flow(service: &str, step: &'static str, message: impl std::fmt::Display) -> OAuthError {
    OAuthError::Flow {
        service: service.to_string(),
        step,
        message: clip(&message.to_string(), MAX_MESSAGE_CHARS),
    }
}

fn auth_flow(service: &str, step: &'static str, error: &AuthError) -> OAuthError {
    flow(service, step, describe(error))
}

/// An error and its sources, `: `-joined (rmcp's discovery errors keep the cause in the
/// source chain).
fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

/// `text` without the authorization code and state, should a server echo them.
fn scrub(text: &str, code: Option<&str>, state: &str) -> String {
    let mut known = crate::secrets::KnownSecrets::new().with("state", state);
    if let Some(code) = code {
        known = known.with("authorization code", code);
    }
    known.scrub_owned(text)
}

/// At most `max` characters of `text`, with `…` when cut.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests;
