//! The `[limits]` table: how hard Airlock lets its clients press on each upstream server.
//! A concurrency cap, a token-bucket rate (per service, and per agent × service), and a
//! circuit breaker that stops opening connections to a service after repeated failures.
//! The defaults never bite one user; an operator tightens them for a shared gateway.
//!
//! ```toml
//! [limits]                        # every service
//! max_concurrent = 64             # calls in flight per service
//! calls_per_second = 20           # absent: no rate limit
//! burst = 40                      # default: calls_per_second, at least 1
//! agent_calls_per_second = 5      # per agent x service; absent: none
//! agent_burst = 10
//! breaker_failures = 5            # connection failures in a row that open it; 0: off
//! breaker_cooldown_secs = 10      # how long it stays open before one probe
//!
//! [limits.services.github]        # one service, key by key over the above
//! max_concurrent = 4
//! ```
//!
//! Files merge key by key in their usual order (user, project, `--config`).

use super::SettingError;
use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value};

/// The default cap on one service's calls in flight.
pub const DEFAULT_MAX_CONCURRENT: usize = 64;
/// The default number of connection failures in a row that open a service's breaker.
pub const DEFAULT_BREAKER_FAILURES: u32 = 5;
/// The default time a breaker stays open before it lets one probe through.
pub const DEFAULT_BREAKER_COOLDOWN: Duration = Duration::from_secs(10);

/// A token bucket: `per_second` tokens refill continuously, up to `burst`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Calls allowed per second, on average.
    pub per_second: f64,
    /// Calls allowed at once after a quiet spell.
    pub burst: u32,
}

/// The limits in effect for one service.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallLimits {
    /// Most calls in flight to the service at once; one more is refused (`overloaded`).
    pub max_concurrent: usize,
    /// The service's rate, across agents (`None`: unlimited).
    pub rate: Option<Rate>,
    /// Each agent's rate on the service (`None`: unlimited).
    pub agent_rate: Option<Rate>,
    /// Connection failures in a row that open the breaker (0: no breaker).
    pub breaker_failures: u32,
    /// How long an open breaker refuses before it lets one connection attempt through.
    pub breaker_cooldown: Duration,
}

impl Default for CallLimits {
    fn default() -> Self {
        CallLimits {
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            rate: None,
            agent_rate: None,
            breaker_failures: DEFAULT_BREAKER_FAILURES,
            breaker_cooldown: DEFAULT_BREAKER_COOLDOWN,
        }
    }
}

/// One table of limit keys as written (every key optional).
#[derive(Debug, Clone, Default, PartialEq)]
struct Keys {
    max_concurrent: Option<usize>,
    calls_per_second: Option<f64>,
    burst: Option<u32>,
    agent_calls_per_second: Option<f64>,
    agent_burst: Option<u32>,
    breaker_failures: Option<u32>,
    breaker_cooldown_secs: Option<f64>,
}

const KEYS: &str = "max_concurrent, calls_per_second, burst, agent_calls_per_second, agent_burst, breaker_failures, breaker_cooldown_secs, services";

