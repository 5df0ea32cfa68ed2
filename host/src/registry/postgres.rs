//! The registry in PostgreSQL (`[registry] url = "postgres://…"`): the same tables and
//! the same versioned migrations as the embedded SQLite database, in one schema of a
//! database every host of a deployment shares. A grant revoked on one host is refused on
//! the next call through any other; nothing is cached.
//!
//! The connections run on the storage runtime ([`crate::storage`]). Single statements go
//! over one shared connection (tokio-postgres pipelines concurrent queries on it);
//! transactions take a second connection of their own. A connection that dropped is
//! made again on the next use. TLS follows the URL's `sslmode` (native-tls).

use std::str::FromStr;
use std::sync::Arc;

use bytes::BytesMut;
use tokio::sync::Mutex;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{Client, Config};

use super::RegistryError;
use super::db::{Cell, Param, Row, Statement};
use crate::storage;

/// Migrations, in the same order and with the same meaning as the SQLite ones; the
/// table `airlock_migrations` records how many ran.
const MIGRATIONS: &[&str] = &[
    "CREATE TABLE namespaces (
        service    TEXT PRIMARY KEY NOT NULL,
        namespace  TEXT NOT NULL UNIQUE,
        created_at BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT)
    );",
    "CREATE TABLE grants (
        agent      TEXT NOT NULL,
        service    TEXT NOT NULL,
        created_at BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT),
        PRIMARY KEY (agent, service)
    );",
    "CREATE TABLE services (
        id                   BIGSERIAL PRIMARY KEY,
        scope                TEXT NOT NULL CHECK (scope IN ('user', 'project')),
        project              TEXT NOT NULL DEFAULT '',
        name                 TEXT NOT NULL,
        label                TEXT,
        description          TEXT,
        transport            TEXT NOT NULL CHECK (transport IN ('stdio', 'http')),
        command              TEXT,
        args                 TEXT NOT NULL DEFAULT '[]',
        cwd                  TEXT,
        env                  TEXT NOT NULL DEFAULT '{}',
        url                  TEXT,
        headers              TEXT NOT NULL DEFAULT '{}',
        auth                 TEXT,
        enabled              BOOLEAN NOT NULL DEFAULT TRUE,
        startup_timeout_secs DOUBLE PRECISION,
        tool_timeout_secs    DOUBLE PRECISION,
        adapters             TEXT,
        adapter_config       TEXT,
        repair               TEXT NOT NULL DEFAULT '[]',
        origin               TEXT,
        created_at           BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT),
        updated_at           BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT),
        UNIQUE (scope, project, name)
    );
    CREATE TABLE catalogs (
        service          TEXT NOT NULL,
        launch_digest    TEXT NOT NULL,
        tested_at        BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT),
        protocol_version TEXT NOT NULL,
        server_name      TEXT NOT NULL,
        server_version   TEXT NOT NULL,
        transport        TEXT NOT NULL,
        tools            TEXT NOT NULL,
        PRIMARY KEY (service, launch_digest)
    );
    CREATE TABLE results (
        seq        BIGSERIAL,
        output_id  TEXT PRIMARY KEY NOT NULL,
        service    TEXT NOT NULL,
        agent      TEXT NOT NULL,
        size       BIGINT NOT NULL,
        digest     TEXT NOT NULL,
        complete   BOOLEAN NOT NULL,
        redacted   BOOLEAN NOT NULL,
        created_at BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT)
    );
    CREATE INDEX results_by_service ON results (service, created_at);
    CREATE TABLE import_previews (
        id         BIGSERIAL PRIMARY KEY,
        created_at BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT),
        request    TEXT NOT NULL,
        entries    TEXT NOT NULL
    );",
    "CREATE TABLE gateway_tokens (
        id          TEXT PRIMARY KEY NOT NULL,
        agent       TEXT NOT NULL,
        fingerprint TEXT NOT NULL UNIQUE,
        secret_ref  TEXT NOT NULL,
        created_at  BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT)
    );",
    "CREATE TABLE approvals (
        id         BIGSERIAL PRIMARY KEY,
        agent      TEXT NOT NULL,
        service    TEXT NOT NULL,
        tool       TEXT NOT NULL,
        arguments  TEXT NOT NULL,
        plugin     TEXT NOT NULL,
        rule       TEXT NOT NULL,
        expires_at BIGINT,
        created_at BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT),
        -- The globs as anchored regular expressions (PostgreSQL has no GLOB).
        tool_re      TEXT NOT NULL,
        arguments_re TEXT NOT NULL
    );
    CREATE INDEX approvals_by_scope ON approvals (agent, service, plugin, rule);",
    "CREATE TABLE tasks (
        id               TEXT PRIMARY KEY NOT NULL,
        agent            TEXT NOT NULL,
        tool             TEXT NOT NULL,
        status           TEXT NOT NULL,
        status_message   TEXT,
        payload          TEXT,
        created_ms       BIGINT NOT NULL,
        updated_ms       BIGINT NOT NULL,
        ttl_ms           BIGINT NOT NULL,
        replica          TEXT NOT NULL,
        lease_until_ms   BIGINT NOT NULL,
        cancel_requested BOOLEAN NOT NULL DEFAULT FALSE
    );
    CREATE INDEX tasks_by_age ON tasks (created_ms);
    CREATE TABLE task_responses (
        task_id TEXT NOT NULL,
        key     TEXT NOT NULL,
        value   TEXT NOT NULL,
        PRIMARY KEY (task_id, key)
    );",
];

