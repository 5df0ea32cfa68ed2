//! [`ServicePipeline`]: the adapter stages one service runs through — naming at catalog
//! time; content conversion then the redaction chain for every result.

use std::collections::HashSet;
use std::sync::Arc;

use super::policy::{PolicyChain, PolicyLink};
use super::work::{approx_size, blocking};
use super::{
    NamedTool, PluginError, RedactionMark, Secret, ServiceInfo, StageInstance, Tool, ToolResult,
};
use crate::config::{AdapterConfig, Adapters};
use crate::secrets::KnownSecrets;
use crate::telemetry::CallTrace;

/// A converted, redacted result and the marks of what was redacted.
#[derive(Debug, Clone)]
pub struct Processed {
    /// The result, safe to show and to store.
    pub result: ToolResult,
    /// Where redactions happened (empty when nothing was redacted).
    pub marks: Vec<RedactionMark>,
}

/// One plugin bound to one stage of a service.
#[derive(Clone)]
pub struct BoundPlugin {
    /// The stage it serves.
    pub stage: super::Stage,
    /// The loaded plugin (name, version, contract, digest).
    pub plugin: Arc<super::LoadedPlugin>,
    /// For a policy, whether it enforces or audits.
    pub mode: Option<crate::config::PolicyMode>,
}

/// The plugins bound to one service.
pub struct ServicePipeline {
    naming: Arc<StageInstance>,
    content: Arc<StageInstance>,
    redaction: Vec<Arc<StageInstance>>,
    policy: PolicyChain,
}

impl ServicePipeline {
    /// Loads and binds every plugin the service's config names, running each `init`.
    pub fn build(
        runtime: &Arc<super::PluginRuntime>,
        service: &str,
        adapters: &Adapters,
        config: &AdapterConfig,
    ) -> Result<Self, PluginError> {
        use super::Stage;
        let naming = runtime.bind(
            runtime.load(&adapters.naming)?,
            Stage::Naming,
            service,
            &config.naming,
        )?;
        let content = runtime.bind(
            runtime.load(&adapters.content)?,
            Stage::Content,
            service,
            &config.content,
        )?;
        let redaction = adapters
            .redaction
            .iter()
            .zip(&config.redaction)
            .map(|(reference, cfg)| {
                runtime.bind(runtime.load(reference)?, Stage::Redaction, service, cfg)
            })
            .collect::<Result<_, _>>()?;
        let policy = adapters
            .policy
            .iter()
            .zip(&config.policy)
            .map(|(reference, settings)| {
                Ok(PolicyLink {
                    stage: runtime.bind(
                        runtime.load(reference)?,
                        Stage::Policy,
                        service,
                        &settings.config,
                    )?,
                    mode: settings.mode,
                    on_failure: settings.on_failure,
                })
            })
            .collect::<Result<_, PluginError>>()?;
        Ok(ServicePipeline {
            naming,
            content,
            redaction,
            policy: PolicyChain::new(policy),
        })
    }

    /// The service's policy chain (empty when it has none).
    pub fn policy(&self) -> &PolicyChain {
        &self.policy
    }

    /// Every plugin bound to the service, in the order a call meets them: naming,
    /// content, the redaction chain, then the policy chain (with its mode).
    pub fn plugins(&self) -> Vec<BoundPlugin> {
        use super::Stage;
        let bound = |stage, instance: &Arc<StageInstance>, mode| BoundPlugin {
            stage,
            plugin: instance.plugin().clone(),
            mode,
        };
        let mut out = vec![
            bound(Stage::Naming, &self.naming, None),
            bound(Stage::Content, &self.content, None),
        ];
        out.extend(
            self.redaction
                .iter()
                .map(|r| bound(Stage::Redaction, r, None)),
        );
        out.extend(
            self.policy
                .links()
                .iter()
                .map(|l| bound(Stage::Policy, &l.stage, Some(l.mode))),
        );
        out
    }

    /// Asks the naming plugin for the service's namespace (called once per service).
    pub async fn namespace(
        &self,
        service: ServiceInfo,
        taken: Vec<String>,
    ) -> Result<String, PluginError> {
        namespace(&self.naming, service, taken).await
    }

    /// Names every tool, verifying that the names are valid and unique.
    pub async fn qualify(
        &self,
        service: ServiceInfo,
        namespace: String,
        tools: Vec<Tool>,
    ) -> Result<Vec<NamedTool>, PluginError> {
        qualify(&self.naming, service, namespace, tools).await
    }

