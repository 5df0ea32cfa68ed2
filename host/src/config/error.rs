//! What can be wrong with a configuration: [`ConfigError`] names the file (and the
//! server) around a [`SettingError`], which says what is wrong with one setting.

use std::path::PathBuf;

use super::Source;

/// A configuration error, naming the file and (when it concerns one) the server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A file could not be read.
    #[error("cannot read config file \"{file}\": {message}")]
    Read {
        /// The file.
        file: PathBuf,
        /// The OS error.
        message: String,
    },
    /// A file is not valid TOML/JSON, or its top level is malformed.
    #[error("invalid config file \"{file}\": {message}")]
    File {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// One server entry is malformed.
    #[error("invalid MCP server \"{server}\" in \"{defined_in}\": {message}")]
    Server {
        /// The server's name.
        server: String,
        /// The file (or registry scope) defining it.
        defined_in: Source,
        /// What is wrong.
        message: String,
    },
}

/// What is wrong with one setting or table, in words that name its key (for example
/// `"tool_timeout" must be a positive number of seconds`). [`ConfigError`] adds the
/// file and the server around it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct SettingError {
    /// What is wrong, naming the key.
    pub message: String,
}

impl From<String> for SettingError {
    fn from(message: String) -> Self {
        SettingError { message }
    }
}

impl From<&str> for SettingError {
    fn from(message: &str) -> Self {
        SettingError {
            message: message.to_string(),
        }
    }
}
