//! The engine-neutral values of the registry's statements: a [`Param`] goes in, a
//! [`Row`] of [`Cell`]s comes out, whichever engine (SQLite or PostgreSQL) runs it.
//! Each table module decodes a row the same way.

use rusqlite::types::{ToSqlOutput, ValueRef};

use super::RegistryError;

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
