//! [`Resources`]: what services offer besides tools — resources, resource templates,
//! prompts and completions, per service or aggregated across services. Every entry point
//! checks access (grants and the embedder's callback) as calls do; an aggregated listing
//! skips the services the agent may not use. Everything that comes back from a server
//! passes the egress rule (`services/egress.rs`). Each request runs under the service's
//! limits and is retried once when the connection closed under it
//! (`services/upstream.rs`).

use serde_json::Value;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::access::{Access, AccessRequest};
use super::services::Services;
use crate::error::{CallError, ErrorCode};
use crate::session::LiveSession;

/// What [`Resources::aggregate`] lists.
#[derive(Clone, Copy)]
enum Listing {
    Resources,
    ResourceTemplates,
    Prompts,
}

impl Listing {
    /// The server capability the listing needs.
    fn capability(self) -> &'static str {
        match self {
            Listing::Resources | Listing::ResourceTemplates => "resources",
            Listing::Prompts => "prompts",
        }
    }

    fn method(self) -> &'static str {
        match self {
            Listing::Resources => "resources/list",
            Listing::ResourceTemplates => "resources/templates/list",
            Listing::Prompts => "prompts/list",
        }
    }
}

/// Resources, prompts and completions of the services.
pub struct Resources {
    services: Arc<Services>,
    access: Arc<Access>,
}

impl Resources {
    pub(crate) fn new(services: Arc<Services>, access: Arc<Access>) -> Resources {
        Resources { services, access }
    }

    /// The services a listing covers: the one named, or every available one.
    fn targets(&self, service: Option<&str>) -> Result<Vec<String>, CallError> {
        match service {
            Some(s) if self.services.has(s) => Ok(vec![s.to_string()]),
            Some(s) => Err(super::services::no_service(s)),
            None => Ok(self
                .services
                .names()
                .into_iter()
                .filter(|name| self.services.is_usable(name))
                .collect()),
        }
    }

    /// Resources of one service, or of every available service when `service` is
    /// `None` (each entry gains a `service` field; unavailable services are skipped).
    ///
    /// ```no_run
    /// # async fn run(airlock: airlock_host::Airlock) -> Result<(), airlock_host::CallError> {
    /// for r in airlock.resources().list_resources("default", None).await? {
    ///     let contents = airlock.resources().read_resource("default", r["service"].as_str().unwrap(), r["uri"].as_str().unwrap()).await?;
    ///     println!("{contents}");
    /// }
    /// let prompts = airlock.resources().list_prompts("default", Some("linear")).await?;
    /// let messages = airlock.resources().get_prompt("default", "linear", "triage-issue", serde_json::json!({"issueId": "ENG-42"})).await?;
    /// # Ok(()) }
    /// ```
    pub async fn list_resources(
        &self,
        agent: &str,
        service: Option<&str>,
    ) -> Result<Vec<Value>, CallError> {
        self.aggregate(agent, service, Listing::Resources).await
    }

    /// Resource templates of one service, or of every available service.
    pub async fn list_resource_templates(
        &self,
        agent: &str,
        service: Option<&str>,
    ) -> Result<Vec<Value>, CallError> {
        self.aggregate(agent, service, Listing::ResourceTemplates)
            .await
    }

    /// Prompts of one service, or of every available service when `service` is `None`.
    pub async fn list_prompts(
        &self,
        agent: &str,
        service: Option<&str>,
    ) -> Result<Vec<Value>, CallError> {
        self.aggregate(agent, service, Listing::Prompts).await
    }

