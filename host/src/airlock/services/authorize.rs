//! A call by an agent that has not authorized a service it must authorize itself
//! (`auth = { type = "oauth", per_agent = true }`). When the host can take a browser
//! back ([`Authorizations::redirect_to`]: the gateway's `/oauth/callback`, or a loopback
//! listener for `airlock serve` over stdio), the agent's authorization is started there
//! and then:
//!
//! - an agent whose client answers URL questions (`elicitation.url`) is asked to open
//!   the sign-in page, and its call goes on once the browser has come back and the
//!   tokens are stored (or fails, saying why: refused, declined, expired);
//! - another agent's call fails with an error naming the URL to open, and its next call
//!   after signing in goes through.
//!
//! The tokens are stored under the agent's own name for the service, never another's.

// URL-mode elicitation is deprecated in the 2026 drafts (SEP-2577) with the rest of
// elicitation; it is how an MCP client shows its user a sign-in page today.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::model::{ElicitRequestParams, ElicitationAction};
use tokio_util::sync::CancellationToken;

use super::Services;
use crate::config::{Auth, Transport};
use crate::error::{CallError, ErrorCode};
use crate::oauth::{Authorizations, FLOW_TTL, Started};
use crate::session::{AgentClient, LiveSession};

impl Services {
    /// The authorizations calls start for agents that must authorize a service
    /// themselves; the gateway sets where browsers come back to, and finishes them.
    pub fn authorizations(&self) -> &Arc<Authorizations> {
        &self.authorizations
    }

    /// Where `agent` signs in to `service_name`: the authorization started (or joined)
    /// for it, when the service is one each agent authorizes itself, `agent` has no
    /// stored authorization, and the host can take a browser back. `None` otherwise (a
    /// failure to start is logged).
    pub async fn sign_in(&self, agent: &str, service_name: &str) -> Option<Started> {
        self.authorizations.redirect()?;
        let (holder, url, client) = self.agents_own_oauth(agent, service_name)?;
        let (store, probe) = (self.secret_store.clone(), holder.clone());
        let authorized =
            tokio::task::spawn_blocking(move || crate::oauth::is_authorized(&store, &probe))
                .await
                .ok()?
                .unwrap_or(false);
        if authorized {
            return None;
        }
        match self.authorizations.begin(&holder, &url, &client).await {
            Ok(started) => started,
            Err(e) => {
                tracing::warn!(service = %service_name, agent, "cannot start the agent's sign-in: {e}");
                None
            }
        }
    }

    /// For a service each agent authorizes itself (`auth = { type = "oauth", per_agent =
    /// true }`): where `agent`'s tokens are kept, the server's URL and the OAuth client
    /// settings. `None` for any other service.
    fn agents_own_oauth(
        &self,
        agent: &str,
        service_name: &str,
    ) -> Option<(String, String, crate::config::OAuthClient)> {
        let service = self.get(service_name)?;
        let Transport::Http { url, auth, .. } = &service.config.transport else {
            return None;
        };
        match auth {
            Auth::OAuth(client) if client.per_agent => Some((
                crate::oauth::token_holder(service_name, auth, agent),
                url.clone(),
                client.clone(),
            )),
            _ => None,
        }
    }

    /// `agent`'s live session with `service`, which refused it (`refused`: the agent has
    /// not authorized a service it must authorize itself), opened once the agent has
    /// signed in through a call whose client is `asker` (the call's own, else the
    /// agent's); see the module docs. Any other service's refusal is returned as it is.
    pub(crate) async fn sign_in_then_open(
        &self,
        agent: &str,
        service_name: &str,
        refused: CallError,
        asker: Option<&Arc<dyn AgentClient>>,
        cancel: Option<&CancellationToken>,
    ) -> Result<Arc<LiveSession>, CallError> {
        let Some((holder, url, client)) = self.agents_own_oauth(agent, service_name) else {
            return Err(refused);
        };
        let mut started = match self.authorizations.begin(&holder, &url, &client).await {
            Ok(Some(started)) => started,
            Ok(None) => return Err(refused),
            Err(e) => {
                return Err(CallError::new(
                    ErrorCode::ServiceUnavailable,
                    format!(
                        "{}; starting agent \"{agent}\"'s authorization failed: {e}",
                        refused.message
                    ),
                ));
            }
        };
        let asker = asker
            .cloned()
            .or_else(|| self.agents.client(agent))
            .filter(|client| client.capabilities().elicitation_url);
        let Some(asker) = asker else {
            return Err(CallError::new(
                ErrorCode::ServiceUnavailable,
                format!(
                    "{}; or open {} in a browser and sign in, then call again (the link is for agent \"{agent}\" only, works once, and expires in {} minutes)",
                    refused.message,
                    started.url,
                    FLOW_TTL.as_secs() / 60
                ),
            ));
        };
        let question = ElicitRequestParams::UrlElicitationParams {
            meta: None,
            message: format!(
                "Service \"{service_name}\" acts with your own account: sign in to it (as agent \"{agent}\") to go on."
            ),
            url: started.url.clone(),
            elicitation_id: started.id.clone(),
        };
        let stopped = || async {
            match cancel {
                Some(cancel) => cancel.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let cancelled = || CallError::new(ErrorCode::Cancelled, "the call was cancelled");
        let answer = tokio::select! {
            answer = asker.elicit(service_name.to_string(), question) => answer,
            _ = stopped() => return Err(cancelled()),
        };
        let declined = |why: &str| {
            CallError::new(
                ErrorCode::ServiceAccessDenied,
                format!(
                    "service \"{service_name}\" is called with each agent's own authorization, and agent \"{agent}\" {why}"
                ),
            )
        };
        match answer {
            Ok(answer) if answer.action == ElicitationAction::Accept => {}
            Ok(_) => return Err(declined("declined to sign in to it")),
            Err(e) => {
                return Err(declined(&format!(
                    "was not asked to sign in to it (its client answered: {})",
                    e.message
                )));
            }
        }
        tracing::info!(service = %service_name, agent = %agent, "waiting for the agent to sign in");
        let finished = tokio::select! {
            finished = started.finished() => finished,
            _ = stopped() => return Err(cancelled()),
        };
        if let Err(why) = finished {
            return Err(CallError::new(
                ErrorCode::ServiceAccessDenied,
                format!(
                    "agent \"{agent}\"'s authorization of service \"{service_name}\" did not complete: {why}"
                ),
            ));
        }
        self.open(agent, service_name).await
    }
}
