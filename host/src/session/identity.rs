//! What a server says about itself in the handshake, read and checked against the
//! protocol revisions Airlock speaks.

use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::Value;

use super::{AirlockClient, SUPPORTED_PROTOCOL_VERSIONS, SessionError, TransportKind};

/// What the server said about itself in the handshake.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ServerIdentity {
    /// The negotiated protocol version.
    pub protocol_version: String,
    /// `serverInfo.name`.
    pub name: String,
    /// `serverInfo.title`.
    pub title: Option<String>,
    /// `serverInfo.version`.
    pub version: String,
    /// The server's instructions, if any.
    pub instructions: Option<String>,
    /// The transport in use.
    pub transport: TransportKind,
}

pub(super) fn placeholder_identity(transport: TransportKind) -> ServerIdentity {
    ServerIdentity {
        protocol_version: String::new(),
        name: String::new(),
        title: None,
        version: String::new(),
        instructions: None,
        transport,
    }
}

pub(super) fn read_identity(
    service: &RunningService<RoleClient, AirlockClient>,
    transport: TransportKind,
) -> Result<ServerIdentity, SessionError> {
    let info = service.peer().peer_info().ok_or_else(|| {
        SessionError::Handshake("the server sent no initialize result".into(), String::new())
    })?;
    let value = serde_json::to_value(&*info).unwrap_or_default();
    let version = value
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !SUPPORTED_PROTOCOL_VERSIONS.contains(&version.as_str()) {
        return Err(SessionError::UnsupportedVersion {
            found: version,
            asked: SUPPORTED_PROTOCOL_VERSIONS[0].into(),
            supported: SUPPORTED_PROTOCOL_VERSIONS.join(", "),
        });
    }
    let server_info = value.get("serverInfo").cloned().unwrap_or_default();
    let s = |k: &str| {
        server_info
            .get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Ok(ServerIdentity {
        protocol_version: version,
        name: s("name").unwrap_or_default(),
        title: s("title"),
        version: s("version").unwrap_or_default(),
        instructions: value
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_string),
        transport,
    })
}