    /// Lists resources, templates or prompts of one service, or of every available
    /// service (each entry gains a `service` field; with no service named, failing or
    /// forbidden services are skipped).
    async fn aggregate(
        &self,
        agent: &str,
        service: Option<&str>,
        kind: Listing,
    ) -> Result<Vec<Value>, CallError> {
        let mut all = Vec::new();
        for name in self.targets(service)? {
            let allowed = self
                .access
                .authorize(&AccessRequest::Service {
                    agent,
                    service: &name,
                    operation: kind.method(),
                })
                .await;
            let listed = match allowed {
                Err(e) => Err(e),
                Ok(()) => {
                    self.services
                        .idempotent(agent, &name, |live| async move {
                            // A server that does not offer the capability lists nothing.
                            if !live.session.server_supports(kind.capability()) {
                                return Ok(Vec::new());
                            }
                            match kind {
                                Listing::Resources => live.session.list_resources().await,
                                Listing::ResourceTemplates => {
                                    live.session.list_resource_templates().await
                                }
                                Listing::Prompts => live.session.list_prompts().await,
                            }
                        })
                        .await
                }
            };
            match listed {
                Ok(items) => {
                    let items = self.services.redact_value(&name, Value::Array(items)).await;
                    all.extend(items.as_array().into_iter().flatten().map(|item| {
                        let mut item = item.clone();
                        item["service"] = Value::String(name.clone());
                        item
                    }))
                }
                Err(e) if service.is_some() => return Err(e),
                Err(e) if e.code == ErrorCode::ServiceAccessDenied => {}
                Err(e) => {
                    tracing::warn!(service = %name, "{} failed: {}", kind.method(), e.message)
                }
            }
        }
        Ok(all)
    }

    /// Reads a resource of `service` (the `ReadResourceResult` JSON, through the
    /// service's redaction).
    pub async fn read_resource(
        &self,
        agent: &str,
        service: &str,
        uri: &str,
    ) -> Result<Value, CallError> {
        let value = self
            .request(
                agent,
                service,
                "resources/read",
                |live, timeout| async move { live.session.read_resource(uri, timeout).await },
            )
            .await?;
        Ok(self.services.redact_value(service, value).await)
    }

    /// Subscribes `agent` to updates of `uri` on `service` (`subscribe = false`
    /// unsubscribes). Updates arrive as `resource_updated` events.
    pub async fn subscribe_resource(
        &self,
        agent: &str,
        service: &str,
        uri: &str,
        subscribe: bool,
    ) -> Result<(), CallError> {
        self.request(
            agent,
            service,
            "resources/subscribe",
            |live, timeout| async move { live.session.subscribe(uri, subscribe, timeout).await },
        )
        .await
    }

    /// Gets a prompt of `service` with `arguments` (a JSON object of strings).
    pub async fn get_prompt(
        &self,
        agent: &str,
        service: &str,
        name: &str,
        arguments: Value,
    ) -> Result<Value, CallError> {
        let Value::Object(arguments) = arguments else {
            return Err(CallError::new(
                ErrorCode::InvalidArguments,
                "prompt arguments must be a JSON object",
            ));
        };
        let value = self
            .request(agent, service, "prompts/get", |live, timeout| {
                let arguments = arguments.clone();
                async move { live.session.get_prompt(name, arguments, timeout).await }
            })
            .await?;
        Ok(self.services.redact_value(service, value).await)
    }

    /// `completion/complete` on `service` (`params` as MCP JSON: `ref`, `argument`,
    /// `context`); the result as MCP JSON.
    pub async fn complete(
        &self,
        agent: &str,
        service: &str,
        params: Value,
    ) -> Result<Value, CallError> {
        let value = self
            .request(agent, service, "completion/complete", |live, timeout| {
                let params = params.clone();
                async move { live.session.complete(params, timeout).await }
            })
            .await?;
        Ok(self.services.redact_value(service, value).await)
    }

    /// One request of `agent` that touches `service` (`operation`, the MCP method):
    /// access checked, then sent under the service's limits with its timeout (retried
    /// once on a fresh session), a failure through the service's redaction.
    async fn request<T, F, Fut>(
        &self,
        agent: &str,
        service: &str,
        operation: &str,
        send: F,
    ) -> Result<T, CallError>
    where
        F: Fn(Arc<LiveSession>, Duration) -> Fut,
        Fut: Future<Output = Result<T, CallError>>,
    {
        self.access
            .authorize(&AccessRequest::Service {
                agent,
                service,
                operation,
            })
            .await?;
        let timeout = self.services.timeout_of(service);
        match self
            .services
            .idempotent(agent, service, |live| send(live, timeout))
            .await
        {
            Ok(value) => Ok(value),
            Err(e) => Err(self.services.redact_error(service, e).await),
        }
    }
}
