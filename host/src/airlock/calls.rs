//! Tool calls through the data path, and resources and prompts (per service or
//! aggregated across services).

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Airlock, DEFAULT_AGENT};
use crate::error::{CallError, ErrorCode};
use crate::events::Event;
use crate::plugin::{RedactionMark, Secret, convert};
use crate::results::Retained;
use crate::session::{CallControl, ProgressUpdate};

/// How to run one call.
#[derive(Debug, Clone)]
pub struct CallOptions {
    /// The calling agent (each agent has its own session per service).
    pub agent: String,
    /// Overrides the service's `tool_timeout_secs`.
    pub timeout: Option<Duration>,
    /// Cancels the call: the server is sent `notifications/cancelled`.
    pub cancel: Option<CancellationToken>,
    /// Receives the server's progress notifications.
    pub progress: Option<mpsc::UnboundedSender<ProgressUpdate>>,
    /// The preview size for this agent's surface (for example
    /// [`crate::results::COMPACT_PREVIEW`] for models on the compact surface); the
    /// Airlock's default when `None`.
    pub preview: Option<usize>,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            agent: DEFAULT_AGENT.to_string(),
            timeout: None,
            cancel: None,
            progress: None,
            preview: None,
        }
    }
}

/// A completed call (including one the server marked `isError`).
#[derive(Debug, Clone, Serialize)]
pub struct CallOutput {
    /// The service that ran it.
    pub service: String,
    /// The qualified tool name.
    pub tool: String,
    /// The server's raw tool name.
    pub raw_tool: String,
    /// Whether the server marked the result as an error.
    pub is_error: bool,
    /// The retention record.
    pub retained: Retained,
    /// The converted, redacted content blocks (MCP JSON).
    pub content: Vec<Value>,
    /// The converted, redacted `structuredContent`, if any.
    pub structured_content: Option<Value>,
    /// The preview of the full text.
    pub preview: String,
    /// Where redactions happened.
    pub redactions: Vec<Redaction>,
    /// How long the call took.
    pub elapsed: Duration,
    /// Progress notifications seen.
    pub progress_seen: usize,
    /// Set when an earlier cancelled call on this session never answered.
    pub warning: Option<String>,
}

/// One redaction mark.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Redaction {
    /// `content[N]`, `structuredContent` or `_meta`.
    pub location: String,
    /// `secret:NAME` or `pattern:NAME`.
    pub rule: String,
    /// Occurrences replaced.
    pub count: u32,
}

impl From<RedactionMark> for Redaction {
    fn from(m: RedactionMark) -> Self {
        Redaction {
            location: m.location,
            rule: m.rule,
            count: m.count,
        }
    }
}

