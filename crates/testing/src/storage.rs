//! Builders for the storage objects volume plugins read: claims, volumes, classes, CSI
//! nodes and volume attachments, plus pod volumes of every kind those plugins look at.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::api::storage::v1 as storage;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::PodBuilder;

/// The annotation that marks a claim's binding as complete.
pub const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";

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
