//! [`Gateway`]: what every downstream session of `airlock serve` shares — the Airlock it
//! fronts, how it serves, how many sessions each agent has open, the suspended calls of
//! 2026-07-28 clients and their task handles.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::ServeOptions;
use super::questions::QuestionBook;
use super::subscribing::Subscribing;
use super::tasks::TaskBook;
use crate::Airlock;

/// The gateway: the Airlock it fronts, how it serves, and how many downstream sessions
/// each agent has open (an agent's upstream sessions close with its last one).
pub struct Gateway {
    pub(crate) airlock: Airlock,
    pub(crate) options: ServeOptions,
    open: Mutex<HashMap<String, usize>>,
    /// The calls of 2026-07-28 clients waiting for their answers.
    pub(super) questions: QuestionBook,
    /// The task handles given to 2026-07-28 clients.
    pub(super) tasks: Arc<TaskBook>,
    /// Listen streams whose upstream subscriptions are being opened.
    pub(super) subscribing: Subscribing,
}

impl Gateway {
    /// A gateway in front of `airlock`.
    pub fn new(airlock: Airlock, options: ServeOptions) -> Self {
        Gateway {
            airlock,
            options,
            open: Mutex::new(HashMap::new()),
            questions: QuestionBook::default(),
            tasks: Arc::default(),
            subscribing: Subscribing::default(),
        }
    }

    pub(super) fn session_opened(&self, agent: &str) {
        *self
            .open
            .lock()
            .expect("open sessions poisoned")
            .entry(agent.to_string())
            .or_default() += 1;
    }

    /// One downstream session of `agent` ended: with its last one, the agent's client
    /// is detached and its upstream sessions (and their processes) are closed.
    pub(super) async fn session_closed(&self, agent: &str) {
        let last = {
            let mut open = self.open.lock().expect("open sessions poisoned");
            let count = open.entry(agent.to_string()).or_default();
            *count = count.saturating_sub(1);
            let last = *count == 0;
            if last {
                open.remove(agent);
            }
            last
        };
        if last {
            self.airlock.services().detach_client(agent);
            self.airlock.services().disconnect_agent(agent).await;
        }
    }

    /// Closes every agent's upstream sessions (the gateway is stopping).
    pub async fn close_all(&self) {
        let agents: Vec<String> = self
            .open
            .lock()
            .expect("open sessions poisoned")
            .drain()
            .map(|(a, _)| a)
            .collect();
        for agent in agents {
            self.airlock.services().detach_client(&agent);
        }
        self.airlock.clone().close().await;
    }

    /// The downstream sessions open per agent.
    pub fn open_sessions(&self) -> HashMap<String, usize> {
        self.open.lock().expect("open sessions poisoned").clone()
    }
}
