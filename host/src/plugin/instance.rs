//! [`StageInstance`]: one plugin bound to one (service, stage) with its configuration,
//! and a pool of warm instances. A trap discards the instance that trapped; a guest
//! error value keeps it.

use std::sync::{Arc, Mutex};

use wasmtime::Store;

use super::api::{Exports, GuestMessage};
use super::runtime::{LoadedPlugin, PluginRuntime};
use super::state::{
    PluginState, classify, deadline_ticks, new_store, scaled_deadline, scaled_memory,
};
use super::{PluginError, Stage};
use crate::secrets::KnownSecrets;

/// The share of the base memory cap (numerator, denominator) past which an instance is
/// not kept for another call: linear memory never shrinks, so an instance that has grown
/// this far is replaced by a fresh one, which starts from the component's initial memory.
pub(super) const RECYCLE_SHARE: (usize, usize) = (3, 4);

/// A live instance, its store, and its stage's typed exports (looked up and
/// type-checked once, when the instance is created).
pub(super) struct Live {
    store: Store<PluginState>,
    exports: Exports,
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

    /// The runtime the plugin runs on.
    pub fn runtime(&self) -> &Arc<PluginRuntime> {
        &self.runtime
    }

    /// The plugin behind this binding.
    pub fn plugin(&self) -> &Arc<LoadedPlugin> {
        &self.plugin
    }

    /// Creates one instance now (running `init`), so configuration errors surface early.
    fn warm_up(&self) -> Result<(), PluginError> {
        let live = self.instantiate()?;
        self.pool.lock().expect("instance pool poisoned").push(live);
        Ok(())
    }

    fn instantiate(&self) -> Result<Live, PluginError> {
        let name = &self.plugin.reference;
        let mut store = new_store(
            self.runtime.engine(),
            self.runtime.limits(),
            name,
            self.stage,
        );
        let instance = self
            .plugin
            .pre
            .instantiate(&mut store)
            .map_err(|e| classify(name, self.stage, e, &store))?;
        let api = &self.plugin.api;
        match api.init(&mut store, &instance, self.stage, &self.config) {
            Ok(Ok(())) => {
                let exports = api
                    .stage_exports(&mut store, &instance, self.stage)
                    .map_err(|e| classify(name, self.stage, e, &store))?;
                Ok(Live { store, exports })
            }
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
    /// `work_bytes` (the size of the input) scales the CPU deadline and the memory cap;
    /// an instance that grew past [`RECYCLE_SHARE`] of the base memory cap is dropped
    /// after the call, so the pool never keeps a large memory around and a plugin whose
    /// heap creeps up call after call (a JavaScript or Python engine) gets a fresh
    /// instance instead of reaching the cap and trapping.
    /// Blocking: call from a blocking context.
    pub(super) fn call<R>(
        &self,
        work_bytes: usize,
        scrub: &KnownSecrets,
        f: impl FnOnce(&mut Store<PluginState>, &Exports) -> wasmtime::Result<Result<R, GuestMessage>>,
    ) -> Result<R, PluginError> {
        let popped = self.pool.lock().expect("instance pool poisoned").pop();
        let mut live = match popped {
            Some(live) => live,
            None => self.instantiate()?,
        };
        let limits = self.runtime.limits();
        live.store
            .set_epoch_deadline(deadline_ticks(scaled_deadline(limits.deadline, work_bytes)));
        {
            let state = live.store.data_mut();
            state.limiter.memory_bytes = scaled_memory(limits.memory_bytes, work_bytes);
            state.scrub = scrub.clone();
        }
        let outcome = f(&mut live.store, &live.exports);
        let keep = {
            let state = live.store.data_mut();
            state.flush_output();
            state.scrub = KnownSecrets::new();
            state.limiter.memory_bytes = limits.memory_bytes;
            state.limiter.peak <= limits.memory_bytes / RECYCLE_SHARE.1 * RECYCLE_SHARE.0
        };
        let give_back = |live: Live| {
            if keep {
                self.pool.lock().expect("instance pool poisoned").push(live);
            }
        };
        match outcome {
            Ok(Ok(value)) => {
                give_back(live);
                Ok(value)
            }
            Ok(Err(message)) => {
                give_back(live);
                Err(PluginError::Failed {
                    plugin: self.plugin.reference.clone(),
                    stage: self.stage,
                    message,
                })
            }
            Err(e) => Err(classify(&self.plugin.reference, self.stage, e, &live.store)),
        }
    }

    /// How many warm instances the pool holds now.
    pub fn pooled(&self) -> usize {
        self.pool.lock().expect("instance pool poisoned").len()
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

impl PluginRuntime {
    /// Binds a loaded plugin to one stage of one service with its configuration. The
    /// first instance is created (and `init` called) at once, so a rejected
    /// configuration is reported now rather than at the first call.
    pub fn bind(
        self: &Arc<Self>,
        plugin: Arc<LoadedPlugin>,
        stage: Stage,
        service: &str,
        config: &serde_json::Value,
    ) -> Result<Arc<StageInstance>, PluginError> {
        if !plugin.provides(stage) {
            return Err(PluginError::MissingStage {
                plugin: plugin.reference.clone(),
                stage,
                provides: plugin
                    .info
                    .stages
                    .iter()
                    .map(|s| s.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let instance = Arc::new(StageInstance::new(
            self.clone(),
            plugin,
            stage,
            service.to_string(),
            config.to_string(),
        ));
        instance.warm_up()?;
        Ok(instance)
    }
}
