//! Text to [`KubeSchedulerConfiguration`]: YAML or JSON, strict, with the field path of every
//! decoding error.

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::FieldError;
use crate::types::{API_VERSION_V1, API_VERSION_V1BETA3, KIND, KubeSchedulerConfiguration};

/// The content type kubesched's API client sends and accepts.
pub(crate) const JSON: &str = "application/json";

/// Upstream's default `clientConnection.contentType`.
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// Fields whose mere presence matters: the typed decoding fills defaults in and can no longer
/// tell "set" from "unset".
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct Explicit {
    api_version: Option<String>,
    client_connection: Option<ExplicitClient>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct ExplicitClient {
    content_type: Option<String>,
    accept_content_types: Option<String>,
}

/// Settings that are accepted but change nothing (or are going away): one warning each.
/// Call only on a document [`decode`] accepted.
pub(crate) fn warnings(text: &str) -> Vec<FieldError> {
    let Ok(explicit) = decode_as::<Explicit>(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if explicit.api_version.as_deref() == Some(API_VERSION_V1BETA3) {
        out.push(FieldError::new(
            "apiVersion",
            format!(
                "{API_VERSION_V1BETA3} was removed in Kubernetes v1.29 and kube-scheduler v1.34 refuses it; kubesched still reads it as {API_VERSION_V1} (`kubesched config migrate FILE` prints the {API_VERSION_V1} file)"
            ),
        ));
    }
    // Upstream's defaults draw nothing (`config defaults` writes them, and kubesched's
    // behaviour for them is the one an operator gets from kube-scheduler): contention
    // profiling is on by default and only matters with profiling's endpoints, which
    // kubesched serves without it; protobuf is the default content type.
    let client = explicit.client_connection.unwrap_or_default();
    if let Some(ct) = client
        .content_type
        .filter(|c| !c.is_empty() && c != JSON && c != PROTOBUF)
    {
        out.push(FieldError::new(
            "clientConnection.contentType",
            format!("kubesched sends {JSON} to the API server: {ct:?} has no effect"),
        ));
    }
    if let Some(accept) = client
        .accept_content_types
        .filter(|a| !a.is_empty() && a.split(',').map(str::trim).any(|t| t != JSON))
    {
        out.push(FieldError::new(
            "clientConnection.acceptContentTypes",
            format!("kubesched accepts only {JSON} from the API server: {accept:?} has no effect"),
        ));
    }
    out
}

/// The same document with `kubescheduler.config.k8s.io/v1` as its apiVersion and as the
/// apiVersion of every plugin args object that named v1beta3; nothing else changes (the two
/// versions have the same fields). Call only on a document [`decode`] accepted.
pub(crate) fn migrate_to_v1(text: &str) -> Result<String, FieldError> {
    let mut doc: serde_json::Value = decode_as(text)?;
    let Some(map) = doc.as_object_mut() else {
        return Err(FieldError::new("", "the document is not an object"));
    };
    map.remove("apiVersion");
    map.remove("kind");
    for profile in map
        .get_mut("profiles")
        .and_then(serde_json::Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        for pc in profile
            .get_mut("pluginConfig")
            .and_then(serde_json::Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(args) = pc
                .get_mut("args")
                .and_then(serde_json::Value::as_object_mut)
                && args.get("apiVersion").and_then(serde_json::Value::as_str)
                    == Some(API_VERSION_V1BETA3)
            {
                args.insert("apiVersion".into(), API_VERSION_V1.into());
            }
        }
    }
    let mut out = format!("apiVersion: {API_VERSION_V1}\nkind: {KIND}\n");
    if !map.is_empty() {
        // serde_json orders the other keys by name.
        out.push_str(
            &serde_saphyr::to_string(&doc)
                .map_err(|e| FieldError::new("", format!("writing YAML: {e}")))?,
        );
    }
    Ok(out)
}

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