impl Keys {
    /// Reads `map` (the table at `at`, for messages), ignoring the `services` key.
    fn read(map: &Map<String, Value>, at: &str) -> Result<Keys, SettingError> {
        let mut keys = Keys::default();
        let count = |key: &str, v: &Value, least: u64| {
            v.as_u64()
                .filter(|n| *n >= least && *n <= u32::MAX as u64)
                .ok_or_else(|| {
                    format!(
                        "\"{at}.{key}\" must be a whole number of at least {least}, got {}",
                        super::fields::kind(v)
                    )
                })
        };
        let positive = |key: &str, v: &Value| {
            v.as_f64()
                .filter(|n| *n > 0.0 && n.is_finite() && *n <= 1e9)
                .ok_or_else(|| {
                    format!(
                        "\"{at}.{key}\" must be a positive number, got {}",
                        super::fields::kind(v)
                    )
                })
        };
        for (key, v) in map {
            match key.as_str() {
                "services" if at == "limits" => {}
                "max_concurrent" => keys.max_concurrent = Some(count(key, v, 1)? as usize),
                "calls_per_second" => keys.calls_per_second = Some(positive(key, v)?),
                "burst" => keys.burst = Some(count(key, v, 1)? as u32),
                "agent_calls_per_second" => keys.agent_calls_per_second = Some(positive(key, v)?),
                "agent_burst" => keys.agent_burst = Some(count(key, v, 1)? as u32),
                "breaker_failures" => keys.breaker_failures = Some(count(key, v, 0)? as u32),
                "breaker_cooldown_secs" => {
                    let secs = positive(key, v)?;
                    if secs > 86_400.0 {
                        return Err(format!(
                            "\"{at}.{key}\" must be at most 86400 seconds, got {secs}"
                        )
                        .into());
                    }
                    keys.breaker_cooldown_secs = Some(secs);
                }
                other => {
                    let expected = if at == "limits" {
                        KEYS
                    } else {
                        KEYS.trim_end_matches(", services")
                    };
                    return Err(
                        format!("unknown key \"{at}.{other}\" (expected {expected})").into(),
                    );
                }
            }
        }
        if keys.burst.is_some() && keys.calls_per_second.is_none() {
            return Err(format!("\"{at}.burst\" needs \"{at}.calls_per_second\" beside it").into());
        }
        if keys.agent_burst.is_some() && keys.agent_calls_per_second.is_none() {
            return Err(format!(
                "\"{at}.agent_burst\" needs \"{at}.agent_calls_per_second\" beside it"
            )
            .into());
        }
        Ok(keys)
    }

    /// `later` over `self`, key by key. A rate and its burst travel together, so a later
    /// rate without a burst does not inherit an earlier burst written for another rate.
    fn overlay(&mut self, later: &Keys) {
        if later.calls_per_second.is_some() {
            self.calls_per_second = later.calls_per_second;
            self.burst = later.burst;
        }
        if later.agent_calls_per_second.is_some() {
            self.agent_calls_per_second = later.agent_calls_per_second;
            self.agent_burst = later.agent_burst;
        }
        let Keys {
            max_concurrent,
            breaker_failures,
            breaker_cooldown_secs,
            ..
        } = later;
        self.max_concurrent = max_concurrent.or(self.max_concurrent);
        self.breaker_failures = breaker_failures.or(self.breaker_failures);
        self.breaker_cooldown_secs = breaker_cooldown_secs.or(self.breaker_cooldown_secs);
    }

    fn apply(&self, limits: &mut CallLimits) {
        let rate = |per_second: Option<f64>, burst: Option<u32>| {
            per_second.map(|per_second| Rate {
                per_second,
                burst: burst.unwrap_or((per_second.ceil() as u32).max(1)),
            })
        };
        if let Some(n) = self.max_concurrent {
            limits.max_concurrent = n;
        }
        if self.calls_per_second.is_some() {
            limits.rate = rate(self.calls_per_second, self.burst);
        }
        if self.agent_calls_per_second.is_some() {
            limits.agent_rate = rate(self.agent_calls_per_second, self.agent_burst);
        }
        if let Some(n) = self.breaker_failures {
            limits.breaker_failures = n;
        }
        if let Some(secs) = self.breaker_cooldown_secs {
            limits.breaker_cooldown = Duration::from_secs_f64(secs);
        }
    }
}

/// Every `[limits]` table read, merged: the keys for every service and those for each
/// named service.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LimitsTable {
    every: Keys,
    services: BTreeMap<String, Keys>,
}

