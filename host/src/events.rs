//! Events an embedder can watch (`Airlock::events`) and the CLI prints as `--json`
//! lines: sessions opening and closing, calls, progress, and server-side changes; and
//! the [`EventBus`] every part of the host sends them on.

use serde::Serialize;

use crate::error::ErrorCode;

/// A service's state, as status and `service_changed` events name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceState {
    /// `enabled = false`.
    Disabled,
    /// A registry service without a fresh tested catalog.
    Untested,
    /// No live session; the next call connects.
    Disconnected,
    /// A connection is being opened.
    Connecting,
    /// At least one live session.
    Connected,
    /// Could not be started, connected or cataloged.
    Failed,
}

impl ServiceState {
    /// The state's name (`connected`, `failed`…).
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceState::Disabled => "disabled",
            ServiceState::Untested => "untested",
            ServiceState::Disconnected => "disconnected",
            ServiceState::Connecting => "connecting",
            ServiceState::Connected => "connected",
            ServiceState::Failed => "failed",
        }
    }
}

/// What happened to one agent's session with a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// The session opened.
    Connected,
    /// The session closed (disconnect, reset, revoke, the server went away).
    Closed,
    /// The session could not be opened.
    Failed,
}

impl SessionState {
    /// The state's name (`connected`, `closed`, `failed`).
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Connected => "connected",
            SessionState::Closed => "closed",
            SessionState::Failed => "failed",
        }
    }
}

/// States compare with their names, as the JSON shows them.
macro_rules! compare_with_names {
    ($($t:ty),*) => {$(
        impl PartialEq<&str> for $t {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )*};
}

compare_with_names!(ServiceState, SessionState);

impl PartialEq<&str> for CallStatus {
    fn eq(&self, other: &&str) -> bool {
        match self {
            CallStatus::Ok => *other == "ok",
            CallStatus::Failed(code) => code.as_str() == *other,
        }
    }
}

/// How a call ended: `ok`, or the error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallStatus {
    /// The call produced a result the server did not mark as an error.
    Ok,
    /// The call failed with this code (`tool_error` for a result marked `isError`).
    Failed(ErrorCode),
}

impl Serialize for CallStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CallStatus::Ok => s.serialize_str("ok"),
            CallStatus::Failed(code) => s.serialize_str(code.as_str()),
        }
    }
}

impl std::fmt::Display for CallStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallStatus::Ok => f.write_str("ok"),
            CallStatus::Failed(code) => f.write_str(code.as_str()),
        }
    }
}

/// Something that happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// A service's state changed.
    ServiceChanged {
        /// The service.
        service: String,
        /// Its new state.
        state: ServiceState,
        /// Why it failed, when it did.
        reason: Option<String>,
    },
    /// An agent's session with a service opened, closed or failed. A reconnection is a
    /// new session number.
    SessionChanged {
        /// The agent.
        agent: String,
        /// The service.
        service: String,
        /// The session number (increases with every connection).
        session: u64,
        /// What happened.
        state: SessionState,
        /// Whether this connection replaces an earlier one for the same agent.
        reconnect: bool,
        /// Why, for `failed`.
        reason: Option<String>,
    },
    /// A grant was given or revoked.
    GrantsChanged {
        /// The agent.
        agent: String,
        /// The service.
        service: String,
        /// Whether the agent now holds the grant.
        granted: bool,
    },
    /// A tool call began (its service is known and the call goes ahead to access checks,
    /// policy and the server). Every `call_started` is followed by one `tool_called`.
    CallStarted {
        /// The agent.
        agent: String,
        /// The service.
        service: String,
        /// The qualified tool name.
        tool: String,
    },
    /// A tool call finished.
    ToolCalled {
        /// The agent.
        agent: String,
        /// The service.
        service: String,
        /// The qualified tool name.
        tool: String,
        /// `ok` or the error code.
        status: CallStatus,
        /// Milliseconds from start to finish.
        elapsed_ms: u64,
        /// Progress notifications seen.
        progress_seen: usize,
        /// Size of the result in bytes, when there is one.
        size: Option<usize>,
        /// Whether anything was redacted.
        redacted: bool,
        /// The retained output's id (page it with `read_output_as`), when it was kept.
        output_id: Option<String>,
    },
    /// A policy decided about a call or its result (enforced or audited).
    PolicyDecided {
        /// The agent.
        agent: String,
        /// The service.
        service: String,
        /// The qualified tool name.
        tool: String,
        /// The policy plugin that decided.
        plugin: String,
        /// The rule it named (`failed` when the plugin failed).
        rule: String,
        /// `allow`, `deny`, `rewrite`, `ask`, `approved`, `declined`, `withhold`,
        /// `replace` or `failed`.
        decision: String,
        /// The reason, question or failure, when there is one (scrubbed of secrets).
        reason: Option<String>,
        /// `enforce` or `audit`.
        mode: String,
    },
    /// The server reported progress on a running call.
    Progress {
        /// The agent.
        agent: String,
        /// The service.
        service: String,
        /// The qualified tool name.
        tool: String,
        /// Progress so far.
        progress: f64,
        /// The total, if known.
        total: Option<f64>,
        /// The server's message.
        message: Option<String>,
    },
    /// A server's tool list changed and the catalog was refreshed.
    ToolsChanged {
        /// The service.
        service: String,
        /// Its tool count now.
        tools: usize,
    },
    /// A resource the server offers changed.
    ResourceUpdated {
        /// The service.
        service: String,
        /// The resource URI.
        uri: String,
    },
    /// The server's resource list changed (list them again to see it).
    ResourcesChanged {
        /// The service.
        service: String,
    },
    /// The server's prompt list changed (list them again to see it).
    PromptsChanged {
        /// The service.
        service: String,
    },
}

