//! A pod's API object as kubesched keeps it: whole, or packed into its JSON bytes.
//!
//! A k8s-openapi `Pod` is mostly inline `Option`s: about 2.4 KB before any content, and
//! 2.3 KB more for each container. A cluster dump's bound pods are read in full by nothing
//! on the scheduling path (their [`PodInfo`](crate::PodInfo) holds what plugins read), so
//! the loader keeps them packed (a slim dump pod is about 1.6 KB of JSON, 0.75 KB once
//! deflated) and they are decoded only when something asks for the object.

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use k8s_openapi::api::core::v1 as api;

/// A pod's API object, cheap to clone (one `Arc`), shared by the in-memory cluster, the
/// scheduler's compiled pods and the pod's [`PodInfo`](crate::PodInfo).
///
/// Dereferencing a packed object decodes it once and keeps the result (what the pod being
/// scheduled needs: plugins read it many times); [`PodObject::read`] decodes without
/// keeping, for code that looks at every pod once (reports, listings).
#[derive(Clone)]
pub struct PodObject(Arc<Inner>);

struct Inner {
    /// `namespace/name` (`default` for a pod without a namespace).
    name_key: Box<str>,
    /// `metadata.uid`, when set.
    uid: Option<Box<str>>,
    /// `metadata.namespace` is set.
    namespaced: bool,
    /// `spec.nodeName`, when set.
    node_name: Option<Box<str>>,
    /// `status.phase` is Succeeded or Failed.
    terminal: bool,
    /// `spec.resourceClaims` has entries.
    claims: bool,
    /// `spec.volumes` has entries.
    volumes: bool,
    /// The object's JSON, deflated, when it was packed.
    packed: Option<Box<[u8]>>,
    /// The object: given, or decoded from `packed` on first dereference.
    decoded: OnceLock<Arc<api::Pod>>,
}

impl PodObject {
    /// Keeps the object whole.
    pub fn new(pod: Arc<api::Pod>) -> Self {
        let header = Inner::header(&pod);
        Self(Arc::new(Inner {
            decoded: OnceLock::from(pod),
            ..header
        }))
    }

    /// Keeps the object packed; it is decoded when read. An object that cannot be encoded
    /// (it cannot happen with k8s-openapi's types, which always serialize) is kept whole.
    pub fn packed(pod: &api::Pod) -> Self {
        match serde_json::to_vec(pod) {
            Ok(json) => Self(Arc::new(Inner {
                packed: Some(deflate(&json).into_boxed_slice()),
                ..Inner::header(pod)
            })),
            Err(e) => {
                tracing::warn!(error = %e, "could not pack a pod; keeping it whole");
                Self::new(Arc::new(pod.clone()))
            }
        }
    }

    /// The object, decoded and kept if it was packed.
    pub fn object(&self) -> &Arc<api::Pod> {
        self.0.decoded.get_or_init(|| self.decode())
    }

    /// The object, without keeping a decoded copy: an object already whole (or already
    /// decoded) is shared, a packed one is decoded afresh.
    pub fn read(&self) -> Arc<api::Pod> {
        match self.0.decoded.get() {
            Some(pod) => Arc::clone(pod),
            None => self.decode(),
        }
    }

    /// The pod's key: its uid, or `namespace/name` when it has none (what
    /// [`PodInfo::uid`](crate::PodInfo::uid) is), read without decoding.
    pub fn key(&self) -> &str {
        self.0.uid.as_deref().unwrap_or(&self.0.name_key)
    }

    /// `metadata.uid`, when set, read without decoding.
    pub fn uid(&self) -> Option<&str> {
        self.0.uid.as_deref()
    }

    /// `namespace/name`, the namespace `default` when the object names none, read
    /// without decoding.
    pub fn name_key(&self) -> &str {
        &self.0.name_key
    }

    /// Whether `metadata.namespace` is set, read without decoding.
    pub fn has_namespace(&self) -> bool {
        self.0.namespaced
    }

    /// Whether `spec.resourceClaims` has entries, read without decoding.
    pub fn has_resource_claims(&self) -> bool {
        self.0.claims
    }

    /// Whether `spec.nodeName` is set, read without decoding.
    pub fn is_assigned(&self) -> bool {
        self.0.node_name.is_some()
    }

    /// `spec.nodeName`, when set, read without decoding.
    pub fn node_name(&self) -> Option<&str> {
        self.0.node_name.as_deref()
    }

    /// Whether the pod has finished (`status.phase` Succeeded or Failed), read without
    /// decoding.
    pub fn is_terminal(&self) -> bool {
        self.0.terminal
    }

    /// Whether `spec.volumes` has entries, read without decoding.
    pub fn has_volumes(&self) -> bool {
        self.0.volumes
    }

    /// The object to change: the very allocation when nothing else holds it (so
    /// `Arc::make_mut` need not copy it), else a shared or decoded copy.
    pub fn into_object(self) -> Arc<api::Pod> {
        match Arc::try_unwrap(self.0) {
            Ok(inner) => match inner.decoded.into_inner() {
                Some(pod) => pod,
                None => decode(inner.packed.as_deref().unwrap_or_default()),
            },
            Err(shared) => Self(shared).read(),
        }
    }

