//! Configuration errors: every message names the file and the field path.

use std::fmt;

/// One problem at one field, e.g. `profiles[0].plugins.score.enabled[1].weight`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field path, upstream style (`a.b[2].c`); empty for the whole document.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl FieldError {
    /// A problem at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not a KubeSchedulerConfiguration (syntax, types, unknown fields,
    /// apiVersion or kind).
    #[error("{file}: {error}")]
    Decode {
        /// The file.
        file: String,
        /// Where and what.
        error: FieldError,
    },
    /// The configuration decoded but breaks one or more rules; every problem is listed.
    #[error("{}", render(file, problems))]
    Invalid {
        /// The file.
        file: String,
        /// Every problem found, in document order.
        problems: Vec<FieldError>,
    },
}

impl ConfigError {
    /// The problems, one per field (a read error gives none).
    pub fn problems(&self) -> Vec<FieldError> {
        match self {
            ConfigError::Read { .. } => Vec::new(),
            ConfigError::Decode { error, .. } => vec![error.clone()],
            ConfigError::Invalid { problems, .. } => problems.clone(),
        }
    }
}

fn render(file: &str, problems: &[FieldError]) -> String {
    problems
        .iter()
        .map(|p| format!("{file}: {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}
