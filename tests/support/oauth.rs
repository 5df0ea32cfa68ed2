//! The OAuth test peer (tests/peers/python/oauth_server.py: an authorization server and
//! an OAuth-protected MCP server in one process) and a scripted "browser" for Airlock's
//! authorization-code flow.

use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

use super::{python, python_server};

/// The running OAuth peer, killed with its process group when dropped.
pub struct OAuthServer {
    child: Child,
    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    /// Its request log (no secrets).
    pub log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

pub fn start_oauth_server(token_ttl: u32, extra: &[String]) -> OAuthServer {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let mut child = Command::new(python())
        .arg(python_server("oauth_server.py"))
        .args([
            "--port",
            "0",
            "--token-ttl",
            &token_ttl.to_string(),
            "--log",
        ])
        .arg(&log)
        .args(extra)
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the OAuth server");
    let url = listening_url(&mut child);
    OAuthServer {
        child,
        url,
        log,
        _dir: dir,
    }
}

/// A "browser" that follows the authorization redirect to Airlock's loopback listener
/// (the test server approves without a login page).
pub fn browser_script(dir: &std::path::Path) -> String {
    let path = dir.join("browser.sh");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nexec {} -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=30).read()' \"$1\"\n",
            python().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// The URL a Python peer prints first (`LISTENING URL`), once it serves.
pub fn listening_url(child: &mut Child) -> String {
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("the peer's stdout is piped"))
        .read_line(&mut line)
        .unwrap();
    line.trim()
        .strip_prefix("LISTENING ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_string()
}
