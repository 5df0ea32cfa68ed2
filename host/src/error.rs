//! The error codes Airlock reports for a tool call, shared by the library API and the
//! CLI's `--json` output.

use serde::Serialize;

/// Why a call did not produce a result. The string form is the `error` field of
/// `airlock --json call`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorCode {
    /// The server ran the tool and reported a failure (`isError`, or a JSON-RPC error).
    ToolError,
    /// The call exceeded its timeout; the server was sent a cancellation.
    Timeout,
    /// The caller cancelled the call.
    Cancelled,
    /// No tool has that qualified name.
    UnknownTool,
    /// The arguments are not a JSON object, or the server rejected them as invalid.
    InvalidArguments,
    /// The service could not be reached (failed to start, disconnected, disabled).
    ServiceUnavailable,
    /// The caller may not use this service.
    ServiceAccessDenied,
    /// The live-session limit is reached.
    ServiceSessionLimit,
    /// A plugin failed (trapped, exceeded a limit, or returned an error).
    AdapterError,
    /// A policy refused the call (it never reached the server) or withheld its result.
    PolicyDenied,
    /// The shared registry (PostgreSQL) could not be reached to check what the call
    /// needs; retry shortly. Nothing was sent to the server.
    RegistryUnavailable,
    /// The service already has `limits.max_concurrent` calls in flight; retry shortly.
    /// Nothing was sent to the server.
    Overloaded,
    /// The service's (or the agent's) `limits` rate is spent; the error says when to
    /// retry. Nothing was sent to the server.
    RateLimited,
    /// The service failed to connect `limits.breaker_failures` times in a row, so Airlock
    /// stops trying for a cooldown; the error says when it tries again.
    CircuitOpen,
}

impl ErrorCode {
    /// The wire name, e.g. `tool_error`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ToolError => "tool_error",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::UnknownTool => "unknown_tool",
            ErrorCode::InvalidArguments => "invalid_arguments",
            ErrorCode::ServiceUnavailable => "service_unavailable",
            ErrorCode::ServiceAccessDenied => "service_access_denied",
            ErrorCode::ServiceSessionLimit => "service_session_limit",
            ErrorCode::AdapterError => "adapter_error",
            ErrorCode::PolicyDenied => "policy_denied",
            ErrorCode::RegistryUnavailable => "registry_unavailable",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::CircuitOpen => "circuit_open",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed call: a code and a message for the caller.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code}: {message}")]
pub struct CallError {
    /// The machine-readable code.
    pub code: ErrorCode,
    /// What happened, in words.
    pub message: String,
    /// When retrying may succeed, for refusals that know (`rate_limited`,
    /// `circuit_open`, `overloaded`): `retry_after_ms` in `--json` and in the gateway's
    /// error `_meta`.
    pub retry_after: Option<std::time::Duration>,
}

impl CallError {
    /// Builds an error.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        CallError {
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The same error, saying when to retry.
    pub fn retry_after(mut self, wait: std::time::Duration) -> Self {
        self.retry_after = Some(wait);
        self
    }
}
