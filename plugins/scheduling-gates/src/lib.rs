//! SchedulingGates: a pod that still carries `spec.schedulingGates` is not scheduled; it
//! waits in the queue's gated set until its last gate is removed.
//!
//! PreEnqueue and enqueue extensions only. It reads the pod's gate names and nothing else;
//! it never sees nodes.

use kubesched_framework::events::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
use kubesched_framework::model::PodInfo;
use kubesched_framework::{EnqueueExtensions, Handle, PluginError, PreEnqueuePlugin, Status};

/// The plugin's registered name.
pub const NAME: &str = "SchedulingGates";
/// The start of the PreEnqueue reason; the gate names follow as `[gate1 gate2]` (see
/// [`waiting_reason`]).
pub const ERR_REASON_WAITING_PREFIX: &str = "waiting for scheduling gates:";

/// The PreEnqueue reason for a gated pod, in upstream's words:
/// `waiting for scheduling gates: [gate1 gate2]`.
pub fn waiting_reason(gates: &[String]) -> String {
    format!("{ERR_REASON_WAITING_PREFIX} [{}]", gates.join(" "))
}

/// The SchedulingGates plugin.
#[derive(Debug, Default, Clone, Copy)]
pub struct SchedulingGates;

impl SchedulingGates {
    /// Builds the plugin (it needs nothing from the handle).
    pub fn new(_handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self)
    }
}

kubesched_framework::register_plugin! {
    name: NAME,
    plugin: SchedulingGates,
    factory: SchedulingGates::new,
}

impl PreEnqueuePlugin for SchedulingGates {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        if pod.scheduling_gates.is_empty() {
            Status::success()
        } else {
            Status::unresolvable(waiting_reason(&pod.scheduling_gates))
        }
    }
}

/// Only the gated pod's own update (its last gate removed) can let it in.
fn after_gates_eliminated(
    pod: &PodInfo,
    _old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let new = new
        .and_then(EventObject::as_pod)
        .ok_or("expected a pod as the new object")?;
    Ok(if new.uid == pod.uid {
        QueueingHint::Queue
    } else {
        QueueingHint::Skip
    })
}

impl EnqueueExtensions for SchedulingGates {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![ClusterEventWithHint::with_hint(
            EventResource::TargetPod,
            ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
            after_gates_eliminated,
        )]
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use kubesched_framework::Code;
    use kubesched_framework::registry;
    use kubesched_testing::{PluginHarness, PodBuilder, StatusView};

    #[test]
    fn pre_enqueue_table() {
        let rows: [(PodBuilder, Option<&str>); 3] = [
            (PodBuilder::new("ungated"), None),
            (
                PodBuilder::new("one-gate").scheduling_gate("example.com/quota"),
                Some("waiting for scheduling gates: [example.com/quota]"),
            ),
            (
                PodBuilder::new("two-gates")
                    .scheduling_gate("foo")
                    .scheduling_gate("bar"),
                Some("waiting for scheduling gates: [foo bar]"),
            ),
        ];
        for (pod, want) in rows {
            let pod = pod.info();
            let status = SchedulingGates.pre_enqueue(&pod);
            match want {
                None => assert!(status.is_success(), "{}: {status:?}", pod.name),
                Some(reason) => {
                    assert_eq!(
                        status.code(),
                        Code::UnschedulableAndUnresolvable,
                        "{}",
                        pod.name
                    );
                    assert_eq!(status.reasons(), [reason], "{}", pod.name);
                    assert_eq!(reason, waiting_reason(&pod.scheduling_gates));
                }
            }
        }
    }

    #[test]
    fn hint_queues_only_the_pod_itself() {
        let events = SchedulingGates.events_to_register();
        assert_eq!(events.len(), 1);
        assert_eq!(
            events[0].event.label(),
            "TargetPodUpdatePodSchedulingGatesEliminated"
        );
        let hint = events[0].hint.as_ref().expect("hint");
        let pod = PodBuilder::new("p").scheduling_gate("g").info();
        let same = EventObject::Pod(PodBuilder::new("p").info());
        let other = EventObject::Pod(PodBuilder::new("q").info());
        assert_eq!(hint(&pod, None, Some(&same)), Ok(QueueingHint::Queue));
        assert_eq!(hint(&pod, None, Some(&other)), Ok(QueueingHint::Skip));
        assert!(hint(&pod, None, None).is_err());
    }

    #[test]
    fn registered_with_its_points() {
        let desc = registry::find(NAME).expect("registered");
        assert_eq!(
            kubesched_framework::implemented_points(&SchedulingGates),
            desc.extension_points().to_vec()
        );
    }

    #[test]
    fn snapshot_through_the_framework() {
        let framework = PluginHarness::new(SchedulingGates).framework();
        let pods = [
            PodBuilder::new("ready"),
            PodBuilder::new("quota").scheduling_gate("example.com/quota"),
            PodBuilder::new("many")
                .scheduling_gate("example.com/quota")
                .scheduling_gate("example.com/volumes")
                .scheduling_gate("example.com/approval"),
        ];
        let results: BTreeMap<String, StatusView> = pods
            .into_iter()
            .map(|p| {
                let pod = p.info();
                let status = framework.run_pre_enqueue_plugins(&pod);
                (pod.key(), StatusView::from(&status))
            })
            .collect();
        insta::assert_yaml_snapshot!(results);
    }
}