impl LimitsTable {
    /// Reads one file's `[limits]` table.
    pub(super) fn parse(value: &Value) -> Result<LimitsTable, SettingError> {
        let kind = super::fields::kind;
        let Value::Object(map) = value else {
            return Err(format!("\"limits\" must be a table, got {}", kind(value)).into());
        };
        let mut table = LimitsTable {
            every: Keys::read(map, "limits")?,
            services: BTreeMap::new(),
        };
        match map.get("services") {
            None => {}
            Some(Value::Object(services)) => {
                for (name, v) in services {
                    let at = format!("limits.services.{name}");
                    let Value::Object(keys) = v else {
                        return Err(format!("\"{at}\" must be a table, got {}", kind(v)).into());
                    };
                    table.services.insert(name.clone(), Keys::read(keys, &at)?);
                }
            }
            Some(other) => {
                return Err(format!(
                    "\"limits.services\" must be a table of services, got {}",
                    kind(other)
                )
                .into());
            }
        }
        Ok(table)
    }

    /// `later` (a file read after) over this table, key by key.
    pub(super) fn overlay(&mut self, later: &LimitsTable) {
        self.every.overlay(&later.every);
        for (name, keys) in &later.services {
            self.services.entry(name.clone()).or_default().overlay(keys);
        }
    }

    /// The limits in effect for `service`: the defaults, then the keys for every service,
    /// then the service's own.
    pub fn for_service(&self, service: &str) -> CallLimits {
        let mut limits = CallLimits::default();
        self.every.apply(&mut limits);
        if let Some(own) = self.services.get(service) {
            own.apply(&mut limits);
        }
        limits
    }

    /// Services named under `[limits.services]`.
    pub fn named_services(&self) -> impl Iterator<Item = &str> {
        self.services.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn table(v: Value) -> LimitsTable {
        LimitsTable::parse(&v).unwrap()
    }

    #[test]
    fn defaults_every_service_and_one_service_stack_key_by_key() {
        assert_eq!(
            LimitsTable::default().for_service("x"),
            CallLimits::default()
        );
        let t = table(json!({
            "max_concurrent": 8, "calls_per_second": 2.5, "breaker_failures": 0,
            "services": {"gh": {"max_concurrent": 2, "agent_calls_per_second": 1, "agent_burst": 3}}
        }));
        let other = t.for_service("other");
        assert_eq!(other.max_concurrent, 8);
        assert_eq!(
            other.rate,
            Some(Rate {
                per_second: 2.5,
                burst: 3
            })
        );
        assert_eq!(other.agent_rate, None);
        assert_eq!(other.breaker_failures, 0);
        let gh = t.for_service("gh");
        assert_eq!(gh.max_concurrent, 2);
        assert_eq!(gh.rate, other.rate);
        assert_eq!(
            gh.agent_rate,
            Some(Rate {
                per_second: 1.0,
                burst: 3
            })
        );
    }

    #[test]
    fn a_later_file_overrides_key_by_key_and_a_rate_brings_its_own_burst() {
        let mut t = table(json!({"calls_per_second": 10, "burst": 50, "max_concurrent": 4}));
        t.overlay(&table(
            json!({"calls_per_second": 1, "services": {"a": {"max_concurrent": 1}}}),
        ));
        let every = t.for_service("b");
        assert_eq!(every.max_concurrent, 4);
        assert_eq!(
            every.rate,
            Some(Rate {
                per_second: 1.0,
                burst: 1
            })
        );
        assert_eq!(t.for_service("a").max_concurrent, 1);
        assert_eq!(t.named_services().collect::<Vec<_>>(), ["a"]);
    }

    #[test]
    fn bad_limits_name_the_key() {
        let err = |v: Value| LimitsTable::parse(&v).unwrap_err().message;
        assert!(err(json!({"max_concurrent": 0})).contains("\"limits.max_concurrent\""));
        assert!(err(json!({"calls_per_second": -1})).contains("must be a positive number"));
        assert!(err(json!({"burst": 3})).contains("needs \"limits.calls_per_second\""));
        assert!(err(json!({"breaker_cooldown_secs": 1e6})).contains("at most 86400"));
        let unknown = err(json!({"services": {"gh": {"rate": 1}}}));
        assert!(unknown.contains("\"limits.services.gh.rate\""), "{unknown}");
        assert!(err(json!({"services": {"gh": 3}})).contains("must be a table"));
        assert!(err(json!([])).contains("\"limits\" must be a table"));
    }
}
