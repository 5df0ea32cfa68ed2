//! `airlock-host`: a WASM-sandboxed plugin host for MCP bridges.
//!
//! The native host owns everything that touches the operating system — spawning MCP
//! servers ([`launch`]), transports ([`transport`]), sessions ([`session`]), persistent
//! state ([`registry`]), retained results ([`results`]) and secrets ([`secrets`]). Every
//! policy — tool naming, content conversion, redaction — runs in WebAssembly components
//! ([`plugin`]) chosen per service in the config ([`config`]).
//!
//! Start with [`Airlock::start`]; the [`Airlock`] hands out its capability services
//! ([`Services`], [`Access`], [`Catalog`], [`Resources`], [`Outputs`], [`Calls`]).
//! `ARCHITECTURE.md` names the layers and what each may import.
//!
//! Features: `cli` (default) builds the `airlock` binary, its command line and the demo;
//! `gateway` (part of `cli`) adds `airlock serve`, the MCP gateway; `keyring` (part of
//! `cli`) adds the OS credential store. Without default features this is the embeddable
//! library alone.

#![warn(missing_docs)]

mod airlock;
pub mod alloc;
pub mod catalog;
#[cfg(feature = "cli")]
pub mod cli;
pub mod config;
#[cfg(feature = "cli")]
pub mod demo;
pub mod digest;
pub mod error;
pub mod events;
#[cfg(feature = "gateway")]
pub mod gateway;
pub mod import;
pub mod launch;
pub mod mcp;
#[cfg(feature = "http")]
pub mod oauth;
pub mod plugin;
pub mod registry;
pub mod results;
pub mod secrets;
pub mod servers;
pub mod session;
pub mod storage;
pub mod telemetry;
pub mod transport;

pub use airlock::meters;
pub use airlock::{
    Access, AccessCheck, AccessMode, AccessOptions, AccessRefused, AccessRequest, Agents, Airlock,
    AirlockOptions, Approval, ApprovalRequest, Approver, COMPACT_PREVIEW, CallOptions, CallOutput,
    CallerRequest, Calls, Catalog, CatalogTool, DEFAULT_AGENT, DEFAULT_MAX_SESSIONS,
    DEFAULT_PREVIEW, DegradedService, Outputs, PluginSlot, Readiness, ReadinessCheck, Reconciled,
    Redaction, Reindexed, RememberArguments, Resources, ServicePlugins, ServiceReport,
    ServiceStatus, Services, SessionInfo, StartError, Stores, TestReport, URL_ELICITATION,
    call_json,
};
pub use error::{CallError, ErrorCode};
pub use events::Event;
