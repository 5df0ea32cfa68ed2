//! `airlock-host`: a WASM-sandboxed plugin host for MCP bridges.
//!
//! The native host owns everything that touches the operating system — spawning MCP
//! servers ([`launch`]), transports ([`transport`]), sessions ([`session`]), persistent
//! state ([`registry`]), retained results ([`results`]) and secrets ([`secrets`]). Every
//! policy — tool naming, content conversion, redaction — runs in WebAssembly components
//! ([`plugin`]) chosen per service in the config ([`config`]).
//!
//! Start with [`Airlock::start`].

mod airlock;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod demo;
pub mod error;
pub mod events;
pub mod import;
pub mod launch;
pub mod oauth;
pub mod plugin;
pub mod registry;
pub mod results;
pub mod secrets;
pub mod servers;
pub mod session;
pub mod transport;

pub use airlock::{
    AccessCheck, AccessMode, AccessOptions, AccessRequest, Airlock, AirlockOptions, CallOptions,
    CallOutput, DEFAULT_AGENT, DEFAULT_MAX_SESSIONS, Redaction, ServiceReport, ServiceStatus,
    StartError, TestReport,
};
pub use error::{CallError, ErrorCode};
pub use events::Event;
