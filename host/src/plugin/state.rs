//! The host side of one plugin instance: its store state (WASI granting nothing, captured
//! output, the secrets to scrub from what it logs), the memory limiter, the epoch
//! deadline, and the classification of a trap into a typed error.

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use wasmtime::Engine;

use super::bindings::airlock::adapter::log;
use super::{PluginError, Stage, TrapKind};
use crate::config::SandboxLimits;
use crate::secrets::KnownSecrets;

/// How often the epoch ticks; deadlines are counted in ticks.
pub(super) const EPOCH_TICK: std::time::Duration = std::time::Duration::from_millis(10);

/// How much a plugin may print to stdout/stderr per instance before writes fail.
const OUTPUT_CAP: usize = 64 << 10;
/// Longest log message kept from a plugin.
const LOG_MESSAGE_CAP: usize = 4 << 10;

/// Caps linear memory and tables, remembering whether the cap was hit.
pub(crate) struct Limiter {
    /// The cap in force for the call in progress.
    pub(super) memory_bytes: usize,
    /// The largest memory the instance has asked for, over its life.
    pub(super) peak: usize,
    hit: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.hit = true;
            self.peak = self.peak.max(desired);
            wasmtime::bail!(
                "memory limit of {} bytes exceeded (wanted {desired})",
                self.memory_bytes
            );
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// The host side of one instance: WASI with nothing granted, limits, and identity for
/// log attribution.
pub(crate) struct PluginState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(super) limiter: Limiter,
    plugin: String,
    stage: Stage,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
    stdout_seen: usize,
    stderr_seen: usize,
    /// Known secrets of the call in progress: scrubbed from what the guest logs or
    /// prints (the content stage sees results before redaction).
    pub(super) scrub: KnownSecrets,
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// A wall clock fixed at the Unix epoch and a monotonic clock fixed at zero: plugins
/// get no time source.
struct FrozenClock;

impl wasmtime_wasi::HostWallClock for FrozenClock {
    fn resolution(&self) -> std::time::Duration {
        std::time::Duration::from_secs(1)
    }
    fn now(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
}

impl wasmtime_wasi::HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

impl super::bindings::airlock::adapter::types::Host for PluginState {}

impl log::Host for PluginState {
    fn log(&mut self, level: log::Level, message: String) {
        let mut message = message;
        if message.len() > LOG_MESSAGE_CAP {
            let mut cut = LOG_MESSAGE_CAP;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push('…');
        }
        let message = self.scrub.scrub(&message);
        let (plugin, stage) = (&self.plugin, self.stage.name());
        match level {
            log::Level::Trace => tracing::trace!(plugin, stage, "{message}"),
            log::Level::Debug => tracing::debug!(plugin, stage, "{message}"),
            log::Level::Info => tracing::info!(plugin, stage, "{message}"),
            log::Level::Warn => tracing::warn!(plugin, stage, "{message}"),
            log::Level::Error => tracing::error!(plugin, stage, "{message}"),
        }
    }
}

impl super::bindings::v01::airlock::adapter::types::Host for PluginState {}

impl super::bindings::v01::airlock::adapter::log::Host for PluginState {
    fn log(&mut self, level: super::bindings::v01::airlock::adapter::log::Level, message: String) {
        let level = super::bindings::cross(&level);
        log::Host::log(self, level, message);
    }
}

impl PluginState {
    /// Sends what the guest printed since the last flush to `tracing`. Each pipe holds
    /// at most `OUTPUT_CAP` bytes over the instance's life; past that the guest's writes
    /// fail (a Rust guest then panics, and the instance is replaced).
    pub(super) fn flush_output(&mut self) {
        for (pipe, seen, name) in [
            (&self.stdout, &mut self.stdout_seen, "stdout"),
            (&self.stderr, &mut self.stderr_seen, "stderr"),
        ] {
            let bytes = pipe.contents();
            if bytes.len() > *seen {
                let text = String::from_utf8_lossy(&bytes[*seen..]);
                let text = self.scrub.scrub(&text);
                tracing::debug!(plugin = %self.plugin, stage = self.stage.name(), stream = name, "{}", text.trim_end());
                *seen = bytes.len();
            }
        }
    }
}

/// A WASI context that grants nothing: no preopens, args, env, network or clock.
fn sandboxed_wasi() -> WasiCtxBuilder {
    let mut builder = WasiCtxBuilder::new();
    builder
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .wall_clock(FrozenClock)
        .monotonic_clock(FrozenClock);
    builder
}

/// A fresh store for one instance of a plugin, with limits installed.
pub(super) fn new_store(
    engine: &Engine,
    limits: SandboxLimits,
    plugin: &str,
    stage: Stage,
) -> Store<PluginState> {
    let stdout = MemoryOutputPipe::new(OUTPUT_CAP);
    let stderr = MemoryOutputPipe::new(OUTPUT_CAP);
    let mut builder = sandboxed_wasi();
    builder.stdout(stdout.clone()).stderr(stderr.clone());
    let state = PluginState {
        wasi: builder.build(),
        table: ResourceTable::new(),
        limiter: Limiter {
            memory_bytes: limits.memory_bytes,
            peak: 0,
            hit: false,
        },
        plugin: plugin.to_string(),
        stage,
        stdout,
        stderr,
        stdout_seen: 0,
        stderr_seen: 0,
        scrub: KnownSecrets::new(),
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    store.set_epoch_deadline(deadline_ticks(limits.deadline));
    store
}

/// The deadline grows with the input: one more `deadline` per 4 MiB, so a legitimate
/// 32 MiB result gets time in proportion while a small input still stops a runaway loop
/// at the base deadline.
pub(super) fn scaled_deadline(
    deadline: std::time::Duration,
    work_bytes: usize,
) -> std::time::Duration {
    deadline + deadline.mul_f64(work_bytes as f64 / (4 << 20) as f64)
}

/// The memory cap grows with the input: a plugin holds its input, its output and the
/// allocator's growth at once, so six times the input on top of the base cap lets a
/// result at the retention limit through, while a small input stays under the base cap.
pub(super) fn scaled_memory(base: usize, work_bytes: usize) -> usize {
    base.saturating_add(work_bytes.saturating_mul(6))
}

pub(super) fn deadline_ticks(deadline: std::time::Duration) -> u64 {
    (deadline.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64 + 1
}

/// Turns a wasmtime error from a guest call into a typed plugin error.
pub(super) fn classify(
    plugin: &str,
    stage: Stage,
    error: wasmtime::Error,
    store: &Store<PluginState>,
) -> PluginError {
    let kind = if store.data().limiter.hit {
        TrapKind::MemoryLimit
    } else {
        match error.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::Interrupt) => TrapKind::Deadline,
            Some(wasmtime::Trap::StackOverflow) => TrapKind::StackOverflow,
            Some(wasmtime::Trap::UnreachableCodeReached) => TrapKind::Panic,
            _ => TrapKind::Other,
        }
    };
    let label = match kind {
        TrapKind::Deadline => "deadline",
        TrapKind::MemoryLimit => "memory_limit",
        TrapKind::StackOverflow => "stack_overflow",
        TrapKind::Panic => "panic",
        TrapKind::Other => "other",
    };
    metrics::counter!(
        crate::telemetry::PLUGIN_TRAPS,
        "plugin" => plugin.to_string(),
        "stage" => stage.name(),
        "kind" => label,
    )
    .increment(1);
    let detail = match error.downcast_ref::<wasmtime::Trap>() {
        Some(trap) => trap.to_string(),
        None => format!("{error}"),
    };
    PluginError::Trap {
        plugin: plugin.to_string(),
        stage,
        kind,
        detail,
    }
}
