//! How a request's failure reads: rmcp's errors on a request mapped to Airlock's error
//! codes (the 2026-07-28 codes among them), and the timeout and cancellation of a call,
//! each with a message that says what happened.

use std::time::Duration;

use rmcp::service::ServiceError;

use crate::error::{CallError, ErrorCode};

/// Resolves at `deadline`; never without one.
pub(super) async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A tool call the caller cancelled.
pub(super) fn cancelled(raw_name: &str) -> CallError {
    CallError::new(
        ErrorCode::Cancelled,
        format!("the call to \"{raw_name}\" was cancelled; the server was sent a cancellation"),
    )
}

/// A tool call past its timeout.
pub(super) fn timed_out(raw_name: &str, timeout: Option<Duration>) -> CallError {
    CallError::new(
        ErrorCode::Timeout,
        format!(
            "tool \"{raw_name}\" did not answer within {:.1} s; the server was sent a cancellation",
            timeout.unwrap_or_default().as_secs_f64()
        ),
    )
}

/// Maps an rmcp error on a request to Airlock's error codes.
pub(super) fn service_error(error: ServiceError, what: &str) -> CallError {
    match error {
        ServiceError::Timeout { timeout } => CallError::new(
            ErrorCode::Timeout,
            format!(
                "\"{what}\" did not answer within {:.1} s; the server was sent a cancellation",
                timeout.as_secs_f64()
            ),
        ),
        ServiceError::Cancelled { reason } => CallError::new(
            ErrorCode::Cancelled,
            format!("the request was cancelled: {}", reason.unwrap_or_default()),
        ),
        ServiceError::McpError(e) if e.code.0 == crate::transport::guard::UNREADABLE_ANSWER => {
            CallError::new(ErrorCode::ToolError, format!("\"{what}\": {}", e.message))
        }
        ServiceError::McpError(e)
            if e.code == rmcp::model::ErrorCode::UNSUPPORTED_PROTOCOL_VERSION =>
        {
            CallError::new(
                ErrorCode::ServiceUnavailable,
                format!(
                    "\"{what}\": the server no longer accepts the protocol revision this session negotiated ({}); the next call reconnects",
                    e.message
                ),
            )
        }
        ServiceError::McpError(e)
            if e.code == rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY =>
        {
            CallError::new(
                ErrorCode::ToolError,
                format!(
                    "\"{what}\" needs something of the agent's client that it did not declare: {}",
                    e.message
                ),
            )
        }
        ServiceError::McpError(e) if e.code == rmcp::model::ErrorCode::HEADER_MISMATCH => {
            CallError::new(
                ErrorCode::ServiceUnavailable,
                format!(
                    "\"{what}\": the server refused the request's routing headers: {}",
                    e.message
                ),
            )
        }
        ServiceError::McpError(e) if e.code == rmcp::model::ErrorCode::INVALID_PARAMS => {
            CallError::new(
                ErrorCode::InvalidArguments,
                format!("the server rejected the arguments: {}", e.message),
            )
        }
        ServiceError::McpError(e) => CallError::new(
            ErrorCode::ToolError,
            format!("the server reported an error: {}", e.message),
        ),
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => CallError::new(
            ErrorCode::ServiceUnavailable,
            format!("the connection to the server closed during \"{what}\""),
        ),
        other => CallError::new(ErrorCode::ToolError, other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ErrorCode as Rpc;

    fn refused(code: Rpc) -> CallError {
        service_error(
            ServiceError::McpError(rmcp::ErrorData::new(code, "details", None)),
            "tools/call",
        )
    }

    #[test]
    fn the_2026_07_28_error_codes_read_as_what_they_mean() {
        let version = refused(Rpc::UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(version.code, ErrorCode::ServiceUnavailable);
        assert!(
            version.message.contains("reconnects"),
            "{}",
            version.message
        );
        let capability = refused(Rpc::MISSING_REQUIRED_CLIENT_CAPABILITY);
        assert_eq!(capability.code, ErrorCode::ToolError);
        assert!(
            capability.message.contains("did not declare"),
            "{}",
            capability.message
        );
        let headers = refused(Rpc::HEADER_MISMATCH);
        assert_eq!(headers.code, ErrorCode::ServiceUnavailable);
        assert!(
            headers.message.contains("routing headers"),
            "{}",
            headers.message
        );
    }
}
