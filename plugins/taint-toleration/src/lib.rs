//! TaintToleration: a pod may only run on nodes whose NoSchedule and NoExecute taints it
//! tolerates, and it prefers nodes with fewer PreferNoSchedule taints it does not tolerate.
//!
//! Filter, PreScore, Score (with a reversed NormalizeScore) and enqueue extensions. It reads
//! the compiled taints of the node and tolerations of the pod only; it keeps nothing between
//! cycles and must not look at other pods or other nodes.

use kubesched_framework::events::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
use kubesched_framework::model::{
    NodeInfo, PodInfo, Taint, TaintEffect, Toleration, find_untolerated_with, tolerated_with,
};
use kubesched_framework::normalize::default_normalize_score;
use kubesched_framework::{
    CycleState, EnqueueExtensions, Feature, FilterPlugin, Handle, MAX_NODE_SCORE, PluginError,
    PreScorePlugin, Remedy, ScorePlugin, Status,
};
use std::sync::Arc;

/// The plugin's registered name.
pub const NAME: &str = "TaintToleration";
/// The Filter reason for a node with a NoSchedule or NoExecute taint the pod does not
/// tolerate. Since v1.34 upstream names no taint here (the taint only goes to a debug log),
/// so nodes with different taints are counted together in the FailedScheduling message;
/// v1.37's plugin returns the same string (checked against its taint_toleration.go).
pub const ERR_REASON_UNTOLERATED: &str = "node(s) had untolerated taint(s)";
/// The Error given by Score when PreScore did not run for the pod.
pub const ERR_NO_PRE_SCORE_STATE: &str = "TaintToleration: no PreScore state in the cycle";

/// The taint effects Filter enforces.
const DO_NOT_SCHEDULE: [TaintEffect; 2] = [TaintEffect::NoSchedule, TaintEffect::NoExecute];

/// The TaintToleration plugin.
#[derive(Debug, Default, Clone, Copy)]
pub struct TaintToleration {
    /// TaintTolerationComparisonOperators: tolerations with `Lt` / `Gt` compare their
    /// value with the taint's as integers (alpha and off in v1.35-v1.37); off, they
    /// tolerate nothing.
    comparisons: bool,
}

impl TaintToleration {
    /// Builds the plugin; it reads only the feature gates from the handle.
    pub fn new(handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self::with_comparisons(
            handle
                .features()
                .enabled(Feature::TaintTolerationComparisonOperators),
        ))
    }

    /// The plugin with TaintTolerationComparisonOperators as given.
    pub fn with_comparisons(comparisons: bool) -> Self {
        Self { comparisons }
    }
}

kubesched_framework::register_plugin! {
    name: NAME,
    plugin: TaintToleration,
    factory: TaintToleration::new,
}

/// The pod's tolerations that can tolerate a PreferNoSchedule taint, computed once per pod.
#[derive(Debug, Clone, Default)]
struct PreScoreState {
    tolerations: Vec<Toleration>,
}

/// How many PreferNoSchedule taints of the node none of the tolerations tolerate.
fn count_intolerable_prefer_no_schedule(
    taints: &[Taint],
    tolerations: &[Toleration],
    comparisons: bool,
) -> i64 {
    let count = taints
        .iter()
        .filter(|t| {
            t.effect == TaintEffect::PreferNoSchedule
                && !tolerated_with(t, tolerations, comparisons)
        })
        .count();
    i64::try_from(count).unwrap_or(i64::MAX)
}

