//! `airlock plugin new NAME --stage STAGE [--lang rust|js|python]`: writes a plugin
//! project that builds, and passes its own test, with no edits. The templates live in
//! `host/assets/templates/` and are embedded in the binary.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::plugin::Stage;

/// A language `plugin new` writes projects in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Rust with the `airlock-guest` SDK, built with cargo for `wasm32-wasip2`.
    Rust,
    /// JavaScript, built on QuickJS with `componentize-qjs --sync --stub-wasi`.
    Js,
    /// Python, built with `componentize-py`.
    Python,
}

/// The contract the templates build against, as the host binds it.
const CONTRACT: &str = include_str!("../../../wit/adapter.wit");

const RUST_MANIFEST: &str = include_str!("../../assets/templates/rust/Cargo.toml");
const RUST_README: &str = include_str!("../../assets/templates/rust/README.md");
const JS_PACKAGE: &str = include_str!("../../assets/templates/js/package.json");
const JS_README: &str = include_str!("../../assets/templates/js/README.md");
const JS_TEST_HOOKS: &str = include_str!("../../assets/templates/js/test-hooks.mjs");

const PYTHON_REQUIREMENTS: &str = include_str!("../../assets/templates/python/requirements.txt");
const PYTHON_README: &str = include_str!("../../assets/templates/python/README.md");

/// The plugin's source and its test.
fn python_source(stage: Stage) -> (&'static str, &'static str) {
    match stage {
        Stage::Naming => (
            include_str!("../../assets/templates/python/naming.py"),
            include_str!("../../assets/templates/python/test_naming.py"),
        ),
        Stage::Content => (
            include_str!("../../assets/templates/python/content.py"),
            include_str!("../../assets/templates/python/test_content.py"),
        ),
        Stage::Redaction => (
            include_str!("../../assets/templates/python/redaction.py"),
            include_str!("../../assets/templates/python/test_redaction.py"),
        ),
        Stage::Policy => (
            include_str!("../../assets/templates/python/policy.py"),
            include_str!("../../assets/templates/python/test_policy.py"),
        ),
    }
}

fn rust_source(stage: Stage) -> &'static str {
    match stage {
        Stage::Naming => include_str!("../../assets/templates/rust/naming.rs"),
        Stage::Content => include_str!("../../assets/templates/rust/content.rs"),
        Stage::Redaction => include_str!("../../assets/templates/rust/redaction.rs"),
        Stage::Policy => include_str!("../../assets/templates/rust/policy.rs"),
    }
}

/// The plugin's source and its test.
fn js_source(stage: Stage) -> (&'static str, &'static str) {
    match stage {
        Stage::Naming => (
            include_str!("../../assets/templates/js/naming.js"),
            include_str!("../../assets/templates/js/naming.test.mjs"),
        ),
        Stage::Content => (
            include_str!("../../assets/templates/js/content.js"),
            include_str!("../../assets/templates/js/content.test.mjs"),
        ),
        Stage::Redaction => (
            include_str!("../../assets/templates/js/redaction.js"),
            include_str!("../../assets/templates/js/redaction.test.mjs"),
        ),
        Stage::Policy => (
            include_str!("../../assets/templates/js/policy.js"),
            include_str!("../../assets/templates/js/policy.test.mjs"),
        ),
    }
}

/// What to write.
#[derive(Debug)]
pub struct NewPlugin<'a> {
    /// The plugin's name (lower-case letters, digits and `-`).
    pub name: &'a str,
    /// The stage it serves.
    pub stage: Stage,
    /// The language.
    pub lang: Lang,
    /// The project folder (must not exist, or be empty).
    pub dir: &'a Path,
    /// The `airlock-guest` SDK folder, for Rust.
    pub sdk: Option<&'a Path>,
}

/// Where the SDK is when the binary was built from a checkout.
fn default_sdk() -> Option<PathBuf> {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk");
    sdk.join("Cargo.toml")
        .is_file()
        .then(|| sdk.canonicalize().unwrap_or(sdk))
}

fn check_name(name: &str) -> anyhow::Result<()> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
        && name.len() <= 64;
    if !ok {
        bail!(
            "plugin name \"{name}\": use lower-case letters, digits and '-', starting with a letter (at most 64)"
        );
    }
    Ok(())
}

