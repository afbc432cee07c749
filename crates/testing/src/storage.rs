//! Builders for the storage objects volume plugins read: claims, volumes, classes, CSI
//! drivers, nodes and storage capacities, volume attachments, plus pod volumes of every kind
//! those plugins look at.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::api::storage::v1 as storage;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};

use crate::PodBuilder;

/// The annotation that marks a claim's binding as complete.
pub const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// The annotation the scheduler sets on a claim to provision.
const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// A deletion timestamp.
fn deleting() -> Time {
    Time("2024-01-01T00:00:00Z".parse().expect("timestamp"))
}

impl PodBuilder {
    /// Adds any volume.
    pub fn volume(self, volume: api::Volume) -> Self {
        self.with(|p| {
            p.spec
                .get_or_insert_with(Default::default)
                .volumes
                .get_or_insert_with(Default::default)
                .push(volume)
        })
    }

    /// Adds a generic ephemeral volume named `name` (its claim is `<pod>-<name>`).
    pub fn ephemeral_volume(self, name: &str) -> Self {
        self.volume(api::Volume {
            name: name.into(),
            ephemeral: Some(api::EphemeralVolumeSource::default()),
            ..Default::default()
        })
    }
}

/// A volume named `name` with the source `set` fills in.
pub fn volume(name: &str, set: impl FnOnce(&mut api::Volume)) -> api::Volume {
    let mut v = api::Volume {
        name: name.into(),
        ..Default::default()
    };
    set(&mut v);
    v
}

/// Builds a `v1.PersistentVolumeClaim` in namespace `default`.
#[derive(Debug, Clone)]
pub struct PvcBuilder {
    pvc: api::PersistentVolumeClaim,
}

