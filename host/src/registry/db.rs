//! The registry's two database engines behind one small interface: statements are
//! written once, in the SQL both engines accept, with `?N` placeholders; parameters are
//! [`Param`]s and rows come back as [`Row`]s of [`Cell`]s, so each table module decodes
//! a row the same way whichever engine holds it.
//!
//! - SQLite (`registry.db` in the data directory): the embedded default.
//! - PostgreSQL (`[registry] url = "postgres://…"`): shared by every host that points at
//!   it; see [`super::postgres`].

use std::sync::Mutex;

use rusqlite::types::{ToSqlOutput, ValueRef};

use super::RegistryError;
#[cfg(feature = "postgres")]
use super::postgres::Postgres;

/// A statement parameter.
#[derive(Debug, Clone, Copy)]
pub(super) enum Param<'a> {
    /// Text, or NULL.
    Text(Option<&'a str>),
    /// A 64-bit integer, or NULL.
    Int(Option<i64>),
    /// A float, or NULL.
    Real(Option<f64>),
    /// A boolean (an integer 0/1 in SQLite).
    Bool(bool),
}

impl<'a> From<&'a str> for Param<'a> {
    fn from(v: &'a str) -> Self {
        Param::Text(Some(v))
    }
}

impl<'a> From<&'a String> for Param<'a> {
    fn from(v: &'a String) -> Self {
        Param::Text(Some(v))
    }
}

impl<'a> From<Option<&'a str>> for Param<'a> {
    fn from(v: Option<&'a str>) -> Self {
        Param::Text(v)
    }
}

impl<'a> From<&'a Option<String>> for Param<'a> {
    fn from(v: &'a Option<String>) -> Self {
        Param::Text(v.as_deref())
    }
}

impl From<i64> for Param<'_> {
    fn from(v: i64) -> Self {
        Param::Int(Some(v))
    }
}

impl From<Option<i64>> for Param<'_> {
    fn from(v: Option<i64>) -> Self {
        Param::Int(v)
    }
}

impl From<Option<f64>> for Param<'_> {
    fn from(v: Option<f64>) -> Self {
        Param::Real(v)
    }
}

impl From<bool> for Param<'_> {
    fn from(v: bool) -> Self {
        Param::Bool(v)
    }
}

impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            Param::Text(Some(s)) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Param::Int(Some(i)) => ToSqlOutput::Borrowed(ValueRef::Integer(i)),
            Param::Real(Some(f)) => ToSqlOutput::Borrowed(ValueRef::Real(f)),
            Param::Bool(b) => ToSqlOutput::Borrowed(ValueRef::Integer(b.into())),
            Param::Text(None) | Param::Int(None) | Param::Real(None) => {
                ToSqlOutput::Borrowed(ValueRef::Null)
            }
        })
    }
}

/// One value of a result row.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Cell {
    /// NULL.
    Null,
    /// An integer (SQLite's booleans arrive as these).
    Int(i64),
    /// A float.
    Real(f64),
    /// Text.
    Text(String),
    /// A boolean (PostgreSQL).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Bool(bool),
}

/// One result row, with the table it came from for error messages.
#[derive(Debug)]
pub(super) struct Row {
    pub(super) cells: Vec<Cell>,
}

impl Row {
    fn cell(&self, i: usize) -> Result<&Cell, RegistryError> {
        self.cells
            .get(i)
            .ok_or_else(|| RegistryError::Corrupt(format!("a row has no column {i}")))
    }

    fn wrong(&self, i: usize, wanted: &str) -> RegistryError {
        RegistryError::Corrupt(format!(
            "column {i} holds {:?}, expected {wanted}",
            self.cells.get(i)
        ))
    }

    /// Column `i` as text (NULL is an error).
    pub(super) fn text(&self, i: usize) -> Result<String, RegistryError> {
        self.opt_text(i)?.ok_or_else(|| self.wrong(i, "text"))
    }

    /// Column `i` as text or NULL.
    pub(super) fn opt_text(&self, i: usize) -> Result<Option<String>, RegistryError> {
        match self.cell(i)? {
            Cell::Null => Ok(None),
            Cell::Text(s) => Ok(Some(s.clone())),
            _ => Err(self.wrong(i, "text")),
        }
    }

    /// Column `i` as an integer (NULL is an error).
    pub(super) fn int(&self, i: usize) -> Result<i64, RegistryError> {
        self.opt_int(i)?.ok_or_else(|| self.wrong(i, "an integer"))
    }

    /// Column `i` as an integer or NULL.
    pub(super) fn opt_int(&self, i: usize) -> Result<Option<i64>, RegistryError> {
        match self.cell(i)? {
            Cell::Null => Ok(None),
            Cell::Int(n) => Ok(Some(*n)),
            _ => Err(self.wrong(i, "an integer")),
        }
    }

    /// Column `i` as a float or NULL (an integer is widened).
    pub(super) fn opt_real(&self, i: usize) -> Result<Option<f64>, RegistryError> {
        match self.cell(i)? {
            Cell::Null => Ok(None),
            Cell::Real(f) => Ok(Some(*f)),
            Cell::Int(n) => Ok(Some(*n as f64)),
            _ => Err(self.wrong(i, "a number")),
        }
    }

    /// Column `i` as a boolean (an integer 0/1 in SQLite).
    pub(super) fn boolean(&self, i: usize) -> Result<bool, RegistryError> {
        match self.cell(i)? {
            Cell::Bool(b) => Ok(*b),
            Cell::Int(n) => Ok(*n != 0),
            _ => Err(self.wrong(i, "a boolean")),
        }
    }
}

/// One statement of a transaction.
pub(super) type Statement<'a> = (&'a str, Vec<Param<'a>>);

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