impl FilterPlugin for TaintToleration {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(n) = node.node() else {
            return Status::error("node not found");
        };
        // Most nodes have no taint: answer from NodeInfo's flag without touching the node.
        if !node.node_has_taints() {
            return Status::success();
        }
        match find_untolerated_with(
            &n.taints,
            &pod.tolerations,
            &DO_NOT_SCHEDULE,
            self.comparisons,
        ) {
            None => Status::success(),
            Some(taint) => {
                tracing::debug!(
                    pod = %pod.key(),
                    node = %n.name,
                    taint_key = %taint.key,
                    taint_value = %taint.value,
                    effect = ?taint.effect,
                    "node had an untolerated taint"
                );
                Status::unresolvable(ERR_REASON_UNTOLERATED)
            }
        }
    }

    fn remedies(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Vec<Remedy> {
        node.node()
            .and_then(|n| {
                find_untolerated_with(
                    &n.taints,
                    &pod.tolerations,
                    &DO_NOT_SCHEDULE,
                    self.comparisons,
                )
            })
            .map(|t| Remedy::Toleration {
                key: t.key.clone(),
                value: t.value.clone(),
                effect: t.effect.as_str().to_string(),
            })
            .into_iter()
            .collect()
    }
}

impl PreScorePlugin for TaintToleration {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, _nodes: &[Arc<NodeInfo>]) -> Status {
        // An empty effect tolerates every effect, PreferNoSchedule included.
        let tolerations = pod
            .tolerations
            .iter()
            .filter(|t| t.effect.is_none_or(|e| e == TaintEffect::PreferNoSchedule))
            .cloned()
            .collect();
        state.write(PreScoreState { tolerations });
        Status::success()
    }
}

impl ScorePlugin for TaintToleration {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let s = state
            .read::<PreScoreState>()
            .ok_or_else(|| Status::error(ERR_NO_PRE_SCORE_STATE))?;
        if !node.has_node() {
            return Err(Status::error("node not found"));
        }
        if !node.node_has_taints() {
            return Ok(0);
        }
        let n = node.node().ok_or_else(|| Status::error("node not found"))?;
        Ok(count_intolerable_prefer_no_schedule(
            &n.taints,
            &s.tolerations,
            self.comparisons,
        ))
    }

    fn has_normalize_score(&self) -> bool {
        true
    }

    fn normalize_score(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
        scores: &mut [i64],
    ) -> Status {
        // Fewer intolerable taints is better: reversed.
        default_normalize_score(MAX_NODE_SCORE, true, scores);
        Status::success()
    }
}

/// Queue when the node changed from having an untolerated NoSchedule/NoExecute taint
/// (or not existing) to having none.
fn after_node_change(
    comparisons: bool,
    pod: &PodInfo,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let new = new
        .and_then(EventObject::as_node)
        .ok_or("expected a node as the new object")?;
    let was_untolerated = match old {
        None => true,
        Some(o) => {
            let o = o.as_node().ok_or("expected a node as the old object")?;
            find_untolerated_with(&o.taints, &pod.tolerations, &DO_NOT_SCHEDULE, comparisons)
                .is_some()
        }
    };
    let is_untolerated =
        find_untolerated_with(&new.taints, &pod.tolerations, &DO_NOT_SCHEDULE, comparisons)
            .is_some();
    Ok(if was_untolerated && !is_untolerated {
        QueueingHint::Queue
    } else {
        QueueingHint::Skip
    })
}