    /// Changes the object in place, keeping it as it is kept (packed or whole).
    pub fn modify(&mut self, change: impl FnOnce(&mut api::Pod)) {
        let packed = self.0.packed.is_some();
        let mut object = std::mem::replace(self, Self::new(Arc::default())).into_object();
        change(Arc::make_mut(&mut object));
        *self = if packed {
            Self::packed(&object)
        } else {
            Self::new(object)
        };
    }

    /// A changed version of this object, kept as this one is: packed if this one was
    /// packed (a dump's pod stays small through its binding), whole otherwise.
    pub fn successor(&self, pod: api::Pod) -> Self {
        if self.0.packed.is_some() {
            Self::packed(&pod)
        } else {
            Self::new(Arc::new(pod))
        }
    }

    /// Whether the object is held packed and not decoded.
    pub fn is_packed(&self) -> bool {
        self.0.decoded.get().is_none()
    }

    /// The packed size in bytes (0 for an object held whole).
    pub fn packed_len(&self) -> usize {
        self.0.packed.as_deref().map_or(0, <[u8]>::len)
    }

    /// Whether both are the very same object (not merely equal ones): one `PodObject`,
    /// or two wrapping one allocation of the API object (a watch cache hands out the same
    /// `Arc` it stored).
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
            || matches!(
                (a.0.decoded.get(), b.0.decoded.get()),
                (Some(x), Some(y)) if Arc::ptr_eq(x, y)
            )
    }

    fn decode(&self) -> Arc<api::Pod> {
        decode(self.0.packed.as_deref().unwrap_or_default())
    }
}

/// Raw deflate at the fastest level, with one compressor per thread (setting one up
/// costs more than packing a pod).
fn deflate(json: &[u8]) -> Vec<u8> {
    use miniz_oxide::deflate::core::{
        CompressorOxide, TDEFLFlush, TDEFLStatus, compress, create_comp_flags_from_zip_params,
    };
    thread_local! {
        static COMPRESSOR: std::cell::RefCell<CompressorOxide> =
            std::cell::RefCell::new(CompressorOxide::new(create_comp_flags_from_zip_params(1, 0, 0)));
    }
    COMPRESSOR.with(|compressor| {
        let mut compressor = compressor.borrow_mut();
        compressor.reset();
        // The first byte says how the rest is held: deflated, or the JSON as it is.
        let mut output = vec![DEFLATED; json.len() / 2 + 64];
        let (mut input, mut written) = (json, 1);
        loop {
            let (status, read, wrote) = compress(
                &mut compressor,
                input,
                &mut output[written..],
                TDEFLFlush::Finish,
            );
            written += wrote;
            input = &input[read..];
            match status {
                TDEFLStatus::Done => break,
                TDEFLStatus::Okay => {
                    let room = output.len() * 2;
                    output.resize(room, 0);
                }
                // The compressor reports misuse only (bad parameters): keep the JSON.
                _ => return [&[PLAIN][..], json].concat(),
            }
        }
        output.truncate(written);
        output.shrink_to_fit();
        output
    })
}

/// The first byte of packed bytes: the JSON follows deflated.
const DEFLATED: u8 = 0;
/// The first byte of packed bytes: the JSON follows as it is.
const PLAIN: u8 = 1;

/// The JSON back from [`deflate`]'s bytes.
fn inflate(bytes: &[u8]) -> Result<Vec<u8>, String> {
    match bytes.split_first() {
        Some((&DEFLATED, rest)) => {
            miniz_oxide::inflate::decompress_to_vec(rest).map_err(|e| format!("{e:?}"))
        }
        Some((&PLAIN, rest)) => Ok(rest.to_vec()),
        _ => Err("no packing tag".into()),
    }
}

fn decode(bytes: &[u8]) -> Arc<api::Pod> {
    let json = match inflate(bytes) {
        Ok(json) => json,
        Err(e) => {
            tracing::error!(error = %e, "a packed pod did not inflate");
            return Arc::new(api::Pod::default());
        }
    };
    match serde_json::from_slice(&json) {
        Ok(pod) => Arc::new(pod),
        Err(e) => {
            // Bytes this type wrote itself always decode; if they ever did not, the
            // scheduler sees an empty pod rather than stopping.
            tracing::error!(error = %e, "a packed pod did not decode");
            Arc::new(api::Pod::default())
        }
    }
}

