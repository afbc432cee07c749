//! The `PodGroup` custom resource (`scheduling.x-k8s.io/v1alpha1`), as
//! kubernetes-sigs/scheduler-plugins defines it, and the label that puts a pod in a group.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Serialize};

/// The API group of PodGroup.
pub const GROUP: &str = "scheduling.x-k8s.io";
/// The API version of PodGroup.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of PodGroup objects.
pub const API_VERSION: &str = "scheduling.x-k8s.io/v1alpha1";
/// The plural, as in URLs and RBAC rules.
pub const PLURAL: &str = "podgroups";

/// The label naming a pod's group (in the pod's namespace). This is scheduler-plugins'
/// current key; releases before v0.22 used `pod-group.scheduling.sigs.k8s.io`.
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

/// The phases a PodGroup goes through (`status.phase`).
pub mod phase {
    /// Fewer pods than `minMember` exist yet.
    pub const PENDING: &str = "Pending";
    /// Enough pods exist and the scheduler is placing them.
    pub const SCHEDULING: &str = "Scheduling";
    /// At least `minMember` pods are bound.
    pub const SCHEDULED: &str = "Scheduled";
    /// At least `minMember` pods are bound (and run).
    pub const RUNNING: &str = "Running";
    /// State unknown.
    pub const UNKNOWN: &str = "Unknown";
    /// At least `minMember` pods succeeded.
    pub const FINISHED: &str = "Finished";
    /// A pod failed while the group could no longer reach `minMember`.
    pub const FAILED: &str = "Failed";
}

/// A group of pods scheduled all together or not at all.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct PodGroup {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the group needs.
    #[serde(default)]
    pub spec: PodGroupSpec,
    /// What the group has reached.
    #[serde(default)]
    pub status: Option<PodGroupStatus>,
}

/// What a PodGroup asks for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupSpec {
    /// The fewest pods that must be placed together; none is bound before that many are.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub min_member: i32,
    /// The resources the group needs in the whole cluster before any of it is tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_resources: Option<BTreeMap<String, Quantity>>,
    /// How long placed pods wait at Permit for their siblings (the plugin's
    /// `permitWaitingTimeSeconds` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_timeout_seconds: Option<i32>,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// What a PodGroup has reached.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupStatus {
    /// One of [`phase`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The workloads (`namespace/owner`) whose pods form the group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occupied_by: Option<String>,
    /// Pods of the group bound to a node (and still live).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub scheduled: i32,
    /// Pods of the group running.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub running: i32,
    /// Pods of the group that succeeded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub succeeded: i32,
    /// Pods of the group that failed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed: i32,
    /// When the scheduler started placing the group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_start_time: Option<Time>,
}

impl PodGroup {
    /// `namespace/name`, the key the plugin's bookkeeping uses.
    pub fn full_name(&self) -> String {
        format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or_default(),
            self.metadata.name.as_deref().unwrap_or_default()
        )
    }

    /// The wait at Permit: the group's own `scheduleTimeoutSeconds` whenever it is set,
    /// else `default`. As upstream (`GetWaitTimeDuration`), a set value is taken as it is:
    /// 0 or a negative number means no wait at all, so a placed pod that does not
    /// complete the group times out at once (upstream's message shows the negative
    /// duration; ours says `0s`).
    pub fn permit_timeout(&self, default: std::time::Duration) -> std::time::Duration {
        match self.spec.schedule_timeout_seconds {
            Some(s) => std::time::Duration::from_secs(u64::try_from(s).unwrap_or(0)),
            None => default,
        }
    }
}

/// Written with its `apiVersion` and `kind`, as the API server expects a whole object.
impl Serialize for PodGroup {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Whole<'a> {
            api_version: &'a str,
            kind: &'a str,
            metadata: &'a ObjectMeta,
            spec: &'a PodGroupSpec,
            #[serde(skip_serializing_if = "Option::is_none")]
            status: &'a Option<PodGroupStatus>,
        }
        Whole {
            api_version: API_VERSION,
            kind: "PodGroup",
            metadata: &self.metadata,
            spec: &self.spec,
            status: &self.status,
        }
        .serialize(serializer)
    }
}

impl k8s_openapi::Resource for PodGroup {
    const API_VERSION: &'static str = API_VERSION;
    const GROUP: &'static str = GROUP;
    const KIND: &'static str = "PodGroup";
    const VERSION: &'static str = VERSION;
    const URL_PATH_SEGMENT: &'static str = PLURAL;
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for PodGroup {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_the_upstream_shape() {
        let yaml = serde_json::json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "gang", "namespace": "ml"},
            "spec": {"minMember": 8, "minResources": {"cpu": "8"}, "scheduleTimeoutSeconds": 30},
            "status": {"phase": "Pending", "scheduled": 3, "running": 2}
        });
        let pg: PodGroup = serde_json::from_value(yaml.clone()).expect("a valid PodGroup");
        assert_eq!(pg.full_name(), "ml/gang");
        assert_eq!(pg.spec.min_member, 8);
        assert_eq!(
            pg.permit_timeout(std::time::Duration::from_secs(60)),
            std::time::Duration::from_secs(30)
        );
        assert_eq!(serde_json::to_value(&pg).expect("serialises"), yaml);
    }

    #[test]
    fn the_crd_schema_keeps_every_status_field() {
        // A field missing from the CRD's structural schema is pruned by the API server:
        // the plugin's status writes would be lost.
        let crd = include_str!("../deploy/crd.yaml");
        let status_schema = crd
            .split_once("\n          status:\n")
            .expect("a status schema")
            .1;
        let full = PodGroupStatus {
            phase: Some(phase::SCHEDULED.into()),
            occupied_by: Some("ns/job".into()),
            scheduled: 1,
            running: 1,
            succeeded: 1,
            failed: 1,
            schedule_start_time: Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
        };
        let fields = serde_json::to_value(&full).expect("serialises");
        for field in fields.as_object().expect("an object").keys() {
            assert!(
                status_schema.contains(&format!("\n              {field}:")),
                "status.{field} is in deploy/crd.yaml"
            );
        }
    }

    #[test]
    fn a_set_timeout_is_taken_as_it_is_and_negative_means_none() {
        use std::time::Duration;
        let default = Duration::from_secs(60);
        let with = |timeout: Option<i32>| PodGroup {
            spec: PodGroupSpec {
                min_member: 2,
                schedule_timeout_seconds: timeout,
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(with(None).permit_timeout(default), default);
        assert_eq!(
            with(Some(5)).permit_timeout(default),
            Duration::from_secs(5)
        );
        assert_eq!(with(Some(0)).permit_timeout(default), Duration::ZERO);
        assert_eq!(with(Some(-30)).permit_timeout(default), Duration::ZERO);
        assert_eq!(with(Some(i32::MIN)).permit_timeout(default), Duration::ZERO);
    }
}
