//! Object kinds as declarations: a plugin names the kinds it reads (and the writes it
//! makes) in its registration, and the backends derive from those declarations what they
//! watch, load from manifests and ask RBAC for.
//!
//! A kind is any Rust type implementing [`Kind`]: k8s-openapi's types and a hand-written
//! custom resource struct alike (it implements `k8s_openapi::Resource` with its group,
//! version, kind, plural and scope, `k8s_openapi::Metadata<Ty = ObjectMeta>` and serde).
//! [`ObjectKind`] is its type-erased descriptor, built at compile time with
//! [`ObjectKind::of`].

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::events::{EventObject, EventResource};
use crate::objects::Store;

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

/// The type-erased descriptor of a [`Kind`]: what a backend needs to watch, list, load
/// and store its objects without knowing the Rust type.
#[derive(Clone, Copy)]
pub struct ObjectKind {
    /// The API group (`""` for the core group).
    pub group: &'static str,
    /// The API version, e.g. `v1alpha1`.
    pub version: &'static str,
    /// The kind, e.g. `PodGroup`.
    pub kind: &'static str,
    /// The plural resource name, e.g. `podgroups`.
    pub plural: &'static str,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
    type_id: fn() -> TypeId,
    new_store: fn() -> Arc<dyn AnyStore>,
}

impl ObjectKind {
    /// The descriptor of `K`.
    pub const fn of<K: Kind>() -> Self {
        Self {
            group: K::GROUP,
            version: K::VERSION,
            kind: K::KIND,
            plural: K::URL_PATH_SEGMENT,
            namespaced: <K::Scope as KindScope>::NAMESPACED,
            type_id: TypeId::of::<K>,
            new_store: new_store::<K>,
        }
    }

    /// `group/version`, or `version` for the core group (the `apiVersion` of its objects).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural.group` (`plural` for the core group), as `kubectl` and RBAC messages name it.
    pub fn resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Its group and kind.
    pub const fn name(&self) -> KindName {
        KindName {
            group: self.group,
            kind: self.kind,
        }
    }

    /// Whether an object with this `apiVersion` and `kind` is of this kind's group and kind
    /// (the version is checked when the object is decoded).
    pub fn matches(&self, api_version: &str, kind: &str) -> bool {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        self.kind == kind && self.group == group
    }

    /// The Rust type behind the descriptor.
    pub fn type_id(&self) -> TypeId {
        (self.type_id)()
    }

    /// The resource its change events are reported as: the built-in resources the queue
    /// has always known keep their names, every other kind is [`EventResource::Kind`].
    pub fn event_resource(&self) -> EventResource {
        use EventResource as R;
        match (self.group, self.kind) {
            ("", "Namespace") => R::Namespace,
            ("", "Service" | "ReplicationController") | ("apps", "ReplicaSet" | "StatefulSet") => {
                R::Workload
            }
            ("", "PersistentVolume") => R::PersistentVolume,
            ("", "PersistentVolumeClaim") => R::PersistentVolumeClaim,
            ("storage.k8s.io", "StorageClass") => R::StorageClass,
            ("storage.k8s.io", "CSINode") => R::CSINode,
            ("storage.k8s.io", "CSIDriver") => R::CSIDriver,
            ("storage.k8s.io", "CSIStorageCapacity") => R::CSIStorageCapacity,
            ("storage.k8s.io", "VolumeAttachment") => R::VolumeAttachment,
            ("resource.k8s.io", "ResourceClaim") => R::ResourceClaim,
            ("resource.k8s.io", "ResourceSlice") => R::ResourceSlice,
            ("resource.k8s.io", "DeviceClass") => R::DeviceClass,
            _ => R::Kind(self.name()),
        }
    }

    /// A new, empty store for objects of this kind.
    pub(crate) fn new_store(&self) -> Arc<dyn AnyStore> {
        (self.new_store)()
    }
}

impl PartialEq for ObjectKind {
    fn eq(&self, other: &Self) -> bool {
        self.type_id() == other.type_id()
    }
}

impl Eq for ObjectKind {}

impl fmt::Debug for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.api_version(), self.kind)
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.kind, self.resource())
    }
}

/// A write a plugin makes to objects of a kind in cluster mode: the verbs on the objects
/// and on their `status` subresource. Declared in `register_plugin!`'s `writes: [...]`, it
/// becomes RBAC rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindWrite {
    /// The kind written.
    pub kind: ObjectKind,
    /// Verbs on the objects (e.g. `create`, `update`).
    pub verbs: &'static [&'static str],
    /// Verbs on the `status` subresource (e.g. `update`, `patch`).
    pub status_verbs: &'static [&'static str],
}

impl KindWrite {
    /// What [`ObjectWriter`](crate::ObjectWriter) does on a kind the plugin owns: create
    /// objects, replace and patch their status.
    pub const fn owned<K: Kind>() -> Self {
        Self {
            kind: ObjectKind::of::<K>(),
            verbs: &["create"],
            status_verbs: &["update", "patch"],
        }
    }

