//! [`PluginRuntime`]: the wasmtime engine, its epoch ticker, the on-disk cache of compiled
//! components, and the checks every component passes before it may run.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cap_std::fs::Dir;
use sha2::{Digest, Sha256};
use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{Engine, Store};

use super::api::Api;
use super::bindings::{Adapter, v01};
use super::state::{EPOCH_TICK, PluginState, classify, new_store};
use super::{PluginError, PluginInfo, Stage, builtin_bytes};
use crate::config::{PluginRef, SandboxLimits};

/// The contract versions this host loads: `airlock:adapter@0.2.x` (current) and the
/// frozen `0.1.x`.
pub const SUPPORTED_CONTRACT: &str = "0.2.x or 0.1.x";
const CONTRACT_PACKAGE: &str = "airlock:adapter/";
/// WASI 0.2 packages a plugin may import (all linked with nothing granted).
const WASI_PACKAGES: &[&str] = &[
    "wasi:cli/",
    "wasi:io/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:filesystem/",
    "wasi:sockets/",
];
const CACHE_DIR: &str = "plugin-cache";
/// Inputs at least this large draw on the work budget; smaller ones never wait.
const BUDGETED_FROM: usize = 1 << 20;
/// The plugin work budget, in MiB of input in flight at once (about six times that in
/// guest memory at the peak): four results at the 32 MiB retention limit.
const WORK_BUDGET_MIB: u32 = 128;

/// A compiled, checked, pre-instantiated plugin.
pub struct LoadedPlugin {
    /// How the config referred to it (`builtin:standard`, a path).
    pub reference: String,
    /// What the plugin says about itself.
    pub info: PluginInfo,
    /// The contract version it was built for (`0.1.0`).
    pub contract: String,
    /// What it imports (the contract's `log`, WASI 0.2 interfaces), linked with nothing
    /// granted.
    pub imports: Vec<String>,
    /// The component's size in bytes.
    pub size: usize,
    /// The SHA-256 of its bytes (hex), the value to pin it by.
    pub sha256: String,
    pub(super) pre: InstancePre<PluginState>,
    pub(super) api: Api,
}

impl LoadedPlugin {
    /// Whether the plugin provides `stage`.
    pub fn provides(&self, stage: Stage) -> bool {
        self.api.exports(stage) && self.info.stages.contains(&stage)
    }
}

/// The engine and everything compiled on it. Cheap to share (`Arc`).
pub struct PluginRuntime {
    engine: Engine,
    linker: Linker<PluginState>,
    limits: SandboxLimits,
    cache_dir: Option<Dir>,
    loaded: Mutex<HashMap<String, Arc<LoadedPlugin>>>,
    ticker_stop: Arc<AtomicBool>,
    work_budget: tokio::sync::Semaphore,
}

impl Drop for PluginRuntime {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

impl PluginRuntime {
    /// Builds an engine with the given limits. `data_dir`, when given, holds the
    /// compiled-artifact cache (`plugin-cache/`), so a warm start does not recompile.
    pub fn new(limits: SandboxLimits, data_dir: Option<&Dir>) -> Result<Arc<Self>, PluginError> {
        let cache = match data_dir {
            Some(dir) => {
                dir.create_dir_all(CACHE_DIR)
                    .map_err(|e| PluginError::Load {
                        plugin: "(runtime)".into(),
                        message: format!("cannot create {CACHE_DIR}/: {e}"),
                    })?;
                Some(dir.open_dir(CACHE_DIR).map_err(|e| PluginError::Load {
                    plugin: "(runtime)".into(),
                    message: format!("cannot open {CACHE_DIR}/: {e}"),
                })?)
            }
            None => None,
        };
        PluginRuntime::with_cache(limits, cache)
    }

