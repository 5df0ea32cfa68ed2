//! The `tasks` and `task_responses` tables: the task handles `airlock serve` gives its
//! 2026-07-28 clients (the `io.modelcontextprotocol/tasks` extension).
//!
//! A task row is the handle's whole public state: whose it is, its status, and its
//! payload (the questions it waits on, or its terminal result or error, as JSON that has
//! already passed the egress rule). The replica running the call owns the row: it alone
//! moves the status, and it renews a lease while the call runs. Any replica answers
//! `tasks/get` from the row; a row whose lease ran out before it reached a terminal
//! status is an orphan (its replica stopped) and reads as failed. Answers and
//! cancellations that reach another replica wait in the registry until the owner's
//! next renewal takes them.
//!
//! Times are unix milliseconds, set by the caller (so tests can move the clock).

use super::db::Row;
use super::{Registry, RegistryError, params};

/// One task handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRecord {
    /// The task id (unguessable).
    pub id: String,
    /// The agent that started it: the only one that may see or steer it.
    pub agent: String,
    /// The tool called, as the client named it.
    pub tool: String,
    /// `working`, `input_required`, `completed`, `failed` or `cancelled`.
    pub status: String,
    /// A message about the status, for the client.
    pub status_message: Option<String>,
    /// JSON: `{"inputRequests": …}`, `{"result": …}` or `{"error": …}`.
    pub payload: Option<String>,
    /// When it was made.
    pub created_ms: i64,
    /// When its status last changed.
    pub updated_ms: i64,
    /// How long after creation it is kept.
    pub ttl_ms: i64,
    /// The replica running it.
    pub replica: String,
    /// Until when that replica vouches for it.
    pub lease_until_ms: i64,
}

/// What other replicas left for a running task's owner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskSignals {
    /// Whether its client asked to cancel it.
    pub cancel_requested: bool,
    /// Answers to its questions: (key, JSON value).
    pub responses: Vec<(String, String)>,
}

