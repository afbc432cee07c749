//! The in-tree volume plugins upstream migrates to CSI drivers, and how one of their
//! volumes is named by the CSI driver (csi-translation-lib's names and volume handles), so
//! an in-tree volume and its CSI twin count as one attachment.

use kubesched_framework::model::k8s_openapi::api::core::v1::{PersistentVolume, Volume};

/// The zone label (GA).
const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
/// The zone label (beta).
const LABEL_BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
/// What csi-translation-lib writes where a GCE volume handle has no known part.
const UNSPECIFIED: &str = "UNSPECIFIED";

/// An in-tree plugin that csi-translation-lib knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InTreePlugin {
    /// The in-tree plugin name, e.g. `kubernetes.io/aws-ebs` (also its provisioner name).
    pub name: &'static str,
    /// The CSI driver it migrates to.
    pub driver: &'static str,
    /// Whether NodeVolumeLimits counts its volumes against the CSI driver's limit (upstream's
    /// `isCSIMigrationOn` in v1.34: migration is GA for these, on whenever the node has a
    /// CSINode object).
    pub counted: bool,
}

/// AWS EBS.
pub const AWS_EBS: InTreePlugin = plugin("kubernetes.io/aws-ebs", "ebs.csi.aws.com", true);
/// GCE persistent disk.
pub const GCE_PD: InTreePlugin = plugin("kubernetes.io/gce-pd", "pd.csi.storage.gke.io", true);
/// Azure disk.
pub const AZURE_DISK: InTreePlugin = plugin("kubernetes.io/azure-disk", "disk.csi.azure.com", true);
/// OpenStack Cinder.
pub const CINDER: InTreePlugin = plugin("kubernetes.io/cinder", "cinder.csi.openstack.org", true);
/// Portworx.
pub const PORTWORX: InTreePlugin =
    plugin("kubernetes.io/portworx-volume", "pxd.portworx.com", true);
/// vSphere: translatable, but not counted by the CSI limits plugin upstream.
pub const VSPHERE: InTreePlugin = plugin(
    "kubernetes.io/vsphere-volume",
    "csi.vsphere.vmware.com",
    false,
);
/// Azure file: translatable, not attachable, not counted.
pub const AZURE_FILE: InTreePlugin =
    plugin("kubernetes.io/azure-file", "file.csi.azure.com", false);

const fn plugin(name: &'static str, driver: &'static str, counted: bool) -> InTreePlugin {
    InTreePlugin {
        name,
        driver,
        counted,
    }
}

/// Every in-tree plugin the translation library knows.
pub const IN_TREE_PLUGINS: [InTreePlugin; 7] = [
    AWS_EBS, GCE_PD, AZURE_DISK, CINDER, PORTWORX, VSPHERE, AZURE_FILE,
];

/// The in-tree plugin of a provisioner name (a StorageClass's `provisioner`).
pub fn by_name(name: &str) -> Option<InTreePlugin> {
    IN_TREE_PLUGINS.iter().copied().find(|p| p.name == name)
}

/// A volume as its CSI driver names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiVolume {
    /// The in-tree plugin it came from.
    pub plugin: InTreePlugin,
    /// The CSI volume handle.
    pub handle: String,
}

/// The EBS volume ID of a Kubernetes volume ID (`aws://zone/vol-…` or a bare `vol-…`).
fn ebs_volume_id(id: &str) -> String {
    match id.strip_prefix("aws://") {
        Some(rest) => rest.rsplit('/').next().unwrap_or(rest).to_string(),
        None => id.to_string(),
    }
}

/// The region of GCE zones (`us-central1-a` → `us-central1`).
fn gce_region(zone: &str) -> &str {
    zone.rsplit_once('-').map_or(zone, |(r, _)| r)
}

fn gce_zonal_handle(zone: &str, pd: &str) -> String {
    format!("projects/{UNSPECIFIED}/zones/{zone}/disks/{pd}")
}

/// An inline pod volume of a migratable in-tree plugin, as its CSI driver names it.
pub fn inline(volume: &Volume) -> Option<CsiVolume> {
    let (plugin, handle) = if let Some(v) = &volume.aws_elastic_block_store {
        (AWS_EBS, ebs_volume_id(&v.volume_id))
    } else if let Some(v) = &volume.gce_persistent_disk {
        (GCE_PD, gce_zonal_handle(UNSPECIFIED, &v.pd_name))
    } else if let Some(v) = &volume.azure_disk {
        (AZURE_DISK, v.disk_uri.clone())
    } else if let Some(v) = &volume.cinder {
        (CINDER, v.volume_id.clone())
    } else if let Some(v) = &volume.portworx_volume {
        (PORTWORX, v.volume_id.clone())
    } else if let Some(v) = &volume.vsphere_volume {
        (VSPHERE, v.volume_path.clone())
    } else if let Some(v) = &volume.azure_file {
        (AZURE_FILE, v.share_name.clone())
    } else {
        return None;
    };
    Some(CsiVolume { plugin, handle })
}

