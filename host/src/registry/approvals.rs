//! The `approvals` table: a person's answers to policy questions, remembered as scoped
//! grants. Each names the agent, the service, the policy plugin and rule that asked, a
//! glob over the server's raw tool name, a glob over the call's arguments (as canonical
//! JSON text), and an optional expiry. A later question from the same rule about a
//! matching call is answered by the grant instead of a person.
//!
//! Globs are SQLite's `GLOB` (`*`, `?`, `[…]`, `[^…]`, case-sensitive); [`glob_literal`]
//! makes a pattern that matches one text exactly. PostgreSQL has no `GLOB`: there each
//! grant also keeps its globs as anchored regular expressions ([`glob_regex`]), written
//! with the row and matched with `~`.

use serde::Serialize;

use super::db::{Db, Row};
use super::{Registry, RegistryError, params};

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

fn grant_from_row(row: &Row) -> Result<ApprovalGrant, RegistryError> {
    Ok(ApprovalGrant {
        id: row.int(0)?,
        agent: row.text(1)?,
        service: row.text(2)?,
        tool: row.text(3)?,
        arguments: row.text(4)?,
        plugin: row.text(5)?,
        rule: row.text(6)?,
        expires_at: row.opt_int(7)?,
        created_at: row.int(8)?,
    })
}

/// The anchored regular expression (PostgreSQL's `~`) that matches what the `GLOB`
/// pattern `glob` matches in SQLite. An unclosed `[` matches nothing there, and here.
pub(super) fn glob_regex(glob: &str) -> String {
    const META: &str = ".^$|()[]{}*+?\\";
    let mut re = String::from("^");
    let chars: Vec<char> = glob.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' => re.push_str(".*"),
            '?' => re.push('.'),
            '[' => {
                // A class: `[^` negates; a `]` right after the opening is a member.
                let mut j = i + 1;
                let mut class = String::from("[");
                if chars.get(j) == Some(&'^') {
                    class.push('^');
                    j += 1;
                }
                if chars.get(j) == Some(&']') {
                    class.push(']');
                    j += 1;
                }
                while j < chars.len() && chars[j] != ']' {
                    if chars[j] == '\\' || chars[j] == '[' {
                        class.push('\\');
                    }
                    class.push(chars[j]);
                    j += 1;
                }
                if j >= chars.len() {
                    // `x` before the start of the text: matches nothing.
                    return "x^".to_string();
                }
                class.push(']');
                re.push_str(&class);
                i = j;
            }
            c => {
                if META.contains(c) {
                    re.push('\\');
                }
                re.push(c);
            }
        }
        i += 1;
    }
    re.push('$');
    re
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
    #[cfg_attr(not(feature = "postgres"), allow(unused_mut, unused_variables))]
    pub fn remember_approval(
        &self,
        scope: &ApprovalScope<'_>,
        expires_at: Option<i64>,
    ) -> Result<i64, RegistryError> {
        let (tool_re, arguments_re) = (glob_regex(scope.tool), glob_regex(scope.arguments));
        let mut values = params![
            scope.agent,
            scope.service,
            scope.tool,
            scope.arguments,
            scope.plugin,
            scope.rule,
            expires_at
        ]
        .to_vec();
        let sql = match self.db {
            Db::Sqlite(_) => {
                "INSERT INTO approvals (agent, service, tool, arguments, plugin, rule, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id"
            }
            #[cfg(feature = "postgres")]
            Db::Postgres(_) => {
                values.extend(params![&tool_re, &arguments_re]);
                "INSERT INTO approvals
                   (agent, service, tool, arguments, plugin, rule, expires_at, tool_re, arguments_re)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) RETURNING id"
            }
        };
        let row = self.db.query_opt(sql, &values)?;
        row.ok_or_else(|| RegistryError::Corrupt("an approval got no id".into()))?
            .int(0)
    }

    /// The oldest live grant that answers the question `scope` describes, at `now`
    /// (unix milliseconds). Here `scope.tool` and `scope.arguments` are the call's own
    /// values, matched against each grant's globs.
    pub fn matching_approval(
        &self,
        scope: &ApprovalScope<'_>,
        now: i64,
    ) -> Result<Option<ApprovalGrant>, RegistryError> {
        let matches = match self.db {
            Db::Sqlite(_) => "?5 GLOB tool AND ?6 GLOB arguments",
            #[cfg(feature = "postgres")]
            Db::Postgres(_) => "?5 ~ tool_re AND ?6 ~ arguments_re",
        };
        self.db
            .query_opt(
                &format!(
                    "SELECT {COLUMNS} FROM approvals
                     WHERE agent = ?1 AND service = ?2 AND plugin = ?3 AND rule = ?4
                       AND {matches}
                       AND (expires_at IS NULL OR expires_at > ?7)
                     ORDER BY id LIMIT 1"
                ),
                &params![
                    scope.agent,
                    scope.service,
                    scope.plugin,
                    scope.rule,
                    scope.tool,
                    scope.arguments,
                    now
                ],
            )?
            .map(|row| grant_from_row(&row))
            .transpose()
    }

    /// The remembered approvals of `agent` (every agent's with `None`), oldest first,
    /// lapsed ones included (their `expires_at` says so).
    pub fn approvals(&self, agent: Option<&str>) -> Result<Vec<ApprovalGrant>, RegistryError> {
        let rows = match agent {
            Some(agent) => self.db.query(
                &format!("SELECT {COLUMNS} FROM approvals WHERE agent = ?1 ORDER BY id"),
                &params![agent],
            )?,
            None => self
                .db
                .query(&format!("SELECT {COLUMNS} FROM approvals ORDER BY id"), &[])?,
        };
        rows.iter().map(grant_from_row).collect()
    }

    /// Forgets the approval `id`. Returns whether there was one.
    pub fn revoke_approval(&self, id: i64) -> Result<bool, RegistryError> {
        Ok(self
            .db
            .execute("DELETE FROM approvals WHERE id = ?1", &params![id])?
            > 0)
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

    #[test]
    fn glob_regexes_match_what_sqlite_globs_match() {
        let cases = [
            ("drop_*", "drop_table", true),
            ("drop_*", "xdrop_table", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("[^x]y", "zy", true),
            ("[^x]y", "xy", false),
            ("[]]", "]", true),
            ("a.b", "axb", false),
            ("(x)+", "(x)+", true),
            ("[a", "[a", false),
        ];
        for (glob, text, expected) in cases {
            let re = regex::Regex::new(&glob_regex(glob)).unwrap();
            assert_eq!(
                re.is_match(text),
                expected,
                "{glob} vs {text}: {}",
                glob_regex(glob)
            );
        }
        let literal = glob_literal(r#"{"p":"a*b?[c]\\d"}"#);
        let re = regex::Regex::new(&glob_regex(&literal)).unwrap();
        assert!(re.is_match(r#"{"p":"a*b?[c]\\d"}"#));
        assert!(!re.is_match(r#"{"p":"aXb?[c]\\d"}"#));
    }
}
