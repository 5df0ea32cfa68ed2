//! The bundled plugins, embedded in the host binary so a fresh install needs no `.wasm`
//! on disk. `scripts/build-plugins.sh` rebuilds them from `plugins/`; a test rebuilds
//! them and checks the bytes match.

/// `(name, component bytes)` of every bundled plugin.
pub const BUILTIN_PLUGINS: &[(&str, &[u8])] = &[
    (
        "standard",
        include_bytes!("../../assets/plugins/standard.wasm"),
    ),
    (
        "text-only",
        include_bytes!("../../assets/plugins/text-only.wasm"),
    ),
    ("policy", include_bytes!("../../assets/plugins/policy.wasm")),
];

/// The bytes of the bundled plugin `name`, if there is one.
pub fn builtin_bytes(name: &str) -> Option<&'static [u8]> {
    BUILTIN_PLUGINS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, b)| *b)
}
