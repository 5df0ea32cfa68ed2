//! Where a server definition comes from: a config file, or the registry at a scope.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where a registry service applies: to every folder (user) or to one project folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Everywhere, for this user.
    User,
    /// Only when Airlock runs in one project folder.
    Project,
}

/// A scope name that is neither `user` nor `project`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scope \"{0}\"; expected \"user\" or \"project\"")]
pub struct UnknownScope(pub String);

impl Scope {
    /// `user` or `project`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
        }
    }

    /// Parses `user` or `project`.
    pub fn parse(text: &str) -> Result<Scope, UnknownScope> {
        match text {
            "user" => Ok(Scope::User),
            "project" => Ok(Scope::Project),
            other => Err(UnknownScope(other.to_string())),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a server's definition comes from. Shown (and serialized) as the file's path,
/// or `registry:user` / `registry:project`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// A config file (or an in-memory document named like one).
    File(PathBuf),
    /// The registry, managed with `airlock servers`.
    Registry(Scope),
}

impl Source {
    /// Whether the definition is managed by `airlock servers`.
    pub fn is_registry(&self) -> bool {
        matches!(self, Source::Registry(_))
    }

    /// The file, for a file source.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Source::File(path) => Some(path),
            Source::Registry(_) => None,
        }
    }

    /// The folder relative plugin paths resolve against (the file's folder; none for
    /// the registry).
    pub fn base_dir(&self) -> &Path {
        match self {
            Source::File(path) => path.parent().unwrap_or(Path::new(".")),
            Source::Registry(_) => Path::new(""),
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File(path) => write!(f, "{}", path.display()),
            Source::Registry(scope) => write!(f, "registry:{scope}"),
        }
    }
}

impl Serialize for Source {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl From<PathBuf> for Source {
    fn from(path: PathBuf) -> Self {
        Source::File(path)
    }
}

impl From<&Path> for Source {
    fn from(path: &Path) -> Self {
        Source::File(path.to_path_buf())
    }
}
