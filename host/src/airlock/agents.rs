//! [`Agents`]: what Airlock keeps per agent, whichever services it uses: its own MCP
//! client (through which servers ask it questions and send it logs), the roots its
//! servers are offered, and the lowest server log level it wants.
//!
//! A client is kept wrapped: a URL-mode elicitation, which sends the user to a page the
//! server chose, first passes the asking service's policy through the
//! [`QuestionGate`] the call path installs (`call/questions.rs`).

#![allow(deprecated)] // sampling and elicitation: still in every supported revision

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock, RwLock, Weak};

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    LoggingMessageNotificationParam,
};
use serde_json::{Value, json};

use crate::session::{AgentCapabilities, AgentClient, AgentFuture, AgentLink};
use crate::telemetry::CallTrace;

/// The tool name policies see a URL-mode elicitation as (`deny = ["elicitation/url"]`
/// refuses them all; `deny_arguments` can match the URL).
pub const URL_ELICITATION: &str = "elicitation/url";

/// Checks a URL-mode elicitation against the asking service's policy before the agent's
/// client sees it. Answers the URL to send the user to (rewritten, or `None` for the
/// server's own), or the refusal the server is told.
pub trait QuestionGate: Send + Sync {
    /// Checks `arguments` (`url`, `message`, `tool`) asked by `service` of `agent`, the
    /// decision recorded as a stage of `trace` (the asking call's).
    fn check_url<'a>(
        &'a self,
        agent: &'a str,
        service: &'a str,
        arguments: Value,
        trace: &'a CallTrace,
    ) -> Pin<Box<dyn Future<Output = Result<Option<String>, McpError>> + Send + 'a>>;
}

/// Per-agent clients, roots, log levels and presented access tokens.
pub struct Agents {
    links: RwLock<HashMap<String, Arc<AgentLink>>>,
    roots: RwLock<HashMap<String, Vec<String>>>,
    default_roots: Vec<String>,
    log_levels: RwLock<HashMap<String, String>>,
    /// The access token each agent last presented and when it expires (seconds since
    /// the epoch); memory only, never logged.
    access_tokens: RwLock<HashMap<String, (String, u64)>>,
    gate: OnceLock<Weak<dyn QuestionGate>>,
}

impl Agents {
    /// No agent known yet; an agent that sets no roots gets `default_roots`.
    pub(crate) fn new(default_roots: Vec<String>) -> Agents {
        Agents {
            links: Default::default(),
            roots: Default::default(),
            default_roots,
            log_levels: Default::default(),
            access_tokens: Default::default(),
            gate: OnceLock::new(),
        }
    }

    /// Installs the gate URL-mode elicitations pass (once, at start).
    pub(crate) fn set_gate(&self, gate: Weak<dyn QuestionGate>) {
        let _ = self.gate.set(gate);
    }

    /// Where `agent`'s sessions find its client (made on first use).
    pub fn link(&self, agent: &str) -> Arc<AgentLink> {
        // Read first: every 2026-07-28 request looks its agent's link up.
        let known = self
            .links
            .read()
            .expect("agent links poisoned")
            .get(agent)
            .cloned();
        known.unwrap_or_else(|| {
            self.links
                .write()
                .expect("agent links poisoned")
                .entry(agent.to_string())
                .or_default()
                .clone()
        })
    }

    /// `agent`'s client now, if it has one.
    pub fn client(&self, agent: &str) -> Option<Arc<dyn AgentClient>> {
        self.links
            .read()
            .expect("agent links poisoned")
            .get(agent)
            .and_then(|link| link.get())
    }

    /// Makes `client` `agent`'s client (its URL questions policed), or forgets it.
    pub(crate) fn set_client(&self, agent: &str, client: Option<Arc<dyn AgentClient>>) {
        let client = client.map(|c| self.policed(c, agent, None, CallTrace::default()));
        self.link(agent).set(client);
    }

    /// `client` with the URL-mode elicitations it is asked checked by the asking
    /// service's policy first; `tool` is the server's name of the tool whose call asks,
    /// when known, and `trace` that call's trace (the decision is a stage of it).
    pub fn policed(
        &self,
        client: Arc<dyn AgentClient>,
        agent: &str,
        tool: Option<&str>,
        trace: CallTrace,
    ) -> Arc<dyn AgentClient> {
        Arc::new(PolicedAsker {
            client,
            gate: self.gate.get().cloned(),
            agent: agent.to_string(),
            tool: tool.map(str::to_string),
            trace,
        })
    }

    /// The roots offered to `agent`'s servers: its own, else the defaults.
    pub fn roots(&self, agent: &str) -> Vec<String> {
        self.roots
            .read()
            .expect("roots poisoned")
            .get(agent)
            .cloned()
            .unwrap_or_else(|| self.default_roots.clone())
    }