    /// Converts then redacts a result with the service's known secrets. Any failure
    /// fails the whole call, so an unredacted result is never returned. The server's
    /// `is_error` is kept whatever the plugins say.
    pub async fn process(
        self: &Arc<Self>,
        result: crate::mcp::ToolResult,
        known: &KnownSecrets,
    ) -> Result<Processed, PluginError> {
        self.process_then(result, known, CallTrace::current(), |processed| processed)
            .await
    }

    /// [`ServicePipeline::process`], then `finish` on the processed result, all in the
    /// same blocking section (the caller's own CPU work on the result — its text, digest,
    /// MCP JSON — rides along instead of taking one of its own). A large result first
    /// waits for its share of the host's plugin work budget, so several results at the
    /// retention limit at once cannot exhaust the host's memory.
    ///
    /// Plugins never run as an async worker: wasmtime-wasi's synchronous stdio (a plugin
    /// that prints) enters the tokio runtime to block, which a worker must not do, and a
    /// plugin may run up to its deadline. The section leaves the worker role first (see
    /// `blocking`). The content and redaction stages are recorded in `trace`.
    pub async fn process_then<R: Send + 'static>(
        self: &Arc<Self>,
        result: crate::mcp::ToolResult,
        known: &KnownSecrets,
        trace: CallTrace,
        finish: impl FnOnce(Processed) -> R + Send + 'static,
    ) -> Result<R, PluginError> {
        let _budget = self
            .content
            .runtime()
            .work_budget(result.approx_size())
            .await;
        let pipeline = self.clone();
        let known = known.clone();
        // What the plugins log belongs to the caller's span (the call's).
        let span = tracing::Span::current();
        blocking(move || {
            let _in_call = span.enter();
            let secrets = plugin_secrets(&known);
            let result = super::result_into_wit(result);
            pipeline
                .process_now(result, &secrets, &known, &trace)
                .map(finish)
        })
        .await
    }

    /// [`ServicePipeline::process`] on the calling thread. Blocking (plugins run up to
    /// their deadline): call it from a blocking context, never on an async worker.
    /// `scrub` is the service's known secrets, scrubbed from what plugins log; `trace` is
    /// where the content and redaction stages are recorded.
    pub fn process_now(
        &self,
        result: ToolResult,
        secrets: &[Secret],
        scrub: &KnownSecrets,
        trace: &CallTrace,
    ) -> Result<Processed, PluginError> {
        let is_error = result.is_error;
        let mut stage = trace.stage("content");
        stage.set_str("airlock.plugin", self.content.plugin_name());
        let mut converted = convert_now(&self.content, result, scrub)?;
        stage.done();
        let mut marks = Vec::new();
        for plugin in &self.redaction {
            let mut stage = trace.stage("redaction");
            stage.set_str("airlock.plugin", plugin.plugin_name());
            let redacted = redact_now(plugin, converted, secrets, scrub)?;
            stage.set_u64("airlock.redactions", redacted.marks.len() as u64);
            stage.done();
            converted = redacted.result;
            marks.extend(redacted.marks);
        }
        converted.is_error = is_error;
        Ok(Processed {
            result: converted,
            marks,
        })
    }

    /// Runs only the redaction chain on `texts` that came from the service's server but
    /// are not a tool result (the strings of tool metadata, resource contents, prompt
    /// messages, log data): each travels as a text block of a result, and comes back
    /// redacted in its place. One blocking section for the whole chain.
    pub async fn redact_texts(
        self: &Arc<Self>,
        texts: Vec<String>,
        secrets: Vec<Secret>,
    ) -> Result<Vec<String>, PluginError> {
        let pipeline = self.clone();
        let count = texts.len();
        blocking(move || {
            let scrub = scrub_set(&secrets);
            let mut result = super::result_into_wit(crate::mcp::ToolResult::of_texts(texts));
            for stage in &pipeline.redaction {
                result = redact_now(stage, result, &secrets, &scrub)?.result;
            }
            let texts: Vec<String> = result
                .content
                .into_iter()
                .filter_map(|block| match block {
                    super::ContentBlock::Text(t) => Some(t.text),
                    _ => None,
                })
                .collect();
            if texts.len() != count {
                let stage = pipeline
                    .redaction
                    .last()
                    .expect("a redaction chain is never empty");
                return Err(stage
                    .contract_error(format!("returned {} text blocks for {count}", texts.len())));
            }
            Ok(texts)
        })
        .await
    }
}

/// The secrets as the redaction contract takes them.
pub fn plugin_secrets(known: &KnownSecrets) -> Vec<Secret> {
    known
        .iter()
        .map(|s| Secret {
            name: s.name.clone(),
            value: s.value.clone(),
        })
        .collect()
}

