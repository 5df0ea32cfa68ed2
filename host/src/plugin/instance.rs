//! One plugin bound to one (service, stage): its store state, limits, warm instance
//! pool, and the trap handling that discards a failed instance.

use std::sync::{Arc, Mutex};

use wasmtime::component::{Instance, ResourceTable};
use wasmtime::{ResourceLimiter, Store};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::bindings::airlock::adapter::log;
use super::runtime::{EPOCH_TICK, LoadedPlugin, PluginRuntime};
use super::{PluginError, Stage, TrapKind};

/// How much a plugin may print to stdout/stderr per instance before writes fail.
const OUTPUT_CAP: usize = 64 << 10;
/// Longest log message kept from a plugin.
const LOG_MESSAGE_CAP: usize = 4 << 10;

/// Caps linear memory and tables, remembering whether the cap was hit.
pub(super) struct Limiter {
    memory_bytes: usize,
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
            wasmtime::bail!(
                "memory limit of {} bytes exceeded (wanted {desired})",
                self.memory_bytes
            );
        }
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
pub(super) struct PluginState {
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
    scrub: Vec<(String, String)>,
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
        let message = crate::launch::scrub(&message, &self.scrub);
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

impl PluginState {
    /// Sends what the guest printed since the last flush to `tracing`. Each pipe holds
    /// at most `OUTPUT_CAP` bytes over the instance's life; past that the guest's writes
    /// fail (a Rust guest then panics, and the instance is replaced).
    fn flush_output(&mut self) {
        for (pipe, seen, name) in [
            (&self.stdout, &mut self.stdout_seen, "stdout"),
            (&self.stderr, &mut self.stderr_seen, "stderr"),
        ] {
            let bytes = pipe.contents();
            if bytes.len() > *seen {
                let text = String::from_utf8_lossy(&bytes[*seen..]);
                let text = crate::launch::scrub(&text, &self.scrub);
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
pub(super) fn new_store(runtime: &PluginRuntime, plugin: &str, stage: Stage) -> Store<PluginState> {
    let stdout = MemoryOutputPipe::new(OUTPUT_CAP);
    let stderr = MemoryOutputPipe::new(OUTPUT_CAP);
    let mut builder = sandboxed_wasi();
    builder.stdout(stdout.clone()).stderr(stderr.clone());
    let limits = runtime.limits();
    let state = PluginState {
        wasi: builder.build(),
        table: ResourceTable::new(),
        limiter: Limiter {
            memory_bytes: limits.memory_bytes,
            hit: false,
        },
        plugin: plugin.to_string(),
        stage,
        stdout,
        stderr,
        stdout_seen: 0,
        stderr_seen: 0,
        scrub: Vec::new(),
    };
    let mut store = Store::new(runtime.engine(), state);
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

fn deadline_ticks(deadline: std::time::Duration) -> u64 {
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

/// A live instance and its store.
pub(super) struct Live {
    pub store: Store<PluginState>,
    pub instance: Instance,
}

/// One plugin bound to one stage of one service, with a pool of warm instances.
pub struct StageInstance {
    runtime: Arc<PluginRuntime>,
    plugin: Arc<LoadedPlugin>,
    stage: Stage,
    service: String,
    config: String,
    pool: Mutex<Vec<Live>>,
}

impl StageInstance {
    pub(super) fn new(
        runtime: Arc<PluginRuntime>,
        plugin: Arc<LoadedPlugin>,
        stage: Stage,
        service: String,
        config: String,
    ) -> Self {
        StageInstance {
            runtime,
            plugin,
            stage,
            service,
            config,
            pool: Mutex::new(Vec::new()),
        }
    }

    /// The plugin reference, for messages.
    pub fn plugin_name(&self) -> &str {
        &self.plugin.reference
    }

    /// The plugin behind this binding.
    pub fn plugin(&self) -> &Arc<LoadedPlugin> {
        &self.plugin
    }

    /// Creates one instance now (running `init`), so configuration errors surface early.
    pub(super) fn warm_up(&self) -> Result<(), PluginError> {
        let live = self.instantiate()?;
        self.pool.lock().expect("instance pool poisoned").push(live);
        Ok(())
    }

    fn instantiate(&self) -> Result<Live, PluginError> {
        let name = &self.plugin.reference;
        let mut store = new_store(&self.runtime, name, self.stage);
        let instance = self
            .plugin
            .pre
            .instantiate(&mut store)
            .map_err(|e| classify(name, self.stage, e, &store))?;
        let api = self
            .plugin
            .plugin_api
            .load(&mut store, &instance)
            .map_err(|e| classify(name, self.stage, e, &store))?;
        match api.call_init(&mut store, self.stage, &self.config) {
            Ok(Ok(())) => Ok(Live { store, instance }),
            Ok(Err(message)) => Err(PluginError::Config {
                plugin: name.clone(),
                stage: self.stage,
                service: self.service.clone(),
                message,
            }),
            Err(e) => Err(classify(name, self.stage, e, &store)),
        }
    }

    /// Runs `f` on a warm instance. A trap discards the instance; a guest error value
    /// keeps it. What the guest logs or prints meanwhile is scrubbed of `scrub`.
    /// Blocking: call from a blocking context.
    pub(super) fn call<R>(
        &self,
        work_bytes: usize,
        scrub: &[(String, String)],
        f: impl FnOnce(
            &mut Store<PluginState>,
            &Instance,
            &LoadedPlugin,
        ) -> wasmtime::Result<Result<R, String>>,
    ) -> Result<R, PluginError> {
        let popped = self.pool.lock().expect("instance pool poisoned").pop();
        let mut live = match popped {
            Some(live) => live,
            None => self.instantiate()?,
        };
        live.store
            .set_epoch_deadline(deadline_ticks(scaled_deadline(
                self.runtime.limits().deadline,
                work_bytes,
            )));
        live.store.data_mut().scrub = scrub.to_vec();
        let outcome = f(&mut live.store, &live.instance, &self.plugin);
        live.store.data_mut().flush_output();
        live.store.data_mut().scrub.clear();
        match outcome {
            Ok(Ok(value)) => {
                self.pool.lock().expect("instance pool poisoned").push(live);
                Ok(value)
            }
            Ok(Err(message)) => {
                self.pool.lock().expect("instance pool poisoned").push(live);
                Err(PluginError::Failed {
                    plugin: self.plugin.reference.clone(),
                    stage: self.stage,
                    message,
                })
            }
            Err(e) => Err(classify(&self.plugin.reference, self.stage, e, &live.store)),
        }
    }

    /// Builds the error for a plugin output that breaks the contract.
    pub(super) fn contract_error(&self, message: String) -> PluginError {
        PluginError::Contract {
            plugin: self.plugin.reference.clone(),
            stage: self.stage,
            message,
        }
    }
}
