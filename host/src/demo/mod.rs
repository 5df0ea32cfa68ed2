//! `airlock demo`: a bundled MCP server (built on rmcp's server side, run as a real child
//! process of the `airlock` binary via the hidden `demo-server` command) and the
//! walk-through that shows a newcomer the catalog, redaction, content conversion, and a
//! plugin swapped by configuration alone.
//!
//! Layer 8 (client of the facade). May import the facade and `config`.

pub mod server;
mod walkthrough;

pub use walkthrough::{DEMO_CONFIG, run_demo};
