//! The registry in PostgreSQL (`[registry] url = "postgres://…"`): the same tables and
//! the same versioned migrations as the embedded SQLite database, in one schema of a
//! database every host of a deployment shares. A grant revoked on one host is refused on
//! the next call through any other that reaches the database.
//!
//! The connections run on the storage runtime ([`crate::storage`]). Single statements go
//! over one shared connection (tokio-postgres pipelines concurrent queries on it);
//! transactions take a second connection of their own. TLS follows the URL's `sslmode`
//! (native-tls).
//!
//! An outage is bounded: every statement, connecting included, gives up after the
//! configured timeout with [`RegistryError::Unavailable`]; a connection that failed is
//! dropped and made again on the next use; a read that failed on a connection that
//! turned out dead is sent once more on a new one (a restarted server). After a failure
//! the database is not tried again for a short, growing pause (100 ms doubling to 2 s),
//! so a stalled server costs each caller at most one timeout, not one per statement.

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::sync::Mutex;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{Client, Config};

use super::RegistryError;
use super::grant_memo::GrantMemo;
use super::pg_listen;
use super::rows::{Cell, Param, Row, Statement};
use crate::config::RegistryBounds;
use crate::storage;

/// The first pause after a failure before the database is tried again.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause between tries while the database cannot be reached.
const LONGEST_PAUSE: Duration = Duration::from_secs(2);

use super::pg_migrations::MIGRATIONS;

/// A registry in PostgreSQL.
pub(crate) struct Postgres {
    state: Arc<State>,
    /// `host:port/database (schema)`, for messages: never the password.
    location: String,
    bounds: RegistryBounds,
    outage: std::sync::Mutex<Outage>,
    /// Grant answers kept while other hosts' changes are heard.
    memo: Arc<GrantMemo>,
    /// The task hearing other hosts' changes ([`super::pg_listen`]), started by the
    /// first grant check ([`Postgres::hear_changes`]).
    listener: std::sync::OnceLock<tokio::task::AbortHandle>,
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(listener) = self.listener.get() {
            listener.abort();
        }
    }
}

/// What the last failures to reach the database were, and when to try again.
#[derive(Default)]
struct Outage {
    /// Not tried again before this instant.
    pause_until: Option<Instant>,
    /// The pause after the next failure.
    next_pause: Duration,
    /// Why the last try failed.
    reason: String,
}

/// Why a job on the storage runtime failed.
enum Failure {
    /// The database answered with an error, or the connection failed.
    Postgres(tokio_postgres::Error),
    /// The job did not finish within the timeout.
    TimedOut(Duration),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        Failure::Postgres(e)
    }
}