/// The host-side scrub set for `secrets` (what plugins log is scrubbed of them).
fn scrub_set(secrets: &[Secret]) -> KnownSecrets {
    secrets
        .iter()
        .map(|s| (s.name.clone(), s.value.clone()))
        .collect()
}

/// Runs a naming stage's `namespace`, checking the answer.
pub async fn namespace(
    stage: &Arc<StageInstance>,
    service: ServiceInfo,
    taken: Vec<String>,
) -> Result<String, PluginError> {
    let stage = stage.clone();
    blocking(move || {
        let ns = stage.call(0, &KnownSecrets::new(), |store, api| {
            api.namespace(store, &service, &taken)
        })?;
        if ns.is_empty() || ns.len() > 64 || taken.contains(&ns) {
            return Err(stage.contract_error(format!(
                "namespace {ns:?} is empty, too long or already taken"
            )));
        }
        Ok(ns)
    })
    .await
}

/// Runs a naming stage's `qualify`, verifying that the names are valid and unique.
pub async fn qualify(
    stage: &Arc<StageInstance>,
    service: ServiceInfo,
    namespace: String,
    tools: Vec<Tool>,
) -> Result<Vec<NamedTool>, PluginError> {
    let stage = stage.clone();
    blocking(move || qualify_now(&stage, &service, &namespace, &tools)).await
}

/// [`qualify`] on the calling thread (blocking).
pub fn qualify_now(
    stage: &StageInstance,
    service: &ServiceInfo,
    namespace: &str,
    tools: &[Tool],
) -> Result<Vec<NamedTool>, PluginError> {
    let tools_bytes: usize = tools
        .iter()
        .map(|t| {
            t.name.len()
                + t.description.as_ref().map_or(0, String::len)
                + t.input_schema.as_ref().map_or(0, String::len)
        })
        .sum();
    let named = stage.call(tools_bytes, &KnownSecrets::new(), |store, api| {
        api.qualify(store, service, namespace, tools)
    })?;
    if named.len() != tools.len() {
        return Err(stage.contract_error(format!(
            "returned {} tools for {} listed",
            named.len(),
            tools.len()
        )));
    }
    let mut seen = HashSet::with_capacity(named.len());
    for (tool, raw) in named.iter().zip(tools) {
        if !is_valid_name(&tool.name) {
            return Err(stage.contract_error(format!(
                "name {:?} does not match ^[a-zA-Z0-9_-]{{1,64}}$",
                tool.name
            )));
        }
        if !seen.insert(tool.name.as_str()) {
            return Err(stage.contract_error(format!("name {:?} is given to two tools", tool.name)));
        }
        if tool.raw_name != raw.name {
            return Err(stage.contract_error(format!(
                "reordered or renamed the raw tool {:?} (got {:?})",
                raw.name, tool.raw_name
            )));
        }
    }
    Ok(named)
}

/// Runs one content stage on a result (`is_error` is kept).
pub async fn convert(
    stage: &Arc<StageInstance>,
    result: ToolResult,
) -> Result<ToolResult, PluginError> {
    let stage = stage.clone();
    blocking(move || convert_now(&stage, result, &KnownSecrets::new())).await
}

/// [`convert`] on the calling thread (blocking), scrubbing `scrub` (the service's known
/// secrets) from what the plugin logs or prints: it sees the result before redaction.
pub fn convert_now(
    stage: &StageInstance,
    result: ToolResult,
    scrub: &KnownSecrets,
) -> Result<ToolResult, PluginError> {
    let is_error = result.is_error;
    let mut converted = stage.call(approx_size(&result), scrub, |store, api| {
        api.convert(store, &result)
    })?;
    converted.is_error = is_error;
    Ok(converted)
}

/// Runs one redaction stage on a result (`is_error` is kept).
pub async fn redact(
    stage: &Arc<StageInstance>,
    result: ToolResult,
    secrets: Vec<Secret>,
) -> Result<Processed, PluginError> {
    let stage = stage.clone();
    blocking(move || redact_now(&stage, result, &secrets, &scrub_set(&secrets))).await
}

/// [`redact`] on the calling thread (blocking), with the scrub set already built.
pub fn redact_now(
    stage: &StageInstance,
    result: ToolResult,
    secrets: &[Secret],
    scrub: &KnownSecrets,
) -> Result<Processed, PluginError> {
    let is_error = result.is_error;
    let mut redacted = stage.call(approx_size(&result), scrub, |store, api| {
        api.redact(store, &result, secrets)
    })?;
    redacted.result.is_error = is_error;
    Ok(Processed {
        result: redacted.result,
        marks: redacted.marks,
    })
}

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
