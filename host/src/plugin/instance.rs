//! [`StageInstance`]: one plugin bound to one (service, stage) with its configuration,
//! and a pool of warm instances. A trap discards the instance that trapped; a guest
//! error value keeps it.

use std::sync::{Arc, Mutex};

use wasmtime::Store;
use wasmtime::component::Instance;

use super::runtime::{LoadedPlugin, PluginRuntime};
use super::state::{PluginState, classify, deadline_ticks, new_store, scaled_deadline};
use super::{PluginError, Stage};
use crate::secrets::KnownSecrets;

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
        scrub: &KnownSecrets,
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
        live.store.data_mut().scrub = scrub.clone();
        let outcome = f(&mut live.store, &live.instance, &self.plugin);
        live.store.data_mut().flush_output();
        live.store.data_mut().scrub = KnownSecrets::new();
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