impl Airlock {
    /// Calls the tool with qualified name `tool` as the default agent. `timeout`
    /// overrides the service's `tool_timeout_secs`.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Value,
        timeout: Option<Duration>,
    ) -> Result<CallOutput, CallError> {
        self.call_with(
            tool,
            arguments,
            CallOptions {
                timeout,
                ..Default::default()
            },
        )
        .await
    }

    /// Calls a tool with full control: agent, timeout, cancellation, progress. The
    /// result is converted, redacted and retained; a result the server marked
    /// `isError` is returned as a [`CallOutput`] with `is_error`. An interrupted call is
    /// never repeated.
    ///
    /// ```no_run
    /// # async fn run(airlock: airlock_host::Airlock) {
    /// use airlock_host::CallOptions;
    /// let cancel = tokio_util::sync::CancellationToken::new();
    /// let (progress, mut updates) = tokio::sync::mpsc::unbounded_channel();
    /// let options = CallOptions { agent: "agent-7".into(), cancel: Some(cancel.clone()), progress: Some(progress), ..Default::default() };
    /// tokio::spawn(async move { while let Some(p) = updates.recv().await { println!("{:?}", p); } });
    /// let outcome = airlock.call_with("mcp__fs__read_file", serde_json::json!({"path": "/tmp/x"}), options).await;
    /// # }
    /// ```
    pub async fn call_with(
        &self,
        tool: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<CallOutput, CallError> {
        let started = Instant::now();
        let entry = self
            .inner
            .catalog
            .read()
            .expect("catalog lock poisoned")
            .get(tool)
            .cloned();
        let outcome = match entry {
            None => {
                let hint = self
                    .search_tools(&tool.replace("__", " ").replace('_', " "))
                    .first()
                    .map(|t| format!("; did you mean \"{}\"?", t.name))
                    .unwrap_or_default();
                Err(CallError::new(
                    ErrorCode::UnknownTool,
                    format!("no tool named \"{tool}\"{hint}"),
                ))
            }
            Some(entry) => self
                .run_call(&entry, arguments, &options, started)
                .await
                .map_err(|e| (e, entry.service.clone()))
                .map_err(|(e, service)| {
                    self.inner.emit(Event::ToolCalled {
                        agent: options.agent.clone(),
                        service,
                        tool: tool.to_string(),
                        status: e.code.to_string(),
                        elapsed_ms: started.elapsed().as_millis() as u64,
                        progress_seen: 0,
                        size: None,
                        redacted: false,
                    });
                    e
                }),
        };
        if let Ok(out) = &outcome {
            self.inner.emit(Event::ToolCalled {
                agent: options.agent.clone(),
                service: out.service.clone(),
                tool: out.tool.clone(),
                status: if out.is_error {
                    ErrorCode::ToolError.to_string()
                } else {
                    "ok".into()
                },
                elapsed_ms: out.elapsed.as_millis() as u64,
                progress_seen: out.progress_seen,
                size: Some(out.retained.size),
                redacted: out.retained.redacted,
            });
        }
        outcome
    }

    async fn run_call(
        &self,
        entry: &crate::catalog::CatalogTool,
        arguments: Value,
        options: &CallOptions,
        started: Instant,
    ) -> Result<CallOutput, CallError> {
        let Value::Object(arguments) = arguments else {
            return Err(CallError::new(
                ErrorCode::InvalidArguments,
                format!("arguments must be a JSON object, got {arguments}"),
            ));
        };
        let inner = &self.inner;
        // A denied call never reaches the server: checked before any session opens.
        inner.authorize(&super::AccessRequest::Call {
            agent: &options.agent,
            service: &entry.service,
            tool: &entry.name,
        })?;
        let service = inner
            .service(&entry.service)
            .expect("catalog services are configured");
        let pipeline = service
            .pipeline
            .clone()
            .expect("cataloged services have pipelines");
        let live = inner.session(&options.agent, &entry.service).await?;

        // Progress: count it, pass it to the caller, and publish it as events.
        let (tx, mut rx) = mpsc::unbounded_channel::<ProgressUpdate>();
        let forward = {
            let caller = options.progress.clone();
            let events = inner.events.clone();
            let (agent, svc, tool) = (
                options.agent.clone(),
                entry.service.clone(),
                entry.name.clone(),
            );
            tokio::spawn(async move {
                let mut seen = 0usize;
                while let Some(update) = rx.recv().await {
                    seen += 1;
                    let _ = events.send(Event::Progress {
                        agent: agent.clone(),
                        service: svc.clone(),
                        tool: tool.clone(),
                        progress: update.progress,
                        total: update.total,
                        message: update.message.clone(),
                    });
                    if let Some(caller) = &caller {
                        let _ = caller.send(update);
                    }
                }
                seen
            })
        };
        let control = CallControl {
            timeout: Some(options.timeout.unwrap_or(service.config.tool_timeout)),
            cancel: options.cancel.clone(),
            progress: Some(tx),
        };
        let reply = live
            .session
            .call_tool(&entry.raw_name, arguments, control)
            .await;
        drop(live);
        let progress_seen = forward.await.unwrap_or(0);
        let reply = reply?;

        let result = convert::result_from_mcp(&reply.result);
        let secrets = service
            .secrets()
            .iter()
            .map(|(name, value)| Secret {
                name: name.clone(),
                value: value.clone(),
            })
            .collect();
        let processed = pipeline.process(result, secrets).await.map_err(|e| {
            CallError::new(
                ErrorCode::AdapterError,
                crate::launch::scrub(&e.to_string(), &service.secrets()),
            )
        })?;
        let text = convert::result_text(&processed.result);
        let redactions: Vec<Redaction> = processed.marks.into_iter().map(Redaction::from).collect();
        let (retained, preview) = inner
            .results
            .retain_for(
                Some(&options.agent),
                &entry.service,
                &text,
                !redactions.is_empty(),
                options.preview.unwrap_or(inner.preview),
            )
            .map_err(|e| {
                CallError::new(
                    ErrorCode::ToolError,
                    format!("cannot retain the result: {e}"),
                )
            })?;
        if let Some(output_id) = &retained.output_id {
            let indexed = inner.registry.index_result(&crate::registry::ResultEntry {
                output_id: output_id.clone(),
                service: entry.service.clone(),
                agent: options.agent.clone(),
                size: retained.size as u64,
                digest: retained.digest.clone(),
                complete: retained.complete,
                redacted: retained.redacted,
            });
            if let Err(e) = indexed {
                tracing::warn!(service = %entry.service, "cannot index a retained result: {e}");
            }
        }
        let mcp = convert::result_to_mcp(&processed.result);
        Ok(CallOutput {
            service: entry.service.clone(),
            tool: entry.name.clone(),
            raw_tool: entry.raw_name.clone(),
            is_error: processed.result.is_error,
            retained,
            content: mcp["content"].as_array().cloned().unwrap_or_default(),
            structured_content: mcp.get("structuredContent").cloned(),
            preview,
            redactions,
            elapsed: started.elapsed(),
            progress_seen,
            warning: reply.warning,
        })
    }

    fn targets(&self, service: Option<&str>) -> Result<Vec<String>, CallError> {
        match service {
            Some(s) if self.inner.services.contains_key(s) => Ok(vec![s.to_string()]),
            Some(s) => Err(CallError::new(
                ErrorCode::ServiceUnavailable,
                format!("no service named \"{s}\""),
            )),
            None => Ok(self
                .inner
                .services
                .iter()
                .filter(|(_, s)| s.config.enabled && s.pipeline.is_some())
                .map(|(n, _)| n.clone())
                .collect()),
        }
    }

    /// Resources of one service, or of every available service when `service` is
    /// `None` (each entry gains a `service` field; unavailable services are skipped).
    ///
    /// ```no_run
    /// # async fn run(airlock: airlock_host::Airlock) -> Result<(), airlock_host::CallError> {
    /// for r in airlock.list_resources("default", None).await? {
    ///     let contents = airlock.read_resource("default", r["service"].as_str().unwrap(), r["uri"].as_str().unwrap()).await?;
    ///     println!("{contents}");
    /// }
    /// let prompts = airlock.list_prompts("default", Some("linear")).await?;
    /// let messages = airlock.get_prompt("default", "linear", "triage-issue", serde_json::json!({"issueId": "ENG-42"})).await?;
    /// # Ok(()) }
    /// ```
    pub async fn list_resources(
        &self,
        agent: &str,
        service: Option<&str>,
    ) -> Result<Vec<Value>, CallError> {
        self.aggregate(agent, service, Listing::Resources).await
    }

    /// Lists resources or prompts of one service, or of every available service (each
    /// entry gains a `service` field; with no service named, failing services are
    /// skipped with a warning).
    async fn aggregate(
        &self,
        agent: &str,
        service: Option<&str>,
        kind: Listing,
    ) -> Result<Vec<Value>, CallError> {
        let mut all = Vec::new();
        for name in self.targets(service)? {
            let listed = match self.inner.session(agent, &name).await {
                Ok(live) => match kind {
                    Listing::Resources => live.session.list_resources().await,
                    Listing::Prompts => live.session.list_prompts().await,
                },
                Err(e) => Err(e),
            };
            match listed {
                Ok(items) => all.extend(items.into_iter().map(|mut item| {
                    item["service"] = Value::String(name.clone());
                    item
                })),
                Err(e) if service.is_some() => return Err(e),
                Err(e) => {
                    tracing::warn!(service = %name, "{} failed: {}", kind.method(), e.message)
                }
            }
        }
        Ok(all)
    }

    /// Reads a resource of `service` (the raw `ReadResourceResult` JSON; secrets the
    /// service knows are scrubbed from its text).
    pub async fn read_resource(
        &self,
        agent: &str,
        service: &str,
        uri: &str,
    ) -> Result<Value, CallError> {
        let live = self.inner.session(agent, service).await?;
        let svc = self
            .inner
            .service(service)
            .expect("session implies service");
        let value = live
            .session
            .read_resource(uri, svc.config.tool_timeout)
            .await?;
        Ok(scrub_json(value, &svc.secrets()))
    }

    /// Prompts of one service, or of every available service when `service` is `None`.
    pub async fn list_prompts(
        &self,
        agent: &str,
        service: Option<&str>,
    ) -> Result<Vec<Value>, CallError> {
        self.aggregate(agent, service, Listing::Prompts).await
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
        let live = self.inner.session(agent, service).await?;
        let svc = self
            .inner
            .service(service)
            .expect("session implies service");
        let value = live
            .session
            .get_prompt(name, arguments, svc.config.tool_timeout)
            .await?;
        Ok(scrub_json(value, &svc.secrets()))
    }
}

/// What [`Airlock::aggregate`] lists.
#[derive(Clone, Copy)]
enum Listing {
    Resources,
    Prompts,
}

impl Listing {
    fn method(self) -> &'static str {
        match self {
            Listing::Resources => "resources/list",
            Listing::Prompts => "prompts/list",
        }
    }
}

/// Replaces known secret values in every string of `value`.
fn scrub_json(mut value: Value, secrets: &[(String, String)]) -> Value {
    fn walk(v: &mut Value, secrets: &[(String, String)]) {
        match v {
            Value::String(s) => *s = crate::launch::scrub(s, secrets),
            Value::Array(items) => items.iter_mut().for_each(|i| walk(i, secrets)),
            Value::Object(map) => map.values_mut().for_each(|i| walk(i, secrets)),
            _ => {}
        }
    }
    walk(&mut value, secrets);
    value
}
