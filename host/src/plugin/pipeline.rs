//! [`ServicePipeline`]: the adapter stages one service runs through — naming at catalog
//! time; content conversion then the redaction chain for every result.

use std::collections::HashSet;
use std::sync::Arc;

use super::{
    NamedTool, PluginError, RedactionMark, Secret, ServiceInfo, StageInstance, Tool, ToolResult,
};
use crate::config::{AdapterConfig, Adapters};
use crate::secrets::KnownSecrets;

/// A converted, redacted result and the marks of what was redacted.
#[derive(Debug, Clone)]
pub struct Processed {
    /// The result, safe to show and to store.
    pub result: ToolResult,
    /// Where redactions happened (empty when nothing was redacted).
    pub marks: Vec<RedactionMark>,
}

/// The plugins bound to one service.
pub struct ServicePipeline {
    naming: Arc<StageInstance>,
    content: Arc<StageInstance>,
    redaction: Vec<Arc<StageInstance>>,
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
        Ok(ServicePipeline {
            naming,
            content,
            redaction,
        })
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

    /// Converts then redacts a result. Any failure fails the whole call, so an
    /// unredacted result is never returned. The server's `is_error` is kept whatever
    /// the plugins say.
    pub async fn process(
        &self,
        result: ToolResult,
        secrets: Vec<Secret>,
    ) -> Result<Processed, PluginError> {
        let is_error = result.is_error;
        let scrub: KnownSecrets = secrets
            .iter()
            .map(|s| (s.name.clone(), s.value.clone()))
            .collect();
        let mut converted = convert_scrubbed(&self.content, result, scrub.clone()).await?;
        let mut marks = Vec::new();
        for stage in &self.redaction {
            let redacted =
                redact_scrubbed(stage, converted, secrets.clone(), scrub.clone()).await?;
            converted = redacted.result;
            marks.extend(redacted.marks);
        }
        converted.is_error = is_error;
        Ok(Processed {
            result: converted,
            marks,
        })
    }
}

impl ServicePipeline {
    /// Runs only the redaction chain on a JSON document that came from the service's
    /// server but is not a tool result (tool metadata, resource contents, prompt
    /// messages, log data): the document travels as the result's `structuredContent`, so
    /// every string in it is redacted with the service's secrets and configured
    /// patterns.
    pub async fn redact_json(
        &self,
        value: serde_json::Value,
        secrets: Vec<Secret>,
    ) -> Result<serde_json::Value, PluginError> {
        let mut result = ToolResult {
            content: Vec::new(),
            structured_content: Some(value.to_string()),
            is_error: false,
            meta: None,
        };
        let scrub: KnownSecrets = secrets
            .iter()
            .map(|s| (s.name.clone(), s.value.clone()))
            .collect();
        for stage in &self.redaction {
            result = redact_scrubbed(stage, result, secrets.clone(), scrub.clone())
                .await?
                .result;
        }
        let text = result.structured_content.unwrap_or_default();
        serde_json::from_str(&text).map_err(|e| {
            let stage = self
                .redaction
                .last()
                .expect("a redaction chain is never empty");
            stage.contract_error(format!(
                "returned structuredContent that is no longer JSON: {e}"
            ))
        })
    }
}

