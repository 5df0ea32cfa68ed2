//! The `approvals` table: a person's answers to policy questions, remembered as scoped
//! grants. Each names the agent, the service, the policy plugin and rule that asked, a
//! glob over the server's raw tool name, a glob over the call's arguments (as canonical
//! JSON text), and an optional expiry. A later question from the same rule about a
//! matching call is answered by the grant instead of a person.
//!
//! Globs are SQLite's `GLOB` (`*`, `?`, `[…]`, case-sensitive); [`glob_literal`] makes
//! a pattern that matches one text exactly.

use rusqlite::{OptionalExtension, Row, params};
use serde::Serialize;

use super::{Registry, RegistryError};

/// A remembered approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApprovalGrant {
    /// The grant's id (`airlock grants revoke ID`).
    pub id: i64,
    /// The agent it lets through.
    pub agent: String,
    /// The service.
    pub service: String,
    /// A glob over the server's own tool name.
    pub tool: String,
    /// A glob over the call's arguments as canonical JSON text (`*`: any arguments).
    pub arguments: String,
    /// The policy plugin whose question it answers.
    pub plugin: String,
    /// The plugin's rule that asked.
    pub rule: String,
    /// When it lapses (unix milliseconds), or never.
    pub expires_at: Option<i64>,
    /// When it was given (unix seconds; set by the database).
    pub created_at: i64,
}

/// What one question is about: the call, and who asks.
#[derive(Debug, Clone, Copy)]
pub struct ApprovalScope<'a> {
    /// The agent.
    pub agent: &'a str,
    /// The service.
    pub service: &'a str,
    /// The server's own tool name.
    pub tool: &'a str,
    /// The arguments as canonical JSON text.
    pub arguments: &'a str,
    /// The asking plugin.
    pub plugin: &'a str,
    /// The asking rule.
    pub rule: &'a str,
}

const COLUMNS: &str = "id, agent, service, tool, arguments, plugin, rule, expires_at, created_at";

fn grant_from_row(row: &Row) -> rusqlite::Result<ApprovalGrant> {
    Ok(ApprovalGrant {
        id: row.get(0)?,
        agent: row.get(1)?,
        service: row.get(2)?,
        tool: row.get(3)?,
        arguments: row.get(4)?,
        plugin: row.get(5)?,
        rule: row.get(6)?,
        expires_at: row.get(7)?,
        created_at: row.get(8)?,
    })
}

/// A glob that matches `text` and nothing else (each of `*`, `?` and `[` in brackets).
pub fn glob_literal(text: &str) -> String {
    let mut glob = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '*' | '?' | '[' => {
                glob.push('[');
                glob.push(c);
                glob.push(']');
            }
            c => glob.push(c),
        }
    }
    glob
}

impl Registry {
    /// Remembers an approval: `tool` and `arguments` are globs (see [`glob_literal`]).
    /// Returns the new grant's id.
    pub fn remember_approval(
        &self,
        scope: &ApprovalScope<'_>,
        expires_at: Option<i64>,
    ) -> Result<i64, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        db.execute(
            "INSERT INTO approvals (agent, service, tool, arguments, plugin, rule, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                scope.agent,
                scope.service,
                scope.tool,
                scope.arguments,
                scope.plugin,
                scope.rule,
                expires_at
            ],
        )?;
        Ok(db.last_insert_rowid())
    }

    /// The oldest live grant that answers the question `scope` describes, at `now`
    /// (unix milliseconds). Here `scope.tool` and `scope.arguments` are the call's own
    /// values, matched against each grant's globs.
    pub fn matching_approval(
        &self,
        scope: &ApprovalScope<'_>,
        now: i64,
    ) -> Result<Option<ApprovalGrant>, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        Ok(db
            .query_row(
                &format!(
                    "SELECT {COLUMNS} FROM approvals
                     WHERE agent = ?1 AND service = ?2 AND plugin = ?3 AND rule = ?4
                       AND ?5 GLOB tool AND ?6 GLOB arguments
                       AND (expires_at IS NULL OR expires_at > ?7)
                     ORDER BY id LIMIT 1"
                ),
                params![
                    scope.agent,
                    scope.service,
                    scope.plugin,
                    scope.rule,
                    scope.tool,
                    scope.arguments,
                    now
                ],
                grant_from_row,
            )
            .optional()?)
    }

    /// The remembered approvals of `agent` (every agent's with `None`), oldest first,
    /// lapsed ones included (their `expires_at` says so).
    pub fn approvals(&self, agent: Option<&str>) -> Result<Vec<ApprovalGrant>, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        let mut stmt = db.prepare(&format!(
            "SELECT {COLUMNS} FROM approvals WHERE ?1 IS NULL OR agent = ?1 ORDER BY id"
        ))?;
        let rows = stmt.query_map([agent], grant_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Forgets the approval `id`. Returns whether there was one.
    pub fn revoke_approval(&self, id: i64) -> Result<bool, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        Ok(db.execute("DELETE FROM approvals WHERE id = ?1", [id])? > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope<'a>(tool: &'a str, arguments: &'a str) -> ApprovalScope<'a> {
        ApprovalScope {
            agent: "a",
            service: "s",
            tool,
            arguments,
            plugin: "builtin:policy",
            rule: "ask_destructive",
        }
    }

    #[test]
    fn a_grant_answers_matching_calls_until_it_lapses_or_is_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::open(dir.path()).unwrap();
        let exact = glob_literal(r#"{"path":"/tmp/a*b?[c]"}"#);
        let id = reg.remember_approval(&scope("wipe", &exact), None).unwrap();
        let hit = reg
            .matching_approval(&scope("wipe", r#"{"path":"/tmp/a*b?[c]"}"#), 0)
            .unwrap();
        assert_eq!(hit.map(|g| g.id), Some(id));
        // The literal's metacharacters match only themselves.
        for other in [r#"{"path":"/tmp/aXXb?[c]"}"#, r#"{"path":"/tmp/a*bZ[c]"}"#] {
            assert!(
                reg.matching_approval(&scope("wipe", other), 0)
                    .unwrap()
                    .is_none()
            );
        }
        assert!(
            reg.matching_approval(&scope("wipe2", r#"{"path":"/tmp/a*b?[c]"}"#), 0)
                .unwrap()
                .is_none()
        );
        // Another rule's question is not answered by it.
        let mut other_rule = scope("wipe", r#"{"path":"/tmp/a*b?[c]"}"#);
        other_rule.rule = "budget";
        assert!(reg.matching_approval(&other_rule, 0).unwrap().is_none());

        let any = reg
            .remember_approval(&scope("drop_*", "*"), Some(1_000))
            .unwrap();
        assert!(
            reg.matching_approval(&scope("drop_table", "{}"), 999)
                .unwrap()
                .is_some()
        );
        assert!(
            reg.matching_approval(&scope("drop_table", "{}"), 1_000)
                .unwrap()
                .is_none(),
            "lapsed"
        );
        assert_eq!(reg.approvals(Some("a")).unwrap().len(), 2);
        assert!(reg.approvals(Some("b")).unwrap().is_empty());
        assert!(reg.revoke_approval(any).unwrap());
        assert!(!reg.revoke_approval(any).unwrap());
        assert_eq!(reg.approvals(None).unwrap().len(), 1);
    }
}
