//! A loaded plugin's exports, whichever contract it was built for: [`Api`] holds the
//! export indices found once at load, [`Exports`] the typed functions of one instance's
//! stage. Both speak the current contract's types; a plugin built for a frozen contract
//! (0.1) has its values carried across ([`cross`]).

use wasmtime::Store;
use wasmtime::component::{Instance, InstancePre};

use super::bindings::exports::airlock::adapter as current;
use super::bindings::v01::exports::airlock::adapter as frozen01;
use super::bindings::{
    Call, NamedTool, PluginInfo, Redacted, ResultVerdict, Secret, ServiceInfo, Stage, Tool,
    ToolResult, Verdict, cross,
};
use super::state::PluginState;

/// The export indices of a plugin, per contract.
pub(super) enum Api {
    /// Built for `airlock:adapter@0.2.x`.
    Current {
        plugin: current::plugin::GuestIndices,
        naming: Option<current::naming::GuestIndices>,
        content: Option<current::content::GuestIndices>,
        redaction: Option<current::redaction::GuestIndices>,
        policy: Option<current::policy::GuestIndices>,
    },
    /// Built for `airlock:adapter@0.1.x` (no policy stage).
    V01 {
        plugin: frozen01::plugin::GuestIndices,
        naming: Option<frozen01::naming::GuestIndices>,
        content: Option<frozen01::content::GuestIndices>,
        redaction: Option<frozen01::redaction::GuestIndices>,
    },
}

/// The typed functions of the one stage an instance serves (looked up and type-checked
/// once, when the instance is created).
pub(super) enum Exports {
    Naming(current::naming::Guest),
    Content(current::content::Guest),
    Redaction(current::redaction::Guest),
    Policy(current::policy::Guest),
    NamingV01(frozen01::naming::Guest),
    ContentV01(frozen01::content::Guest),
    RedactionV01(frozen01::redaction::Guest),
}

/// What a guest function returns: a trap (the outer error), or the guest's own answer,
/// which the WIT contract types `result<T, string>`.
type Answer<T> = wasmtime::Result<Result<T, GuestMessage>>;

/// A guest's error message, as the WIT contract carries it: the plugin's own words,
/// untrusted, scrubbed before it reaches a user.
pub(super) type GuestMessage = String;

impl Api {
    /// The indices of a component whose `plugin` export is at contract `minor` (1 or 2);
    /// the message says what is missing.
    pub(super) fn new(pre: &InstancePre<PluginState>, minor: u32) -> wasmtime::Result<Api> {
        Ok(if minor == 1 {
            Api::V01 {
                plugin: frozen01::plugin::GuestIndices::new(pre)?,
                naming: frozen01::naming::GuestIndices::new(pre).ok(),
                content: frozen01::content::GuestIndices::new(pre).ok(),
                redaction: frozen01::redaction::GuestIndices::new(pre).ok(),
            }
        } else {
            Api::Current {
                plugin: current::plugin::GuestIndices::new(pre)?,
                naming: current::naming::GuestIndices::new(pre).ok(),
                content: current::content::GuestIndices::new(pre).ok(),
                redaction: current::redaction::GuestIndices::new(pre).ok(),
                policy: current::policy::GuestIndices::new(pre).ok(),
            }
        })
    }

    /// Whether the component exports `stage`'s interface.
    pub(super) fn exports(&self, stage: Stage) -> bool {
        match self {
            Api::Current {
                naming,
                content,
                redaction,
                policy,
                ..
            } => match stage {
                Stage::Naming => naming.is_some(),
                Stage::Content => content.is_some(),
                Stage::Redaction => redaction.is_some(),
                Stage::Policy => policy.is_some(),
            },
            Api::V01 {
                naming,
                content,
                redaction,
                ..
            } => match stage {
                Stage::Naming => naming.is_some(),
                Stage::Content => content.is_some(),
                Stage::Redaction => redaction.is_some(),
                Stage::Policy => false,
            },
        }
    }

    /// Calls `plugin.describe`.
    pub(super) fn describe(
        &self,
        store: &mut Store<PluginState>,
        instance: &Instance,
    ) -> wasmtime::Result<PluginInfo> {
        match self {
            Api::Current { plugin, .. } => plugin.load(&mut *store, instance)?.call_describe(store),
            Api::V01 { plugin, .. } => {
                let info = plugin.load(&mut *store, instance)?.call_describe(store)?;
                Ok(cross(&info))
            }
        }
    }

    /// Calls `plugin.init` for `stage` with its configuration (JSON text).
    pub(super) fn init(
        &self,
        store: &mut Store<PluginState>,
        instance: &Instance,
        stage: Stage,
        config: &String,
    ) -> Answer<()> {
        match self {
            Api::Current { plugin, .. } => plugin
                .load(&mut *store, instance)?
                .call_init(store, stage, config),
            Api::V01 { plugin, .. } => {
                let stage = cross(&stage);
                plugin
                    .load(&mut *store, instance)?
                    .call_init(store, stage, config)
            }
        }
    }

