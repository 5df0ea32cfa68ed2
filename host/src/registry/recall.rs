//! Last-known answers: the bearer tokens and grants the database confirmed, with when,
//! so that a short outage of a shared registry (PostgreSQL restarting, a network
//! partition) costs only the requests that truly need it. An answer is recalled only
//! while the database cannot be reached and only within the outage grace; a token or a
//! grant the database was seen not to hold, or that this host removed, is forgotten at
//! once and never recalled.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::TokenRecord;

/// Past this many remembered answers of one kind, the expired ones are dropped.
const PRUNE_ABOVE: usize = 10_000;

/// The remembered answers.
pub(super) struct Recall {
    grace: Duration,
    tokens: Mutex<HashMap<String, (TokenRecord, Instant)>>,
    grants: Mutex<HashMap<(String, String), Instant>>,
    lists: Mutex<HashMap<String, (Vec<String>, Instant)>>,
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Drops the entries of `map` older than `grace` once it holds more than it should.
fn prune<K, V>(map: &mut HashMap<K, V>, grace: Duration, seen: impl Fn(&V) -> Instant) {
    if map.len() > PRUNE_ABOVE {
        map.retain(|_, v| seen(v).elapsed() < grace);
    }
}

impl Recall {
    /// Answers are recalled for `grace` after the database gave them (zero: never).
    pub fn new(grace: Duration) -> Recall {
        Recall {
            grace,
            tokens: Default::default(),
            grants: Default::default(),
            lists: Default::default(),
        }
    }

    fn fresh(&self, seen: Instant) -> bool {
        seen.elapsed() < self.grace
    }

    /// The database answered for the token of `fingerprint`.
    pub fn token_seen(&self, fingerprint: &str, token: Option<&TokenRecord>) {
        let mut tokens = locked(&self.tokens);
        match token {
            Some(token) if !self.grace.is_zero() => {
                tokens.insert(fingerprint.to_string(), (token.clone(), Instant::now()));
                prune(&mut tokens, self.grace, |(_, seen)| *seen);
            }
            _ => {
                tokens.remove(fingerprint);
            }
        }
    }

    /// The token of `fingerprint`, if the database confirmed it within the grace.
    pub fn token(&self, fingerprint: &str) -> Option<TokenRecord> {
        let tokens = locked(&self.tokens);
        let (token, seen) = tokens.get(fingerprint)?;
        self.fresh(*seen).then(|| token.clone())
    }

    /// The token `id` was removed.
    pub fn forget_token(&self, id: &str) {
        locked(&self.tokens).retain(|_, (token, _)| token.id != id);
    }

    /// The database answered whether `agent` holds a grant for `service`.
    pub fn grant_seen(&self, agent: &str, service: &str, granted: bool) {
        if granted && !self.grace.is_zero() {
            let mut grants = locked(&self.grants);
            grants.insert((agent.to_string(), service.to_string()), Instant::now());
            prune(&mut grants, self.grace, |seen| *seen);
        } else {
            self.forget_grant(agent, service);
        }
    }

    /// Whether the database confirmed `agent`'s grant of `service` within the grace.
    pub fn granted(&self, agent: &str, service: &str) -> bool {
        let key = (agent.to_string(), service.to_string());
        let pair = locked(&self.grants).get(&key).copied();
        let listed = locked(&self.lists)
            .get(agent)
            .filter(|(services, _)| services.iter().any(|s| s == service))
            .map(|(_, seen)| *seen);
        pair.into_iter().chain(listed).any(|seen| self.fresh(seen))
    }

    /// The database listed every service granted to `agent`.
    pub fn grants_seen(&self, agent: &str, services: &[String]) {
        locked(&self.grants)
            .retain(|(a, s), _| a != agent || services.iter().any(|listed| listed == s));
        if self.grace.is_zero() {
            return;
        }
        let mut lists = locked(&self.lists);
        lists.insert(agent.to_string(), (services.to_vec(), Instant::now()));
        prune(&mut lists, self.grace, |(_, seen)| *seen);
    }

    /// The services granted to `agent`, as the database listed them within the grace.
    pub fn grants(&self, agent: &str) -> Option<Vec<String>> {
        let lists = locked(&self.lists);
        let (services, seen) = lists.get(agent)?;
        self.fresh(*seen).then(|| services.clone())
    }

    /// `agent`'s grant of `service` is gone.
    pub fn forget_grant(&self, agent: &str, service: &str) {
        locked(&self.grants).remove(&(agent.to_string(), service.to_string()));
        if let Some((services, _)) = locked(&self.lists).get_mut(agent) {
            services.retain(|s| s != service);
        }
    }

    /// `service` was removed: every grant of it is gone.
    pub fn forget_service(&self, service: &str) {
        locked(&self.grants).retain(|(_, s), _| s != service);
        for (services, _) in locked(&self.lists).values_mut() {
            services.retain(|s| s != service);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(id: &str) -> TokenRecord {
        TokenRecord {
            id: id.into(),
            agent: "alice".into(),
            fingerprint: format!("sha256:{id}"),
            secret_ref: "ref".into(),
            created_at: 0,
        }
    }

    #[test]
    fn a_confirmed_token_is_recalled_until_it_is_refused_or_removed() {
        let recall = Recall::new(Duration::from_secs(60));
        recall.token_seen("sha256:a", Some(&token("a")));
        assert_eq!(recall.token("sha256:a").unwrap().id, "a");
        recall.token_seen("sha256:a", None);
        assert!(
            recall.token("sha256:a").is_none(),
            "refused: never recalled"
        );
        recall.token_seen("sha256:a", Some(&token("a")));
        recall.forget_token("a");
        assert!(
            recall.token("sha256:a").is_none(),
            "removed: never recalled"
        );
    }

    #[test]
    fn grants_are_recalled_per_pair_and_per_list_until_revoked() {
        let recall = Recall::new(Duration::from_secs(60));
        recall.grant_seen("alice", "github", true);
        recall.grants_seen("bob", &["jira".into(), "linear".into()]);
        assert!(recall.granted("alice", "github"));
        assert!(recall.granted("bob", "jira"), "a listed grant counts");
        assert!(!recall.granted("alice", "jira"));
        recall.grants_seen("bob", &["linear".into()]);
        assert!(
            !recall.granted("bob", "jira"),
            "no longer listed: forgotten"
        );
        recall.grant_seen("alice", "github", false);
        assert!(!recall.granted("alice", "github"));
        recall.forget_grant("bob", "linear");
        assert_eq!(recall.grants("bob"), Some(vec![]));
        recall.grant_seen("carol", "s3", true);
        recall.forget_service("s3");
        assert!(!recall.granted("carol", "s3"));
    }

    #[test]
    fn nothing_is_recalled_past_the_grace_or_with_none() {
        let none = Recall::new(Duration::ZERO);
        none.token_seen("sha256:a", Some(&token("a")));
        none.grant_seen("alice", "github", true);
        assert!(none.token("sha256:a").is_none());
        assert!(!none.granted("alice", "github"));
        let short = Recall::new(Duration::from_millis(20));
        short.grant_seen("alice", "github", true);
        std::thread::sleep(Duration::from_millis(40));
        assert!(!short.granted("alice", "github"));
    }
}