/// Writes the project. Returns the files written, relative to `dir`, and the commands
/// that build and test it.
pub fn create(new: &NewPlugin<'_>) -> anyhow::Result<(Vec<PathBuf>, Vec<String>)> {
    check_name(new.name)?;
    if new.dir.exists()
        && std::fs::read_dir(new.dir)
            .with_context(|| format!("\"{}\"", new.dir.display()))?
            .next()
            .is_some()
    {
        bail!(
            "\"{}\" already exists and is not empty; choose another folder",
            new.dir.display()
        );
    }
    let crate_name = new.name.replace('-', "_");
    let stage = new.stage.name();
    let fill = |template: &str, sdk: &str| {
        template
            .replace("{{name}}", new.name)
            .replace("{{crate}}", &crate_name)
            .replace("{{stage}}", stage)
            .replace("{{sdk}}", sdk)
    };
    let (files, commands): (Vec<(&str, String)>, Vec<String>) = match new.lang {
        Lang::Rust => {
            let sdk = match new.sdk {
                Some(sdk) => sdk
                    .canonicalize()
                    .with_context(|| format!("--sdk \"{}\"", sdk.display()))?,
                None => default_sdk().context(
                    "the airlock-guest SDK was not found beside this build; pass --sdk PATH (a checkout's guest-sdk folder)",
                )?,
            };
            if !sdk.join("Cargo.toml").is_file() {
                bail!("--sdk \"{}\" holds no Cargo.toml", sdk.display());
            }
            let sdk_text = sdk.display().to_string().replace('\\', "/");
            let mut files = vec![
                ("Cargo.toml", fill(RUST_MANIFEST, &sdk_text)),
                ("src/lib.rs", fill(rust_source(new.stage), &sdk_text)),
                ("README.md", fill(RUST_README, &sdk_text)),
                (".gitignore", "/target\n".to_string()),
            ];
            // The SDK's workspace lock pins the same dependency versions the host was
            // tested with, and lets the project build offline from a warm cargo cache.
            if let Ok(lock) = std::fs::read_to_string(sdk.join("../Cargo.lock")) {
                files.push(("Cargo.lock", lock));
            }
            let commands = vec![
                "cargo test".to_string(),
                "cargo build --release --target wasm32-wasip2".to_string(),
                format!("airlock plugin check target/wasm32-wasip2/release/{crate_name}.wasm"),
            ];
            (files, commands)
        }
        Lang::Js => {
            let (source, test) = js_source(new.stage);
            let files = vec![
                ("package.json", fill(JS_PACKAGE, "")),
                ("plugin.js", fill(source, "")),
                ("test.mjs", fill(test, "")),
                ("test-hooks.mjs", JS_TEST_HOOKS.to_string()),
                ("wit/adapter.wit", CONTRACT.to_string()),
                ("README.md", fill(JS_README, "")),
                (".gitignore", "/node_modules\n/*.wasm\n".to_string()),
            ];
            let commands = vec![
                "npm install".to_string(),
                "npm test".to_string(),
                "npm run build".to_string(),
                format!("airlock plugin check {}.wasm", new.name),
            ];
            (files, commands)
        }
        Lang::Python => {
            let (source, test) = python_source(new.stage);
            let files = vec![
                ("requirements.txt", PYTHON_REQUIREMENTS.to_string()),
                ("app.py", fill(source, "")),
                ("test_app.py", fill(test, "")),
                ("wit/adapter.wit", CONTRACT.to_string()),
                ("README.md", fill(PYTHON_README, "")),
                (
                    ".gitignore",
                    "/.venv\n/bindings\n/*.wasm\n__pycache__/\n".to_string(),
                ),
            ];
            let world = format!("{stage}-plugin");
            let commands = vec![
                "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt".to_string(),
                format!(".venv/bin/componentize-py -d wit -w {world} bindings bindings"),
                ".venv/bin/python -m unittest test_app".to_string(),
                format!(
                    ".venv/bin/componentize-py -d wit -w {world} componentize --stub-wasi app -o {}.wasm",
                    new.name
                ),
                format!("airlock plugin check {}.wasm", new.name),
            ];
            (files, commands)
        }
    };
    let mut written = Vec::new();
    for (path, text) in files {
        let full = new.dir.join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create \"{}\"", parent.display()))?;
        }
        std::fs::write(&full, text)
            .with_context(|| format!("cannot write \"{}\"", full.display()))?;
        written.push(PathBuf::from(path));
    }
    Ok((written, commands))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["guard", "team-guard2"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "Guard", "2guard", "guard-", "gu_ard", "a/b"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_non_empty_folder_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep.txt"), "mine").unwrap();
        let err = create(&NewPlugin {
            name: "guard",
            stage: Stage::Policy,
            lang: Lang::Js,
            dir: dir.path(),
            sdk: None,
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("not empty"), "{err}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("keep.txt")).unwrap(),
            "mine"
        );
    }
}
