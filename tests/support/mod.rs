//! Helpers shared by the integration tests: where the real peers live (npm reference
//! servers, the Python SDK venv, the fixture plugins), config files in temp folders, and
//! running the real `airlock` binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

mod background;
mod eras;
mod gateway;
mod idp;
mod oauth;
mod policy;
// Each test binary uses some of these, none all of them.
#[allow(unused_imports)]
pub use background::*;
#[allow(unused_imports)]
pub use eras::*;
#[allow(unused_imports)]
pub use gateway::*;
#[allow(unused_imports)]
pub use idp::*;
#[allow(unused_imports)]
pub use oauth::*;
#[allow(unused_imports)]
pub use policy::*;

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

/// The `airlock` binary built for these tests.
pub fn airlock_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_airlock"))
}

fn must_exist(path: PathBuf, what: &str) -> PathBuf {
    assert!(
        path.exists(),
        "{what} is missing at {}; run scripts/test.sh, which installs the test peers",
        path.display()
    );
    path
}

/// The Python interpreter of the test venv (with the `mcp` SDK installed).
pub fn python() -> PathBuf {
    must_exist(
        root().join("tests/.venv/bin/python"),
        "the Python test venv",
    )
}

/// A Python test server script under tests/peers/python.
pub fn python_server(script: &str) -> PathBuf {
    must_exist(
        root().join("tests/peers/python").join(script),
        "a Python test server",
    )
}

/// The Python interpreter of the 2026-07-28-era venv (the `mcp` SDK 2.x, pinned by
/// tests/peers/python-modern/requirements.txt).
pub fn modern_python() -> PathBuf {
    must_exist(
        root().join("tests/.venv-modern/bin/python"),
        "the Python SDK 2.x test venv",
    )
}

/// A script under tests/peers/python-modern (run with [`modern_python`]).
pub fn modern_peer(script: &str) -> PathBuf {
    must_exist(
        root().join("tests/peers/python-modern").join(script),
        "a Python SDK 2.x test peer",
    )
}

/// An example program of `airlock-host` (`host/examples/NAME.rs`), which `cargo test`
/// builds beside the test binaries.
pub fn example_binary(name: &str) -> PathBuf {
    // target/debug/deps/TEST-* -> target/debug/examples/NAME
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the target directory");
    must_exist(
        dir.join("examples").join(name),
        "an example built by cargo test",
    )
}

/// `node` and the entry point of `@modelcontextprotocol/server-everything`.
pub fn everything_server() -> (String, PathBuf) {
    let entry = must_exist(
        root()
            .join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
        "@modelcontextprotocol/server-everything",
    );
    ("node".to_string(), entry)
}

/// Builds the fixture plugins once per test binary and returns the path of `name`
/// (`hostile`, `foreign-import`, `future-contract`).
pub fn fixture_wasm(name: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let status = Command::new("bash")
            .arg(root().join("scripts/build-plugins.sh"))
            .arg("--fixtures")
            .status()
            .expect("run scripts/build-plugins.sh");
        assert!(status.success(), "building the fixture plugins failed");
    });
    let file = format!("airlock_fixture_{}.wasm", name.replace('-', "_"));
    must_exist(
        root().join("target/wasm/wasm32-wasip2/plugin").join(file),
        "a fixture plugin",
    )
}

/// A compiled-plugin cache shared by every test's data directory, so each new workspace
/// does not compile the bundled plugins again.
pub fn plugin_cache() -> PathBuf {
    root().join("target/test-plugin-cache")
}

/// A TOML string literal.
pub fn toml_str(s: impl AsRef<str>) -> String {
    toml_escape(s.as_ref())
}

