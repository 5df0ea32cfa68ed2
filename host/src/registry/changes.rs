//! What other processes changed: the `changes` table holds one counter per topic,
//! bumped by database triggers on every write to the topic's tables, whoever made it (a
//! replica, `airlock servers add`, the console of another host). A running host reads
//! the counters (one small query) and takes in only what moved.
//!
//! Topics: `services` (the `services`, `catalogs` and `namespaces` tables: definitions,
//! tested catalogs, frozen names), `grants`, and `pauses` (`service_pauses`: services
//! an operator disabled at run time, on every replica at once).

use std::collections::{BTreeMap, BTreeSet};

use super::{Registry, RegistryError};

/// The change counters, by topic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Generations(BTreeMap<String, i64>);

impl Generations {
    /// The counter of `topic` (0 when unknown).
    pub fn of(&self, topic: &str) -> i64 {
        self.0.get(topic).copied().unwrap_or(0)
    }

    /// Whether `topic` moved since `earlier`.
    pub fn moved(&self, earlier: &Generations, topic: &str) -> bool {
        self.of(topic) != earlier.of(topic)
    }
}

impl Registry {
    /// The change counters now.
    pub fn generations(&self) -> Result<Generations, RegistryError> {
        let rows = self
            .db
            .query("SELECT topic, generation FROM changes", &[])?;
        let mut counters = BTreeMap::new();
        for row in &rows {
            counters.insert(row.text(0)?, row.int(1)?);
        }
        Ok(Generations(counters))
    }

    /// Disables `service` at run time on every host sharing this registry, until
    /// [`Registry::resume`]. Returns whether it was running.
    pub fn pause(&self, service: &str) -> Result<bool, RegistryError> {
        Ok(self.db.execute(
            "INSERT INTO service_pauses (service) VALUES (?1) ON CONFLICT DO NOTHING",
            &[service.into()],
        )? > 0)
    }

    /// Ends a run-time disable of `service`. Returns whether it was paused.
    pub fn resume(&self, service: &str) -> Result<bool, RegistryError> {
        Ok(self.db.execute(
            "DELETE FROM service_pauses WHERE service = ?1",
            &[service.into()],
        )? > 0)
    }

    /// Every service disabled at run time.
    pub fn paused(&self) -> Result<BTreeSet<String>, RegistryError> {
        self.db
            .query("SELECT service FROM service_pauses", &[])?
            .iter()
            .map(|row| row.text(0))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_move_their_topic_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::open(dir.path()).unwrap();
        let start = registry.generations().unwrap();
        registry.grant("a", "svc").unwrap();
        let granted = registry.generations().unwrap();
        assert!(granted.moved(&start, "grants"));
        assert!(!granted.moved(&start, "services"));
        assert!(!granted.moved(&start, "pauses"));
        assert!(registry.pause("svc").unwrap());
        assert!(!registry.pause("svc").unwrap());
        let paused = registry.generations().unwrap();
        assert!(paused.moved(&granted, "pauses"));
        assert_eq!(
            registry.paused().unwrap(),
            BTreeSet::from(["svc".to_string()])
        );
        assert!(registry.resume("svc").unwrap());
        assert!(registry.paused().unwrap().is_empty());
    }
}
