//! The policy stage on a server's questions. A URL-mode elicitation sends the user to a
//! web page the server chose, which is as much an action as a tool call; before it
//! reaches the agent's client (or a call's own asker) the service's policy chain sees
//! it as a call of the pseudo-tool [`URL_ELICITATION`], with the URL, the message and
//! the asking tool as arguments. The chain may allow it, deny it (the server is told
//! why), rewrite its `url`, or ask a person, exactly as for a tool call. Form
//! elicitations and sampling pass unchanged (their text is already scrubbed of the
//! service's secrets by the session).

#![allow(deprecated)] // sampling and elicitation: still in every supported revision

use std::sync::{Arc, Weak};

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    LoggingMessageNotificationParam,
};
use serde_json::{Value, json};

use super::Inner;
use crate::plugin::Call;
use crate::session::{AgentCapabilities, AgentClient, AgentFuture};

/// The tool name policies see a URL-mode elicitation as (`deny = ["elicitation/url"]`
/// refuses them all; `deny_arguments` can match the URL).
pub const URL_ELICITATION: &str = "elicitation/url";

/// An agent's client (or a call's asker) whose URL-mode elicitations pass the policy
/// stage first.
pub(crate) struct PolicedAsker {
    client: Arc<dyn AgentClient>,
    host: Weak<Inner>,
    agent: String,
    /// The server's name of the tool whose call asks, when known.
    tool: Option<String>,
}

impl PolicedAsker {
    /// `client`, with `agent`'s questions checked by the policy of the service asking.
    pub(crate) fn wrap(
        client: Arc<dyn AgentClient>,
        host: &Arc<Inner>,
        agent: &str,
        tool: Option<&str>,
    ) -> Arc<dyn AgentClient> {
        Arc::new(PolicedAsker {
            client,
            host: Arc::downgrade(host),
            agent: agent.to_string(),
            tool: tool.map(str::to_string),
        })
    }
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
        let (client, host, agent) = (self.client.clone(), self.host.clone(), self.agent.clone());
        Box::pin(async move {
            let Some(host) = host.upgrade() else {
                return Err(McpError::internal_error("Airlock is shutting down", None));
            };
            let checked = host.check_url_question(&agent, &service, arguments).await?;
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

impl Inner {
    /// Runs `service`'s policy chain on a URL-mode elicitation of `agent`'s. Returns the
    /// URL to send the user to (rewritten by a policy, or the server's), or the refusal
    /// the server is answered with.
    async fn check_url_question(
        &self,
        agent: &str,
        service: &str,
        arguments: Value,
    ) -> Result<Option<String>, McpError> {
        let Some(svc) = self.service(service) else {
            return Ok(None);
        };
        let Some(pipeline) = svc.pipeline.clone() else {
            return Ok(None);
        };
        if pipeline.policy().is_empty() {
            return Ok(None);
        }
        let roots = self
            .agent_roots(agent)
            .into_iter()
            .map(|path| format!("file://{path}"))
            .collect();
        let call = Call {
            agent: agent.to_string(),
            service: service.to_string(),
            tool: URL_ELICITATION.to_string(),
            raw_tool: URL_ELICITATION.to_string(),
            arguments: arguments.to_string(),
            annotations: None,
            roots,
        };
        match self
            .enforce_call_policy(&pipeline, &call, &svc.secrets())
            .await
        {
            Ok(allowed) => Ok(allowed
                .get("url")
                .and_then(Value::as_str)
                .map(str::to_string)),
            Err(e) => Err(McpError::invalid_request(
                format!(
                    "Airlock's policy refused to send the user to this URL: {}",
                    e.message
                ),
                None,
            )),
        }
    }
}