fn toml_escape(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A stdio server entry for the Python fixture server.
pub fn python_fixture_entry(name: &str, extra: &str) -> String {
    format!(
        "[mcp_servers.{name}]\ntype = \"stdio\"\ncommand = {}\nargs = [{}]\n{extra}\n",
        toml_str(python().display().to_string()),
        toml_str(python_server("fixture_server.py").display().to_string())
    )
}

/// A stdio server entry for the demo server built into the airlock binary.
pub fn demo_entry(name: &str, extra: &str) -> String {
    format!(
        "[mcp_servers.{name}]\ntype = \"stdio\"\ncommand = {}\nargs = [\"demo-server\"]\n{extra}\n",
        toml_str(airlock_bin().display().to_string())
    )
}

/// A temp folder holding a config file and a data directory.
pub struct Workspace {
    /// The temp folder (removed on drop).
    pub dir: tempfile::TempDir,
    /// The `[registry]` and `[results]` tables its config ends with (may be empty).
    storage: String,
}

impl Workspace {
    /// A workspace whose `airlock.toml` holds `config`, plus, when the suites run
    /// against remote storage ([`remote_storage`]), `[registry]` and `[results]` tables
    /// of its own (a fresh PostgreSQL schema and S3 prefix).
    pub fn new(config: &str) -> Self {
        if remote_storage() {
            Self::with_storage(config, &remote_storage_tables(&storage_tag()))
        } else {
            Self::with_storage(config, "")
        }
    }

    /// A workspace whose `airlock.toml` holds `config` and then `storage` (the
    /// `[registry]` and `[results]` tables several workspaces may share).
    pub fn with_storage(config: &str, storage: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = Workspace {
            dir,
            storage: storage.to_string(),
        };
        ws.rewrite(config);
        ws
    }

    /// Replaces the config with `config`, keeping the workspace's storage tables.
    pub fn rewrite(&self, config: &str) {
        std::fs::write(self.config(), format!("{config}\n{}", self.storage)).expect("write config");
    }

    /// The config file.
    pub fn config(&self) -> PathBuf {
        self.dir.path().join("airlock.toml")
    }

    /// The data directory.
    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Runs `airlock --config <config> --data-dir <data> ARGS`, with no user config,
    /// in the workspace folder, plus `envs`.
    pub fn run(&self, args: &[&str], envs: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(airlock_bin());
        cmd.arg("--config")
            .arg(self.config())
            .arg("--data-dir")
            .arg(self.data())
            .args(args);
        cmd.current_dir(self.dir.path())
            .env(
                "AIRLOCK_CONFIG",
                self.dir.path().join("no-user-config.toml"),
            )
            .env("AIRLOCK_PLUGIN_CACHE", plugin_cache());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        cmd.output().expect("run airlock")
    }

    /// Runs with `--json` and parses stdout as one JSON object.
    pub fn json(&self, args: &[&str], envs: &[(&str, &str)]) -> (Value, Output) {
        let mut full = vec!["--json"];
        full.extend_from_slice(args);
        let out = self.run(&full, envs);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON object ({e}):\n{stdout}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (value, out)
    }

    /// Options for the library API using this workspace's data directory.
    pub fn options(&self) -> airlock_host::AirlockOptions {
        let mut options = airlock_host::AirlockOptions::new(self.data());
        options.plugin_cache = Some(plugin_cache());
        options
    }

    /// The registry this workspace's config names (SQLite in its data directory, or its
    /// PostgreSQL schema).
    pub fn registry(&self) -> airlock_host::registry::Registry {
        std::fs::create_dir_all(self.data()).expect("data directory");
        airlock_host::registry::Registry::open_at(&self.data(), &self.load().storage.registry)
            .expect("the registry opens")
    }

    /// Runs `sql` directly on this workspace's registry database (SQLite or its
    /// PostgreSQL schema), behind Airlock's back: how a test ages or damages a row.
    pub fn registry_sql(&self, sql: &str) {
        match self.load().storage.registry {
            airlock_host::config::RegistryLocation::Local => {
                let db = rusqlite::Connection::open(self.data().join("registry.db")).unwrap();
                db.execute_batch(sql).unwrap();
            }
            airlock_host::config::RegistryLocation::Postgres { url, schema, .. } => {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                        .await
                        .unwrap();
                    tokio::spawn(connection);
                    client
                        .batch_execute(&format!("SET search_path TO \"{schema}\"; {sql}"))
                        .await
                        .unwrap();
                });
            }
        }
    }

    /// The one integer `sql` selects from this workspace's registry (SQLite or its
    /// PostgreSQL schema), such as a `count(*)`.
    pub fn registry_count(&self, sql: &str) -> i64 {
        match self.load().storage.registry {
            airlock_host::config::RegistryLocation::Local => {
                let db = rusqlite::Connection::open(self.data().join("registry.db")).unwrap();
                db.query_row(sql, [], |row| row.get(0)).unwrap()
            }
            airlock_host::config::RegistryLocation::Postgres { url, schema, .. } => {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                        .await
                        .unwrap();
                    tokio::spawn(connection);
                    client
                        .batch_execute(&format!("SET search_path TO \"{schema}\""))
                        .await
                        .unwrap();
                    client.query_one(sql, &[]).await.unwrap().get::<_, i64>(0)
                })
            }
        }
    }

    /// Everything this workspace's registry holds, as bytes to search: the SQLite
    /// file, or every row of every table of its PostgreSQL schema as text.
    pub fn registry_dump(&self) -> Vec<u8> {
        match self.load().storage.registry {
            airlock_host::config::RegistryLocation::Local => {
                std::fs::read(self.data().join("registry.db")).unwrap()
            }
            airlock_host::config::RegistryLocation::Postgres { url, schema, .. } => {
                with_postgres(&url, async |client| {
                    let tables = client
                        .query(
                            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1",
                            &[&schema],
                        )
                        .await
                        .unwrap();
                    let mut dump = Vec::new();
                    for table in tables {
                        let name: String = table.get(0);
                        let rows = client
                            .query(
                                &format!("SELECT t::text FROM \"{schema}\".\"{name}\" t"),
                                &[],
                            )
                            .await
                            .unwrap();
                        for row in rows {
                            dump.extend(row.get::<_, String>(0).into_bytes());
                            dump.push(b'\n');
                        }
                    }
                    assert!(!dump.is_empty(), "the registry schema {schema} is empty");
                    dump
                })
            }
        }
    }

    /// The parsed config of this workspace (no user/project files).
    pub fn load(&self) -> airlock_host::config::Config {
        let sources = airlock_host::config::ConfigSources {
            user: None,
            project: None,
            explicit: vec![self.config()],
        };
        airlock_host::config::Config::load(&sources, &airlock_host::config::process_env)
            .expect("valid config")
    }
}

