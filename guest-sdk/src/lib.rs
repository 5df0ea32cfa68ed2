//! `airlock-guest`: everything a plugin author needs to write an Airlock adapter plugin.
//!
//! A plugin is a WebAssembly component built for `wasm32-wasip2`. It implements
//! [`Plugin`] (construction from its configuration) and one trait per stage it serves —
//! [`Naming`], [`Content`], [`Redaction`], [`Policy`] — then invokes [`export_plugin!`]
//! once. The SDK builds against contract `airlock:adapter@0.2.0` ([`CONTRACT_VERSION`]).
//!
//! ```no_run
//! use airlock_guest::{export_plugin, Config, Content, ContentBlock, Plugin, Stage, TextBlock, ToolResult};
//!
//! /// Upper-cases every text block.
//! struct Shout;
//!
//! impl Plugin for Shout {
//!     const NAME: &'static str = "shout";
//!     fn new(_stage: Stage, config: Config) -> Result<Self, String> {
//!         config.deny_unknown(&[])?;
//!         Ok(Shout)
//!     }
//! }
//!
//! impl Content for Shout {
//!     fn convert(&self, mut result: ToolResult) -> Result<ToolResult, String> {
//!         for block in &mut result.content {
//!             if let ContentBlock::Text(TextBlock { text, .. }) = block {
//!                 *text = text.to_uppercase();
//!             }
//!         }
//!         Ok(result)
//!     }
//! }
//!
//! export_plugin!(Shout, stages: [content]);
//! ```
//!
//! Build it with `cargo build --target wasm32-wasip2 --release` and point a service's
//! `adapters.content` at the resulting `.wasm` file.
//!
//! The helpers in [`names`], [`json`] and [`log`] keep plugins small: the bundled
//! `standard` plugin is built from them.

pub mod config;
pub mod json;
pub mod log;
pub mod names;
#[doc(hidden)]
pub mod runtime;

/// Raw bindings generated from the WIT contract (`wit/adapter.wit`, 0.2). Plugin authors
/// normally use the re-exports at the crate root instead.
pub mod bindings {
    wit_bindgen::generate!({
        world: "adapter",
        path: "../wit",
        pub_export_macro: true,
        export_macro_name: "__export_adapter_world",
    });
}

pub use bindings::airlock::adapter::types::{
    BlobResource, ContentBlock, EmbeddedResource, MediaBlock, ResourceContents, ResourceLink,
    Stage, TextBlock, TextResource, Tool, ToolResult, UnknownBlock,
};
pub use bindings::exports::airlock::adapter::naming::{NamedTool, ServiceInfo};
pub use bindings::exports::airlock::adapter::plugin::PluginInfo;
pub use bindings::exports::airlock::adapter::policy::{
    Call, Decision, ResultDecision, ResultVerdict, Verdict,
};
pub use bindings::exports::airlock::adapter::redaction::{Redacted, RedactionMark, Secret};
pub use config::Config;

/// The version of the WIT contract this SDK builds against.
pub const CONTRACT_VERSION: &str = "0.2.0";

/// What every plugin implements: how to build an instance from its configuration.
///
/// The host creates a fresh instance per (service, stage) and calls [`Plugin::new`] once
/// with that stage's `adapter_config` table. Returning `Err` rejects the configuration;
/// the message is shown to the operator, naming the plugin and the service.
pub trait Plugin: Sized + 'static {
    /// The plugin's name, as shown in messages.
    const NAME: &'static str;
    /// The plugin's own version.
    const VERSION: &'static str = "0.1.0";

    /// Builds the plugin for one stage from its configuration.
    fn new(stage: Stage, config: Config) -> Result<Self, String>;
}

/// The naming stage. Both methods have defaults implementing the standard
/// `mcp__{server}__{tool}` policy, so a plugin overrides only what it changes.
pub trait Naming: Plugin {
    /// Chooses the service's namespace (called once per service; the host freezes it).
    fn namespace(&self, service: &ServiceInfo, taken: &[String]) -> Result<String, String> {
        let base = format!("mcp__{}", names::sanitize(&service.id));
        Ok(names::unique_namespace(&base, taken, names::MAX_NAME_LEN))
    }

    /// Names every tool of the service under `namespace`.
    fn qualify(
        &self,
        service: &ServiceInfo,
        namespace: &str,
        tools: Vec<Tool>,
    ) -> Result<Vec<NamedTool>, String> {
        let _ = service;
        Ok(names::qualify_tools(namespace, tools, None))
    }
}

