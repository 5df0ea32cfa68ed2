//! Unit tests of the importer, one file per module they exercise; the helpers they share
//! (fixtures, client files in temporary folders, accessors) live here.

use super::*;
use std::collections::{BTreeMap, HashMap};
use std::fs;

/// The text of a fixture under `tests/fixtures/import/`.
macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/import/",
            $name
        ))
    };
}

fn put(root: &Path, rel: &str, text: &str) -> PathBuf {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, text).unwrap();
    path
}

/// An environment to scan with, as [`env_of`] builds it.
type BoxedEnv = Box<dyn Fn(&str) -> Option<String>>;

fn env_of(pairs: &[(&str, &str)]) -> BoxedEnv {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Box::new(move |name: &str| map.get(name).cloned())
}

fn no_env(_: &str) -> Option<String> {
    None
}

fn scan_in(
    home: &Path,
    workspace: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    only: Option<Client>,
) -> Scan {
    scan(&ImportSources {
        home,
        workspace,
        env,
        only,
    })
}

fn names(out: &Scan) -> Vec<&str> {
    out.candidates.iter().map(|c| c.name.as_str()).collect()
}

fn find<'s>(out: &'s Scan, name: &str) -> &'s Candidate {
    out.candidates
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no candidate {name:?} in {:?}", names(out)))
}

fn problem<'s>(out: &'s Scan, entry: &str) -> &'s ImportProblem {
    out.problems
        .iter()
        .find(|p| p.entry.as_deref() == Some(entry))
        .unwrap_or_else(|| panic!("no problem for {entry:?} in {:?}", out.problems))
}

fn val(value: &str, secret: bool) -> ImportedValue {
    ImportedValue {
        value: value.to_string(),
        secret,
    }
}

fn args(c: &Candidate) -> Vec<&str> {
    match &c.transport {
        ImportedTransport::Stdio { args, .. } => args.iter().map(String::as_str).collect(),
        other => panic!("{} is not stdio: {other:?}", c.name),
    }
}

fn env(c: &Candidate) -> &BTreeMap<String, ImportedValue> {
    match &c.transport {
        ImportedTransport::Stdio { env, .. } => env,
        other => panic!("{} is not stdio: {other:?}", c.name),
    }
}

fn cwd(c: &Candidate) -> Option<&str> {
    match &c.transport {
        ImportedTransport::Stdio { .. } => c.cwd.as_deref(),
        other => panic!("{} is not stdio: {other:?}", c.name),
    }
}

fn url(c: &Candidate) -> &str {
    match &c.transport {
        ImportedTransport::Http { url, .. } => url,
        other => panic!("{} is not http: {other:?}", c.name),
    }
}

fn headers(c: &Candidate) -> &BTreeMap<String, ImportedValue> {
    match &c.transport {
        ImportedTransport::Http { headers, .. } => headers,
        other => panic!("{} is not http: {other:?}", c.name),
    }
}

fn values(pairs: &[(&str, &str, bool)]) -> BTreeMap<String, ImportedValue> {
    pairs
        .iter()
        .map(|(k, v, secret)| (k.to_string(), val(v, *secret)))
        .collect()
}

mod clients;
mod credentials;
mod jsonc;
mod names;
mod normalize;
mod parse;
mod references;
mod scan;
