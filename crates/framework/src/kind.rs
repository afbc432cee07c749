//! What an object kind is: the [`Kind`] trait every readable type implements (k8s-openapi's
//! types and hand-written custom resources alike), its name as events carry it, and
//! decoding a raw object into it with errors that name the field. The descriptors built
//! from kinds ([`ObjectKind`](crate::kinds::ObjectKind)) and the stores that hold their
//! objects sit above this, in `kinds.rs` and `store.rs`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Whether a kind's objects live in a namespace; implemented for k8s-openapi's scopes.
pub trait KindScope {
    /// True for namespaced kinds.
    const NAMESPACED: bool;
}

impl KindScope for k8s_openapi::NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl KindScope for k8s_openapi::ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// A type a plugin can read as an object kind. Implemented for every type with the right
/// traits; a custom resource needs `k8s_openapi::Resource` (scope
/// `NamespaceResourceScope` or `ClusterResourceScope`), `k8s_openapi::Metadata<Ty =
/// ObjectMeta>`, `Serialize`, `Deserialize` and `Clone`.
pub trait Kind:
    k8s_openapi::Resource<Scope: KindScope>
    + k8s_openapi::Metadata<Ty = ObjectMeta>
    + Serialize
    + DeserializeOwned
    + Clone
    + Send
    + Sync
    + 'static
{
}

impl<K> Kind for K where
    K: k8s_openapi::Resource<Scope: KindScope>
        + k8s_openapi::Metadata<Ty = ObjectMeta>
        + Serialize
        + DeserializeOwned
        + Clone
        + Send
        + Sync
        + 'static
{
}

/// A kind's name as events carry it: API group and kind (`""` for the core group).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct KindName {
    /// The API group, `""` for core.
    pub group: &'static str,
    /// The kind, e.g. `PodGroup`.
    pub kind: &'static str,
}

/// An object that could not be decoded into its kind's type: which kind, which object,
/// which field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {object}: {}{message}", field.as_deref().map(|f| format!("{f}: ")).unwrap_or_default())]
pub struct DecodeError {
    /// The kind, e.g. `PodGroup`.
    pub kind: &'static str,
    /// `namespace/name` or `name`, as far as it could be read.
    pub object: String,
    /// The field path, when known.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// The `namespace/name` (or `name`) of a raw object, for messages.
pub fn raw_object_key(value: &serde_json::Value) -> String {
    let meta = value.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(|n| n.as_str())
        .unwrap_or("<unnamed>");
    match meta
        .and_then(|m| m.get("namespace"))
        .and_then(|n| n.as_str())
    {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// Decodes a raw object into `K`, naming the field that did not fit.
pub fn decode_object<K: Kind>(value: serde_json::Value) -> Result<K, DecodeError> {
    let object = raw_object_key(&value);
    for (field, expected) in [("apiVersion", K::API_VERSION), ("kind", K::KIND)] {
        if let Some(given) = value.get(field)
            && given.as_str() != Some(expected)
        {
            return Err(DecodeError {
                kind: K::KIND,
                object,
                field: Some(field.into()),
                message: format!("expected {expected:?} for a {}, got {given}", K::KIND),
            });
        }
    }
    serde_path_to_error::deserialize::<_, K>(value).map_err(|e| {
        let path = e.path().to_string();
        DecodeError {
            kind: K::KIND,
            object,
            field: (path != ".").then_some(path),
            message: e.into_inner().to_string(),
        }
    })
}

/// Applies an RFC 7386 JSON merge patch to `target` (objects merge key by key, `null`
/// removes a key, anything else replaces).
pub fn merge_patch(target: &mut serde_json::Value, patch: &serde_json::Value) {
    let serde_json::Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = serde_json::Value::Object(Default::default());
    }
    if let serde_json::Value::Object(map) = target {
        for (k, v) in patch {
            if v.is_null() {
                map.remove(k);
            } else {
                merge_patch(map.entry(k.clone()).or_insert(serde_json::Value::Null), v);
            }
        }
    }
}
