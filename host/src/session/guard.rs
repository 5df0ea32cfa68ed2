//! What keeps Airlock's clients from pressing too hard on one upstream server: a cap on
//! calls in flight, token-bucket rates (the service's, and each agent's on it), and a
//! circuit breaker on opening connections. Each refusal is a typed [`CallError`]
//! (`overloaded`, `rate_limited`, `circuit_open`) that says when to retry; nothing
//! refused was sent to the server.
//!
//! The breaker counts connection failures in a row (a session that could not be opened,
//! or a transport that closed under a call). At `breaker_failures` it opens: for
//! `breaker_cooldown` no new connection to the service is attempted. Then one attempt
//! (the probe) is let through; its success closes the breaker, its failure opens it for
//! another cooldown. Sessions already open are not refused: they are the evidence the
//! service works.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::{CallLimits, Rate};
use crate::error::{CallError, ErrorCode};

/// How long an `overloaded` caller is told to wait: a call in flight usually ends by then.
const OVERLOADED_RETRY: Duration = Duration::from_millis(500);
/// Agent buckets kept before idle (full) ones are forgotten.
const AGENT_BUCKETS_KEPT: usize = 1024;

/// One service's limits and their live state. Shared by every agent's calls.
#[derive(Debug)]
pub struct UpstreamGuard {
    service: String,
    limits: CallLimits,
    in_flight: AtomicUsize,
    bucket: Option<Mutex<Bucket>>,
    agent_buckets: Mutex<HashMap<String, Bucket>>,
    breaker: Mutex<Breaker>,
    /// Whether the breaker counts any failure: a success then has nothing to reset, so
    /// the call path takes no lock.
    failing: AtomicBool,
}

/// A call's place among the service's calls in flight; released on drop.
#[derive(Debug)]
#[must_use = "the slot is released when the permit drops"]
pub struct Permit<'a> {
    guard: &'a UpstreamGuard,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.guard.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Leave to open one connection, to be answered with [`ConnectAttempt::succeeded`] or
/// [`ConnectAttempt::failed`]. A probe dropped unanswered (its caller gave up) lets the
/// next caller probe at once.
#[derive(Debug)]
#[must_use = "report how the connection went"]
pub struct ConnectAttempt<'a> {
    guard: &'a UpstreamGuard,
    probe: bool,
    answered: bool,
}

impl ConnectAttempt<'_> {
    /// The connection opened: the breaker closes.
    pub fn succeeded(mut self) {
        self.answered = true;
        self.guard.record_success();
    }

    /// The connection failed: one more failure in a row.
    pub fn failed(mut self) {
        self.answered = true;
        if self.probe {
            let mut breaker = self.guard.breaker();
            self.guard.failing.store(true, Ordering::Release);
            breaker.failures = breaker.failures.saturating_add(1);
            breaker.state = State::Open {
                until: Instant::now() + self.guard.limits.breaker_cooldown,
            };
        } else {
            self.guard.record_failure();
        }
    }
}

impl Drop for ConnectAttempt<'_> {
    fn drop(&mut self) {
        if self.probe && !self.answered {
            let mut breaker = self.guard.breaker();
            if breaker.state == State::HalfOpen {
                breaker.state = State::Open {
                    until: Instant::now(),
                };
            }
        }
    }
}

/// A token bucket's state.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    refilled: Instant,
}

impl Bucket {
    fn full(rate: Rate) -> Self {
        Bucket {
            tokens: f64::from(rate.burst),
            refilled: Instant::now(),
        }
    }

    /// Refills for the time since the last look.
    fn refill(&mut self, rate: Rate, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate.per_second).min(f64::from(rate.burst));
        self.refilled = now;
    }

    /// Whether a token is there to take (refilled first); else how long until one is.
    fn check(&mut self, rate: Rate, now: Instant) -> Result<(), Duration> {
        self.refill(rate, now);
        if self.tokens >= 1.0 {
            Ok(())
        } else {
            let missing = 1.0 - self.tokens;
            Err(Duration::from_secs_f64(
                missing / rate.per_second.max(f64::EPSILON),
            ))
        }
    }

    fn is_full(&self, rate: Rate, now: Instant) -> bool {
        let mut probe = *self;
        probe.refill(rate, now);
        probe.tokens >= f64::from(rate.burst)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed,
    Open { until: Instant },
    HalfOpen,
}

#[derive(Debug)]
struct Breaker {
    state: State,
    /// Connection failures in a row.
    failures: u32,
}

/// The live state of a service's limits, as `status` shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GuardReport {
    /// Calls in flight now.
    pub in_flight: usize,
    /// The cap on calls in flight.
    pub max_concurrent: usize,
    /// The service's rate, in calls per second (absent: unlimited).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calls_per_second: Option<f64>,
    /// Each agent's rate on the service (absent: unlimited).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_calls_per_second: Option<f64>,
    /// `closed`, `open` or `half_open` (a probe is connecting); `off` with no breaker.
    pub breaker: &'static str,
    /// Connection failures in a row.
    pub failures: u32,
    /// While open: milliseconds until a probe is let through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_in_ms: Option<u64>,
}

