//! Object kinds as declarations: a plugin names the kinds it reads (and the writes it
//! makes) in its registration, and the backends derive from those declarations what they
//! watch, load from manifests and ask RBAC for.
//!
//! A kind is any Rust type implementing [`Kind`]: k8s-openapi's types and a hand-written
//! custom resource struct alike (it implements `k8s_openapi::Resource` with its group,
//! version, kind, plural and scope, `k8s_openapi::Metadata<Ty = ObjectMeta>` and serde).
//! [`ObjectKind`] is its type-erased descriptor, built at compile time with
//! [`ObjectKind::of`].

pub use crate::kind::{
    DecodeError, Kind, KindName, KindScope, decode_object, merge_patch, raw_object_key,
};
pub use crate::store::{AnyStore, ObjectKind};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventResource;
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
