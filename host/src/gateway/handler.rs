//! One downstream session's MCP server handler: the handshake (which
//! agent this is, its client attached for sampling, elicitation and logs), listings,
//! calls, resources, prompts, completion, log levels, roots, and the watcher that turns
//! Airlock's events into `list_changed` and `resources/updated` notifications.

#![allow(deprecated)] // roots, logging and subscriptions: still in every supported revision

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
    CompleteResult, GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult,
    Implementation, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    Prompt, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, Resource,
    ResourceTemplate, ServerCapabilities, ServerConfig, SetLevelRequestParams,
    SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::ToolSurface;
use super::downstream::DownstreamClient;
use super::eras::{self, listing};
use super::notices::{self, Audience};
use super::own_tools::{self, Served};
use super::results::rpc_error;
use super::session_state::SessionState;
use super::shared::Gateway;
use crate::Airlock;

/// The agent an HTTP request was authenticated as (put in the request's extensions by
/// the HTTP layer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AuthenticatedAgent(pub String);

/// The MCP server handler of one downstream session.
#[derive(Clone)]
pub struct DownstreamSession {
    gateway: Arc<Gateway>,
    state: Arc<SessionState>,
}

fn internal(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(e.to_string(), None)
}

/// Parses an rmcp result type from JSON built by the gateway.
pub(crate) fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, McpError> {
    serde_json::from_value(value).map_err(internal)
}

impl Gateway {
    /// The handler of the one stdio session (its agent is the configured one).
    pub(crate) fn stdio_session(self: &Arc<Self>) -> DownstreamSession {
        DownstreamSession::new(self.clone(), Some(self.options.agent.clone()))
    }

    /// A handler for an HTTP session (its agent comes from the request).
    pub(crate) fn http_session(self: &Arc<Self>) -> DownstreamSession {
        DownstreamSession::new(self.clone(), None)
    }
}

impl DownstreamSession {
    pub(super) fn new(gateway: Arc<Gateway>, agent: Option<String>) -> Self {
        let state = SessionState::default();
        if let Some(agent) = agent {
            let _ = state.agent.set(agent);
        }
        let _ = state.gateway.set(Arc::downgrade(&gateway));
        DownstreamSession {
            gateway,
            state: Arc::new(state),
        }
    }

    fn airlock(&self) -> &Airlock {
        &self.gateway.airlock
    }

    /// This session's agent: fixed (stdio), learned at `initialize`, or — for a request
    /// without a session (2026-07-28) — the one its HTTP request was authenticated as.
    fn agent(&self, ctx: Option<&RequestContext<RoleServer>>) -> String {
        if let Some(agent) = self.state.agent.get() {
            return agent.clone();
        }
        ctx.and_then(request_agent)
            .unwrap_or_else(|| self.gateway.options.agent.clone())
    }

    /// The agent a request comes from. A 2026-07-28 request's agent is offered a client
    /// whose calls bring their own askers before any of its upstream sessions opens, so
    /// the sessions declare from the start what its calls can answer (a first call would
    /// otherwise reopen every session opened before it, and end what they subscribed).
    async fn caller(&self, ctx: &RequestContext<RoleServer>) -> String {
        let agent = self.agent(Some(ctx));
        if eras::is_stateless(ctx) {
            let askers = Arc::new(crate::session::PerCallAskers);
            self.airlock().services().offer_client(&agent, askers).await;
        }
        agent
    }

    /// Asks the client for its roots and makes them the agent's.
    async fn refresh_roots(&self, peer: &rmcp::Peer<RoleServer>, agent: &str) {
        let supports_roots = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        if !supports_roots {
            return;
        }
        match peer.list_roots().await {
            Ok(listed) => {
                let roots = listed.roots.into_iter().map(|r| r.uri).collect();
                self.airlock().services().set_roots(agent, roots).await;
            }
            Err(e) => tracing::warn!(agent, "cannot read the client's roots: {e}"),
        }
    }

    fn instructions(&self, agent: &str) -> String {
        let mut text = self.airlock().catalog().instructions_for(agent);
        text.push_str("\n\n");
        text.push_str(own_tools::INSTRUCTIONS);
        text
    }
}

/// The agent an HTTP request was authenticated as, if it came over HTTP.
fn request_agent(ctx: &RequestContext<RoleServer>) -> Option<String> {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<AuthenticatedAgent>())
        .map(|a| a.0.clone())
}