/// The content stage: converts a result's blocks for a model. `is_error` must be kept.
pub trait Content: Plugin {
    /// Converts one tool result.
    fn convert(&self, result: ToolResult) -> Result<ToolResult, String>;
}

/// The redaction stage: removes secrets from a converted result and marks what it did.
pub trait Redaction: Plugin {
    /// Redacts one tool result. `secrets` are the values the host knows to be secret.
    fn redact(&self, result: ToolResult, secrets: Vec<Secret>) -> Result<Redacted, String>;
}

/// The policy stage: decides whether a call may run and whether its result may leave.
///
/// The host runs the configured policies in order before a call reaches its server
/// ([`Policy::check_call`]) and on the redacted result before it leaves
/// ([`Policy::check_result`], which lets everything through unless overridden). An
/// `Err` (or a trap) counts as a denial unless the operator set `on_failure = "open"`.
pub trait Policy: Plugin {
    /// Decides whether `call` may run: allow, deny with a reason, rewrite the arguments,
    /// or ask a person. Name the rule that decided in the verdict.
    fn check_call(&self, call: &Call) -> Result<Verdict, String>;

    /// Decides whether the redacted `result` of `call` may leave: allow, withhold with a
    /// reason, or replace it.
    fn check_result(&self, call: &Call, result: ToolResult) -> Result<ResultVerdict, String> {
        let _ = (call, result);
        Ok(ResultVerdict {
            decision: ResultDecision::Allow,
            rule: "default".to_string(),
        })
    }
}

