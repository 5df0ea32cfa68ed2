//! The `console_sessions` table: operator console sessions, so a console login made
//! through one replica works through every replica (a load balancer need not route the
//! console stickily), and the message an action leaves for the next page is found by
//! whichever replica serves that page. A session is kept by the SHA-256 of its cookie,
//! never the cookie itself.

use super::{Registry, RegistryError, params};

/// One console session as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSession {
    /// The token every form of the session carries.
    pub csrf: String,
    /// When it was made (Unix milliseconds).
    pub created_ms: i64,
}

impl Registry {
    /// Keeps a new console session (by its cookie's digest). Sessions made before
    /// `expired_before_ms` are dropped; past `max` sessions, the oldest go.
    pub fn open_console_session(
        &self,
        id_digest: &str,
        session: &ConsoleSession,
        expired_before_ms: i64,
        max: usize,
    ) -> Result<(), RegistryError> {
        self.db.transaction(&[
            (
                "DELETE FROM console_sessions WHERE created_ms < ?1",
                params![expired_before_ms].to_vec(),
            ),
            (
                "DELETE FROM console_sessions WHERE id_digest NOT IN (
                    SELECT id_digest FROM console_sessions
                    ORDER BY created_ms DESC, id_digest LIMIT ?1)",
                params![max.saturating_sub(1) as i64].to_vec(),
            ),
            (
                "INSERT INTO console_sessions (id_digest, csrf, created_ms) VALUES (?1, ?2, ?3)",
                params![id_digest, &session.csrf, session.created_ms].to_vec(),
            ),
        ])
    }

    /// The console session of a cookie digest, unless made before `expired_before_ms`.
    pub fn console_session(
        &self,
        id_digest: &str,
        expired_before_ms: i64,
    ) -> Result<Option<ConsoleSession>, RegistryError> {
        self.db
            .query_opt(
                "SELECT csrf, created_ms FROM console_sessions
                 WHERE id_digest = ?1 AND created_ms >= ?2",
                &params![id_digest, expired_before_ms],
            )?
            .map(|row| {
                Ok(ConsoleSession {
                    csrf: row.text(0)?,
                    created_ms: row.int(1)?,
                })
            })
            .transpose()
    }

    /// Ends a console session.
    pub fn close_console_session(&self, id_digest: &str) -> Result<(), RegistryError> {
        self.db.execute(
            "DELETE FROM console_sessions WHERE id_digest = ?1",
            &params![id_digest],
        )?;
        Ok(())
    }

    /// Leaves a message for the session's next page (replacing an unread one).
    pub fn set_console_flash(
        &self,
        id_digest: &str,
        failed: bool,
        text: &str,
    ) -> Result<(), RegistryError> {
        self.db.execute(
            "UPDATE console_sessions SET flash_failed = ?2, flash_text = ?3 WHERE id_digest = ?1",
            &params![id_digest, failed, text],
        )?;
        Ok(())
    }

    /// Takes the session's unread message: (whether it reports a failure, the text).
    pub fn take_console_flash(
        &self,
        id_digest: &str,
    ) -> Result<Option<(bool, String)>, RegistryError> {
        let flash = self
            .db
            .query_opt(
                "SELECT flash_failed, flash_text FROM console_sessions
                 WHERE id_digest = ?1 AND flash_text IS NOT NULL",
                &params![id_digest],
            )?
            .map(|row| Ok::<_, RegistryError>((row.boolean(0)?, row.text(1)?)))
            .transpose()?;
        if flash.is_some() {
            self.db.execute(
                "UPDATE console_sessions SET flash_failed = NULL, flash_text = NULL WHERE id_digest = ?1",
                &params![id_digest],
            )?;
        }
        Ok(flash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_expire_are_capped_and_carry_one_message() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::open(dir.path()).unwrap();
        let session = |ms| ConsoleSession {
            csrf: format!("csrf-{ms}"),
            created_ms: ms,
        };
        for ms in [10, 20, 30] {
            registry
                .open_console_session(&format!("d{ms}"), &session(ms), 0, 2)
                .unwrap();
        }
        // Capped at two: the oldest went.
        assert_eq!(registry.console_session("d10", 0).unwrap(), None);
        assert_eq!(
            registry.console_session("d20", 0).unwrap(),
            Some(session(20))
        );
        // Expired ones are not found.
        assert_eq!(registry.console_session("d20", 25).unwrap(), None);
        registry
            .set_console_flash("d30", true, "it failed")
            .unwrap();
        assert_eq!(
            registry.take_console_flash("d30").unwrap(),
            Some((true, "it failed".to_string()))
        );
        assert_eq!(registry.take_console_flash("d30").unwrap(), None);
        registry.close_console_session("d30").unwrap();
        assert_eq!(registry.console_session("d30", 0).unwrap(), None);
    }
}
