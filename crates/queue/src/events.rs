//! Which cluster events a pod update is, as upstream's `PodSchedulingPropertiesChange`
//! interprets it.

use kubesched_framework::events::{ActionType, ClusterEvent, EventResource};
use kubesched_model::{PodInfo, Resource};

/// Whether any request of `old` is larger than (or absent from) `new`.
fn scaled_down(old: &Resource, new: &Resource) -> bool {
    old.milli_cpu > new.milli_cpu
        || old.memory > new.memory
        || old.ephemeral_storage > new.ephemeral_storage
        || old
            .scalar
            .iter()
            .any(|(name, amount)| *amount > new.scalar.get(name).copied().unwrap_or(0))
}

/// The names of the pod's generated ResourceClaims (`status.resourceClaimStatuses`).
fn generated_claims(
    pod: &PodInfo,
) -> Option<&Vec<kubesched_model::k8s_openapi::api::core::v1::PodResourceClaimStatus>> {
    pod.pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref())
        .filter(|v| !v.is_empty())
}

/// The events a pod update is for the other pods: one per kind of change that may make
/// them schedulable, or a single general `Update` when none of them applies. The resource
/// is `AssignedPod` when the new pod is bound, `UnscheduledPod` otherwise.
pub fn pod_update_events(old: &PodInfo, new: &PodInfo) -> Vec<ClusterEvent> {
    let resource = if new.node_name.is_some() {
        EventResource::AssignedPod
    } else {
        EventResource::UnscheduledPod
    };
    update_events(old, new, resource)
}

/// The events a pending pod's own update is for that pod: the same actions as
/// [`pod_update_events`], about `TargetPod` (v1.37, #135905), so that only registrations
/// for the pod itself (or the broad `Pod`) hear them.
pub fn target_pod_update_events(old: &PodInfo, new: &PodInfo) -> Vec<ClusterEvent> {
    update_events(old, new, EventResource::TargetPod)
}

fn update_events(old: &PodInfo, new: &PodInfo, resource: EventResource) -> Vec<ClusterEvent> {
    let mut actions = Vec::new();
    if old.labels != new.labels {
        actions.push(ActionType::UPDATE_POD_LABEL);
    }
    if scaled_down(&old.requests, &new.requests) {
        actions.push(ActionType::UPDATE_POD_SCALE_DOWN);
    }
    if !old.scheduling_gates.is_empty() && new.scheduling_gates.is_empty() {
        actions.push(ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED);
    }
    if old.tolerations != new.tolerations {
        actions.push(ActionType::UPDATE_POD_TOLERATION);
    }
    if generated_claims(old) != generated_claims(new) {
        actions.push(ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM);
    }
    if actions.is_empty() {
        actions.push(ActionType::UPDATE_OTHER);
    }
    actions
        .into_iter()
        .map(|a| ClusterEvent::new(resource, a))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_testing::PodBuilder;

    fn labels(events: &[ClusterEvent]) -> Vec<String> {
        events.iter().map(ClusterEvent::label).collect()
    }

    #[test]
    fn classifies_pod_updates() {
        let base = || PodBuilder::new("p").container(&[("cpu", "500m")]);
        let cases: Vec<(&str, PodBuilder, PodBuilder, Vec<&str>)> = vec![
            (
                "nothing scheduling-relevant",
                base(),
                base().priority(1),
                vec!["UnscheduledPodUpdate"],
            ),
            (
                "labels",
                base(),
                base().label("a", "b"),
                vec!["UnscheduledPodUpdatePodLabel"],
            ),
            (
                "scale down",
                base(),
                PodBuilder::new("p").container(&[("cpu", "100m")]),
                vec!["UnscheduledPodUpdatePodScaleDown"],
            ),
            (
                "scale up is no scale down",
                base(),
                PodBuilder::new("p").container(&[("cpu", "1")]),
                vec!["UnscheduledPodUpdate"],
            ),
            (
                "last gate removed",
                base().scheduling_gate("g"),
                base(),
                vec!["UnscheduledPodUpdatePodSchedulingGatesEliminated"],
            ),
            (
                "tolerations and labels",
                base(),
                base()
                    .label("x", "y")
                    .toleration("k", "Exists", "", "NoSchedule"),
                vec![
                    "UnscheduledPodUpdatePodLabel",
                    "UnscheduledPodUpdatePodToleration",
                ],
            ),
            (
                "bound pod",
                base().node("n"),
                base().node("n").label("a", "b"),
                vec!["AssignedPodUpdatePodLabel"],
            ),
        ];
        for (name, old, new, want) in cases {
            let got = pod_update_events(&old.info(), &new.info());
            assert_eq!(labels(&got), want, "{name}");
        }
    }

    #[test]
    fn a_pending_pods_own_update_is_about_the_target_pod() {
        let old = PodBuilder::new("p").container(&[("cpu", "500m")]);
        let new = PodBuilder::new("p")
            .container(&[("cpu", "500m")])
            .toleration("k", "Exists", "", "NoSchedule");
        assert_eq!(
            labels(&target_pod_update_events(&old.info(), &new.info())),
            vec!["TargetPodUpdatePodToleration"]
        );
    }
}
