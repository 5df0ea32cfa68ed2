//! The registry's two database engines behind one small interface: statements are
//! written once, in the SQL both engines accept, with `?N` placeholders; parameters are
//! [`Param`]s and rows come back as [`Row`]s of [`Cell`]s, so each table module decodes
//! a row the same way whichever engine holds it.
//!
//! - SQLite (`registry.db` in the data directory): the embedded default.
//! - PostgreSQL (`[registry] url = "postgres://…"`): shared by every host that points at
//!   it; see [`super::postgres`].

use std::sync::Mutex;

use rusqlite::types::ValueRef;

use super::RegistryError;
#[cfg(feature = "postgres")]
use super::postgres::Postgres;
pub(super) use super::rows::{Cell, Param, Row, Statement};

/// The engine holding the registry.
pub(super) enum Db {
    /// The embedded database.
    Sqlite(Mutex<rusqlite::Connection>),
    /// A shared PostgreSQL database.
    #[cfg(feature = "postgres")]
    Postgres(Postgres),
}

impl Db {
    /// Runs a statement; returns how many rows it changed.
    pub(super) fn execute(&self, sql: &str, params: &[Param<'_>]) -> Result<u64, RegistryError> {
        match self {
            Db::Sqlite(db) => {
                let db = db.lock().expect("registry lock poisoned");
                let mut stmt = db.prepare_cached(sql)?;
                Ok(stmt.execute(rusqlite::params_from_iter(params))? as u64)
            }
            #[cfg(feature = "postgres")]
            Db::Postgres(pg) => pg.execute(sql, params),
        }
    }

    /// Runs a query; returns every row.
    pub(super) fn query(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, RegistryError> {
        match self {
            Db::Sqlite(db) => {
                let db = db.lock().expect("registry lock poisoned");
                let mut stmt = db.prepare_cached(sql)?;
                let width = stmt.column_count();
                let rows = stmt.query_map(rusqlite::params_from_iter(params), |row| {
                    (0..width)
                        .map(|i| {
                            Ok(match row.get_ref(i)? {
                                ValueRef::Null => Cell::Null,
                                ValueRef::Integer(n) => Cell::Int(n),
                                ValueRef::Real(f) => Cell::Real(f),
                                ValueRef::Text(t) => {
                                    Cell::Text(String::from_utf8_lossy(t).into_owned())
                                }
                                ValueRef::Blob(_) => Cell::Null,
                            })
                        })
                        .collect::<rusqlite::Result<Vec<_>>>()
                        .map(|cells| Row { cells })
                })?;
                Ok(rows.collect::<Result<_, _>>()?)
            }
            #[cfg(feature = "postgres")]
            Db::Postgres(pg) => pg.query(sql, params),
        }
    }

    /// [`Db::query`] for async callers: on PostgreSQL the caller's task awaits the
    /// answer instead of a thread waiting for it; SQLite, local and quick, answers inline.
    pub(super) async fn query_async(
        &self,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Vec<Row>, RegistryError> {
        match self {
            Db::Sqlite(_) => self.query(sql, params),
            #[cfg(feature = "postgres")]
            Db::Postgres(pg) => pg.query_async(sql, params).await,
        }
    }

    /// Starts hearing other hosts' changes, where the engine can (PostgreSQL; once).
    pub(super) fn hear_changes(&self) {
        match self {
            Db::Sqlite(_) => {}
            #[cfg(feature = "postgres")]
            Db::Postgres(pg) => pg.hear_changes(),
        }
    }

    /// Runs a query expecting at most one row.
    pub(super) fn query_opt(
        &self,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Option<Row>, RegistryError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// Runs statements in one transaction: all of them take effect, or none.
    pub(super) fn transaction(&self, statements: &[Statement<'_>]) -> Result<(), RegistryError> {
        match self {
            Db::Sqlite(db) => {
                let mut db = db.lock().expect("registry lock poisoned");
                let tx = db.transaction()?;
                for (sql, params) in statements {
                    tx.prepare_cached(sql)?
                        .execute(rusqlite::params_from_iter(params))?;
                }
                tx.commit()?;
                Ok(())
            }
            #[cfg(feature = "postgres")]
            Db::Postgres(pg) => pg.transaction(statements),
        }
    }

    /// The engine's name, for messages.
    pub(super) fn engine(&self) -> &'static str {
        match self {
            Db::Sqlite(_) => "SQLite",
            #[cfg(feature = "postgres")]
            Db::Postgres(_) => "PostgreSQL",
        }
    }
}