    /// Replacing objects of `K` (`update`), e.g. a volume's `claimRef`.
    pub const fn update<K: Kind>() -> Self {
        Self {
            kind: ObjectKind::of::<K>(),
            verbs: &["update"],
            status_verbs: &[],
        }
    }

    /// Replacing and patching the status of objects of `K`.
    pub const fn status<K: Kind>() -> Self {
        Self {
            kind: ObjectKind::of::<K>(),
            verbs: &[],
            status_verbs: &["update", "patch"],
        }
    }
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

/// The backends' type-erased view of one kind's [`Store`]: they feed it raw objects
/// (from a watch or a manifest) without knowing the Rust type. Plugins use the typed
/// [`Store`] from [`ObjectStore::of`](crate::ObjectStore::of) instead.
pub trait AnyStore: Send + Sync + 'static {
    /// The kind stored.
    fn kind(&self) -> ObjectKind;
    /// Decodes a raw object and adds or replaces it; returns the previous and the new
    /// object as events carry them (hints downcast them to the kind's type).
    fn upsert_raw(
        &self,
        value: serde_json::Value,
    ) -> Result<(Option<EventObject>, EventObject), DecodeError>;
    /// Removes an object; returns it as events carry it if it was there.
    fn remove_raw(&self, namespace: Option<&str>, name: &str) -> Option<EventObject>;
    /// One object as JSON (with `apiVersion` and `kind`).
    fn get_raw(&self, namespace: Option<&str>, name: &str) -> Option<serde_json::Value>;
    /// Number of objects.
    fn len(&self) -> usize;
    /// Whether there is none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The typed store, for [`ObjectStore::of`](crate::ObjectStore::of)'s downcast.
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

fn new_store<K: Kind>() -> Arc<dyn AnyStore> {
    Arc::new(Store::<K>::default())
}

impl<K: Kind> AnyStore for Store<K> {
    fn kind(&self) -> ObjectKind {
        ObjectKind::of::<K>()
    }

    fn upsert_raw(
        &self,
        value: serde_json::Value,
    ) -> Result<(Option<EventObject>, EventObject), DecodeError> {
        let obj = Arc::new(decode_object::<K>(value)?);
        let old = self.upsert_arc(obj.clone());
        Ok((old.map(EventObject::object), EventObject::object(obj)))
    }

    fn remove_raw(&self, namespace: Option<&str>, name: &str) -> Option<EventObject> {
        self.remove(namespace, name).map(EventObject::object)
    }

    fn get_raw(&self, namespace: Option<&str>, name: &str) -> Option<serde_json::Value> {
        let obj = self.get(namespace, name)?;
        let mut v = serde_json::to_value(&*obj).ok()?;
        if let Some(m) = v.as_object_mut() {
            m.insert("apiVersion".into(), K::API_VERSION.into());
            m.insert("kind".into(), K::KIND.into());
        }
        Some(v)
    }

    fn len(&self) -> usize {
        Store::len(self)
    }

    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim};

    #[test]
    fn descriptors_of_built_in_kinds() {
        let ns = ObjectKind::of::<Namespace>();
        assert_eq!(
            (ns.group, ns.version, ns.kind, ns.plural, ns.namespaced),
            ("", "v1", "Namespace", "namespaces", false)
        );
        assert_eq!(ns.api_version(), "v1");
        assert_eq!(ns.event_resource(), EventResource::Namespace);
        let pvc = ObjectKind::of::<PersistentVolumeClaim>();
        assert!(pvc.namespaced);
        assert!(pvc.matches("v1", "PersistentVolumeClaim"));
        assert!(!pvc.matches("apps/v1", "PersistentVolumeClaim"));
        assert_ne!(ns, pvc);
    }

    #[test]
    fn decode_errors_name_kind_object_and_field() {
        let err = decode_object::<PersistentVolumeClaim>(serde_json::json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "ns"},
            "spec": {"accessModes": "ReadWriteOnce"}
        }))
        .expect_err("a string is not a list");
        assert_eq!(err.kind, "PersistentVolumeClaim");
        assert_eq!(err.object, "ns/data");
        assert_eq!(err.field.as_deref(), Some("spec.accessModes"));
        let err = decode_object::<PersistentVolumeClaim>(serde_json::json!({
            "apiVersion": "v2", "kind": "PersistentVolumeClaim", "metadata": {"name": "x"}
        }))
        .expect_err("wrong version");
        assert_eq!(err.field.as_deref(), Some("apiVersion"));
        assert!(
            err.to_string()
                .starts_with("PersistentVolumeClaim x: apiVersion: ")
        );
    }

    #[test]
    fn merge_patches() {
        let mut v = serde_json::json!({"a": 1, "s": {"phase": "Pending", "n": 1}});
        merge_patch(
            &mut v,
            &serde_json::json!({"s": {"phase": "Running", "n": null}}),
        );
        assert_eq!(v, serde_json::json!({"a": 1, "s": {"phase": "Running"}}));
    }
}
