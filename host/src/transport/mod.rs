//! Transports to MCP servers. Stdio: the spawned child's stdout/stdin, framed as
//! newline-delimited JSON-RPC by rmcp's async read/write transport.

use rmcp::RoleClient;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::process::{ChildStdin, ChildStdout};

/// The transport for a stdio server: reads its stdout, writes its stdin.
pub fn stdio(
    stdout: ChildStdout,
    stdin: ChildStdin,
) -> AsyncRwTransport<RoleClient, ChildStdout, ChildStdin> {
    AsyncRwTransport::new_client(stdout, stdin)
}