/// Runs a naming stage's `namespace`, checking the answer.
pub async fn namespace(
    stage: &Arc<StageInstance>,
    service: ServiceInfo,
    taken: Vec<String>,
) -> Result<String, PluginError> {
    let stage = stage.clone();
    blocking(move || {
        let ns = stage.call(0, &KnownSecrets::new(), |store, instance, plugin| {
            let api = plugin
                .naming_api
                .as_ref()
                .expect("checked at bind")
                .load(&mut *store, instance)?;
            api.call_namespace(&mut *store, &service, &taken)
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
    blocking(move || {
        let raw: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
        let tools_bytes: usize = tools
            .iter()
            .map(|t| {
                t.name.len()
                    + t.description.as_ref().map_or(0, String::len)
                    + t.input_schema.as_ref().map_or(0, String::len)
            })
            .sum();
        let named = stage.call(
            tools_bytes,
            &KnownSecrets::new(),
            |store, instance, plugin| {
                let api = plugin
                    .naming_api
                    .as_ref()
                    .expect("checked at bind")
                    .load(&mut *store, instance)?;
                api.call_qualify(&mut *store, &service, &namespace, &tools)
            },
        )?;
        if named.len() != raw.len() {
            return Err(stage.contract_error(format!(
                "returned {} tools for {} listed",
                named.len(),
                raw.len()
            )));
        }
        let mut seen = HashSet::new();
        for (tool, raw_name) in named.iter().zip(&raw) {
            if !is_valid_name(&tool.name) {
                return Err(stage.contract_error(format!(
                    "name {:?} does not match ^[a-zA-Z0-9_-]{{1,64}}$",
                    tool.name
                )));
            }
            if !seen.insert(tool.name.clone()) {
                return Err(
                    stage.contract_error(format!("name {:?} is given to two tools", tool.name))
                );
            }
            if &tool.raw_name != raw_name {
                return Err(stage.contract_error(format!(
                    "reordered or renamed the raw tool {raw_name:?} (got {:?})",
                    tool.raw_name
                )));
            }
        }
        Ok(named)
    })
    .await
}

/// Runs one content stage on a result (`is_error` is kept).
pub async fn convert(
    stage: &Arc<StageInstance>,
    result: ToolResult,
) -> Result<ToolResult, PluginError> {
    convert_scrubbed(stage, result, KnownSecrets::new()).await
}

/// Like [`convert`], scrubbing `scrub` (the service's known secrets) from what the
/// plugin logs or prints: it sees the result before redaction.
pub async fn convert_scrubbed(
    stage: &Arc<StageInstance>,
    result: ToolResult,
    scrub: KnownSecrets,
) -> Result<ToolResult, PluginError> {
    let stage = stage.clone();
    blocking(move || {
        let is_error = result.is_error;
        let mut converted =
            stage.call(approx_size(&result), &scrub, |store, instance, plugin| {
                let api = plugin
                    .content_api
                    .as_ref()
                    .expect("checked at bind")
                    .load(&mut *store, instance)?;
                api.call_convert(&mut *store, &result)
            })?;
        converted.is_error = is_error;
        Ok(converted)
    })
    .await
}

/// Runs one redaction stage on a result (`is_error` is kept).
pub async fn redact(
    stage: &Arc<StageInstance>,
    result: ToolResult,
    secrets: Vec<Secret>,
) -> Result<Processed, PluginError> {
    let scrub = secrets
        .iter()
        .map(|s| (s.name.clone(), s.value.clone()))
        .collect();
    redact_scrubbed(stage, result, secrets, scrub).await
}

/// Like [`redact`], with the secrets to scrub from what the plugin logs already built.
async fn redact_scrubbed(
    stage: &Arc<StageInstance>,
    result: ToolResult,
    secrets: Vec<Secret>,
    scrub: KnownSecrets,
) -> Result<Processed, PluginError> {
    let stage = stage.clone();
    blocking(move || {
        let is_error = result.is_error;
        let mut redacted =
            stage.call(approx_size(&result), &scrub, |store, instance, plugin| {
                let api = plugin
                    .redaction_api
                    .as_ref()
                    .expect("checked at bind")
                    .load(&mut *store, instance)?;
                api.call_redact(&mut *store, &result, &secrets)
            })?;
        redacted.result.is_error = is_error;
        Ok(Processed {
            result: redacted.result,
            marks: redacted.marks,
        })
    })
    .await
}

/// Roughly how many bytes a plugin has to work through for `result`.
fn approx_size(result: &ToolResult) -> usize {
    use super::ContentBlock;
    use super::bindings::airlock::adapter::types::ResourceContents;
    let blocks: usize = result
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) => t.text.len(),
            ContentBlock::Image(m) | ContentBlock::Audio(m) => m.data.len(),
            ContentBlock::ResourceLink(l) => l.uri.len() + l.name.len(),
            ContentBlock::Embedded(r) => match &r.contents {
                ResourceContents::Text(t) => t.text.len(),
                ResourceContents::Blob(b) => b.blob.len(),
            },
            ContentBlock::Unknown(u) => u.raw.len(),
        })
        .sum();
    blocks + result.structured_content.as_ref().map_or(0, String::len)
}

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

async fn blocking<R: Send + 'static>(
    f: impl FnOnce() -> Result<R, PluginError> + Send + 'static,
) -> Result<R, PluginError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(PluginError::Load {
            plugin: "(runtime)".into(),
            message: format!("plugin task failed: {e}"),
        }),
    }
}