/// A registry in PostgreSQL.
pub(crate) struct Postgres {
    state: Arc<State>,
    /// `host:port/database (schema)`, for messages: never the password.
    location: String,
}

/// What the jobs on the storage runtime share.
struct State {
    config: Config,
    schema: String,
    shared: Mutex<Option<Arc<Client>>>,
    transactions: Mutex<Option<Client>>,
}

/// A parameter owned for the trip to the storage runtime.
#[derive(Debug)]
enum Value {
    Text(Option<String>),
    Int(Option<i64>),
    Real(Option<f64>),
    Bool(bool),
}

impl ToSql for Value {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Value::Text(v) => v.to_sql(ty, out),
            Value::Int(v) => v.to_sql(ty, out),
            Value::Real(v) => v.to_sql(ty, out),
            Value::Bool(v) => v.to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        <String as ToSql>::accepts(ty)
            || <i64 as ToSql>::accepts(ty)
            || <f64 as ToSql>::accepts(ty)
            || <bool as ToSql>::accepts(ty)
    }

    to_sql_checked!();
}

fn owned(params: &[Param<'_>]) -> Vec<Value> {
    params
        .iter()
        .map(|p| match *p {
            Param::Text(v) => Value::Text(v.map(str::to_string)),
            Param::Int(v) => Value::Int(v),
            Param::Real(v) => Value::Real(v),
            Param::Bool(v) => Value::Bool(v),
        })
        .collect()
}

fn refs(values: &[Value]) -> Vec<&(dyn ToSql + Sync)> {
    values.iter().map(|v| v as &(dyn ToSql + Sync)).collect()
}

/// A statement in PostgreSQL's dialect: `?N` placeholders become `$N`, and SQLite's
/// `unixepoch()` the epoch seconds of `now()`.
pub(super) fn dialect(sql: &str) -> String {
    let sql = sql.replace("unixepoch()", "CAST(EXTRACT(EPOCH FROM now()) AS BIGINT)");
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

fn decode(row: &tokio_postgres::Row) -> Result<Row, tokio_postgres::Error> {
    let mut cells = Vec::with_capacity(row.len());
    for (i, column) in row.columns().iter().enumerate() {
        let ty = column.type_();
        let cell = if *ty == Type::INT8 {
            row.try_get::<_, Option<i64>>(i)?.map(Cell::Int)
        } else if *ty == Type::INT4 {
            row.try_get::<_, Option<i32>>(i)?
                .map(|n| Cell::Int(n.into()))
        } else if *ty == Type::INT2 {
            row.try_get::<_, Option<i16>>(i)?
                .map(|n| Cell::Int(n.into()))
        } else if *ty == Type::FLOAT8 {
            row.try_get::<_, Option<f64>>(i)?.map(Cell::Real)
        } else if *ty == Type::FLOAT4 {
            row.try_get::<_, Option<f32>>(i)?
                .map(|f| Cell::Real(f.into()))
        } else if *ty == Type::BOOL {
            row.try_get::<_, Option<bool>>(i)?.map(Cell::Bool)
        } else {
            row.try_get::<_, Option<String>>(i)?.map(Cell::Text)
        };
        cells.push(cell.unwrap_or(Cell::Null));
    }
    Ok(Row { cells })
}

impl Postgres {
    /// Connects to `url`, creates `schema` when it is missing, and runs the migrations
    /// (one host at a time: an advisory lock serializes hosts starting together).
    pub(super) fn connect(url: &str, schema: &str) -> Result<Postgres, RegistryError> {
        let config = Config::from_str(url).map_err(|e| {
            RegistryError::Config(format!(
                "[registry] url is not a PostgreSQL connection URL: {e}"
            ))
        })?;
        if schema.is_empty()
            || schema.len() > 63
            || !schema
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            return Err(RegistryError::Config(format!(
                "[registry] schema {schema:?} must be 1 to 63 of a-z, 0-9 and _"
            )));
        }
        let location = format!("{} ({schema})", describe(&config));
        let pg = Postgres {
            state: Arc::new(State {
                config,
                schema: schema.to_string(),
                shared: Mutex::new(None),
                transactions: Mutex::new(None),
            }),
            location,
        };
        pg.migrate()?;
        Ok(pg)
    }

    /// Where the registry is, for messages (no credentials).
    pub(super) fn location(&self) -> &str {
        &self.location
    }

    fn error(&self, e: tokio_postgres::Error) -> RegistryError {
        let message = match e.as_db_error() {
            Some(db) => match db.detail() {
                Some(detail) => format!("{} ({detail})", db.message()),
                None => db.message().to_string(),
            },
            None => {
                let mut message = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    message.push_str(": ");
                    message.push_str(&s.to_string());
                    source = s.source();
                }
                message
            }
        };
        RegistryError::Postgres {
            location: self.location.clone(),
            message,
        }
    }

    fn migrate(&self) -> Result<(), RegistryError> {
        let state = self.state.clone();
        storage::wait(async move {
            let schema = &state.schema;
            let mut client = state.open().await?;
            let tx = client.transaction().await?;
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtext('airlock registry migrations'))",
                &[],
            )
            .await?;
            tx.batch_execute(&format!(
                "CREATE SCHEMA IF NOT EXISTS \"{schema}\";
                 SET LOCAL search_path TO \"{schema}\";
                 CREATE TABLE IF NOT EXISTS airlock_migrations (version BIGINT PRIMARY KEY);"
            ))
            .await?;
            let done: i64 = tx
                .query_one(
                    "SELECT COALESCE(MAX(version), 0) FROM airlock_migrations",
                    &[],
                )
                .await?
                .get(0);
            for (i, sql) in MIGRATIONS.iter().enumerate().skip(done as usize) {
                tx.batch_execute(sql).await?;
                tx.execute(
                    "INSERT INTO airlock_migrations (version) VALUES ($1)",
                    &[&(i as i64 + 1)],
                )
                .await?;
            }
            tx.commit().await
        })
        .map_err(|e| self.error(e))
    }

    /// Runs a statement; returns how many rows it changed.
    pub(super) fn execute(&self, sql: &str, params: &[Param<'_>]) -> Result<u64, RegistryError> {
        let (state, sql, values) = (self.state.clone(), dialect(sql), owned(params));
        storage::wait(async move {
            let client = state.shared().await?;
            client.execute(&sql, &refs(&values)).await
        })
        .map_err(|e| self.error(e))
    }

    /// Runs a query; returns every row.
    pub(super) fn query(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, RegistryError> {
        let (state, sql, values) = (self.state.clone(), dialect(sql), owned(params));
        storage::wait(async move {
            let client = state.shared().await?;
            let rows = client.query(&sql, &refs(&values)).await?;
            rows.iter().map(decode).collect::<Result<Vec<_>, _>>()
        })
        .map_err(|e| self.error(e))
    }

    /// Runs statements in one transaction, on the transaction connection.
    pub(super) fn transaction(&self, statements: &[Statement<'_>]) -> Result<(), RegistryError> {
        let state = self.state.clone();
        let statements: Vec<(String, Vec<Value>)> = statements
            .iter()
            .map(|(sql, params)| (dialect(sql), owned(params)))
            .collect();
        storage::wait(async move {
            let mut slot = state.transactions.lock().await;
            if slot.as_ref().is_none_or(Client::is_closed) {
                *slot = Some(state.open().await?);
            }
            let client = slot
                .as_mut()
                .expect("a transaction connection was just made");
            let tx = client.transaction().await?;
            for (sql, values) in &statements {
                tx.execute(sql, &refs(values)).await?;
            }
            tx.commit().await
        })
        .map_err(|e| self.error(e))
    }
}

impl State {
    /// A new connection, its driver running on the storage runtime, with the search
    /// path set to the registry's schema.
    async fn open(&self) -> Result<Client, tokio_postgres::Error> {
        let tls = postgres_native_tls::MakeTlsConnector::new(
            native_tls::TlsConnector::new().expect("the system TLS library initializes"),
        );
        let (client, connection) = self.config.connect(tls).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!("registry: PostgreSQL connection closed: {e}");
            }
        });
        client
            .batch_execute(&format!("SET search_path TO \"{}\"", self.schema))
            .await?;
        Ok(client)
    }

    /// The shared connection, made again when it dropped.
    async fn shared(&self) -> Result<Arc<Client>, tokio_postgres::Error> {
        let mut slot = self.shared.lock().await;
        match slot.as_ref() {
            Some(client) if !client.is_closed() => Ok(client.clone()),
            _ => {
                let client = Arc::new(self.open().await?);
                *slot = Some(client.clone());
                Ok(client)
            }
        }
    }
}

/// `host:port/database` of a connection config, for messages.
fn describe(config: &Config) -> String {
    use tokio_postgres::config::Host;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!(
        "postgres://{host}:{port}/{}",
        config.get_dbname().unwrap_or("")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_translate_to_postgres_placeholders() {
        assert_eq!(
            dialect("UPDATE t SET a = ?1, b = unixepoch() WHERE c = ?12 AND d = '?'"),
            "UPDATE t SET a = $1, b = CAST(EXTRACT(EPOCH FROM now()) AS BIGINT) WHERE c = $12 AND d = '?'"
        );
    }
}