/// Whether `status` is final.
pub fn is_terminal(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

const TASK_COLUMNS: &str = "id, agent, tool, status, status_message, payload, created_ms, \
     updated_ms, ttl_ms, replica, lease_until_ms";

fn task_from_row(row: &Row) -> Result<TaskRecord, RegistryError> {
    Ok(TaskRecord {
        id: row.text(0)?,
        agent: row.text(1)?,
        tool: row.text(2)?,
        status: row.text(3)?,
        status_message: row.opt_text(4)?,
        payload: row.opt_text(5)?,
        created_ms: row.int(6)?,
        updated_ms: row.int(7)?,
        ttl_ms: row.int(8)?,
        replica: row.text(9)?,
        lease_until_ms: row.int(10)?,
    })
}

impl Registry {
    /// Stores a new task, and forgets the tasks (and their pending answers) whose time
    /// ran out by `now_ms`.
    pub fn insert_task(&self, task: &TaskRecord, now_ms: i64) -> Result<(), RegistryError> {
        self.db.transaction(&[
            (
                "DELETE FROM task_responses WHERE task_id IN
                    (SELECT id FROM tasks WHERE created_ms + ttl_ms < ?1)",
                params![now_ms].to_vec(),
            ),
            (
                "DELETE FROM tasks WHERE created_ms + ttl_ms < ?1",
                params![now_ms].to_vec(),
            ),
            (
                "INSERT INTO tasks (id, agent, tool, status, status_message, payload, created_ms,
                    updated_ms, ttl_ms, replica, lease_until_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![
                    &task.id,
                    &task.agent,
                    &task.tool,
                    &task.status,
                    &task.status_message,
                    &task.payload,
                    task.created_ms,
                    task.updated_ms,
                    task.ttl_ms,
                    &task.replica,
                    task.lease_until_ms
                ]
                .to_vec(),
            ),
        ])
    }

    /// The task `id` of `agent`, if it exists and its time has not run out. A task that
    /// its replica stopped running (its lease ran out before it ended) is marked failed
    /// with `orphan_error` first; a poll of a healthy task only reads.
    pub fn task(
        &self,
        id: &str,
        agent: &str,
        now_ms: i64,
        orphan_error: &str,
    ) -> Result<Option<TaskRecord>, RegistryError> {
        let read = || -> Result<Option<TaskRecord>, RegistryError> {
            self.db
                .query_opt(
                    &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1 AND agent = ?2"),
                    &params![id, agent],
                )?
                .map(|row| task_from_row(&row))
                .transpose()
        };
        let Some(mut task) = read()? else {
            return Ok(None);
        };
        if task.created_ms + task.ttl_ms < now_ms {
            return Ok(None);
        }
        if !is_terminal(&task.status) && task.lease_until_ms < now_ms {
            // The owner may have renewed or ended it since the read: the update is
            // conditional, and what it left is read again.
            self.db.execute(
                "UPDATE tasks SET status = 'failed', status_message = ?2, payload = ?3,
                    updated_ms = ?4
                 WHERE id = ?1 AND status IN ('working', 'input_required')
                    AND lease_until_ms < ?4",
                &params![
                    id,
                    "the gateway replica running this task stopped before it finished",
                    orphan_error,
                    now_ms
                ],
            )?;
            task = read()?.unwrap_or(task);
        }
        Ok(Some(task))
    }

    /// Records the running task's new status, as its owner `replica`; a task that has
    /// ended (or was taken over as an orphan) is left as it is. Returns whether it moved.
    pub fn set_task_status(
        &self,
        id: &str,
        replica: &str,
        status: &str,
        status_message: Option<&str>,
        payload: Option<&str>,
        now_ms: i64,
    ) -> Result<bool, RegistryError> {
        let changed = self.db.execute(
            "UPDATE tasks SET status = ?3, status_message = ?4, payload = ?5, updated_ms = ?6
             WHERE id = ?1 AND replica = ?2 AND status IN ('working', 'input_required')",
            &params![id, replica, status, status_message, payload, now_ms],
        )?;
        if changed > 0 && is_terminal(status) {
            self.db.execute(
                "DELETE FROM task_responses WHERE task_id = ?1",
                &params![id],
            )?;
        }
        Ok(changed > 0)
    }

    /// Renews `replica`'s lease on its running task until `lease_until_ms`, and takes
    /// what other replicas left for it.
    pub fn renew_task(
        &self,
        id: &str,
        replica: &str,
        lease_until_ms: i64,
    ) -> Result<TaskSignals, RegistryError> {
        let renewed = self.db.query_opt(
            "UPDATE tasks SET lease_until_ms = ?3
             WHERE id = ?1 AND replica = ?2 AND status IN ('working', 'input_required')
             RETURNING cancel_requested",
            &params![id, replica, lease_until_ms],
        )?;
        let Some(row) = renewed else {
            return Ok(TaskSignals::default());
        };
        let responses = self
            .db
            .query(
                "DELETE FROM task_responses WHERE task_id = ?1 RETURNING key, value",
                &params![id],
            )?
            .iter()
            .map(|row| Ok((row.text(0)?, row.text(1)?)))
            .collect::<Result<Vec<_>, RegistryError>>()?;
        Ok(TaskSignals {
            cancel_requested: row.boolean(0)?,
            responses,
        })
    }

    /// Leaves `agent`'s answers for its running task's owner. Returns false when the
    /// task is not `agent`'s, or not running.
    pub fn leave_task_responses(
        &self,
        id: &str,
        agent: &str,
        responses: &[(String, String)],
    ) -> Result<bool, RegistryError> {
        if !self.task_is_running(id, agent)? {
            return Ok(false);
        }
        let statements: Vec<_> = responses
            .iter()
            .map(|(key, value)| {
                (
                    "INSERT INTO task_responses (task_id, key, value) VALUES (?1, ?2, ?3)
                     ON CONFLICT (task_id, key) DO NOTHING",
                    params![id, key, value].to_vec(),
                )
            })
            .collect();
        self.db.transaction(&statements)?;
        Ok(true)
    }

    /// Asks the owner of `agent`'s running task to cancel it. Returns false when the
    /// task is not `agent`'s, or not running.
    pub fn request_task_cancel(&self, id: &str, agent: &str) -> Result<bool, RegistryError> {
        let changed = self.db.execute(
            "UPDATE tasks SET cancel_requested = ?3
             WHERE id = ?1 AND agent = ?2 AND status IN ('working', 'input_required')",
            &params![id, agent, true],
        )?;
        Ok(changed > 0)
    }

    fn task_is_running(&self, id: &str, agent: &str) -> Result<bool, RegistryError> {
        Ok(self
            .db
            .query_opt(
                "SELECT 1 FROM tasks
                 WHERE id = ?1 AND agent = ?2 AND status IN ('working', 'input_required')",
                &params![id, agent],
            )?
            .is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, now: i64) -> TaskRecord {
        TaskRecord {
            id: id.into(),
            agent: "ada".into(),
            tool: "mcp__t__report".into(),
            status: "working".into(),
            status_message: None,
            payload: None,
            created_ms: now,
            updated_ms: now,
            ttl_ms: 60_000,
            replica: "r1".into(),
            lease_until_ms: now + 10_000,
        }
    }

    #[test]
    fn a_task_is_its_agents_ends_once_and_reads_failed_when_its_replica_stops() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::open(dir.path()).unwrap();
        let now = 1_000_000;
        registry.insert_task(&task("a", now), now).unwrap();
        registry.insert_task(&task("b", now), now).unwrap();
        assert!(registry.task("a", "eve", now, "{}").unwrap().is_none());
        let seen = registry.task("a", "ada", now, "{}").unwrap().unwrap();
        assert_eq!(seen.status, "working");

        // Answers and a cancel left by another replica reach the owner once.
        let answer = vec![("q1".to_string(), "{\"action\":\"accept\"}".to_string())];
        assert!(!registry.leave_task_responses("a", "eve", &answer).unwrap());
        assert!(registry.leave_task_responses("a", "ada", &answer).unwrap());
        assert!(registry.request_task_cancel("a", "ada").unwrap());
        let signals = registry.renew_task("a", "r1", now + 20_000).unwrap();
        assert!(signals.cancel_requested);
        assert_eq!(signals.responses, answer);
        assert!(
            registry
                .renew_task("a", "r1", now + 20_000)
                .unwrap()
                .responses
                .is_empty()
        );

        // The owner ends it; only once, and only the owner.
        assert!(
            !registry
                .set_task_status("a", "r2", "completed", None, Some("{}"), now)
                .unwrap()
        );
        assert!(
            registry
                .set_task_status("a", "r1", "cancelled", None, None, now)
                .unwrap()
        );
        assert!(
            !registry
                .set_task_status("a", "r1", "completed", None, None, now)
                .unwrap()
        );

        // "b"'s lease runs out: it reads failed, with the orphan error.
        let later = now + 10_001;
        let orphan = registry
            .task("b", "ada", later, "{\"error\":1}")
            .unwrap()
            .unwrap();
        assert_eq!(orphan.status, "failed");
        assert_eq!(orphan.payload.as_deref(), Some("{\"error\":1}"));
        assert!(
            !registry
                .set_task_status("b", "r1", "completed", None, None, later)
                .unwrap()
        );

        // Past their time to live, tasks are gone.
        let gone = now + 60_001;
        assert!(registry.task("a", "ada", gone, "{}").unwrap().is_none());
        registry.insert_task(&task("c", gone), gone).unwrap();
        let rows = registry.db.query("SELECT id FROM tasks", &[]).unwrap();
        assert_eq!(rows.len(), 1);
    }
}