    /// Like [`PluginRuntime::new`], with `cache` as the compiled-artifact cache itself (a
    /// folder several data directories may share; artifacts are keyed by the engine's
    /// compatibility hash and written atomically).
    pub fn with_cache(limits: SandboxLimits, cache: Option<Dir>) -> Result<Arc<Self>, PluginError> {
        let err = |message: String| PluginError::Load {
            plugin: "(runtime)".into(),
            message,
        };
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        config.max_wasm_stack(limits.stack_bytes);
        let engine =
            Engine::new(&config).map_err(|e| err(format!("cannot create the engine: {e}")))?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| err(format!("cannot link WASI: {e}")))?;
        Adapter::add_to_linker::<PluginState, wasmtime::component::HasSelf<PluginState>>(
            &mut linker,
            |s| s,
        )
        .map_err(|e| err(format!("cannot link host imports: {e}")))?;
        v01::Adapter::add_to_linker::<PluginState, wasmtime::component::HasSelf<PluginState>>(
            &mut linker,
            |s| s,
        )
        .map_err(|e| err(format!("cannot link the 0.1 host imports: {e}")))?;
        let cache_dir = cache;
        let ticker_stop = Arc::new(AtomicBool::new(false));
        {
            let engine = engine.clone();
            let stop = ticker_stop.clone();
            std::thread::Builder::new()
                .name("airlock-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(EPOCH_TICK);
                        engine.increment_epoch();
                    }
                })
                .map_err(|e| err(format!("cannot start the epoch ticker: {e}")))?;
        }
        Ok(Arc::new(PluginRuntime {
            engine,
            linker,
            limits,
            cache_dir,
            loaded: Mutex::new(HashMap::new()),
            ticker_stop,
            work_budget: tokio::sync::Semaphore::new(WORK_BUDGET_MIB as usize),
        }))
    }

    /// The sandbox limits every call runs under.
    pub fn limits(&self) -> SandboxLimits {
        self.limits
    }

    /// Waits for `work_bytes` of the plugin work budget (held until the permit drops).
    /// Inputs under 1 MiB never wait; one larger than the whole budget takes all of it.
    pub async fn work_budget(&self, work_bytes: usize) -> Option<tokio::sync::SemaphorePermit<'_>> {
        if work_bytes < BUDGETED_FROM {
            return None;
        }
        let mib = u32::try_from(work_bytes.div_ceil(1 << 20))
            .unwrap_or(u32::MAX)
            .min(WORK_BUDGET_MIB);
        self.work_budget.acquire_many(mib).await.ok()
    }

    pub(super) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Loads (or returns the already loaded) plugin for `reference`. A pinned plugin
    /// whose bytes have another SHA-256 is refused, naming both digests.
    pub fn load(&self, reference: &PluginRef) -> Result<Arc<LoadedPlugin>, PluginError> {
        let name = reference.to_string();
        let bytes = Self::read(reference)?;
        if let PluginRef::Pinned { sha256, .. } = reference {
            let actual = hex::encode(Sha256::digest(&bytes));
            if &actual != sha256 {
                return Err(PluginError::Load {
                    plugin: name,
                    message: format!(
                        "its SHA-256 is {actual}, but the config pins {sha256}; the plugin changed (check it, then update the pin)"
                    ),
                });
            }
        }
        self.load_bytes(&name, &bytes)
    }

    /// The bytes of a plugin: embedded, or read from its file.
    fn read(reference: &PluginRef) -> Result<std::borrow::Cow<'static, [u8]>, PluginError> {
        let name = reference.to_string();
        Ok(match reference {
            PluginRef::Builtin(builtin) => builtin_bytes(builtin)
                .ok_or_else(|| PluginError::Load {
                    plugin: name.clone(),
                    message: format!(
                        "there is no bundled plugin named \"{builtin}\" (bundled: {})",
                        super::BUILTIN_PLUGINS
                            .iter()
                            .map(|(n, _)| format!("builtin:{n}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                })?
                .into(),
            PluginRef::File(path) => std::fs::read(path)
                .map_err(|e| PluginError::Load {
                    plugin: name.clone(),
                    message: format!("cannot read the file: {e}"),
                })?
                .into(),
            PluginRef::Pinned { plugin, .. } => Self::read(plugin)?,
        })
    }

    /// Loads a component from bytes, checking its imports and contract version.
    pub fn load_bytes(
        &self,
        reference: &str,
        bytes: &[u8],
    ) -> Result<Arc<LoadedPlugin>, PluginError> {
        let key = self.cache_key(bytes);
        if let Some(found) = self.loaded.lock().expect("plugin table poisoned").get(&key) {
            return Ok(found.clone());
        }
        let err = |message: String| PluginError::Load {
            plugin: reference.to_string(),
            message,
        };
        let component = self.compile_cached(reference, &key, bytes)?;
        self.check_imports(reference, &component)?;
        let contract = self.check_contract(reference, &component)?;
        let imports = component
            .component_type()
            .imports(&self.engine)
            .map(|(name, _)| name.to_string())
            .collect();
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| err(format!("cannot link the component: {e}")))?;
        let api = Api::new(&pre, contract_minor(&contract).unwrap_or(0)).map_err(|e| {
            err(format!(
                "not an Airlock plugin (no airlock:adapter/plugin export): {e}"
            ))
        })?;
        let info = self.describe(reference, &pre, &api)?;
        let loaded = Arc::new(LoadedPlugin {
            reference: reference.to_string(),
            info,
            contract,
            imports,
            size: bytes.len(),
            sha256: hex::encode(Sha256::digest(bytes)),
            pre,
            api,
        });
        self.loaded
            .lock()
            .expect("plugin table poisoned")
            .insert(key, loaded.clone());
        Ok(loaded)
    }

    fn cache_key(&self, bytes: &[u8]) -> String {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.engine
            .precompile_compatibility_hash()
            .hash(&mut hasher);
        let mut digest = Sha256::new();
        digest.update(bytes);
        digest.update(hasher.finish().to_le_bytes());
        hex::encode(&digest.finalize()[..16])
    }

    /// The compiled component for `bytes` (of plugin `reference`): from the compiled
    /// cache under `key` when an entry is there and loads, else compiled and cached.
    fn compile_cached(
        &self,
        reference: &str,
        key: &str,
        bytes: &[u8],
    ) -> Result<Component, PluginError> {
        let file = format!("{key}.cwasm");
        if let Some(dir) = &self.cache_dir
            && let Ok(cached) = dir.read(&file)
        {
            // SAFETY: the artifact was written by `Component::serialize` on an engine with
            // the same compatibility hash (it is part of the key), into Airlock's own data
            // directory. A corrupt file fails to deserialize and is recompiled below.
            match unsafe { Component::deserialize(&self.engine, &cached) } {
                Ok(component) => return Ok(component),
                Err(e) => {
                    tracing::warn!(file, error = %e, "ignoring unreadable compiled plugin cache entry")
                }
            }
        }
        let component = Component::new(&self.engine, bytes).map_err(|e| PluginError::Load {
            plugin: reference.to_string(),
            message: format!("not a valid WebAssembly component: {e:#}"),
        })?;
        if let Some(dir) = &self.cache_dir {
            match component.serialize() {
                Ok(artifact) => {
                    let tmp = format!("{key}.tmp{}", std::process::id());
                    if let Err(e) = dir
                        .write(&tmp, &artifact)
                        .and_then(|_| dir.rename(&tmp, dir, &file))
                    {
                        tracing::warn!(error = %e, "cannot write the compiled plugin cache");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot serialize a compiled plugin"),
            }
        }
        Ok(component)
    }

    fn check_imports(&self, reference: &str, component: &Component) -> Result<(), PluginError> {
        for (name, _) in component.component_type().imports(&self.engine) {
            let allowed = if let Some(rest) = name.strip_prefix(CONTRACT_PACKAGE) {
                let version = rest.split_once('@').map(|(_, v)| v).unwrap_or("");
                if rest.starts_with("log@") || rest.starts_with("types@") {
                    if !contract_supported(version) {
                        return Err(PluginError::UnsupportedContract {
                            plugin: reference.into(),
                            found: version.into(),
                            supported: SUPPORTED_CONTRACT.into(),
                        });
                    }
                    true
                } else {
                    false
                }
            } else {
                WASI_PACKAGES.iter().any(|p| name.starts_with(p)) && name.contains("@0.2.")
            };
            if !allowed {
                return Err(PluginError::ForbiddenImport {
                    plugin: reference.into(),
                    import: name.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Checks the contract version of every export; returns it (that of `plugin`).
    fn check_contract(
        &self,
        reference: &str,
        component: &Component,
    ) -> Result<String, PluginError> {
        let mut saw_plugin = None;
        for (name, _) in component.component_type().exports(&self.engine) {
            let Some(rest) = name.strip_prefix(CONTRACT_PACKAGE) else {
                continue;
            };
            let version = rest.split_once('@').map(|(_, v)| v).unwrap_or("");
            if !contract_supported(version) {
                return Err(PluginError::UnsupportedContract {
                    plugin: reference.into(),
                    found: version.into(),
                    supported: SUPPORTED_CONTRACT.into(),
                });
            }
            if rest.starts_with("plugin@") {
                saw_plugin = Some(version.to_string());
            }
        }
        saw_plugin.ok_or_else(|| PluginError::Load {
            plugin: reference.into(),
            message: "not an Airlock plugin: it exports no airlock:adapter/plugin interface".into(),
        })
    }

    fn describe(
        &self,
        reference: &str,
        pre: &InstancePre<PluginState>,
        api: &Api,
    ) -> Result<PluginInfo, PluginError> {
        // No stage runs yet: a trap here is reported as a load-time failure.
        let trap = |e: wasmtime::Error, store: &Store<PluginState>| match classify(
            reference,
            Stage::Naming,
            e,
            store,
        ) {
            PluginError::Trap {
                plugin,
                kind,
                detail,
                ..
            } => PluginError::DescribeTrap {
                plugin,
                kind,
                detail,
            },
            other => other,
        };
        let mut store = new_store(&self.engine, self.limits, reference, Stage::Naming);
        let instance = pre.instantiate(&mut store).map_err(|e| trap(e, &store))?;
        api.describe(&mut store, &instance)
            .map_err(|e| trap(e, &store))
    }
}

/// The minor version of a `0.x.y` contract this host loads (1 or 2), else `None`.
fn contract_minor(version: &str) -> Option<u32> {
    let mut parts = version.split('.');
    match (parts.next(), parts.next()) {
        (Some("0"), Some("1")) => Some(1),
        (Some("0"), Some("2")) => Some(2),
        _ => None,
    }
}

/// Whether a contract version (e.g. `0.1.3`) is one this host loads.
fn contract_supported(version: &str) -> bool {
    contract_minor(version).is_some()
}