/// Queue when the pod whose tolerations changed is the rejected pod itself.
fn after_pod_toleration_change(
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

impl EnqueueExtensions for TaintToleration {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        let comparisons = self.comparisons;
        vec![
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD.union(ActionType::UPDATE_NODE_TAINT),
                move |pod, old, new| after_node_change(comparisons, pod, old, new),
            ),
            ClusterEventWithHint::with_hint(
                EventResource::TargetPod,
                ActionType::UPDATE_POD_TOLERATION,
                after_pod_toleration_change,
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_framework::model::TaintEffect::*;
    use kubesched_framework::model::find_untolerated;
    use kubesched_testing::{NodeBuilder, PluginHarness, PodBuilder, node_info};

    fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
        Taint {
            key: key.into(),
            value: value.into(),
            effect,
        }
    }

    /// Runs Filter for `pod` on a node with `taints` and checks the outcome: None means
    /// Success, Some(taint) means rejected because of that taint (the reason itself names
    /// no taint since v1.34, so the taint is only what the test expects was found).
    fn check_filter(pod: PodBuilder, taints: &[(&str, &str, &str)], want: Option<Taint>) {
        let mut node = NodeBuilder::new("n1");
        for (k, v, e) in taints {
            node = node.taint(k, v, e);
        }
        let info = pod.info();
        let run = PluginHarness::new(TaintToleration::default())
            .run(&info, &[node_info(node.clone(), &[])]);
        let status = run.filter_of("n1").expect("filter ran");
        let compiled = node_info(node, &[]);
        let found = find_untolerated(
            &compiled.node().expect("node").taints,
            &info.tolerations,
            &DO_NOT_SCHEDULE,
        )
        .cloned();
        assert_eq!(found, want, "untolerated taint");
        match want {
            None => assert_eq!(status.code, "Success", "{status:?}"),
            Some(_) => {
                assert_eq!(status.code, "UnschedulableAndUnresolvable");
                assert_eq!(status.reasons, vec![ERR_REASON_UNTOLERATED.to_string()]);
            }
        }
    }

    #[test]
    fn numeric_operators_behind_their_gate() {
        // TaintTolerationComparisonOperators (KEP-5471): Gt tolerates a taint whose value
        // is a greater integer, Lt a smaller one. Off (its default: v1.34 had no such
        // operators, v1.35-v1.37 keep it alpha) the toleration tolerates nothing.
        // (pod toleration operator and value, node taint value, tolerated with the gate on)
        let rows = [
            ("Gt", "5", "10", true),
            ("Gt", "10", "10", false),
            ("Gt", "10", "3", false),
            ("Lt", "10", "3", true),
            ("Lt", "3", "3", false),
            ("Lt", "3", "10", false),
            ("Gt", "-1", "0", true),
            ("Gt", "5", "many", false),
        ];
        for (op, value, taint_value, want) in rows {
            let pod = PodBuilder::new("p").toleration("capacity", op, value, "NoSchedule");
            let node = || NodeBuilder::new("n1").taint("capacity", taint_value, "NoSchedule");
            for (comparisons, want) in [(true, want), (false, false)] {
                let run = PluginHarness::new(TaintToleration::with_comparisons(comparisons))
                    .run(&pod.clone().info(), &[node_info(node(), &[])]);
                let status = run.filter_of("n1").expect("filter ran");
                if want {
                    assert_eq!(status.code, "Success", "{op} {value} vs {taint_value}");
                } else {
                    assert_eq!(
                        status.reasons,
                        vec![ERR_REASON_UNTOLERATED.to_string()],
                        "{op} {value} vs {taint_value}, gate {comparisons}"
                    );
                }
            }
        }
        // Score counts a PreferNoSchedule taint a Gt toleration covers as tolerated.
        let infos = [
            node_info(
                NodeBuilder::new("big").taint("capacity", "10", "PreferNoSchedule"),
                &[],
            ),
            node_info(
                NodeBuilder::new("small").taint("capacity", "2", "PreferNoSchedule"),
                &[],
            ),
        ];
        let pod = PodBuilder::new("p")
            .toleration("capacity", "Gt", "5", "")
            .info();
        let run = PluginHarness::new(TaintToleration::with_comparisons(true)).run(&pod, &infos);
        let raw: Vec<_> = run.nodes.iter().map(|n| n.score).collect();
        assert_eq!(raw, vec![Some(0), Some(1)]);
        // The registered factory reads the gate from the handle.
        let on = kubesched_framework::FeatureGates::defaults()
            .with(Feature::TaintTolerationComparisonOperators, true)
            .expect("alpha gate");
        let harness = PluginHarness::from_registry(
            NAME,
            None,
            kubesched_framework::Handle::builder().features(on),
        )
        .expect("registered");
        let run = harness.run(
            &pod,
            &[node_info(
                NodeBuilder::new("big").taint("capacity", "10", "NoSchedule"),
                &[],
            )],
        );
        assert_eq!(run.filter_of("big").expect("filter").code, "Success");
    }

    #[test]
    fn reason_matches_v1_34() {
        // v1.34 stopped naming the taint in the reason.
        assert_eq!(ERR_REASON_UNTOLERATED, "node(s) had untolerated taint(s)");
    }

    #[test]
    fn filter_table() {
        // A pod without tolerations fits an untainted node.
        check_filter(PodBuilder::new("plain"), &[], None);
        // ... and not a node with a NoSchedule taint.
        check_filter(
            PodBuilder::new("plain"),
            &[("dedicated", "user1", "NoSchedule")],
            Some(taint("dedicated", "user1", NoSchedule)),
        );
        // NoExecute is enforced too.
        check_filter(
            PodBuilder::new("plain"),
            &[("evict", "", "NoExecute")],
            Some(taint("evict", "", NoExecute)),
        );
        // An Equal toleration with the same key, value and effect.
        check_filter(
            PodBuilder::new("tolerates").toleration("dedicated", "Equal", "user1", "NoSchedule"),
            &[("dedicated", "user1", "NoSchedule")],
            None,
        );
        // Another value is not tolerated.
        check_filter(
            PodBuilder::new("wrong-value").toleration("dedicated", "Equal", "user2", "NoSchedule"),
            &[("dedicated", "user1", "NoSchedule")],
            Some(taint("dedicated", "user1", NoSchedule)),
        );
        // Exists ignores the value.
        check_filter(
            PodBuilder::new("exists").toleration("dedicated", "Exists", "", "NoSchedule"),
            &[("dedicated", "user1", "NoSchedule")],
            None,
        );
        // An empty effect tolerates every effect.
        check_filter(
            PodBuilder::new("any-effect").toleration("dedicated", "Equal", "user1", ""),
            &[
                ("dedicated", "user1", "NoSchedule"),
                ("dedicated", "user1", "NoExecute"),
            ],
            None,
        );
        // A toleration of another effect does not help.
        check_filter(
            PodBuilder::new("other-effect").toleration("dedicated", "Equal", "user1", "NoExecute"),
            &[("dedicated", "user1", "NoSchedule")],
            Some(taint("dedicated", "user1", NoSchedule)),
        );
        // PreferNoSchedule never rejects.
        check_filter(
            PodBuilder::new("soft"),
            &[("soft", "x", "PreferNoSchedule")],
            None,
        );
        // The first untolerated hard taint is reported.
        check_filter(
            PodBuilder::new("partial").toleration("a", "Exists", "", ""),
            &[
                ("soft", "", "PreferNoSchedule"),
                ("a", "1", "NoSchedule"),
                ("b", "2", "NoSchedule"),
                ("c", "3", "NoExecute"),
            ],
            Some(taint("b", "2", NoSchedule)),
        );
        // Exists with an empty key tolerates everything.
        check_filter(
            PodBuilder::new("wildcard").toleration("", "Exists", "", ""),
            &[("a", "1", "NoSchedule"), ("b", "2", "NoExecute")],
            None,
        );
    }

    /// Scores `pod` on nodes given as lists of taints; returns (raw, normalised) per node.
    fn scores(pod: PodBuilder, nodes: &[&[(&str, &str, &str)]]) -> Vec<(i64, i64)> {
        let infos: Vec<_> = nodes
            .iter()
            .enumerate()
            .map(|(i, taints)| {
                let mut n = NodeBuilder::new(&format!("n{i}"));
                for (k, v, e) in *taints {
                    n = n.taint(k, v, e);
                }
                node_info(n, &[])
            })
            .collect();
        let run = PluginHarness::new(TaintToleration::default()).run(&pod.info(), &infos);
        assert_eq!(
            run.pre_score.as_ref().map(|s| s.code.as_str()),
            Some("Success")
        );
        run.nodes
            .iter()
            .map(|n| {
                (
                    n.score.expect("scored"),
                    n.normalized_score.expect("normalised"),
                )
            })
            .collect()
    }

    #[test]
    fn score_table() {
        // Tolerated PreferNoSchedule taints cost nothing; the node with fewer untolerated
        // ones wins.
        assert_eq!(
            scores(
                PodBuilder::new("p").toleration("foo", "Equal", "bar", "PreferNoSchedule"),
                &[
                    &[("foo", "bar", "PreferNoSchedule")],
                    &[("foo", "blah", "PreferNoSchedule")],
                ],
            ),
            vec![(0, 100), (1, 0)]
        );
        // Counting: 0, 1 and 2 intolerable taints.
        assert_eq!(
            scores(
                PodBuilder::new("p").toleration("cpu-type", "Equal", "arm64", "PreferNoSchedule"),
                &[
                    &[],
                    &[
                        ("cpu-type", "arm64", "PreferNoSchedule"),
                        ("gpu", "x", "PreferNoSchedule")
                    ],
                    &[
                        ("cpu-type", "x86", "PreferNoSchedule"),
                        ("gpu", "x", "PreferNoSchedule"),
                    ],
                ],
            ),
            vec![(0, 100), (1, 50), (2, 0)]
        );
        // Only PreferNoSchedule taints count; a NoSchedule-only toleration does not help
        // with a PreferNoSchedule taint.
        assert_eq!(
            scores(
                PodBuilder::new("p").toleration("foo", "Equal", "bar", "NoSchedule"),
                &[
                    &[("foo", "bar", "PreferNoSchedule")],
                    &[("foo", "bar", "NoSchedule")],
                ],
            ),
            vec![(1, 0), (0, 100)]
        );
        // An empty-effect toleration counts for scoring.
        assert_eq!(
            scores(
                PodBuilder::new("p").toleration("foo", "Exists", "", ""),
                &[&[("foo", "bar", "PreferNoSchedule")], &[]],
            ),
            vec![(0, 100), (0, 100)]
        );
    }

    #[test]
    fn score_without_pre_score_is_an_error() {
        let pod = PodBuilder::new("p").info();
        let node = node_info(NodeBuilder::new("n1"), &[]);
        let err = TaintToleration::default()
            .score(&CycleState::new(), &pod, &node)
            .expect_err("no state");
        assert!(err.is_error());
        assert_eq!(err.reasons(), [ERR_NO_PRE_SCORE_STATE]);
    }

    fn hints() -> Vec<ClusterEventWithHint> {
        TaintToleration::default().events_to_register()
    }

    #[test]
    fn registers_node_and_pod_toleration_events() {
        let events: Vec<_> = hints().iter().map(|e| e.event.label()).collect();
        assert_eq!(
            events,
            ["NodeAdd|UpdateNodeTaint", "TargetPodUpdatePodToleration"]
        );
        assert!(hints().iter().all(|e| e.hint.is_some()));
    }

    #[test]
    fn node_hint_table() {
        let events = hints();
        let hint = events[0].hint.as_ref().expect("node hint");
        let node = |taints: &[(&str, &str, &str)]| {
            let mut n = NodeBuilder::new("n1");
            for (k, v, e) in taints {
                n = n.taint(k, v, e);
            }
            EventObject::Node(n.model())
        };
        let pod = PodBuilder::new("p")
            .toleration("foo", "Equal", "bar", "NoSchedule")
            .info();
        let tolerated = node(&[("foo", "bar", "NoSchedule")]);
        let untolerated = node(&[("foo", "baz", "NoSchedule")]);
        let soft = node(&[("other", "", "PreferNoSchedule")]);
        let cases = [
            // A new node the pod tolerates.
            (None, &tolerated, QueueingHint::Queue),
            // A new node the pod does not tolerate.
            (None, &untolerated, QueueingHint::Skip),
            // A taint the pod did not tolerate was replaced by one it does.
            (Some(&untolerated), &tolerated, QueueingHint::Queue),
            // It was already fine: nothing new for this pod.
            (Some(&tolerated), &soft, QueueingHint::Skip),
            // Still untolerated.
            (Some(&untolerated), &untolerated, QueueingHint::Skip),
        ];
        for (i, (old, new, want)) in cases.into_iter().enumerate() {
            assert_eq!(hint(&pod, old, Some(new)), Ok(want), "case {i}");
        }
        assert!(hint(&pod, None, None).is_err());
    }

    #[test]
    fn pod_hint_queues_only_the_pod_itself() {
        let events = hints();
        let hint = events[1].hint.as_ref().expect("pod hint");
        let pod = PodBuilder::new("p").info();
        let same = EventObject::Pod(
            PodBuilder::new("p")
                .toleration("foo", "Exists", "", "")
                .info(),
        );
        let other = EventObject::Pod(PodBuilder::new("q").info());
        assert_eq!(hint(&pod, None, Some(&same)), Ok(QueueingHint::Queue));
        assert_eq!(hint(&pod, None, Some(&other)), Ok(QueueingHint::Skip));
    }

    #[test]
    fn registered_with_its_points() {
        let desc = kubesched_framework::registry::find(NAME).expect("registered");
        assert_eq!(
            kubesched_framework::implemented_points(&TaintToleration::default()),
            desc.extension_points().to_vec()
        );
    }

    #[test]
    fn snapshot_mixed_taints() {
        let nodes = [
            node_info(NodeBuilder::new("clean"), &[]),
            node_info(
                NodeBuilder::new("dedicated").taint("dedicated", "gpu", "NoSchedule"),
                &[],
            ),
            node_info(
                NodeBuilder::new("soft-one").taint("spot", "true", "PreferNoSchedule"),
                &[],
            ),
            node_info(
                NodeBuilder::new("soft-two")
                    .taint("spot", "true", "PreferNoSchedule")
                    .taint("legacy", "", "PreferNoSchedule"),
                &[],
            ),
            node_info(
                NodeBuilder::new("tolerated")
                    .taint("team", "a", "NoSchedule")
                    .taint("team", "a", "PreferNoSchedule"),
                &[],
            ),
            node_info(
                NodeBuilder::new("draining").taint(
                    "node.kubernetes.io/unreachable",
                    "",
                    "NoExecute",
                ),
                &[],
            ),
        ];
        let pod = PodBuilder::new("web")
            .toleration("team", "Equal", "a", "")
            .info();
        let run = PluginHarness::new(TaintToleration::default()).run(&pod, &nodes);
        insta::assert_yaml_snapshot!(run);
    }

    #[test]
    fn remedy_names_the_first_untolerated_taint() {
        let node = NodeBuilder::new("n1")
            .taint("soft", "", "PreferNoSchedule")
            .taint("tolerated", "x", "NoSchedule")
            .taint("node-role/gpu", "", "NoSchedule")
            .taint("dedicated", "ml", "NoExecute");
        let pod = PodBuilder::new("p")
            .toleration("tolerated", "Equal", "x", "NoSchedule")
            .info();
        let got =
            PluginHarness::new(TaintToleration::default()).remedies(&pod, &[node_info(node, &[])]);
        assert_eq!(
            got,
            vec![(
                "n1".to_string(),
                vec!["add a toleration for node-role/gpu:NoSchedule".to_string()]
            )]
        );
        let valued = NodeBuilder::new("n2").taint("dedicated", "ml", "NoExecute");
        let got = PluginHarness::new(TaintToleration::default())
            .remedies(&PodBuilder::new("p").info(), &[node_info(valued, &[])]);
        assert_eq!(
            got[0].1,
            vec!["add a toleration for dedicated=ml:NoExecute".to_string()]
        );
    }
}
