//! Text to [`KubeSchedulerConfiguration`]: YAML or JSON, strict, with the field path of every
//! decoding error.

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::FieldError;
use crate::types::{API_VERSION_V1, API_VERSION_V1BETA3, KIND, KubeSchedulerConfiguration};

/// The type header, read first so a wrong apiVersion or kind is reported as such rather than
/// as whatever field the other version lacks.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
}

/// Decodes a configuration document and checks its apiVersion and kind.
pub(crate) fn decode(text: &str) -> Result<KubeSchedulerConfiguration, FieldError> {
    if text.trim().is_empty() {
        return Err(FieldError::new(
            "",
            "the file is empty; it must hold a KubeSchedulerConfiguration",
        ));
    }
    let meta: TypeMeta = decode_as(text)?;
    match meta.api_version.as_deref() {
        Some(API_VERSION_V1 | API_VERSION_V1BETA3) => {}
        Some(other) => {
            return Err(FieldError::new(
                "apiVersion",
                format!(
                    "unsupported value {other:?}: must be {API_VERSION_V1:?} or {API_VERSION_V1BETA3:?}"
                ),
            ));
        }
        None => {
            return Err(FieldError::new(
                "apiVersion",
                format!("required value: must be {API_VERSION_V1:?}"),
            ));
        }
    }
    match meta.kind.as_deref() {
        Some(KIND) => {}
        Some(other) => {
            return Err(FieldError::new(
                "kind",
                format!("unsupported value {other:?}: must be {KIND:?}"),
            ));
        }
        None => {
            return Err(FieldError::new(
                "kind",
                format!("required value: must be {KIND:?}"),
            ));
        }
    }
    decode_as(text)
}

/// JSON documents go through serde_json (clearer messages); everything else is YAML.
fn decode_as<T: DeserializeOwned>(text: &str) -> Result<T, FieldError> {
    if text.trim_start().starts_with('{') {
        let mut de = serde_json::Deserializer::from_str(text);
        let value = serde_path_to_error::deserialize(&mut de)
            .map_err(|e| FieldError::new(path_string(e.path()), e.inner().to_string()))?;
        de.end()
            .map_err(|e| FieldError::new("", format!("trailing content: {e}")))?;
        return Ok(value);
    }
    let mut path = String::new();
    // One-line messages: the CLI prints them after the file name and path.
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    serde_saphyr::with_deserializer_from_str_with_options(text, options, |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            path = path_string(e.path());
            e.into_inner()
        })
    })
    .map_err(|e| FieldError::new(path, for_users(&e.to_string())))
}

/// The YAML library's advice is for programmers; whoever edits the file needs other words.
fn for_users(message: &str) -> String {
    message
        .replace(", set DuplicateKeyPolicy in Options if acceptable", "")
        .replace(
            "; use from_str_multiple or from_str_multiple_with_options",
            "; a configuration file holds one document",
        )
}

/// serde_path_to_error writes `a.b[0].c`, but marks an unknown map key with `?`; a path made
/// only of that mark means the document root.
fn path_string(path: &serde_path_to_error::Path) -> String {
    let s = path.to_string();
    if s == "." || s == "?" {
        String::new()
    } else {
        s
    }
}