impl PvcBuilder {
    /// A claim named `name` asking for 1Gi, ReadWriteOnce, without a class.
    pub fn new(name: &str) -> Self {
        Self {
            pvc: api::PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some("default".into()),
                    uid: Some(format!("uid-{name}")),
                    ..Default::default()
                },
                spec: Some(api::PersistentVolumeClaimSpec {
                    access_modes: Some(vec!["ReadWriteOnce".into()]),
                    resources: Some(api::VolumeResourceRequirements {
                        requests: Some(BTreeMap::from([(
                            "storage".to_string(),
                            Quantity("1Gi".into()),
                        )])),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                status: None,
            },
        }
    }

    fn spec(&mut self) -> &mut api::PersistentVolumeClaimSpec {
        self.pvc.spec.get_or_insert_with(Default::default)
    }

    /// Sets the namespace.
    pub fn namespace(mut self, ns: &str) -> Self {
        self.pvc.metadata.namespace = Some(ns.into());
        self
    }

    /// Sets the access modes.
    pub fn access_modes(mut self, modes: &[&str]) -> Self {
        self.spec().access_modes = Some(modes.iter().map(|m| m.to_string()).collect());
        self
    }

    /// Sets `spec.storageClassName`.
    pub fn storage_class(mut self, class: &str) -> Self {
        self.spec().storage_class_name = Some(class.into());
        self
    }

    /// Sets the storage request.
    pub fn request(mut self, size: &str) -> Self {
        self.spec().resources = Some(api::VolumeResourceRequirements {
            requests: Some(BTreeMap::from([(
                "storage".to_string(),
                Quantity(size.into()),
            )])),
            ..Default::default()
        });
        self
    }

    /// Binds the claim to `pv` (volumeName plus the bind-completed annotation).
    pub fn bound_to(mut self, pv: &str) -> Self {
        self.spec().volume_name = Some(pv.into());
        self.pvc
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(BIND_COMPLETED.into(), "yes".into());
        self.pvc.status = Some(api::PersistentVolumeClaimStatus {
            phase: Some("Bound".into()),
            ..Default::default()
        });
        self
    }

    /// Sets only `spec.volumeName` (a claim pre-bound to a volume).
    pub fn volume_name(mut self, pv: &str) -> Self {
        self.spec().volume_name = Some(pv.into());
        self
    }

    /// Makes the pod `pod` (with UID `uid`) the claim's controlling owner, as for the
    /// claim of a generic ephemeral volume.
    pub fn owned_by_pod(mut self, pod: &str, uid: &str) -> Self {
        self.pvc.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: pod.into(),
            uid: uid.into(),
            controller: Some(true),
            ..Default::default()
        }]);
        self
    }

    /// Sets `metadata.uid`.
    pub fn uid(mut self, uid: &str) -> Self {
        self.pvc.metadata.uid = Some(uid.into());
        self
    }

    /// Removes the storage request.
    pub fn no_request(mut self) -> Self {
        self.spec().resources = None;
        self
    }

    /// Sets `spec.volumeMode`.
    pub fn volume_mode(mut self, mode: &str) -> Self {
        self.spec().volume_mode = Some(mode.into());
        self
    }

    /// Sets `spec.selector` to these `matchLabels`.
    pub fn selector(mut self, pairs: &[(&str, &str)]) -> Self {
        self.spec().selector = Some(crate::selector(pairs));
        self
    }

    /// Sets `spec.selector` as given.
    pub fn raw_selector(mut self, selector: LabelSelector) -> Self {
        self.spec().selector = Some(selector);
        self
    }

    /// Sets `volume.kubernetes.io/selected-node`.
    pub fn selected_node(self, node: &str) -> Self {
        self.annotation(SELECTED_NODE, node)
    }

    /// Adds an annotation.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.pvc
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(key.into(), value.into());
        self
    }

    /// Sets `status.phase`.
    pub fn phase(mut self, phase: &str) -> Self {
        self.pvc.status.get_or_insert_with(Default::default).phase = Some(phase.into());
        self
    }

    /// Marks the claim for deletion.
    pub fn deleting(mut self) -> Self {
        self.pvc.metadata.deletion_timestamp = Some(deleting());
        self
    }

    /// Sets `metadata.resourceVersion`.
    pub fn resource_version(mut self, rv: &str) -> Self {
        self.pvc.metadata.resource_version = Some(rv.into());
        self
    }

    /// Applies any change.
    pub fn with(mut self, f: impl FnOnce(&mut api::PersistentVolumeClaim)) -> Self {
        f(&mut self.pvc);
        self
    }

    /// The API object.
    pub fn build(self) -> api::PersistentVolumeClaim {
        self.pvc
    }
}

/// Builds a `v1.PersistentVolume`.
#[derive(Debug, Clone)]
pub struct PvBuilder {
    pv: api::PersistentVolume,
}