impl Inner {
    /// The facts read without decoding, and nothing held yet.
    fn header(pod: &api::Pod) -> Self {
        let meta = &pod.metadata;
        let spec = pod.spec.as_ref();
        Self {
            name_key: format!(
                "{}/{}",
                meta.namespace
                    .as_deref()
                    .filter(|n| !n.is_empty())
                    .unwrap_or("default"),
                meta.name.as_deref().unwrap_or_default()
            )
            .into(),
            uid: meta
                .uid
                .as_deref()
                .filter(|u| !u.is_empty())
                .map(Into::into),
            namespaced: meta.namespace.is_some(),
            node_name: spec
                .and_then(|s| s.node_name.as_deref())
                .filter(|n| !n.is_empty())
                .map(Into::into),
            terminal: matches!(
                pod.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            ),
            claims: spec
                .and_then(|s| s.resource_claims.as_ref())
                .is_some_and(|c| !c.is_empty()),
            volumes: spec
                .and_then(|s| s.volumes.as_ref())
                .is_some_and(|v| !v.is_empty()),
            packed: None,
            decoded: OnceLock::new(),
        }
    }
}

impl Deref for PodObject {
    type Target = api::Pod;

    fn deref(&self) -> &api::Pod {
        self.object()
    }
}

impl AsRef<api::Pod> for PodObject {
    fn as_ref(&self) -> &api::Pod {
        self.object()
    }
}

impl From<Arc<api::Pod>> for PodObject {
    fn from(pod: Arc<api::Pod>) -> Self {
        Self::new(pod)
    }
}

impl From<api::Pod> for PodObject {
    fn from(pod: api::Pod) -> Self {
        Self::new(Arc::new(pod))
    }
}

impl From<&PodObject> for PodObject {
    fn from(pod: &PodObject) -> Self {
        pod.clone()
    }
}

impl fmt::Debug for PodObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.decoded.get() {
            Some(pod) => pod.fmt(f),
            None => write!(f, "PodObject(packed, {} bytes)", self.packed_len()),
        }
    }
}

impl PartialEq for PodObject {
    fn eq(&self, other: &Self) -> bool {
        Self::ptr_eq(self, other) || *self.read() == *other.read()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod() -> api::Pod {
        api::Pod {
            metadata: ObjectMeta {
                name: Some("web-1".into()),
                namespace: Some("shop".into()),
                labels: Some([("app".to_string(), "web".to_string())].into()),
                ..Default::default()
            },
            spec: Some(api::PodSpec {
                node_name: Some("n1".into()),
                containers: vec![api::Container {
                    name: "app".into(),
                    image: Some("nginx:1".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_packed_pod_reads_back_equal_and_is_decoded_only_when_dereferenced() {
        let packed = PodObject::packed(&pod());
        assert!(packed.is_packed());
        assert!(packed.packed_len() > 0);
        let json = serde_json::to_vec(&pod()).unwrap();
        assert!(
            packed.packed_len() < json.len(),
            "deflated: {}",
            packed.packed_len()
        );
        assert_eq!(inflate(&deflate(&json)).unwrap(), json);
        assert_eq!(inflate(&[&[PLAIN][..], &json].concat()).unwrap(), json);
        assert!(inflate(&[]).is_err());
        assert_eq!(packed.key(), "shop/web-1");
        assert_eq!(packed.name_key(), "shop/web-1");
        assert!(packed.has_namespace());
        assert!(packed.is_assigned());
        assert_eq!(packed.node_name(), Some("n1"));
        assert!(!packed.is_terminal());
        assert!(!packed.has_resource_claims());
        // `read` leaves it packed.
        assert_eq!(*packed.read(), pod());
        assert!(packed.is_packed());
        // Dereferencing decodes once and keeps it.
        assert_eq!(packed.metadata.name.as_deref(), Some("web-1"));
        assert!(!packed.is_packed());
        assert!(Arc::ptr_eq(packed.object(), &packed.read()));
        // A successor of a packed pod is packed too.
        let mut moved = pod();
        moved.spec.as_mut().unwrap().node_name = Some("n2".into());
        let next = packed.successor(moved.clone());
        assert!(next.is_packed());
        assert_eq!(*next.into_object(), moved);
        let mut changed = packed.clone();
        changed.modify(|p| p.metadata.name = Some("web-2".into()));
        assert!(changed.is_packed());
        assert_eq!(changed.name_key(), "shop/web-2");
        assert_eq!(packed.name_key(), "shop/web-1");
    }

    #[test]
    fn a_whole_pod_is_shared_not_copied() {
        let whole = Arc::new(pod());
        let object = PodObject::from(Arc::clone(&whole));
        assert!(!object.is_packed());
        assert_eq!(object.packed_len(), 0);
        assert!(Arc::ptr_eq(&object.read(), &whole));
        let copy = object.clone();
        assert!(PodObject::ptr_eq(&copy, &object));
        assert!(!PodObject::ptr_eq(&PodObject::from(pod()), &object));
        // Two wrappers of one allocation are the same object.
        assert!(PodObject::ptr_eq(
            &PodObject::from(Arc::clone(&whole)),
            &object
        ));
        assert_eq!(PodObject::from(pod()), object);
        assert!(!object.successor(pod()).is_packed());
        // Held elsewhere too: the allocation is shared, not taken.
        drop(copy);
        assert!(Arc::ptr_eq(&object.into_object(), &whole));
        let alone = PodObject::from(pod());
        let inner = alone.read();
        drop(inner);
        let taken = alone.into_object();
        assert_eq!(Arc::strong_count(&taken), 1);
    }
}