/// Exports a plugin type as a WebAssembly component.
///
/// List the stages the type implements; the others answer with an error and are not
/// advertised in the plugin's description:
///
/// ```ignore
/// airlock_guest::export_plugin!(MyPlugin, stages: [naming, content, redaction, policy]);
/// ```
///
/// On non-wasm targets the macro expands to nothing, so the same crate can be used
/// natively (for tests and benchmarks) as a plain library.
#[macro_export]
macro_rules! export_plugin {
    ($ty:ty, stages: [$($stage:ident),* $(,)?]) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct AirlockPluginExport;

            impl $crate::bindings::exports::airlock::adapter::plugin::Guest for AirlockPluginExport {
                fn describe() -> $crate::PluginInfo {
                    $crate::PluginInfo {
                        name: <$ty as $crate::Plugin>::NAME.to_string(),
                        version: <$ty as $crate::Plugin>::VERSION.to_string(),
                        stages: ::std::vec![$($crate::__stage_value!($stage)),*],
                    }
                }
                fn init(stage: $crate::Stage, config: ::std::string::String) -> ::std::result::Result<(), ::std::string::String> {
                    $crate::runtime::init::<$ty>(stage, &config)
                }
            }

            $crate::__naming_export!(AirlockPluginExport, $ty, [$($stage)*]);
            $crate::__content_export!(AirlockPluginExport, $ty, [$($stage)*]);
            $crate::__redaction_export!(AirlockPluginExport, $ty, [$($stage)*]);
            $crate::__policy_export!(AirlockPluginExport, $ty, [$($stage)*]);

            $crate::bindings::__export_adapter_world!(AirlockPluginExport with_types_in $crate::bindings);
        };
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __stage_value {
    (naming) => {
        $crate::Stage::Naming
    };
    (content) => {
        $crate::Stage::Content
    };
    (redaction) => {
        $crate::Stage::Redaction
    };
    (policy) => {
        $crate::Stage::Policy
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __naming_export {
    ($shim:ident, $ty:ty, [naming $($rest:ident)*]) => {
        impl $crate::bindings::exports::airlock::adapter::naming::Guest for $shim {
            fn namespace(service: $crate::ServiceInfo, taken: ::std::vec::Vec<::std::string::String>) -> ::std::result::Result<::std::string::String, ::std::string::String> {
                $crate::runtime::with::<$ty, _>(|p| <$ty as $crate::Naming>::namespace(p, &service, &taken))
            }
            fn qualify(service: $crate::ServiceInfo, namespace: ::std::string::String, tools: ::std::vec::Vec<$crate::Tool>) -> ::std::result::Result<::std::vec::Vec<$crate::NamedTool>, ::std::string::String> {
                $crate::runtime::with::<$ty, _>(|p| <$ty as $crate::Naming>::qualify(p, &service, &namespace, tools))
            }
        }
    };
    ($shim:ident, $ty:ty, [$other:ident $($rest:ident)*]) => {
        $crate::__naming_export!($shim, $ty, [$($rest)*]);
    };
    ($shim:ident, $ty:ty, []) => {
        impl $crate::bindings::exports::airlock::adapter::naming::Guest for $shim {
            fn namespace(_: $crate::ServiceInfo, _: ::std::vec::Vec<::std::string::String>) -> ::std::result::Result<::std::string::String, ::std::string::String> {
                ::std::result::Result::Err($crate::runtime::unsupported::<$ty>("naming"))
            }
            fn qualify(_: $crate::ServiceInfo, _: ::std::string::String, _: ::std::vec::Vec<$crate::Tool>) -> ::std::result::Result<::std::vec::Vec<$crate::NamedTool>, ::std::string::String> {
                ::std::result::Result::Err($crate::runtime::unsupported::<$ty>("naming"))
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __content_export {
    ($shim:ident, $ty:ty, [content $($rest:ident)*]) => {
        impl $crate::bindings::exports::airlock::adapter::content::Guest for $shim {
            fn convert(result: $crate::ToolResult) -> ::std::result::Result<$crate::ToolResult, ::std::string::String> {
                $crate::runtime::with::<$ty, _>(|p| <$ty as $crate::Content>::convert(p, result))
            }
        }
    };
    ($shim:ident, $ty:ty, [$other:ident $($rest:ident)*]) => {
        $crate::__content_export!($shim, $ty, [$($rest)*]);
    };
    ($shim:ident, $ty:ty, []) => {
        impl $crate::bindings::exports::airlock::adapter::content::Guest for $shim {
            fn convert(_: $crate::ToolResult) -> ::std::result::Result<$crate::ToolResult, ::std::string::String> {
                ::std::result::Result::Err($crate::runtime::unsupported::<$ty>("content"))
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __redaction_export {
    ($shim:ident, $ty:ty, [redaction $($rest:ident)*]) => {
        impl $crate::bindings::exports::airlock::adapter::redaction::Guest for $shim {
            fn redact(result: $crate::ToolResult, secrets: ::std::vec::Vec<$crate::Secret>) -> ::std::result::Result<$crate::Redacted, ::std::string::String> {
                $crate::runtime::with::<$ty, _>(|p| <$ty as $crate::Redaction>::redact(p, result, secrets))
            }
        }
    };
    ($shim:ident, $ty:ty, [$other:ident $($rest:ident)*]) => {
        $crate::__redaction_export!($shim, $ty, [$($rest)*]);
    };
    ($shim:ident, $ty:ty, []) => {
        impl $crate::bindings::exports::airlock::adapter::redaction::Guest for $shim {
            fn redact(_: $crate::ToolResult, _: ::std::vec::Vec<$crate::Secret>) -> ::std::result::Result<$crate::Redacted, ::std::string::String> {
                ::std::result::Result::Err($crate::runtime::unsupported::<$ty>("redaction"))
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __policy_export {
    ($shim:ident, $ty:ty, [policy $($rest:ident)*]) => {
        impl $crate::bindings::exports::airlock::adapter::policy::Guest for $shim {
            fn check_call(call: $crate::Call) -> ::std::result::Result<$crate::Verdict, ::std::string::String> {
                $crate::runtime::with::<$ty, _>(|p| <$ty as $crate::Policy>::check_call(p, &call))
            }
            fn check_result(call: $crate::Call, result: $crate::ToolResult) -> ::std::result::Result<$crate::ResultVerdict, ::std::string::String> {
                $crate::runtime::with::<$ty, _>(|p| <$ty as $crate::Policy>::check_result(p, &call, result))
            }
        }
    };
    ($shim:ident, $ty:ty, [$other:ident $($rest:ident)*]) => {
        $crate::__policy_export!($shim, $ty, [$($rest)*]);
    };
    ($shim:ident, $ty:ty, []) => {
        impl $crate::bindings::exports::airlock::adapter::policy::Guest for $shim {
            fn check_call(_: $crate::Call) -> ::std::result::Result<$crate::Verdict, ::std::string::String> {
                ::std::result::Result::Err($crate::runtime::unsupported::<$ty>("policy"))
            }
            fn check_result(_: $crate::Call, _: $crate::ToolResult) -> ::std::result::Result<$crate::ResultVerdict, ::std::string::String> {
                ::std::result::Result::Err($crate::runtime::unsupported::<$ty>("policy"))
            }
        }
    };
}