impl PvBuilder {
    /// A 1Gi ReadWriteOnce volume named `name` without a source.
    pub fn new(name: &str) -> Self {
        Self {
            pv: api::PersistentVolume {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..Default::default()
                },
                spec: Some(api::PersistentVolumeSpec {
                    access_modes: Some(vec!["ReadWriteOnce".into()]),
                    capacity: Some(BTreeMap::from([(
                        "storage".to_string(),
                        Quantity("1Gi".into()),
                    )])),
                    ..Default::default()
                }),
                status: None,
            },
        }
    }

    fn spec(&mut self) -> &mut api::PersistentVolumeSpec {
        self.pv.spec.get_or_insert_with(Default::default)
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.pv
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(key.into(), value.into());
        self
    }

    /// Sets `spec.storageClassName`.
    pub fn storage_class(mut self, class: &str) -> Self {
        self.spec().storage_class_name = Some(class.into());
        self
    }

    /// A CSI volume of `driver` with handle `handle`.
    pub fn csi(mut self, driver: &str, handle: &str) -> Self {
        self.spec().csi = Some(api::CSIPersistentVolumeSource {
            driver: driver.into(),
            volume_handle: handle.into(),
            ..Default::default()
        });
        self
    }

    /// An in-tree AWS EBS volume.
    pub fn aws_ebs(mut self, volume_id: &str) -> Self {
        self.spec().aws_elastic_block_store = Some(api::AWSElasticBlockStoreVolumeSource {
            volume_id: volume_id.into(),
            ..Default::default()
        });
        self
    }

    /// An in-tree GCE persistent disk.
    pub fn gce_pd(mut self, pd_name: &str) -> Self {
        self.spec().gce_persistent_disk = Some(api::GCEPersistentDiskVolumeSource {
            pd_name: pd_name.into(),
            ..Default::default()
        });
        self
    }

    /// A host path volume (not attachable).
    pub fn host_path(mut self, path: &str) -> Self {
        self.spec().host_path = Some(api::HostPathVolumeSource {
            path: path.into(),
            ..Default::default()
        });
        self
    }

    /// Records the claim the volume is bound to.
    pub fn claim_ref(mut self, namespace: &str, name: &str) -> Self {
        self.spec().claim_ref = Some(api::ObjectReference {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            ..Default::default()
        });
        self
    }

    /// Sets `spec.capacity.storage`.
    pub fn capacity(mut self, size: &str) -> Self {
        self.spec().capacity = Some(BTreeMap::from([(
            "storage".to_string(),
            Quantity(size.into()),
        )]));
        self
    }

    /// Sets the access modes.
    pub fn access_modes(mut self, modes: &[&str]) -> Self {
        self.spec().access_modes = Some(modes.iter().map(|m| m.to_string()).collect());
        self
    }

    /// Sets `spec.volumeMode`.
    pub fn volume_mode(mut self, mode: &str) -> Self {
        self.spec().volume_mode = Some(mode.into());
        self
    }

    /// Sets `status.phase`.
    pub fn phase(mut self, phase: &str) -> Self {
        self.pv.status.get_or_insert_with(Default::default).phase = Some(phase.into());
        self
    }

    /// A volume the PV controller made Available (no claim).
    pub fn available(self) -> Self {
        self.phase("Available")
    }

    /// Records the claim the volume is bound to, with the claim's UID (None: by name only).
    pub fn claim_ref_uid(mut self, namespace: &str, name: &str, uid: Option<&str>) -> Self {
        self.spec().claim_ref = Some(api::ObjectReference {
            kind: Some("PersistentVolumeClaim".into()),
            api_version: Some("v1".into()),
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            uid: uid.map(str::to_string),
            ..Default::default()
        });
        self
    }

    /// Bound to the claim: its claimRef with the UID, and phase Bound.
    pub fn bound_to(self, namespace: &str, name: &str, uid: &str) -> Self {
        self.claim_ref_uid(namespace, name, Some(uid))
            .phase("Bound")
    }

    /// Adds a required node affinity term.
    pub fn node_term(mut self, term: api::NodeSelectorTerm) -> Self {
        self.spec()
            .node_affinity
            .get_or_insert_with(Default::default)
            .required
            .get_or_insert_with(Default::default)
            .node_selector_terms
            .push(term);
        self
    }

    /// Adds the node affinity term `key In values`.
    pub fn affinity(self, key: &str, values: &[&str]) -> Self {
        self.node_term(crate::node_term(key, "In", values))
    }

    /// Sets `metadata.resourceVersion`.
    pub fn resource_version(mut self, rv: &str) -> Self {
        self.pv.metadata.resource_version = Some(rv.into());
        self
    }

    /// Marks the volume for deletion.
    pub fn deleting(mut self) -> Self {
        self.pv.metadata.deletion_timestamp = Some(deleting());
        self
    }

    /// Applies any change.
    pub fn with(mut self, f: impl FnOnce(&mut api::PersistentVolume)) -> Self {
        f(&mut self.pv);
        self
    }

    /// The API object.
    pub fn build(self) -> api::PersistentVolume {
        self.pv
    }
}

/// A StorageClass; `wait_for_first_consumer` picks the binding mode (None leaves it unset).
pub fn storage_class(
    name: &str,
    provisioner: &str,
    wait_for_first_consumer: Option<bool>,
) -> storage::StorageClass {
    storage::StorageClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        provisioner: provisioner.into(),
        volume_binding_mode: wait_for_first_consumer.map(|w| {
            if w {
                "WaitForFirstConsumer".into()
            } else {
                "Immediate".into()
            }
        }),
        ..Default::default()
    }
}