/// Whether `e` says the database cannot be reached (as opposed to refusing one
/// statement): the connection failed or closed, or the server is shutting down,
/// starting up or out of connections.
fn unreachable(e: &tokio_postgres::Error) -> bool {
    if let Some(db) = e.as_db_error() {
        let code = db.code().code();
        return code.starts_with("08") || code.starts_with("57P") || code == "53300";
    }
    if e.is_closed() {
        return true;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    false
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
    /// (one host at a time: an advisory lock serializes hosts starting together). `memo`
    /// is kept true by the listener [`Postgres::hear_changes`] starts.
    pub(super) fn connect(
        url: &str,
        schema: &str,
        bounds: RegistryBounds,
        memo: Arc<GrantMemo>,
    ) -> Result<Postgres, RegistryError> {
        let mut config = Config::from_str(url).map_err(|e| {
            RegistryError::Config(format!(
                "[registry] url is not a PostgreSQL connection URL: {e}"
            ))
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(bounds.timeout);
        }
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
            bounds,
            outage: Default::default(),
            memo,
            listener: Default::default(),
        };
        pg.migrate()?;
        Ok(pg)
    }

    /// Starts listening for other hosts' changes, once: grant checks answer from memory
    /// from then on, while they are heard. A host that never checks a grant (a one-shot
    /// command) opens no listening connection.
    pub(super) fn hear_changes(&self) {
        self.listener.get_or_init(|| {
            let config = self.state.config.clone();
            pg_listen::spawn(
                config,
                &self.state.schema,
                self.bounds.timeout,
                self.memo.clone(),
            )
        });
    }

    /// Where the registry is, for messages (no credentials).
    pub(super) fn location(&self) -> &str {
        &self.location
    }

    fn error(&self, e: tokio_postgres::Error) -> RegistryError {
        let unavailable = unreachable(&e);
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
        if unavailable {
            return RegistryError::Unavailable {
                location: self.location.clone(),
                message,
            };
        }
        RegistryError::Postgres {
            location: self.location.clone(),
            message,
        }
    }

    /// Runs `job` on the storage runtime within the timeout, this thread waiting (see
    /// [`Postgres::attempt`]).
    fn run<T, F, Fut>(&self, retry: bool, job: F) -> Result<T, RegistryError>
    where
        T: Send + 'static,
        F: Fn(Arc<State>) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<T, tokio_postgres::Error>> + Send,
    {
        let outcome = storage::wait(self.attempt(retry, job)?);
        self.settle(outcome)
    }

    /// Runs `job` on the storage runtime within the timeout, the caller's task awaiting
    /// it without holding a thread (see [`Postgres::attempt`]).
    async fn run_async<T, F, Fut>(&self, retry: bool, job: F) -> Result<T, RegistryError>
    where
        T: Send + 'static,
        F: Fn(Arc<State>) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<T, tokio_postgres::Error>> + Send,
    {
        let outcome = match storage::handle().spawn(self.attempt(retry, job)?).await {
            Ok(outcome) => outcome,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => panic!("the storage runtime dropped a job (it is shutting down)"),
        };
        self.settle(outcome)
    }

    /// The future that runs `job` within the timeout. Refused at once while the database
    /// is paused after a failure; a failure to reach it drops the connections; `retry`
    /// sends the job once more on a new connection when the first try found the
    /// connection dead.
    fn attempt<T, F, Fut>(
        &self,
        retry: bool,
        job: F,
    ) -> Result<impl std::future::Future<Output = Result<T, Failure>> + Send + 'static, RegistryError>
    where
        T: Send + 'static,
        F: Fn(Arc<State>) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<T, tokio_postgres::Error>> + Send,
    {
        if let Some(refusal) = self.paused() {
            return Err(refusal);
        }
        let (state, timeout) = (self.state.clone(), self.bounds.timeout);
        Ok(async move {
            let attempt = async {
                match job(state.clone()).await {
                    Err(e) if retry && unreachable(&e) => {
                        state.forget_connections().await;
                        job(state.clone()).await
                    }
                    done => done,
                }
            };
            let outcome = match tokio::time::timeout(timeout, attempt).await {
                Ok(done) => done.map_err(Failure::from),
                Err(_) => Err(Failure::TimedOut(timeout)),
            };
            if let Err(failure) = &outcome
                && !matches!(failure, Failure::Postgres(e) if !unreachable(e))
            {
                state.forget_connections().await;
            }
            outcome
        })
    }

    /// Turns an attempt's outcome into the registry's answer: a failure to reach the
    /// database starts (or lengthens) the pause, an answer ends it.
    fn settle<T>(&self, outcome: Result<T, Failure>) -> Result<T, RegistryError> {
        let error = match outcome {
            Ok(value) => {
                self.reached();
                return Ok(value);
            }
            Err(Failure::Postgres(e)) => self.error(e),
            Err(Failure::TimedOut(after)) => RegistryError::Unavailable {
                location: self.location.clone(),
                message: format!("no answer within {} s", after.as_secs_f64()),
            },
        };
        if let RegistryError::Unavailable { message, .. } = &error {
            self.unreached(message);
        }
        Err(error)
    }

    /// The refusal while the database is paused after a failure.
    fn paused(&self) -> Option<RegistryError> {
        let outage = self.outage.lock().unwrap_or_else(|e| e.into_inner());
        let until = outage.pause_until?;
        let left = until.checked_duration_since(Instant::now())?;
        Some(RegistryError::Unavailable {
            location: self.location.clone(),
            message: format!(
                "{} (tried again in {} ms)",
                outage.reason,
                left.as_millis().max(1)
            ),
        })
    }

    /// The database answered: the outage, if any, is over.
    fn reached(&self) {
        let mut outage = self.outage.lock().unwrap_or_else(|e| e.into_inner());
        if outage.pause_until.take().is_some() {
            tracing::info!("registry {}: reachable again", self.location);
        }
        outage.next_pause = FIRST_PAUSE;
    }

    /// The database could not be reached: pause before the next try.
    fn unreached(&self, reason: &str) {
        let mut outage = self.outage.lock().unwrap_or_else(|e| e.into_inner());
        if outage.pause_until.is_none() {
            tracing::warn!("registry {}: cannot be reached: {reason}", self.location);
        }
        let pause = outage.next_pause.max(FIRST_PAUSE);
        outage.pause_until = Some(Instant::now() + pause);
        outage.next_pause = (pause * 2).min(LONGEST_PAUSE);
        outage.reason = reason.to_string();
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
        let (sql, values) = (Arc::new(dialect(sql)), Arc::new(owned(params)));
        self.run(false, move |state| {
            let (sql, values) = (sql.clone(), values.clone());
            async move {
                let client = state.shared().await?;
                client.execute(sql.as_str(), &refs(&values)).await
            }
        })
    }

    /// Runs a query; returns every row.
    /// A `SELECT` is sent again once when its connection turned out dead; anything
    /// else (a `DELETE … RETURNING`) is not, since it may have taken effect.
    pub(super) fn query(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, RegistryError> {
        let (retry, job) = query_job(sql, params);
        self.run(retry, job)
    }

    /// [`Postgres::query`] for async callers: the caller's task awaits the answer.
    pub(super) async fn query_async(
        &self,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Vec<Row>, RegistryError> {
        let (retry, job) = query_job(sql, params);
        self.run_async(retry, job).await
    }

    /// Runs statements in one transaction, on the transaction connection.
    pub(super) fn transaction(&self, statements: &[Statement<'_>]) -> Result<(), RegistryError> {
        let statements: Arc<Vec<(String, Vec<Value>)>> = Arc::new(
            statements
                .iter()
                .map(|(sql, params)| (dialect(sql), owned(params)))
                .collect(),
        );
        self.run(false, move |state| {
            let statements = statements.clone();
            async move {
                let mut slot = state.transactions.lock().await;
                if slot.as_ref().is_none_or(Client::is_closed) {
                    *slot = Some(state.open().await?);
                }
                let client = slot
                    .as_mut()
                    .expect("a transaction connection was just made");
                let tx = client.transaction().await?;
                for (sql, values) in statements.iter() {
                    tx.execute(sql, &refs(values)).await?;
                }
                tx.commit().await
            }
        })
    }
}

/// A query as a job for [`Postgres::run`], and whether it may be sent twice (a
/// `SELECT` may).
fn query_job(
    sql: &str,
    params: &[Param<'_>],
) -> (
    bool,
    impl Fn(Arc<State>) -> QueryFuture + Send + Sync + 'static,
) {
    let retry = sql
        .trim_start()
        .get(..6)
        .is_some_and(|w| w.eq_ignore_ascii_case("select"));
    let (sql, values) = (Arc::new(dialect(sql)), Arc::new(owned(params)));
    let job = move |state: Arc<State>| -> QueryFuture {
        let (sql, values) = (sql.clone(), values.clone());
        Box::pin(async move {
            let client = state.shared().await?;
            let rows = client.query(sql.as_str(), &refs(&values)).await?;
            rows.iter().map(decode).collect::<Result<Vec<_>, _>>()
        })
    };
    (retry, job)
}

/// A query job's future.
type QueryFuture = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Vec<Row>, tokio_postgres::Error>> + Send>,
>;

impl State {
    /// A new connection, its driver running on the storage runtime, with the search
    /// path set to the registry's schema.
    async fn open(&self) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) = self.config.connect(tls()).await?;
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

    /// Drops both connections: the next statement makes a new one.
    async fn forget_connections(&self) {
        self.shared.lock().await.take();
        self.transactions.lock().await.take();
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

/// The TLS connector for a connection (used as the URL's `sslmode` says).
pub(super) fn tls() -> postgres_native_tls::MakeTlsConnector {
    postgres_native_tls::MakeTlsConnector::new(
        native_tls::TlsConnector::new().expect("the system TLS library initializes"),
    )
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