    /// The typed functions of `stage` (its export was checked at bind).
    pub(super) fn stage_exports(
        &self,
        store: &mut Store<PluginState>,
        instance: &Instance,
        stage: Stage,
    ) -> wasmtime::Result<Exports> {
        const CHECKED: &str = "the stage's export is checked at bind";
        Ok(match (self, stage) {
            (Api::Current { naming, .. }, Stage::Naming) => {
                Exports::Naming(naming.as_ref().expect(CHECKED).load(store, instance)?)
            }
            (Api::Current { content, .. }, Stage::Content) => {
                Exports::Content(content.as_ref().expect(CHECKED).load(store, instance)?)
            }
            (Api::Current { redaction, .. }, Stage::Redaction) => {
                Exports::Redaction(redaction.as_ref().expect(CHECKED).load(store, instance)?)
            }
            (Api::Current { policy, .. }, Stage::Policy) => {
                Exports::Policy(policy.as_ref().expect(CHECKED).load(store, instance)?)
            }
            (Api::V01 { naming, .. }, Stage::Naming) => {
                Exports::NamingV01(naming.as_ref().expect(CHECKED).load(store, instance)?)
            }
            (Api::V01 { content, .. }, Stage::Content) => {
                Exports::ContentV01(content.as_ref().expect(CHECKED).load(store, instance)?)
            }
            (Api::V01 { redaction, .. }, Stage::Redaction) => {
                Exports::RedactionV01(redaction.as_ref().expect(CHECKED).load(store, instance)?)
            }
            (Api::V01 { .. }, Stage::Policy) => unreachable!("{CHECKED}"),
        })
    }
}

impl Exports {
    /// `naming.namespace`.
    pub(super) fn namespace(
        &self,
        store: &mut Store<PluginState>,
        service: &ServiceInfo,
        taken: &[String],
    ) -> Answer<String> {
        match self {
            Exports::Naming(api) => api.call_namespace(store, service, taken),
            Exports::NamingV01(api) => api.call_namespace(store, &cross(service), taken),
            _ => unreachable!("a naming call on a non-naming binding"),
        }
    }

    /// `naming.qualify`.
    pub(super) fn qualify(
        &self,
        store: &mut Store<PluginState>,
        service: &ServiceInfo,
        namespace: &str,
        tools: &[Tool],
    ) -> Answer<Vec<NamedTool>> {
        match self {
            Exports::Naming(api) => api.call_qualify(store, service, namespace, tools),
            Exports::NamingV01(api) => {
                let tools: Vec<_> = tools.iter().map(cross).collect();
                Ok(api
                    .call_qualify(store, &cross(service), namespace, &tools)?
                    .map(|named| named.iter().map(cross).collect()))
            }
            _ => unreachable!("a naming call on a non-naming binding"),
        }
    }

    /// `content.convert`.
    pub(super) fn convert(
        &self,
        store: &mut Store<PluginState>,
        result: &ToolResult,
    ) -> Answer<ToolResult> {
        match self {
            Exports::Content(api) => api.call_convert(store, result),
            Exports::ContentV01(api) => {
                Ok(api.call_convert(store, &cross(result))?.map(|r| cross(&r)))
            }
            _ => unreachable!("a content call on a non-content binding"),
        }
    }

    /// `redaction.redact`.
    pub(super) fn redact(
        &self,
        store: &mut Store<PluginState>,
        result: &ToolResult,
        secrets: &[Secret],
    ) -> Answer<Redacted> {
        match self {
            Exports::Redaction(api) => api.call_redact(store, result, secrets),
            Exports::RedactionV01(api) => {
                let secrets: Vec<_> = secrets.iter().map(cross).collect();
                Ok(api
                    .call_redact(store, &cross(result), &secrets)?
                    .map(|r| cross(&r)))
            }
            _ => unreachable!("a redaction call on a non-redaction binding"),
        }
    }

    /// `policy.check-call`.
    pub(super) fn check_call(
        &self,
        store: &mut Store<PluginState>,
        call: &Call,
    ) -> Answer<Verdict> {
        match self {
            Exports::Policy(api) => api.call_check_call(store, call),
            _ => unreachable!("a policy call on a non-policy binding"),
        }
    }

    /// `policy.check-result`.
    pub(super) fn check_result(
        &self,
        store: &mut Store<PluginState>,
        call: &Call,
        result: &ToolResult,
    ) -> Answer<ResultVerdict> {
        match self {
            Exports::Policy(api) => api.call_check_result(store, call, result),
            _ => unreachable!("a policy call on a non-policy binding"),
        }
    }
}