/// A CSINode for `node` with these drivers and their attach limits (None: no limit).
pub fn csi_node(node: &str, drivers: &[(&str, Option<i32>)]) -> storage::CSINode {
    storage::CSINode {
        metadata: ObjectMeta {
            name: Some(node.into()),
            ..Default::default()
        },
        spec: storage::CSINodeSpec {
            drivers: drivers
                .iter()
                .map(|(name, count)| storage::CSINodeDriver {
                    name: (*name).into(),
                    node_id: node.into(),
                    allocatable: count.map(|c| storage::VolumeNodeResources { count: Some(c) }),
                    ..Default::default()
                })
                .collect(),
        },
        ..Default::default()
    }
}

/// A VolumeAttachment of the volume `pv` to `node` by `attacher`.
pub fn volume_attachment(
    name: &str,
    node: &str,
    attacher: &str,
    pv: &str,
) -> storage::VolumeAttachment {
    storage::VolumeAttachment {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: storage::VolumeAttachmentSpec {
            attacher: attacher.into(),
            node_name: node.into(),
            source: storage::VolumeAttachmentSource {
                persistent_volume_name: Some(pv.into()),
                ..Default::default()
            },
        },
        status: None,
    }
}

/// Builds a `storage.k8s.io/v1` StorageClass. Defaults: binding mode Immediate, reclaim
/// policy Delete (the API server's defaults).
#[derive(Debug, Clone)]
pub struct StorageClassBuilder {
    sc: storage::StorageClass,
}

impl StorageClassBuilder {
    /// A class named `name` provisioned by `provisioner`.
    pub fn new(name: &str, provisioner: &str) -> Self {
        Self {
            sc: storage::StorageClass {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..Default::default()
                },
                provisioner: provisioner.into(),
                volume_binding_mode: Some("Immediate".into()),
                reclaim_policy: Some("Delete".into()),
                ..Default::default()
            },
        }
    }

    /// `volumeBindingMode: WaitForFirstConsumer`.
    pub fn wait_for_first_consumer(mut self) -> Self {
        self.sc.volume_binding_mode = Some("WaitForFirstConsumer".into());
        self
    }

    /// Adds an allowed topology term `key In values`.
    pub fn allowed_topology(mut self, key: &str, values: &[&str]) -> Self {
        self.sc
            .allowed_topologies
            .get_or_insert_with(Default::default)
            .push(api::TopologySelectorTerm {
                match_label_expressions: Some(vec![api::TopologySelectorLabelRequirement {
                    key: key.into(),
                    values: values.iter().map(|v| v.to_string()).collect(),
                }]),
            });
        self
    }

    /// Applies any change.
    pub fn with(mut self, f: impl FnOnce(&mut storage::StorageClass)) -> Self {
        f(&mut self.sc);
        self
    }

    /// The API object.
    pub fn build(self) -> storage::StorageClass {
        self.sc
    }
}

/// A CSIDriver, with `storageCapacity` as given.
pub fn csi_driver(name: &str, storage_capacity: bool) -> storage::CSIDriver {
    storage::CSIDriver {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: storage::CSIDriverSpec {
            storage_capacity: Some(storage_capacity),
            ..Default::default()
        },
    }
}

/// A CSIStorageCapacity in `kube-system` for `class`, reachable from nodes with the
/// `topology` labels (None: from no node).
pub fn csi_storage_capacity(
    name: &str,
    class: &str,
    capacity: Option<&str>,
    maximum_volume_size: Option<&str>,
    topology: Option<&[(&str, &str)]>,
) -> storage::CSIStorageCapacity {
    storage::CSIStorageCapacity {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("kube-system".into()),
            ..Default::default()
        },
        storage_class_name: class.into(),
        capacity: capacity.map(|c| Quantity(c.into())),
        maximum_volume_size: maximum_volume_size.map(|c| Quantity(c.into())),
        node_topology: topology.map(crate::selector),
    }
}