impl ServerHandler for DownstreamSession {
    fn get_info(&self) -> ServerConfig {
        let capabilities: ServerCapabilities = serde_json::from_value(json!({
            "tools": {"listChanged": true},
            "resources": {"listChanged": true, "subscribe": true},
            "prompts": {"listChanged": true},
            "logging": {},
            "completions": {},
            "extensions": {"io.modelcontextprotocol/tasks": {}},
        }))
        .expect("a valid capabilities object");
        let agent = self.agent(None);
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("airlock", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions(&agent))
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        eras::supported_versions()
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        ctx.peer.set_peer_info(request.clone());
        let agent = match self.state.agent.get() {
            Some(agent) => agent.clone(),
            None => {
                let agent =
                    request_agent(&ctx).unwrap_or_else(|| self.gateway.options.agent.clone());
                let _ = self.state.agent.set(agent.clone());
                agent
            }
        };
        if !self
            .state
            .opened
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            self.gateway.session_opened(&agent);
        }
        let client = DownstreamClient::new(ctx.peer.clone(), &request, self.state.logs.clone());
        self.airlock()
            .services()
            .attach_client(&agent, Arc::new(client))
            .await;
        self.state.watch(
            self.airlock().changes(),
            ctx.peer.clone(),
            agent.clone(),
            self.gateway.options.tools,
        );
        let mut result = self.negotiate_initialize(&request)?;
        result.instructions = Some(self.instructions(&agent));
        Ok(result)
    }

    async fn on_initialized(&self, ctx: NotificationContext<RoleServer>) {
        let agent = self.agent(None);
        let this = self.clone();
        // Asking the client for its roots is a request to it: not from inside the
        // notification handler, which the client may be waiting on.
        tokio::spawn(async move { this.refresh_roots(&ctx.peer, &agent).await });
    }

    async fn on_roots_list_changed(&self, ctx: NotificationContext<RoleServer>) {
        let agent = self.agent(None);
        let this = self.clone();
        tokio::spawn(async move { this.refresh_roots(&ctx.peer, &agent).await });
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let agent = self.caller(&ctx).await;
        // Airlock's own tools first, in their fixed order; then the catalog's, by name.
        let mut tools: Vec<Tool> =
            eras::typed_items(own_tools::definitions(self.gateway.options.tools))?;
        // Services acting as the caller are listed through the first agent that can open
        // them, whichever tool surface it is offered (the meta tools search the catalog).
        self.airlock().catalog().learn_caller_services(&agent).await;
        if self.gateway.options.tools == ToolSurface::All {
            let mut catalog = Vec::new();
            for tool in self.airlock().catalog().tools_for(&agent) {
                if own_tools::is_own(&tool.name) {
                    tracing::warn!(tool = %tool.name, "a service tool is shadowed by Airlock's own tool of the same name");
                    continue;
                }
                catalog.push(own_tools::catalog_tool_json(&tool));
            }
            tools.extend(eras::sorted_items::<Tool>(catalog, "name")?);
        }
        let per_agent = self.airlock().access().mode() == crate::AccessMode::Grants;
        Ok(listing!(
            ListToolsResult,
            tools,
            eras::cache_scope(per_agent)
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let agent = self.caller(&ctx).await;
        // A resource subscription just acknowledged is open upstream before this call
        // can change the resource.
        self.gateway.subscribing.settled().await;
        if eras::is_stateless(&ctx) {
            // A 2026-07-28 client is asked its server's questions through
            // `input_required`; its retry carries the answers and our requestState.
            let questions = &self.gateway.questions;
            if let Some(state) = request.request_state.as_deref() {
                let answers = request.input_responses.clone().unwrap_or_default();
                return questions.resume(&agent, state, answers, &ctx).await;
            }
            let arguments = Value::Object(request.arguments.unwrap_or_default());
            let name = request.name.to_string();
            let gateway = self.gateway.clone();
            return Ok(questions.call(gateway, agent, name, arguments, &ctx).await);
        }
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let served = Served {
            airlock: self.airlock(),
            options: &self.gateway.options,
            asker: None,
        };
        let result = own_tools::call(&served, &agent, &request.name, arguments, &ctx).await;
        Ok(result.into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let agent = self.caller(&ctx).await;
        let registry = self.airlock().registry();
        self.gateway
            .tasks
            .get(registry, &agent, &request.task_id)
            .await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let agent = self.caller(&ctx).await;
        let registry = self.airlock().registry();
        let (id, answers) = (request.task_id, request.input_responses);
        self.gateway
            .tasks
            .update(registry, &agent, &id, answers)
            .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let agent = self.caller(&ctx).await;
        let registry = self.airlock().registry();
        self.gateway
            .tasks
            .cancel(registry, &agent, &request.task_id)
            .await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Every category Airlock advertises; rmcp narrows it to what it advertises.
        // Resources it honours are subscribed upstream once `listen` runs, after the
        // acknowledgment: calls wait for that meanwhile (see `subscribing`).
        if requested
            .resource_subscriptions
            .as_ref()
            .is_some_and(|uris| !uris.is_empty())
        {
            self.gateway.subscribing.begin();
        }
        Some(requested.clone())
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), McpError> {
        let agent = self.caller(subscription.request_context()).await;
        let audience = Audience {
            agent: &agent,
            surface: self.gateway.options.tools,
            routes: &self.state.routes,
        };
        // Marked pending by `accepted_subscription_filter` on what was requested.
        let subscribing = subscription
            .requested()
            .resource_subscriptions
            .as_ref()
            .is_some_and(|uris| !uris.is_empty())
            .then_some(&self.gateway.subscribing);
        notices::listen(self.airlock(), audience, subscription, subscribing).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let agent = self.caller(&ctx).await;
        let exposed = self
            .state
            .routes
            .list_resources(self.airlock(), &agent)
            .await?;
        let resources: Vec<Resource> = eras::sorted_items(exposed, "uri")?;
        Ok(listing!(
            ListResourcesResult,
            resources,
            eras::cache_scope(true)
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let agent = self.caller(&ctx).await;
        let exposed = self
            .state
            .routes
            .list_templates(self.airlock(), &agent)
            .await?;
        let templates: Vec<ResourceTemplate> = eras::sorted_items(exposed, "uriTemplate")?;
        Ok(listing!(
            ListResourceTemplatesResult,
            templates,
            eras::cache_scope(true)
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let agent = self.caller(&ctx).await;
        let (service, uri) = self
            .state
            .routes
            .resource(self.airlock(), &agent, &request.uri)
            .await?;
        let mut value = self
            .airlock()
            .resources()
            .read_resource(&agent, &service, &uri)
            .await
            .map_err(rpc_error)?;
        if let Some(contents) = value.get_mut("contents").and_then(Value::as_array_mut) {
            for item in contents {
                if item.get("uri").and_then(Value::as_str) == Some(uri.as_str()) {
                    item["uri"] = json!(request.uri);
                }
            }
        }
        let mut result: rmcp::model::ReadResourceResult = from_json(value)?;
        eras::complete(&mut result.result_type);
        // Read through the agent's own upstream session: only its client may keep it.
        result.ttl_ms.get_or_insert(eras::LIST_TTL_MS);
        result.cache_scope = Some(eras::cache_scope(true));
        Ok(result.into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let agent = self.caller(&ctx).await;
        let (service, uri) = self
            .state
            .routes
            .resource(self.airlock(), &agent, &request.uri)
            .await?;
        self.airlock()
            .resources()
            .subscribe_resource(&agent, &service, &uri, true)
            .await
            .map_err(rpc_error)?;
        self.state
            .subscriptions
            .lock()
            .expect("subscriptions poisoned")
            .insert((service, uri));
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let agent = self.caller(&ctx).await;
        let (service, uri) = self
            .state
            .routes
            .resource(self.airlock(), &agent, &request.uri)
            .await?;
        self.state
            .subscriptions
            .lock()
            .expect("subscriptions poisoned")
            .remove(&(service.clone(), uri.clone()));
        self.airlock()
            .resources()
            .subscribe_resource(&agent, &service, &uri, false)
            .await
            .map_err(rpc_error)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let agent = self.caller(&ctx).await;
        let exposed = self
            .state
            .routes
            .list_prompts(self.airlock(), &agent)
            .await?;
        let prompts: Vec<Prompt> = eras::sorted_items(exposed, "name")?;
        Ok(listing!(
            ListPromptsResult,
            prompts,
            eras::cache_scope(true)
        ))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let agent = self.caller(&ctx).await;
        let (service, name) = self
            .state
            .routes
            .prompt(self.airlock(), &agent, &request.name)
            .await?;
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let value = self
            .airlock()
            .resources()
            .get_prompt(&agent, &service, &name, arguments)
            .await
            .map_err(rpc_error)?;
        let mut result: rmcp::model::GetPromptResult = from_json(value)?;
        eras::complete(&mut result.result_type);
        Ok(result.into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let agent = self.caller(&ctx).await;
        let mut params = serde_json::to_value(&request).map_err(internal)?;
        let reference = params.get("ref").cloned().unwrap_or_default();
        let service = match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let exposed = reference["name"].as_str().unwrap_or_default();
                let (service, name) = self
                    .state
                    .routes
                    .prompt(self.airlock(), &agent, exposed)
                    .await?;
                params["ref"]["name"] = json!(name);
                service
            }
            Some("ref/resource") => {
                let exposed = reference["uri"].as_str().unwrap_or_default();
                let (service, uri) = self
                    .state
                    .routes
                    .resource(self.airlock(), &agent, exposed)
                    .await?;
                params["ref"]["uri"] = json!(uri);
                service
            }
            _ => {
                return Err(McpError::invalid_params(
                    "completion/complete needs a ref/prompt or ref/resource reference",
                    None,
                ));
            }
        };
        let value = self
            .airlock()
            .resources()
            .complete(&agent, &service, params)
            .await
            .map_err(rpc_error)?;
        let mut result: CompleteResult = from_json(value)?;
        eras::complete(&mut result.result_type);
        Ok(result)
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let agent = self.caller(&ctx).await;
        self.state.logs.set(request.level);
        let level = serde_json::to_value(request.level).map_err(internal)?;
        let level = level.as_str().unwrap_or("info").to_string();
        self.airlock()
            .services()
            .set_log_level(&agent, &level)
            .await;
        Ok(())
    }
}
