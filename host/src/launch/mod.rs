//! Spawning stdio MCP servers: a minimal environment, bare-command lookup with fallback
//! folders, the child in its own process group, stderr captured (bounded, redacted), and
//! a close that leaves no process behind (SIGTERM to the group, SIGKILL after a grace).
//!
//! Layer 2 (reach). May import: `secrets`.

mod lookup;

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::secrets::KnownSecrets;

pub use lookup::{fallback_dirs, resolve_command};

/// Variables of the host environment a server inherits; nothing else leaks.
pub const INHERITED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USERPROFILE",
    "TMP",
    "TEMP",
    "TMPDIR",
    "SystemRoot",
    "LANG",
];

/// How long a server gets between SIGTERM and SIGKILL.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(3);

/// Bytes of stderr kept for diagnostics (the most recent ones).
pub const STDERR_CAP: usize = 64 << 10;

/// Why a server could not be spawned.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The command is not on PATH nor in the fallback folders.
    #[error("command \"{command}\" was not found on PATH or in {searched}")]
    NotFound {
        /// The command.
        command: String,
        /// The folders searched, for the message.
        searched: String,
    },
    /// The OS refused to start it.
    #[error("cannot start \"{command}\": {source}")]
    Spawn {
        /// The command.
        command: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// What to launch.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// The program.
    pub command: String,
    /// Its arguments (never through a shell).
    pub args: Vec<String>,
    /// Variables on top of the inherited minimal set.
    pub env: BTreeMap<String, String>,
    /// Working directory.
    pub cwd: Option<PathBuf>,
    /// Values to scrub from captured stderr.
    pub secrets: KnownSecrets,
}

/// The minimal environment for a child: [`INHERITED_ENV`] from `host_env`, then `extra`.
pub fn minimal_env(
    host_env: &dyn Fn(&str) -> Option<String>,
    extra: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = INHERITED_ENV
        .iter()
        .filter_map(|k| host_env(k).map(|v| (k.to_string(), v)))
        .collect();
    env.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// A running server process.
pub struct ServerProcess {
    child: Child,
    pgid: Pid,
    stderr_tail: Arc<Mutex<VecDeque<u8>>>,
    terminated: bool,
}

impl ServerProcess {
    /// Spawns the server with piped stdio. Returns the process and its stdout/stdin.
    pub fn spawn(
        spec: &LaunchSpec,
    ) -> Result<(ServerProcess, ChildStdout, ChildStdin), LaunchError> {
        let env = minimal_env(&|k| std::env::var(k).ok(), &spec.env);
        let search_path = env.get("PATH").cloned().unwrap_or_default();
        let home = env.get("HOME").map(PathBuf::from);
        let program = resolve_command(
            &spec.command,
            &search_path,
            home.as_deref(),
            spec.cwd.as_deref(),
        )
        .ok_or_else(|| LaunchError::NotFound {
            command: spec.command.clone(),
            searched: fallback_dirs(home.as_deref())
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
        let mut env = env;
        // A program found in a fallback folder often needs its neighbours (npx needs
        // node): put that folder first on the child's PATH.
        if let Some(dir) = program
            .parent()
            .filter(|d| !search_path.split(':').any(|p| Path::new(p) == *d))
        {
            let path = if search_path.is_empty() {
                dir.display().to_string()
            } else {
                format!("{}:{search_path}", dir.display())
            };
            env.insert("PATH".into(), path);
        }
        let mut cmd = Command::new(&program);
        cmd.args(&spec.args)
            .env_clear()
            .envs(&env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(cwd) = &spec.cwd {
            cmd.current_dir(cwd);
        }
        let mut child = cmd.spawn().map_err(|source| LaunchError::Spawn {
            command: spec.command.clone(),
            source,
        })?;
        let pid = child.id().expect("a just-spawned child has a pid");
        let pgid = Pid::from_raw(pid as i32);
        let stdout = child.stdout.take().expect("stdout is piped");
        let stdin = child.stdin.take().expect("stdin is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        {
            let tail = stderr_tail.clone();
            let secrets = spec.secrets.clone();
            let command = spec.command.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let line = secrets.scrub(&line);
                    tracing::debug!(server = %command, "stderr: {line}");
                    let mut tail = tail.lock().expect("stderr buffer poisoned");
                    tail.extend(line.as_bytes());
                    tail.push_back(b'\n');
                    let excess = tail.len().saturating_sub(STDERR_CAP);
                    tail.drain(..excess);
                }
            });
        }
        Ok((
            ServerProcess {
                child,
                pgid,
                stderr_tail,
                terminated: false,
            },
            stdout,
            stdin,
        ))
    }

    /// The process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.pgid.as_raw() as u32
    }

    /// The last [`STDERR_CAP`] bytes the server wrote to stderr, secrets scrubbed.
    pub fn stderr_tail(&self) -> String {
        let tail = self.stderr_tail.lock().expect("stderr buffer poisoned");
        String::from_utf8_lossy(&tail.iter().copied().collect::<Vec<_>>()).into_owned()
    }

    /// Whether the process has exited (and how).
    pub fn try_exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Ends the server and everything it started: SIGTERM to the process group, then
    /// SIGKILL to the group after `grace` (or at once once the leader has exited, to
    /// catch grandchildren that ignored SIGTERM).
    pub async fn terminate(mut self, grace: Duration) {
        let _ = killpg(self.pgid, Signal::SIGTERM);
        let _ = tokio::time::timeout(grace, self.child.wait()).await;
        let _ = killpg(self.pgid, Signal::SIGKILL);
        let _ = self.child.wait().await;
        self.terminated = true;
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // A process not closed through `terminate` still takes its group with it.
        if !self.terminated {
            let _ = killpg(self.pgid, Signal::SIGKILL);
        }
    }
}