impl UpstreamGuard {
    /// The guard of `service` under `limits`, with full buckets and a closed breaker.
    pub fn new(service: &str, limits: CallLimits) -> Self {
        UpstreamGuard {
            service: service.to_string(),
            limits,
            in_flight: AtomicUsize::new(0),
            bucket: limits.rate.map(|rate| Mutex::new(Bucket::full(rate))),
            agent_buckets: Mutex::new(HashMap::new()),
            breaker: Mutex::new(Breaker {
                state: State::Closed,
                failures: 0,
            }),
            failing: AtomicBool::new(false),
        }
    }

    /// The limits it enforces.
    pub fn limits(&self) -> &CallLimits {
        &self.limits
    }

    /// Admits one request from `agent`: a slot among the calls in flight, then a token
    /// from the agent's bucket and the service's. Refused with `overloaded` or
    /// `rate_limited`, naming when to retry; a refused request takes nothing.
    pub fn admit(&self, agent: &str) -> Result<Permit<'_>, CallError> {
        let max = self.limits.max_concurrent;
        let taken = self
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            });
        if taken.is_err() {
            return Err(CallError::new(
                ErrorCode::Overloaded,
                format!(
                    "service \"{}\" already has {max} calls in flight (limits.max_concurrent); retry shortly",
                    self.service
                ),
            )
            .retry_after(OVERLOADED_RETRY));
        }
        let permit = Permit { guard: self };
        self.take_tokens(agent)?;
        Ok(permit)
    }

    /// Takes a token from the agent's bucket and the service's, or neither.
    fn take_tokens(&self, agent: &str) -> Result<(), CallError> {
        if self.limits.rate.is_none() && self.limits.agent_rate.is_none() {
            return Ok(());
        }
        let now = Instant::now();
        let mut agents = self.agent_buckets.lock().expect("rate buckets poisoned");
        if let Some(rate) = self.limits.agent_rate {
            if agents.len() >= AGENT_BUCKETS_KEPT && !agents.contains_key(agent) {
                agents.retain(|_, bucket| !bucket.is_full(rate, now));
            }
            let bucket = agents
                .entry(agent.to_string())
                .or_insert_with(|| Bucket::full(rate));
            if let Err(wait) = bucket.check(rate, now) {
                return Err(self.rate_limited(
                    wait,
                    format!(
                        "agent \"{agent}\" may make {} calls per second to",
                        rate.per_second
                    ),
                ));
            }
        }
        if let (Some(rate), Some(bucket)) = (self.limits.rate, &self.bucket) {
            let mut bucket = bucket.lock().expect("rate bucket poisoned");
            if let Err(wait) = bucket.check(rate, now) {
                return Err(self.rate_limited(
                    wait,
                    format!("{} calls per second are allowed to", rate.per_second),
                ));
            }
            bucket.tokens -= 1.0;
        }
        if self.limits.agent_rate.is_some()
            && let Some(bucket) = agents.get_mut(agent)
        {
            bucket.tokens -= 1.0;
        }
        Ok(())
    }

    fn rate_limited(&self, wait: Duration, what: String) -> CallError {
        // Whole milliseconds, rounded up: retrying at the time said must succeed.
        let wait = Duration::from_millis(wait.as_millis() as u64 + 1);
        CallError::new(
            ErrorCode::RateLimited,
            format!(
                "{what} service \"{}\" (limits); retry in {} ms",
                self.service,
                wait.as_millis()
            ),
        )
        .retry_after(wait)
    }

    /// Leave to open a connection, or `circuit_open` while the breaker is open (or
    /// another caller's probe is connecting).
    pub fn connect(&self) -> Result<ConnectAttempt<'_>, CallError> {
        let attempt = |probe| ConnectAttempt {
            guard: self,
            probe,
            answered: false,
        };
        if self.limits.breaker_failures == 0 {
            return Ok(attempt(false));
        }
        let mut breaker = self.breaker();
        let now = Instant::now();
        match breaker.state {
            State::Closed => Ok(attempt(false)),
            State::Open { until } if now >= until => {
                breaker.state = State::HalfOpen;
                Ok(attempt(true))
            }
            State::Open { until } => Err(self.circuit_open(breaker.failures, until - now)),
            State::HalfOpen => Err(self.circuit_open(breaker.failures, OVERLOADED_RETRY)),
        }
    }

    fn circuit_open(&self, failures: u32, wait: Duration) -> CallError {
        let wait = Duration::from_millis(wait.as_millis() as u64 + 1);
        CallError::new(
            ErrorCode::CircuitOpen,
            format!(
                "service \"{}\" failed to connect {failures} times in a row; Airlock stops trying for {} s (limits.breaker_cooldown_secs) and tries again in {} ms",
                self.service,
                self.limits.breaker_cooldown.as_secs_f64(),
                wait.as_millis()
            ),
        )
        .retry_after(wait)
    }

    /// A request reached the server and was answered: the breaker closes.
    pub fn record_success(&self) {
        if self.limits.breaker_failures == 0 || !self.failing.load(Ordering::Acquire) {
            return;
        }
        let mut breaker = self.breaker();
        self.failing.store(false, Ordering::Release);
        breaker.failures = 0;
        breaker.state = State::Closed;
    }

    /// A connection failed (to open, or under a call): one more in a row; the breaker
    /// opens at `breaker_failures`.
    pub fn record_failure(&self) {
        if self.limits.breaker_failures == 0 {
            return;
        }
        let mut breaker = self.breaker();
        self.failing.store(true, Ordering::Release);
        breaker.failures = breaker.failures.saturating_add(1);
        if breaker.state == State::Closed && breaker.failures >= self.limits.breaker_failures {
            breaker.state = State::Open {
                until: Instant::now() + self.limits.breaker_cooldown,
            };
        }
    }

    /// The live state, for `status`.
    pub fn report(&self) -> GuardReport {
        let breaker = self.breaker();
        let now = Instant::now();
        let (state, retry_in) = match breaker.state {
            _ if self.limits.breaker_failures == 0 => ("off", None),
            State::Closed => ("closed", None),
            State::Open { until } => (
                "open",
                Some(until.saturating_duration_since(now).as_millis() as u64),
            ),
            State::HalfOpen => ("half_open", None),
        };
        GuardReport {
            in_flight: self.in_flight.load(Ordering::Acquire),
            max_concurrent: self.limits.max_concurrent,
            calls_per_second: self.limits.rate.map(|r| r.per_second),
            agent_calls_per_second: self.limits.agent_rate.map(|r| r.per_second),
            breaker: state,
            failures: breaker.failures,
            retry_in_ms: retry_in,
        }
    }

    fn breaker(&self) -> std::sync::MutexGuard<'_, Breaker> {
        self.breaker.lock().expect("breaker poisoned")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> CallLimits {
        CallLimits::default()
    }

    #[test]
    fn the_cap_refuses_one_more_and_frees_on_drop() {
        let guard = UpstreamGuard::new(
            "s",
            CallLimits {
                max_concurrent: 2,
                ..limits()
            },
        );
        let a = guard.admit("x").unwrap();
        let _b = guard.admit("y").unwrap();
        let refused = guard.admit("x").unwrap_err();
        assert_eq!(refused.code, ErrorCode::Overloaded);
        assert!(refused.retry_after.is_some());
        drop(a);
        assert!(guard.admit("x").is_ok());
    }

    #[test]
    fn a_bucket_allows_its_burst_then_says_when() {
        let rate = Rate {
            per_second: 2.0,
            burst: 3,
        };
        let guard = UpstreamGuard::new(
            "s",
            CallLimits {
                rate: Some(rate),
                ..limits()
            },
        );
        for _ in 0..3 {
            drop(guard.admit("x").unwrap());
        }
        let refused = guard.admit("x").unwrap_err();
        assert_eq!(refused.code, ErrorCode::RateLimited);
        let wait = refused.retry_after.unwrap();
        assert!(
            wait > Duration::from_millis(400) && wait <= Duration::from_millis(501),
            "{wait:?}"
        );
        // A refusal took no slot.
        assert_eq!(guard.report().in_flight, 0);
    }

    #[test]
    fn one_agent_s_rate_leaves_the_others_theirs() {
        let guard = UpstreamGuard::new(
            "s",
            CallLimits {
                agent_rate: Some(Rate {
                    per_second: 0.1,
                    burst: 1,
                }),
                ..limits()
            },
        );
        drop(guard.admit("a").unwrap());
        assert_eq!(guard.admit("a").unwrap_err().code, ErrorCode::RateLimited);
        drop(guard.admit("b").unwrap());
    }

    #[test]
    fn the_breaker_opens_refuses_and_lets_one_probe_through() {
        let guard = UpstreamGuard::new(
            "s",
            CallLimits {
                breaker_failures: 2,
                breaker_cooldown: Duration::from_millis(50),
                ..limits()
            },
        );
        guard.connect().unwrap().failed();
        guard.connect().unwrap().failed();
        let refused = guard.connect().unwrap_err();
        assert_eq!(refused.code, ErrorCode::CircuitOpen);
        assert_eq!(guard.report().breaker, "open");
        std::thread::sleep(Duration::from_millis(60));
        let probe = guard.connect().unwrap();
        // One probe at a time.
        assert_eq!(guard.connect().unwrap_err().code, ErrorCode::CircuitOpen);
        probe.failed();
        assert_eq!(guard.connect().unwrap_err().code, ErrorCode::CircuitOpen);
        std::thread::sleep(Duration::from_millis(60));
        guard.connect().unwrap().succeeded();
        assert_eq!(guard.report().breaker, "closed");
        assert_eq!(guard.report().failures, 0);
    }

    #[test]
    fn an_abandoned_probe_lets_the_next_caller_probe() {
        let guard = UpstreamGuard::new(
            "s",
            CallLimits {
                breaker_failures: 1,
                breaker_cooldown: Duration::ZERO,
                ..limits()
            },
        );
        guard.connect().unwrap().failed();
        drop(guard.connect().unwrap());
        assert!(guard.connect().is_ok());
    }
}