/// An in-tree PersistentVolume of a migratable plugin, as its CSI driver names it.
pub fn persistent(pv: &PersistentVolume) -> Option<CsiVolume> {
    let spec = pv.spec.as_ref()?;
    let (plugin, handle) = if let Some(v) = &spec.aws_elastic_block_store {
        (AWS_EBS, ebs_volume_id(&v.volume_id))
    } else if let Some(v) = &spec.gce_persistent_disk {
        let labels = pv.metadata.labels.as_ref();
        let zones: Vec<&str> = labels
            .and_then(|l| l.get(LABEL_ZONE).or_else(|| l.get(LABEL_BETA_ZONE)))
            .map(|z| z.split("__").collect())
            .unwrap_or_default();
        let handle = match zones.as_slice() {
            [] => gce_zonal_handle(UNSPECIFIED, &v.pd_name),
            [zone] => gce_zonal_handle(zone, &v.pd_name),
            [first, ..] => format!(
                "projects/{UNSPECIFIED}/regions/{}/disks/{}",
                gce_region(first),
                v.pd_name
            ),
        };
        (GCE_PD, handle)
    } else if let Some(v) = &spec.azure_disk {
        (AZURE_DISK, v.disk_uri.clone())
    } else if let Some(v) = &spec.cinder {
        (CINDER, v.volume_id.clone())
    } else if let Some(v) = &spec.portworx_volume {
        (PORTWORX, v.volume_id.clone())
    } else if let Some(v) = &spec.vsphere_volume {
        (VSPHERE, v.volume_path.clone())
    } else if let Some(v) = &spec.azure_file {
        (AZURE_FILE, v.share_name.clone())
    } else {
        return None;
    };
    Some(CsiVolume { plugin, handle })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_framework::model::k8s_openapi::api::core::v1 as api;

    #[test]
    fn ebs_ids_lose_their_url_form() {
        assert_eq!(ebs_volume_id("aws://us-east-1a/vol-123"), "vol-123");
        assert_eq!(ebs_volume_id("vol-123"), "vol-123");
    }

    #[test]
    fn gce_handles_follow_the_volume_zones() {
        let pv = |zone: Option<&str>| api::PersistentVolume {
            metadata: api_meta(zone),
            spec: Some(api::PersistentVolumeSpec {
                gce_persistent_disk: Some(api::GCEPersistentDiskVolumeSource {
                    pd_name: "disk".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: None,
        };
        let handle = |zone| persistent(&pv(zone)).expect("migratable").handle;
        assert_eq!(
            handle(Some("us-central1-a")),
            "projects/UNSPECIFIED/zones/us-central1-a/disks/disk"
        );
        assert_eq!(
            handle(Some("us-central1-a__us-central1-b")),
            "projects/UNSPECIFIED/regions/us-central1/disks/disk"
        );
        assert_eq!(
            handle(None),
            "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/disk"
        );
    }

    fn api_meta(
        zone: Option<&str>,
    ) -> kubesched_framework::model::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta
    {
        kubesched_framework::model::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("pv".into()),
            labels: zone.map(|z| [(LABEL_ZONE.to_string(), z.to_string())].into()),
            ..Default::default()
        }
    }

    #[test]
    fn provisioner_names_map_to_drivers() {
        for (name, driver) in [
            ("kubernetes.io/aws-ebs", "ebs.csi.aws.com"),
            ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
            ("kubernetes.io/azure-disk", "disk.csi.azure.com"),
            ("kubernetes.io/cinder", "cinder.csi.openstack.org"),
            ("kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com"),
            ("kubernetes.io/portworx-volume", "pxd.portworx.com"),
        ] {
            assert_eq!(by_name(name).map(|p| p.driver), Some(driver), "{name}");
        }
        assert!(by_name("ebs.csi.aws.com").is_none());
        let counted: Vec<&str> = IN_TREE_PLUGINS
            .iter()
            .filter(|p| p.counted)
            .map(|p| p.name)
            .collect();
        assert_eq!(
            counted,
            [
                "kubernetes.io/aws-ebs",
                "kubernetes.io/gce-pd",
                "kubernetes.io/azure-disk",
                "kubernetes.io/cinder",
                "kubernetes.io/portworx-volume"
            ]
        );
    }
}