/// The credential [`demo_workspace`] hands the demo server (as `DEMO_API_TOKEN`, read from
/// the `DEMO_TOKEN_FOR_TEST` variable the test passes to `airlock`).
pub const DEMO_TOKEN: &str = "tok_live_0123456789abcdef";

/// A workspace running the demo server as `demo`, its `DEMO_API_TOKEN` taken from
/// `DEMO_TOKEN_FOR_TEST`, plus `extra` config lines.
pub fn demo_workspace(extra: &str) -> Workspace {
    Workspace::new(&demo_entry(
        "demo",
        &format!("env = {{ DEMO_API_TOKEN = \"${{DEMO_TOKEN_FOR_TEST}}\" }}\n{extra}"),
    ))
}

/// The credential [`secret_entry`] hands the Python fixture server as `SERVICE_TOKEN`.
pub const FIXTURE_SECRET: &str = "s3cr3t-fixture-token-9f8e7d6c";

/// A stdio entry for the Python fixture server with `SERVICE_TOKEN` set to
/// [`FIXTURE_SECRET`], plus `extra` config lines.
pub fn secret_entry(name: &str, extra: &str) -> String {
    python_fixture_entry(
        name,
        &format!(
            "env = {{ SERVICE_TOKEN = {} }}\n{extra}",
            toml_str(FIXTURE_SECRET)
        ),
    )
}

/// A workspace running `@modelcontextprotocol/server-everything` over stdio as
/// `everything`, with `API_TOKEN = "everything-test-token-77"`, plus `extra` config lines.
pub fn everything_workspace(extra: &str) -> Workspace {
    let (node, entry) = everything_server();
    Workspace::new(&format!(
        "[mcp_servers.everything]\ncommand = {}\nargs = [{}, \"stdio\"]\nenv = {{ API_TOKEN = \"everything-test-token-77\" }}\n{extra}\n",
        toml_str(node),
        toml_str(entry.display().to_string())
    ))
}

/// The fixture server's secret, which `airlock servers` tests pass as `SERVICE_TOKEN`.
pub const SERVERS_TOKEN: &str = "tok-registry-5f1c9a77e2";

/// The command line of the Python fixture server.
pub fn fixture_cmd() -> Vec<String> {
    vec![
        python().display().to_string(),
        python_server("fixture_server.py").display().to_string(),
    ]
}

