//! Storage classes of claims and volumes, read the way upstream's volume helpers read them:
//! the deprecated beta annotation wins over `spec.storageClassName`.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The deprecated annotation that still names a claim's or a volume's class.
pub const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

fn beta_class(meta: &ObjectMeta) -> Option<&str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
        .map(String::as_str)
}

/// The claim's class, or `None` when neither the annotation nor the field is set (the case
/// in which the default StorageClass is admitted onto it). `Some("")` is an explicit "no
/// class", which is not the same thing.
pub fn claim_class_if_set(pvc: &PersistentVolumeClaim) -> Option<&str> {
    beta_class(&pvc.metadata).or_else(|| pvc.spec.as_ref()?.storage_class_name.as_deref())
}

/// The claim's class, "" when it has none (what the scheduler's volume plugins compare).
pub fn claim_class(pvc: &PersistentVolumeClaim) -> &str {
    claim_class_if_set(pvc).unwrap_or_default()
}

/// The volume's class, "" when it has none.
pub fn volume_class(pv: &PersistentVolume) -> &str {
    beta_class(&pv.metadata)
        .or_else(|| pv.spec.as_ref()?.storage_class_name.as_deref())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, PersistentVolumeSpec};

    fn meta(annotation: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            annotations: annotation.map(|class| {
                [(BETA_STORAGE_CLASS_ANNOTATION.to_string(), class.to_string())].into()
            }),
            ..Default::default()
        }
    }

    fn claim(annotation: Option<&str>, field: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: meta(annotation),
            spec: Some(PersistentVolumeClaimSpec {
                storage_class_name: field.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_annotation_wins_over_the_field_and_unset_differs_from_empty() {
        let cases = [
            (None, None, None, ""),
            (None, Some(""), Some(""), ""),
            (None, Some("fast"), Some("fast"), "fast"),
            (Some("slow"), Some("fast"), Some("slow"), "slow"),
            (Some(""), Some("fast"), Some(""), ""),
        ];
        for (annotation, field, if_set, class) in cases {
            let pvc = claim(annotation, field);
            assert_eq!(claim_class_if_set(&pvc), if_set, "{annotation:?} {field:?}");
            assert_eq!(claim_class(&pvc), class, "{annotation:?} {field:?}");
        }
        assert_eq!(claim_class(&PersistentVolumeClaim::default()), "");
    }

    #[test]
    fn a_volume_reads_its_class_the_same_way() {
        let pv = PersistentVolume {
            metadata: meta(Some("slow")),
            spec: Some(PersistentVolumeSpec {
                storage_class_name: Some("fast".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(volume_class(&pv), "slow");
        assert_eq!(volume_class(&PersistentVolume::default()), "");
    }
}