    /// `agent`'s roots as `file://` URIs (what policies see).
    pub fn root_uris(&self, agent: &str) -> Vec<String> {
        self.roots(agent)
            .into_iter()
            .map(|path| format!("file://{path}"))
            .collect()
    }

    /// Replaces `agent`'s roots.
    pub(crate) fn set_roots(&self, agent: &str, roots: Vec<String>) {
        self.roots
            .write()
            .expect("roots poisoned")
            .insert(agent.to_string(), roots);
    }

    /// The lowest server log level `agent` wants, if it said.
    pub fn log_level(&self, agent: &str) -> Option<String> {
        self.log_levels
            .read()
            .expect("log levels poisoned")
            .get(agent)
            .cloned()
    }

    /// Records the lowest server log level `agent` wants.
    pub(crate) fn set_log_level(&self, agent: &str, level: &str) {
        self.log_levels
            .write()
            .expect("log levels poisoned")
            .insert(agent.to_string(), level.to_string());
    }

    /// Records the access token `agent` presented (verified by the caller), valid until
    /// `until` (seconds since the epoch), for the services that exchange it for their
    /// own (`auth = { type = "token_exchange" }`). Kept in memory only, and no longer
    /// than it is valid; a later token replaces it. `airlock serve --http` records every
    /// token `[serve.auth]` verified; an embedder that verifies its users' tokens itself
    /// may too.
    pub fn set_access_token(&self, agent: &str, token: &str, until: u64) {
        let same = self
            .access_tokens
            .read()
            .expect("access tokens poisoned")
            .get(agent)
            .is_some_and(|(held, _)| held == token);
        if !same {
            let now = unix_now();
            let mut tokens = self.access_tokens.write().expect("access tokens poisoned");
            tokens.retain(|_, (_, until)| *until > now);
            tokens.insert(agent.to_string(), (token.to_string(), until));
        }
    }

    /// Forgets the access token `agent` presented (it now acts with another kind of
    /// credential, one of Airlock's own tokens, say).
    pub fn forget_access_token(&self, agent: &str) {
        let held = self
            .access_tokens
            .read()
            .expect("access tokens poisoned")
            .contains_key(agent);
        if held {
            self.access_tokens
                .write()
                .expect("access tokens poisoned")
                .remove(agent);
        }
    }

    /// The live access token `agent` last presented, if any.
    pub(crate) fn access_token(&self, agent: &str) -> Option<String> {
        self.access_tokens
            .read()
            .expect("access tokens poisoned")
            .get(agent)
            .filter(|(_, until)| *until > unix_now())
            .map(|(token, _)| token.clone())
    }
}

/// An agent's client (or a call's asker) whose URL-mode elicitations pass the gate.
struct PolicedAsker {
    client: Arc<dyn AgentClient>,
    gate: Option<Weak<dyn QuestionGate>>,
    agent: String,
    /// The server's name of the tool whose call asks, when known.
    tool: Option<String>,
    /// The trace of the call that asks (empty when no call is known).
    trace: CallTrace,
}

impl AgentClient for PolicedAsker {
    fn capabilities(&self) -> AgentCapabilities {
        self.client.capabilities()
    }

    fn create_message(
        &self,
        service: String,
        params: CreateMessageRequestParams,
    ) -> AgentFuture<CreateMessageResult> {
        self.client.create_message(service, params)
    }

    fn elicit(&self, service: String, params: ElicitRequestParams) -> AgentFuture<ElicitResult> {
        let ElicitRequestParams::UrlElicitationParams { url, message, .. } = &params else {
            return self.client.elicit(service, params);
        };
        let arguments = json!({
            "url": url,
            "message": message,
            "tool": self.tool.clone().unwrap_or_default(),
        });
        let (client, gate, agent) = (self.client.clone(), self.gate.clone(), self.agent.clone());
        let trace = self.trace.clone();
        Box::pin(async move {
            let checked = match gate.as_ref().map(Weak::upgrade) {
                // No policy stage installed (nothing to check against).
                None => None,
                Some(None) => {
                    return Err(McpError::internal_error("Airlock is shutting down", None));
                }
                Some(Some(gate)) => gate.check_url(&agent, &service, arguments, &trace).await?,
            };
            let params = match (params, checked) {
                (
                    ElicitRequestParams::UrlElicitationParams {
                        meta,
                        message,
                        elicitation_id,
                        ..
                    },
                    Some(url),
                ) => ElicitRequestParams::UrlElicitationParams {
                    meta,
                    message,
                    url,
                    elicitation_id,
                },
                (params, _) => params,
            };
            client.elicit(service, params).await
        })
    }

    fn log(&self, service: &str, message: LoggingMessageNotificationParam) {
        self.client.log(service, message)
    }
}

/// Now, in seconds since the epoch.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