/// The stdout of an `airlock` run that must have succeeded.
pub fn ok(out: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "airlock failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// What an `airlock` run that must have failed printed (stdout, then stderr).
pub fn failed(out: &std::process::Output) -> String {
    assert!(
        !out.status.success(),
        "expected a failure, got success:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `airlock servers add NAME` of the fixture server with its token and `extra` options.
pub fn add_fixture(ws: &Workspace, name: &str, extra: &[&str]) -> std::process::Output {
    let cmd = fixture_cmd();
    let env = format!("SERVICE_TOKEN={SERVERS_TOKEN}");
    let mut args = vec!["servers", "add", name, "--env", &env];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend(cmd.iter().map(String::as_str));
    ws.run(&args, &[])
}

/// Whether process `pid` is gone (no /proc entry, or a zombie awaiting its reaper).
pub fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .map(|rest| rest.trim_start().starts_with('Z'))
            .unwrap_or(true),
    }
}

/// Every file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// The bytes of `file`, or `None` when it vanished after it was listed: a live data
/// directory has short-lived files (SQLite's `-wal` and `-shm` files go when their last
/// connection closes, atomic writes rename their temporary files), and a file that is no
/// longer there holds nothing to check. Any other error fails the test, naming the file.
pub fn file_bytes(file: &Path) -> Option<Vec<u8>> {
    match std::fs::read(file) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("{} vanished between listing and reading", file.display());
            None
        }
        Err(e) => panic!("{}: {e}", file.display()),
    }
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// Runs `job` with a fresh connection to the PostgreSQL database at `url`.
pub fn with_postgres<T>(url: &str, job: impl AsyncFnOnce(&tokio_postgres::Client) -> T) -> T {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        job(&client).await
    })
}

/// Runs `sql` on the PostgreSQL database at `url` with its triggers off
/// (`session_replication_role = replica`): a change made behind every host's back, which
/// no host is told of.
pub fn unannounced(url: &str, sql: &str) {
    let sql = format!("SET session_replication_role = replica; {sql}");
    with_postgres(url, async |client| {
        client.batch_execute(&sql).await.unwrap()
    });
}

/// Whether the suites keep state in PostgreSQL and S3 (`AIRLOCK_TEST_STORAGE=remote`,
/// the test command's second pass) instead of SQLite and the data directory.
pub fn remote_storage() -> bool {
    std::env::var("AIRLOCK_TEST_STORAGE").as_deref() == Ok("remote")
}

/// A tag no other workspace of this test run uses (a schema and prefix name).
pub fn storage_tag() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "t{}_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            % 1_000_000,
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The PostgreSQL server and S3-compatible server the test command started
/// (`scripts/storage-services.sh`): the database URL, the S3 endpoint and bucket.
pub fn storage_services() -> (String, String, String) {
    let var = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| {
            panic!("{name} is not set: run the tests with scripts/test.sh, which starts PostgreSQL and an S3 server")
        })
    };
    (
        var("AIRLOCK_TEST_POSTGRES_URL"),
        var("AIRLOCK_TEST_S3_ENDPOINT"),
        var("AIRLOCK_TEST_S3_BUCKET"),
    )
}

/// `[registry]` and `[results]` tables keeping state in schema `tag` of the test
/// PostgreSQL database and under prefix `tag` of the test bucket.
pub fn remote_storage_tables(tag: &str) -> String {
    let (postgres, endpoint, bucket) = storage_services();
    format!(
        "[registry]\nurl = {}\nschema = {}\n\n[results]\nstore = {}\nendpoint = {}\nregion = \"us-east-1\"\naccess_key_id = \"airlock-test\"\nsecret_access_key = \"airlock-test-secret\"\n",
        toml_str(postgres),
        toml_str(tag),
        toml_str(format!("s3://{bucket}/{tag}")),
        toml_str(endpoint),
    )
}

/// Polls `done` every millisecond for up to `bound`; returns how long it took to hold.
pub fn held_within(
    bound: std::time::Duration,
    mut done: impl FnMut() -> bool,
) -> Option<std::time::Duration> {
    let started = std::time::Instant::now();
    while started.elapsed() < bound {
        if done() {
            return Some(started.elapsed());
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    None
}

/// A host's registry in schema `tag` of the PostgreSQL database at `url`.
pub fn host_registry(
    url: &str,
    tag: &str,
    dir: &std::path::Path,
) -> airlock_host::registry::Registry {
    let location = airlock_host::config::RegistryLocation::Postgres {
        url: url.to_string(),
        schema: tag.to_string(),
        bounds: Default::default(),
        token_key: None,
    };
    airlock_host::registry::Registry::open_at(dir, &location).unwrap()
}