impl Event {
    /// Whether the event is a call's own activity (`call_started`, `tool_called`,
    /// `policy_decided`, `progress`), one or more of which every call emits; the others
    /// say that what the host offers changed.
    pub fn concerns_a_call(&self) -> bool {
        matches!(
            self,
            Event::CallStarted { .. }
                | Event::ToolCalled { .. }
                | Event::PolicyDecided { .. }
                | Event::Progress { .. }
        )
    }
}

/// Where events are sent, shared (cheaply cloned) by every part of the host that
/// reports something: every event goes to [`EventBus::subscribe`]'s receivers, and each
/// one that does not concern a call ([`Event::concerns_a_call`]) to
/// [`EventBus::subscribe_changes`]'s too. A gateway session's notices wait on the second,
/// so a call wakes none of them. A receiver that falls behind misses the oldest.
#[derive(Debug, Clone)]
pub struct EventBus {
    all: tokio::sync::broadcast::Sender<Event>,
    changes: tokio::sync::broadcast::Sender<Event>,
}

impl EventBus {
    /// A bus that keeps up to `capacity` events for a slow receiver.
    pub fn new(capacity: usize) -> EventBus {
        EventBus {
            all: tokio::sync::broadcast::channel(capacity).0,
            changes: tokio::sync::broadcast::channel(capacity).0,
        }
    }

    /// Sends `event` to every receiver that takes it (none is fine).
    pub fn emit(&self, event: Event) {
        if !event.concerns_a_call() && self.changes.receiver_count() > 0 {
            let _ = self.changes.send(event.clone());
        }
        let _ = self.all.send(event);
    }

    /// Sends the call's own event ([`Event::concerns_a_call`]) that `make` builds,
    /// building it only when a receiver takes every event (for events on every call's
    /// path).
    pub fn emit_with(&self, make: impl FnOnce() -> Event) {
        if self.all.receiver_count() > 0 {
            let event = make();
            debug_assert!(event.concerns_a_call(), "{event:?}");
            let _ = self.all.send(event);
        }
    }

    /// Every event from now on.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Event> {
        self.all.subscribe()
    }

    /// The events that do not concern a call, from now on.
    pub fn subscribe_changes(&self) -> tokio::sync::broadcast::Receiver<Event> {
        self.changes.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started() -> Event {
        Event::CallStarted {
            agent: "a".into(),
            service: "s".into(),
            tool: "mcp__s__t".into(),
        }
    }

    #[test]
    fn change_receivers_get_changes_and_no_call_activity() {
        let bus = EventBus::new(8);
        let mut all = bus.subscribe();
        let mut changes = bus.subscribe_changes();
        bus.emit_with(started);
        bus.emit(Event::ToolsChanged {
            service: "s".into(),
            tools: 3,
        });
        bus.emit(Event::Progress {
            agent: "a".into(),
            service: "s".into(),
            tool: "mcp__s__t".into(),
            progress: 1.0,
            total: None,
            message: None,
        });
        assert_eq!(all.try_recv().unwrap(), started());
        assert!(matches!(all.try_recv(), Ok(Event::ToolsChanged { .. })));
        assert!(matches!(all.try_recv(), Ok(Event::Progress { .. })));
        assert!(matches!(changes.try_recv(), Ok(Event::ToolsChanged { .. })));
        assert!(changes.try_recv().is_err(), "no call activity for changes");
    }

    #[test]
    fn a_call_event_is_not_built_for_change_receivers_alone() {
        let bus = EventBus::new(8);
        let _changes = bus.subscribe_changes();
        bus.emit_with(|| unreachable!("built with no receiver of every event"));
        let mut all = bus.subscribe();
        bus.emit_with(started);
        assert_eq!(all.try_recv().unwrap(), started());
    }
}
