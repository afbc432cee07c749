//! [`Lenient`]: an object as a watcher receives it, decoded one object at a time, so that one
//! malformed object in a list or a watch stream is reported (with its name and the field
//! at fault) and skipped instead of failing the whole list or watch.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::de::{Deserialize, DeserializeOwned, Deserializer};

/// Why an object could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// The path of the offending field, e.g. `spec.containers[0].ports`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() || self.field == "." {
            write!(f, "{}", self.message)
        } else {
            write!(f, "field {}: {}", self.field, self.message)
        }
    }
}

/// The metadata of a decoded object (its own, or the one kept beside it).
pub trait MetaOf {
    /// The object's metadata.
    fn meta_of(&self) -> &ObjectMeta;
}

/// An object of kind `K`, or the reason it could not be decoded. Its identity (name,
/// namespace, UID, resourceVersion) is kept in both cases, as far as it can be read, so
/// the watcher can track resource versions and deletions; the rest of the metadata is in
/// the object.
#[derive(Debug, Clone)]
pub struct Lenient<K> {
    meta: ObjectMeta,
    /// The decoded object.
    pub object: Result<K, Malformed>,
}

impl<K> Lenient<K> {
    /// `namespace/name` (or `name` for cluster-scoped objects).
    pub fn key(&self) -> String {
        object_key(&self.meta)
    }

    /// The metadata.
    pub fn meta(&self) -> &ObjectMeta {
        &self.meta
    }

    pub(crate) fn meta_mut_inner(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

/// `namespace/name`, or `name` for cluster-scoped objects.
pub fn object_key(meta: &ObjectMeta) -> String {
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{}", meta.name.as_deref().unwrap_or("")),
        _ => meta.name.clone().unwrap_or_default(),
    }
}

/// Reads what it can of a metadata block that does not decode as a whole.
fn salvage_meta(value: &serde_json::Value) -> ObjectMeta {
    let text = |k: &str| {
        value
            .get(k)
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    ObjectMeta {
        name: text("name"),
        namespace: text("namespace"),
        uid: text("uid"),
        resource_version: text("resourceVersion"),
        ..Default::default()
    }
}

/// The fields [`Lenient`] keeps beside the object.
fn identity(meta: &ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        ..Default::default()
    }
}

impl<K: DeserializeOwned + MetaOf> Lenient<K> {
    /// Decodes one object from its JSON text straight into `K`, without a tree in
    /// between (each string is copied once, into the object). Only when that fails does
    /// a second pass read the text as a tree, to name the field at fault and salvage the
    /// identity.
    pub fn from_json(text: &str) -> Self {
        match serde_json::from_str::<K>(text) {
            Ok(object) => Self {
                meta: identity(object.meta_of()),
                object: Ok(object),
            },
            Err(_) => Self::from_value(serde_json::from_str(text).unwrap_or_default()),
        }
    }

    /// Decodes one object from JSON.
    pub fn from_value(value: serde_json::Value) -> Self {
        let meta = match value.get("metadata") {
            Some(m) => salvage_meta(m),
            None => ObjectMeta::default(),
        };
        let object = serde_path_to_error::deserialize::<_, K>(value).map_err(|e| Malformed {
            field: e.path().to_string(),
            message: e.inner().to_string(),
        });
        Self { meta, object }
    }
}

/// Takes the object's JSON text as the list or the watch line has it (one copy of the
/// bytes, no tree) and decodes it with [`Lenient::from_json`]. kube decodes lists and
/// watch lines with serde_json, which hands the text over; a watch line must then carry
/// `type` before `object`, the order kube-apiserver writes.
impl<'de, K: DeserializeOwned + MetaOf> Deserialize<'de> for Lenient<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
        Ok(Self::from_json(raw.get()))
    }
}

impl<K: Resource<DynamicType = ()>> Resource for Lenient<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    #[test]
    fn a_good_object_decodes() {
        let l: Lenient<Pod> = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7"},
            "spec": {"containers": [{"name": "c"}]}
        }))
        .expect("lenient never fails");
        assert_eq!(l.key(), "ns/p");
        assert_eq!(l.meta().resource_version.as_deref(), Some("7"));
        assert!(l.object.is_ok());
    }

    #[test]
    fn a_malformed_object_names_the_field() {
        let l: Lenient<Pod> = serde_json::from_value(json!({
            "metadata": {"name": "bad", "namespace": "ns", "resourceVersion": "8"},
            "spec": {"containers": "not a list"}
        }))
        .expect("lenient never fails");
        assert_eq!(l.key(), "ns/bad");
        assert_eq!(l.meta().resource_version.as_deref(), Some("8"));
        let err = l.object.expect_err("malformed");
        assert_eq!(err.field, "spec.containers");
        assert!(
            err.to_string().starts_with("field spec.containers: "),
            "{err}"
        );
    }

    #[test]
    fn broken_metadata_keeps_what_can_be_read() {
        let l: Lenient<Pod> = serde_json::from_value(json!({
            "metadata": {"name": "m", "namespace": "ns", "resourceVersion": "9", "labels": 5},
        }))
        .expect("lenient never fails");
        assert_eq!(l.key(), "ns/m");
        assert_eq!(l.meta().resource_version.as_deref(), Some("9"));
        assert!(l.object.is_err());
    }

    #[test]
    fn objects_decode_from_list_and_watch_text_as_kube_reads_it() {
        // A list page as kube decodes it (from the text): the good item whole, the
        // malformed one named with its field, the page itself never fails.
        let page = r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"12"},
            "items":[{"metadata":{"name":"a","namespace":"ns","resourceVersion":"10","labels":{"app":"x"}},
                      "spec":{"containers":[{"name":"c"}]}},
                     {"metadata":{"name":"b","namespace":"ns","resourceVersion":"11"},
                      "spec":{"containers":[{"name":"c","ports":[{"containerPort":"eighty"}]}]}}]}"#;
        let list: kube::core::ObjectList<Lenient<Pod>> =
            serde_json::from_str(page).expect("the page decodes");
        assert_eq!(list.items.len(), 2);
        let good = list.items[0].object.as_ref().expect("a decodes");
        assert_eq!(
            good.metadata.labels.as_ref().and_then(|l| l.get("app")),
            Some(&"x".to_string())
        );
        assert_eq!(list.items[0].meta().resource_version.as_deref(), Some("10"));
        assert_eq!(list.items[1].key(), "ns/b");
        let err = list.items[1].object.as_ref().expect_err("b is malformed");
        assert_eq!(err.field, "spec.containers[0].ports[0].containerPort");

        // A watch line in kube-apiserver's field order.
        let line = r#"{"type":"MODIFIED","object":{"metadata":{"name":"a","namespace":"ns","resourceVersion":"13"},"spec":{"nodeName":"n1","containers":[{"name":"c"}]}}}"#;
        match serde_json::from_str::<kube::core::WatchEvent<Lenient<Pod>>>(line) {
            Ok(kube::core::WatchEvent::Modified(l)) => {
                assert_eq!(l.meta().resource_version.as_deref(), Some("13"));
                let pod = l.object.expect("decodes");
                assert_eq!(pod.spec.and_then(|s| s.node_name).as_deref(), Some("n1"));
            }
            other => panic!("{other:?}"),
        }
    }
}
