//! NodeAffinity: a pod runs only on nodes that satisfy its `nodeSelector` and required node
//! affinity (and the scheduler-enforced `addedAffinity` of the plugin's args), and prefers
//! nodes that match its weighted preferred terms.
//!
//! PreFilter (Skip when there is nothing to check; narrows the candidates when every
//! required term pins node names with `metadata.name In`), Filter, PreScore, Score with a
//! NormalizeScore, and enqueue extensions. It reads the compiled selectors of the pod model
//! and the node's labels and name only; it must not look at other pods.

use std::collections::BTreeSet;
use std::sync::Arc;

use kubesched_framework::events::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
use kubesched_framework::model::k8s_openapi::api::core::v1 as api;
use kubesched_framework::model::selector::{Operator, Requirement, WeightedNodeSelectorTerm};
use kubesched_framework::model::{Labels, Node, NodeInfo, NodeSelector, NodeSelectorTerm, PodInfo};
use kubesched_framework::normalize::default_normalize_score;
use kubesched_framework::registry::PluginArgs;
use kubesched_framework::{
    CycleState, EnqueueExtensions, FilterPlugin, Handle, MAX_NODE_SCORE, PluginError,
    PreFilterPlugin, PreFilterResult, PreScorePlugin, Remedy, ScorePlugin, Status,
};

/// The plugin's registered name.
pub const NAME: &str = "NodeAffinity";
/// Filter reason: the node does not satisfy the pod's `nodeSelector` or required node
/// affinity.
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";
/// Filter reason: the node does not satisfy the required part of the plugin's
/// `addedAffinity`.
pub const ERR_REASON_ENFORCED: &str = "node(s) didn't match scheduler-enforced node affinity";
/// PreFilter reason: every required term pins node names, and no name satisfies them.
pub const ERR_REASON_CONFLICT: &str = "pod affinity terms conflict";

/// The field node selector terms may pin node names with.
const NODE_NAME_FIELD: &str = "metadata.name";

/// `NodeAffinityArgs`: node affinity the scheduler adds to every pod of the profile.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct NodeAffinityArgs {
    /// Required terms are ANDed with each pod's own node affinity; preferred terms are added
    /// to each pod's preferred terms for scoring.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub added_affinity: Option<api::NodeAffinity>,
}

/// The compiled form of `addedAffinity`.
#[derive(Debug, Clone, Default)]
struct AddedAffinity {
    required: Option<NodeSelector>,
    preferred: Vec<WeightedNodeSelectorTerm>,
}

impl NodeAffinityArgs {
    /// Compiles `addedAffinity`; errors name the field as upstream's validation does.
    fn compile(&self) -> Result<AddedAffinity, String> {
        let Some(affinity) = &self.added_affinity else {
            return Ok(AddedAffinity::default());
        };
        let required = affinity
            .required_during_scheduling_ignored_during_execution
            .as_ref()
            .map(|ns| {
                NodeSelector::compile(
                    ns,
                    "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                )
            })
            .transpose()
            .map_err(|e| e.to_string())?;
        let mut preferred = Vec::new();
        for (i, p) in affinity
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten()
            .enumerate()
        {
            let field =
                format!("addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
            let term =
                NodeSelectorTerm::compile(&p.preference, &field).map_err(|e| e.to_string())?;
            preferred.push(WeightedNodeSelectorTerm {
                weight: p.weight,
                term,
            });
        }
        Ok(AddedAffinity {
            required,
            preferred,
        })
    }
}

impl PluginArgs for NodeAffinityArgs {
    const KIND: &'static str = "NodeAffinityArgs";

    fn validate(&self, _gates: &kubesched_framework::FeatureGates) -> Result<(), String> {
        self.compile().map(|_| ())
    }
}

/// The NodeAffinity plugin.
#[derive(Debug, Clone, Default)]
pub struct NodeAffinity {
    added: Arc<AddedAffinity>,
}

impl NodeAffinity {
    /// Builds the plugin from its args.
    pub fn new(args: &NodeAffinityArgs, _handle: &Handle) -> Result<Self, PluginError> {
        let added = args
            .compile()
            .map_err(|e| PluginError(format!("{NAME}: {e}")))?;
        Ok(Self {
            added: Arc::new(added),
        })
    }
}

kubesched_framework::register_plugin! {
    name: NAME,
    plugin: NodeAffinity,
    args: NodeAffinityArgs,
    factory: NodeAffinity::new,
}

/// The node names a term pins: the intersection of its `metadata.name In` field
/// requirements, or None when it has none.
fn pinned_names(term: &NodeSelectorTerm) -> Option<BTreeSet<String>> {
    let mut names: Option<BTreeSet<String>> = None;
    for r in term
        .match_fields
        .iter()
        .filter(|r| r.key == NODE_NAME_FIELD && r.operator == Operator::In)
    {
        let values: BTreeSet<String> = r.values.iter().cloned().collect();
        names = Some(match names {
            None => values,
            Some(prev) => prev.intersection(&values).cloned().collect(),
        });
    }
    names
}

/// The node names the required terms allow, when every term pins names (terms are ORed,
/// so one term without a pin allows every node).
fn required_node_names(required: &NodeSelector) -> Option<BTreeSet<String>> {
    let mut all: Option<BTreeSet<String>> = None;
    for term in &required.terms {
        let names = pinned_names(term)?;
        all.get_or_insert_with(BTreeSet::new).extend(names);
    }
    all
}

/// Whether the node satisfies the scheduler-enforced required terms.
fn matches_added(added: &AddedAffinity, node: &Node) -> bool {
    added
        .required
        .as_ref()
        .is_none_or(|s| s.matches_in(&node.flat_labels, &node.name))
}

/// The sum of the weights of the terms the node matches.
fn preferred_score(terms: &[WeightedNodeSelectorTerm], node: &Node) -> i64 {
    terms
        .iter()
        .filter(|t| t.term.matches_in(&node.flat_labels, &node.name))
        .map(|t| i64::from(t.weight))
        .sum()
}

impl PreFilterPlugin for NodeAffinity {
    fn pre_filter(
        &self,
        _state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        // The pod model already holds the compiled selectors, so Filter needs no cycle state.
        let required = &pod.required_node_affinity;
        if required.is_empty() && self.added.required.is_none() {
            return (None, Status::skip());
        }
        let Some(names) = required.required.as_ref().and_then(required_node_names) else {
            return (None, Status::success());
        };
        if names.is_empty() {
            return (None, Status::unresolvable(ERR_REASON_CONFLICT));
        }
        (Some(PreFilterResult::nodes(names)), Status::success())
    }
}

impl FilterPlugin for NodeAffinity {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(n) = node.node() else {
            return Status::error("node not found");
        };
        if !matches_added(&self.added, n) {
            return Status::unresolvable(ERR_REASON_ENFORCED);
        }
        if !pod
            .required_node_affinity
            .matches_in(&n.flat_labels, &n.name)
        {
            return Status::unresolvable(ERR_REASON_POD);
        }
        Status::success()
    }

    fn remedies(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Vec<Remedy> {
        let Some(n) = node.node() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if let Some(required) = &self.added.required {
            selector_remedies(required, "addedAffinity", n, &mut out);
        }
        let pod_part = &pod.required_node_affinity;
        if let Some(selector) = &pod_part.node_selector {
            for r in selector
                .requirements
                .iter()
                .filter(|r| !r.matches(&n.labels))
            {
                out.push(label_remedy("nodeSelector", r, &n.labels));
            }
        }
        if let Some(required) = &pod_part.required {
            selector_remedies(required, "nodeAffinity", n, &mut out);
        }
        out
    }
}

/// When no term of `selector` matches the node: per term, the first requirement that fails.
fn selector_remedies(selector: &NodeSelector, source: &str, n: &Node, out: &mut Vec<Remedy>) {
    if selector.matches(&n.labels, &n.name) {
        return;
    }
    for (i, term) in selector.terms.iter().enumerate() {
        let source = if selector.terms.len() == 1 {
            source.to_string()
        } else {
            format!("{source} term {i}")
        };
        if let Some(r) = term
            .match_expressions
            .iter()
            .find(|r| !r.matches(&n.labels))
        {
            out.push(label_remedy(&source, r, &n.labels));
        } else if let Some(r) = term
            .match_fields
            .iter()
            .find(|r| !r.matches_value(Some(&n.name)))
        {
            out.push(Remedy::NodeLabel {
                source,
                requirement: describe_requirement(r),
                node_value: Some(n.name.clone()),
            });
        } else if term.match_expressions.is_empty() && term.match_fields.is_empty() {
            out.push(Remedy::NodeLabel {
                source,
                requirement: "a term with no requirements (it matches no node)".to_string(),
                node_value: None,
            });
        }
    }
}

fn label_remedy(source: &str, r: &Requirement, labels: &Labels) -> Remedy {
    Remedy::NodeLabel {
        source: source.to_string(),
        requirement: describe_requirement(r),
        node_value: labels.get(&r.key).cloned(),
    }
}

/// A requirement as it is written in a manifest: `disktype In [ssd]`, `gpu Exists`.
fn describe_requirement(r: &Requirement) -> String {
    match r.operator {
        Operator::In | Operator::NotIn => {
            format!("{} {:?} [{}]", r.key, r.operator, r.values.join(", "))
        }
        Operator::Exists | Operator::DoesNotExist => format!("{} {:?}", r.key, r.operator),
        Operator::Gt | Operator::Lt => format!("{} {:?} {}", r.key, r.operator, r.bound),
    }
}

impl PreScorePlugin for NodeAffinity {
    fn pre_score(
        &self,
        _state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> Status {
        if pod.preferred_node_affinity.is_empty() && self.added.preferred.is_empty() {
            return Status::skip();
        }
        Status::success()
    }
}

impl ScorePlugin for NodeAffinity {
    fn score(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let n = node.node().ok_or_else(|| Status::error("node not found"))?;
        Ok(preferred_score(&self.added.preferred, n)
            + preferred_score(&pod.preferred_node_affinity, n))
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
        default_normalize_score(MAX_NODE_SCORE, false, scores);
        Status::success()
    }
}

/// Queue when a node appears that the pod's required affinity (and the enforced one)
/// accepts, or an update turned a node the pod rejected into one it accepts.
fn after_node_change(
    added: &AddedAffinity,
    pod: &PodInfo,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let new = new
        .and_then(EventObject::as_node)
        .ok_or("expected a node as the new object")?;
    let accepts = |n: &Node| pod.required_node_affinity.matches(&n.labels, &n.name);
    if !matches_added(added, new) || !accepts(new) {
        return Ok(QueueingHint::Skip);
    }
    let Some(old) = old else {
        return Ok(QueueingHint::Queue);
    };
    let old = old.as_node().ok_or("expected a node as the old object")?;
    Ok(if accepts(old) {
        QueueingHint::Skip
    } else {
        QueueingHint::Queue
    })
}

impl EnqueueExtensions for NodeAffinity {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        let added = self.added.clone();
        vec![ClusterEventWithHint::with_hint(
            EventResource::Node,
            ActionType::ADD.union(ActionType::UPDATE_NODE_LABEL),
            move |pod: &PodInfo, old: Option<&EventObject>, new: Option<&EventObject>| {
                after_node_change(&added, pod, old, new)
            },
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_framework::registry;
    use kubesched_testing::{
        NodeBuilder, PluginHarness, PodBuilder, node_info, node_infos, node_term,
    };

    /// A term `metadata.name <op> [name]`.
    fn field_term(op: &str, name: &str) -> api::NodeSelectorTerm {
        api::NodeSelectorTerm {
            match_fields: Some(vec![api::NodeSelectorRequirement {
                key: NODE_NAME_FIELD.into(),
                operator: op.into(),
                values: Some(vec![name.into()]),
            }]),
            ..Default::default()
        }
    }

    /// A term with several requirements, each `key op values`; keys `metadata.name` go to
    /// matchFields.
    fn term(reqs: &[(&str, &str, &[&str])]) -> api::NodeSelectorTerm {
        let mut t = api::NodeSelectorTerm::default();
        for (key, op, values) in reqs {
            let r = api::NodeSelectorRequirement {
                key: key.to_string(),
                operator: op.to_string(),
                values: (!values.is_empty())
                    .then(|| values.iter().map(|v| v.to_string()).collect()),
            };
            if *key == NODE_NAME_FIELD {
                t.match_fields.get_or_insert_with(Vec::new).push(r);
            } else {
                t.match_expressions.get_or_insert_with(Vec::new).push(r);
            }
        }
        t
    }

    fn plugin(args: NodeAffinityArgs) -> NodeAffinity {
        NodeAffinity::new(&args, &Handle::default()).expect("valid args")
    }

    fn added_required(terms: Vec<api::NodeSelectorTerm>) -> NodeAffinityArgs {
        NodeAffinityArgs {
            added_affinity: Some(api::NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(api::NodeSelector {
                    node_selector_terms: terms,
                }),
                ..Default::default()
            }),
        }
    }

    fn added_preferred(terms: Vec<(i32, api::NodeSelectorTerm)>) -> NodeAffinityArgs {
        NodeAffinityArgs {
            added_affinity: Some(api::NodeAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(
                    terms
                        .into_iter()
                        .map(|(weight, preference)| api::PreferredSchedulingTerm {
                            weight,
                            preference,
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
        }
    }

    /// Runs Filter directly (it needs no cycle state): None means Success.
    fn check_filter(pl: &NodeAffinity, pod: PodBuilder, node: NodeBuilder, want: Option<&str>) {
        let pod = pod.info();
        let status = pl.filter(&CycleState::new(), &pod, &node_info(node, &[]));
        match want {
            None => assert!(status.is_success(), "{}: {status:?}", pod.name),
            Some(reason) => {
                assert_eq!(
                    status.code(),
                    kubesched_framework::Code::UnschedulableAndUnresolvable,
                    "{}",
                    pod.name
                );
                assert_eq!(status.reasons(), [reason], "{}", pod.name);
            }
        }
    }

    #[test]
    fn filter_table() {
        let pl = plugin(NodeAffinityArgs::default());
        let node = || NodeBuilder::new("n1").label("foo", "bar").label("gen", "5");
        let pod = PodBuilder::new;
        let rows: Vec<(PodBuilder, NodeBuilder, Option<&str>)> = vec![
            (pod("no-constraints"), node(), None),
            (
                pod("selector-match").node_selector(&[("foo", "bar")]),
                node(),
                None,
            ),
            (
                pod("selector-missing-label").node_selector(&[("baz", "x")]),
                node(),
                Some(ERR_REASON_POD),
            ),
            (
                pod("selector-all-pairs").node_selector(&[("foo", "bar"), ("baz", "x")]),
                node(),
                Some(ERR_REASON_POD),
            ),
            (
                pod("in").node_affinity("foo", "In", &["x", "bar"]),
                node(),
                None,
            ),
            (
                pod("in-miss").node_affinity("foo", "In", &["x"]),
                node(),
                Some(ERR_REASON_POD),
            ),
            (
                pod("not-in").node_affinity("foo", "NotIn", &["x"]),
                node(),
                None,
            ),
            (
                pod("not-in-miss").node_affinity("foo", "NotIn", &["bar"]),
                node(),
                Some(ERR_REASON_POD),
            ),
            (
                pod("exists").node_affinity("foo", "Exists", &[]),
                node(),
                None,
            ),
            (
                pod("does-not-exist").node_affinity("foo", "DoesNotExist", &[]),
                node(),
                Some(ERR_REASON_POD),
            ),
            (pod("gt").node_affinity("gen", "Gt", &["4"]), node(), None),
            (
                pod("gt-equal").node_affinity("gen", "Gt", &["5"]),
                node(),
                Some(ERR_REASON_POD),
            ),
            (pod("lt").node_affinity("gen", "Lt", &["6"]), node(), None),
            (
                pod("lt-not-a-number").node_affinity("foo", "Lt", &["6"]),
                node(),
                Some(ERR_REASON_POD),
            ),
            // Expressions of a term are ANDed.
            (
                pod("and-within-term")
                    .required_node_term(term(&[("foo", "In", &["bar"]), ("gen", "Gt", &["9"])])),
                node(),
                Some(ERR_REASON_POD),
            ),
            // Terms are ORed.
            (
                pod("or-across-terms")
                    .node_affinity("foo", "In", &["x"])
                    .node_affinity("gen", "Lt", &["9"]),
                node(),
                None,
            ),
            // An empty term matches no node, even with another failing term.
            (
                pod("empty-term")
                    .required_node_term(api::NodeSelectorTerm::default())
                    .node_affinity("foo", "In", &["x"]),
                node(),
                Some(ERR_REASON_POD),
            ),
            // A required affinity with no terms matches no node.
            (
                pod("no-terms").with(|p| {
                    p.spec.get_or_insert_with(Default::default).affinity = Some(api::Affinity {
                        node_affinity: Some(api::NodeAffinity {
                            required_during_scheduling_ignored_during_execution: Some(
                                api::NodeSelector::default(),
                            ),
                            ..Default::default()
                        }),
                        ..Default::default()
                    });
                }),
                node(),
                Some(ERR_REASON_POD),
            ),
            // Both nodeSelector and affinity must hold.
            (
                pod("selector-ok-affinity-not")
                    .node_selector(&[("foo", "bar")])
                    .node_affinity("gen", "Gt", &["7"]),
                node(),
                Some(ERR_REASON_POD),
            ),
            (
                pod("affinity-ok-selector-not")
                    .node_selector(&[("foo", "baz")])
                    .node_affinity("gen", "Gt", &["1"]),
                node(),
                Some(ERR_REASON_POD),
            ),
            // matchFields on the node's name.
            (
                pod("name-in").required_node_term(field_term("In", "n1")),
                node(),
                None,
            ),
            (
                pod("name-in-other").required_node_term(field_term("In", "n2")),
                node(),
                Some(ERR_REASON_POD),
            ),
            (
                pod("name-not-in").required_node_term(field_term("NotIn", "n2")),
                node(),
                None,
            ),
            (
                pod("name-and-label").required_node_term(term(&[
                    (NODE_NAME_FIELD, "In", &["n1"]),
                    ("foo", "In", &["x"]),
                ])),
                node(),
                Some(ERR_REASON_POD),
            ),
        ];
        for (pod, node, want) in rows {
            check_filter(&pl, pod, node, want);
        }
    }

    #[test]
    fn filter_with_added_affinity() {
        let pl = plugin(added_required(vec![node_term("zone", "In", &["a"])]));
        let in_zone = || {
            NodeBuilder::new("n1")
                .label("zone", "a")
                .label("foo", "bar")
        };
        let elsewhere = || {
            NodeBuilder::new("n2")
                .label("zone", "b")
                .label("foo", "bar")
        };
        check_filter(&pl, PodBuilder::new("plain"), in_zone(), None);
        check_filter(
            &pl,
            PodBuilder::new("plain"),
            elsewhere(),
            Some(ERR_REASON_ENFORCED),
        );
        // The enforced affinity is checked first.
        check_filter(
            &pl,
            PodBuilder::new("both-fail").node_selector(&[("foo", "x")]),
            elsewhere(),
            Some(ERR_REASON_ENFORCED),
        );
        check_filter(
            &pl,
            PodBuilder::new("pod-fails").node_selector(&[("foo", "x")]),
            in_zone(),
            Some(ERR_REASON_POD),
        );
        check_filter(
            &pl,
            PodBuilder::new("both-hold").node_affinity("foo", "In", &["bar"]),
            in_zone(),
            None,
        );
    }

    /// What PreFilter answered: code, reasons, narrowed node names.
    type PreFilterView = (kubesched_framework::Code, Vec<String>, Option<Vec<String>>);

    /// Runs PreFilter.
    fn pre_filter(pl: &NodeAffinity, pod: PodBuilder) -> PreFilterView {
        let (result, status) = pl.pre_filter(&mut CycleState::new(), &pod.info(), &[]);
        (
            status.code(),
            status.reasons().to_vec(),
            result
                .and_then(|r| r.node_names)
                .map(|n| n.into_iter().collect()),
        )
    }

    #[test]
    fn pre_filter_table() {
        use kubesched_framework::Code::*;
        let pl = plugin(NodeAffinityArgs::default());
        let names = |n: &[&str]| Some(n.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let ok = |n: Option<Vec<String>>| (Success, Vec::<String>::new(), n);
        let rows: Vec<(PodBuilder, PreFilterView)> = vec![
            (PodBuilder::new("nothing"), (Skip, vec![], None)),
            (
                PodBuilder::new("selector").node_selector(&[("a", "b")]),
                ok(None),
            ),
            (
                PodBuilder::new("expression").node_affinity("a", "In", &["b"]),
                ok(None),
            ),
            (
                PodBuilder::new("one-name").required_node_term(field_term("In", "n1")),
                ok(names(&["n1"])),
            ),
            // Terms are ORed: the names are united.
            (
                PodBuilder::new("two-names")
                    .required_node_term(field_term("In", "n1"))
                    .required_node_term(field_term("In", "n2")),
                ok(names(&["n1", "n2"])),
            ),
            // A name pin next to label expressions in the same term still narrows.
            (
                PodBuilder::new("name-and-label").required_node_term(term(&[
                    (NODE_NAME_FIELD, "In", &["n1"]),
                    ("a", "In", &["b"]),
                ])),
                ok(names(&["n1"])),
            ),
            // One term without a pin allows every node.
            (
                PodBuilder::new("one-unpinned-term")
                    .required_node_term(field_term("In", "n1"))
                    .node_affinity("a", "In", &["b"]),
                ok(None),
            ),
            // NotIn does not pin.
            (
                PodBuilder::new("not-in").required_node_term(field_term("NotIn", "n1")),
                ok(None),
            ),
            // Requirements of a term are intersected.
            (
                PodBuilder::new("same-name-twice").required_node_term(term(&[
                    (NODE_NAME_FIELD, "In", &["n1"]),
                    (NODE_NAME_FIELD, "In", &["n1"]),
                ])),
                ok(names(&["n1"])),
            ),
            (
                PodBuilder::new("conflict").required_node_term(term(&[
                    (NODE_NAME_FIELD, "In", &["n1"]),
                    (NODE_NAME_FIELD, "In", &["n2"]),
                ])),
                (
                    UnschedulableAndUnresolvable,
                    vec![ERR_REASON_CONFLICT.to_string()],
                    None,
                ),
            ),
            // A conflicting term next to a satisfiable one is fine.
            (
                PodBuilder::new("conflict-or-name")
                    .required_node_term(term(&[
                        (NODE_NAME_FIELD, "In", &["n1"]),
                        (NODE_NAME_FIELD, "In", &["n2"]),
                    ]))
                    .required_node_term(field_term("In", "n3")),
                ok(names(&["n3"])),
            ),
        ];
        for (pod, want) in rows {
            let name = pod.clone().info().name.clone();
            assert_eq!(pre_filter(&pl, pod), want, "{name}");
        }
        // With an enforced affinity there is always something to check.
        let enforced = plugin(added_required(vec![node_term("zone", "In", &["a"])]));
        assert_eq!(pre_filter(&enforced, PodBuilder::new("nothing")), ok(None));
        // Only enforced preferred terms: Filter has nothing to do.
        let preferred = plugin(added_preferred(vec![(3, node_term("zone", "In", &["a"]))]));
        assert_eq!(
            pre_filter(&preferred, PodBuilder::new("nothing")),
            (Skip, vec![], None)
        );
    }

    /// Scores `pod` over nodes; returns the PreScore code and (raw, normalised) per node.
    fn scores(
        pl: NodeAffinity,
        pod: PodBuilder,
        nodes: Vec<NodeBuilder>,
    ) -> (String, Vec<Option<(i64, i64)>>) {
        let run = PluginHarness::new(pl).run(&pod.info(), &node_infos(nodes, &[]));
        let code = run.pre_score.map(|s| s.code).unwrap_or_default();
        let per_node = run
            .nodes
            .iter()
            .map(|n| n.score.zip(n.normalized_score))
            .collect();
        (code, per_node)
    }

    #[test]
    fn score_table() {
        let nodes = || {
            vec![
                NodeBuilder::new("n1").label("foo", "bar"),
                NodeBuilder::new("n2")
                    .label("foo", "bar")
                    .label("key", "value"),
                NodeBuilder::new("n3").label("az", "az1"),
            ]
        };
        // Nothing preferred: PreScore skips.
        let (code, _) = scores(
            plugin(NodeAffinityArgs::default()),
            PodBuilder::new("plain"),
            nodes(),
        );
        assert_eq!(code, "Skip");
        // One term: matching nodes share the top score.
        assert_eq!(
            scores(
                plugin(NodeAffinityArgs::default()),
                PodBuilder::new("one").preferred_node_term(2, node_term("foo", "In", &["bar"])),
                nodes(),
            ),
            (
                "Success".into(),
                vec![Some((2, 100)), Some((2, 100)), Some((0, 0))]
            )
        );
        // Weights add up per matching term; normalisation truncates.
        assert_eq!(
            scores(
                plugin(NodeAffinityArgs::default()),
                PodBuilder::new("weights")
                    .preferred_node_term(2, node_term("foo", "In", &["bar"]))
                    .preferred_node_term(5, node_term("key", "Exists", &[]))
                    .preferred_node_term(3, node_term("az", "In", &["az1"])),
                nodes(),
            ),
            (
                "Success".into(),
                vec![Some((2, 28)), Some((7, 100)), Some((3, 42))]
            )
        );
        // The enforced preferred terms add to the pod's.
        assert_eq!(
            scores(
                plugin(added_preferred(vec![(5, node_term("az", "Exists", &[]))])),
                PodBuilder::new("added").preferred_node_term(2, node_term("foo", "In", &["bar"])),
                nodes(),
            ),
            (
                "Success".into(),
                vec![Some((2, 40)), Some((2, 40)), Some((5, 100))]
            )
        );
        // Enforced preferred terms alone are enough to score.
        assert_eq!(
            scores(
                plugin(added_preferred(vec![(
                    1,
                    node_term("key", "In", &["value"])
                )])),
                PodBuilder::new("only-added"),
                nodes(),
            ),
            (
                "Success".into(),
                vec![Some((0, 0)), Some((1, 100)), Some((0, 0))]
            )
        );
        // Nodes the enforced required terms reject are filtered out, never scored.
        let both = NodeAffinityArgs {
            added_affinity: Some(api::NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(api::NodeSelector {
                    node_selector_terms: vec![node_term("foo", "Exists", &[])],
                }),
                preferred_during_scheduling_ignored_during_execution: Some(vec![
                    api::PreferredSchedulingTerm {
                        weight: 4,
                        preference: node_term("key", "Exists", &[]),
                    },
                ]),
            }),
        };
        assert_eq!(
            scores(plugin(both), PodBuilder::new("filtered"), nodes()),
            ("Success".into(), vec![Some((0, 0)), Some((4, 100)), None])
        );
    }

    #[test]
    fn args_defaults_round_trip_and_validation() {
        let codec = registry::find(NAME).expect("registered").args.decode;
        let gates = kubesched_framework::FeatureGates::defaults();
        let decode = |args: Option<&serde_json::Value>| codec(args, &gates);
        // No args: the defaults, with no addedAffinity.
        let d = decode(None).expect("defaults");
        assert_eq!(
            d.get::<NodeAffinityArgs>(),
            Some(&NodeAffinityArgs::default())
        );
        assert_eq!(
            d.effective,
            Some(serde_json::json!({
                "kind": "NodeAffinityArgs",
                "apiVersion": "kubescheduler.config.k8s.io/v1",
            }))
        );
        // A full args object round-trips.
        let raw = serde_json::json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "NodeAffinityArgs",
            "addedAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{
                        "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]
                    }]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [{
                    "weight": 3,
                    "preference": {"matchExpressions": [{"key": "ssd", "operator": "Exists"}]}
                }]
            }
        });
        let d = decode(Some(&raw)).expect("valid");
        assert_eq!(d.effective.as_ref(), Some(&raw));
        let args = d.get::<NodeAffinityArgs>().expect("typed");
        let back: NodeAffinityArgs =
            serde_json::from_value(serde_json::to_value(args).expect("encodes")).expect("decodes");
        assert_eq!(&back, args);
        // Unknown fields are refused.
        let err = decode(Some(&serde_json::json!({"addedAfinity": {}}))).expect_err("typo");
        assert!(err.message.contains("addedAfinity"), "{}", err.message);
        // Bad terms are refused with the field named.
        let bad_op = serde_json::json!({"addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}
            ]}
        }});
        let err = decode(Some(&bad_op)).expect_err("bad operator");
        assert!(
            err.message.contains(
                "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]"
            ),
            "{}",
            err.message
        );
        let bad_pref = serde_json::json!({"addedAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 1,
                "preference": {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["x"]}]}
            }]
        }});
        let err = decode(Some(&bad_pref)).expect_err("bad Gt value");
        assert!(
            err.message.contains(
                "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].matchExpressions[0]"
            ),
            "{}",
            err.message
        );
    }

    #[test]
    fn registered_with_its_points() {
        let desc = registry::find(NAME).expect("registered");
        assert_eq!(desc.args.kind, Some("NodeAffinityArgs"));
        assert_eq!(
            kubesched_framework::implemented_points(&plugin(NodeAffinityArgs::default())),
            desc.extension_points().to_vec()
        );
    }

    #[test]
    fn node_hint_table() {
        let node = |labels: &[(&str, &str)]| {
            let mut n = NodeBuilder::new("n1");
            for (k, v) in labels {
                n = n.label(k, v);
            }
            EventObject::Node(n.model())
        };
        let pod = PodBuilder::new("p").node_selector(&[("foo", "bar")]).info();
        let matching = node(&[("foo", "bar")]);
        let other = node(&[("foo", "baz")]);
        let matching_more = node(&[("foo", "bar"), ("extra", "1")]);

        let pl = plugin(NodeAffinityArgs::default());
        let events = pl.events_to_register();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].event.label(), "NodeAdd|UpdateNodeLabel");
        let hint = events[0].hint.as_ref().expect("hint");
        let cases = [
            (None, &matching, QueueingHint::Queue),
            (None, &other, QueueingHint::Skip),
            (Some(&other), &matching, QueueingHint::Queue),
            (Some(&matching), &matching_more, QueueingHint::Skip),
            (Some(&matching), &other, QueueingHint::Skip),
        ];
        for (i, (old, new, want)) in cases.into_iter().enumerate() {
            assert_eq!(hint(&pod, old, Some(new)), Ok(want), "case {i}");
        }
        assert!(hint(&pod, None, None).is_err());

        // A node the enforced affinity rejects never helps.
        let enforced = plugin(added_required(vec![node_term("zone", "In", &["a"])]));
        let events = enforced.events_to_register();
        let hint = events[0].hint.as_ref().expect("hint");
        let in_zone = node(&[("foo", "bar"), ("zone", "a")]);
        assert_eq!(hint(&pod, None, Some(&matching)), Ok(QueueingHint::Skip));
        assert_eq!(hint(&pod, None, Some(&in_zone)), Ok(QueueingHint::Queue));
    }

    fn zoned_nodes() -> Vec<NodeBuilder> {
        vec![
            NodeBuilder::new("a1")
                .zone("a")
                .label("disk", "ssd")
                .label("gen", "3"),
            NodeBuilder::new("a2")
                .zone("a")
                .label("disk", "hdd")
                .label("gen", "5"),
            NodeBuilder::new("b1")
                .zone("b")
                .label("disk", "ssd")
                .label("gen", "7"),
            NodeBuilder::new("c1").zone("c").label("gen", "9"),
        ]
    }

    #[test]
    fn snapshot_selector_affinity_and_preferences() {
        let pod = PodBuilder::new("db")
            .node_selector(&[("disk", "ssd")])
            .node_affinity("topology.kubernetes.io/zone", "In", &["a", "b"])
            .preferred_node_term(10, node_term("gen", "Gt", &["4"]))
            .preferred_node_term(5, node_term("topology.kubernetes.io/zone", "In", &["a"]))
            .info();
        let run = PluginHarness::new(plugin(NodeAffinityArgs::default()))
            .run(&pod, &node_infos(zoned_nodes(), &[]));
        insta::assert_yaml_snapshot!(run);
    }

    #[test]
    fn snapshot_pinned_names_and_added_affinity() {
        let args = serde_json::json!({"addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "gen", "operator": "Lt", "values": ["8"]}]}
            ]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 20, "preference": {"matchExpressions": [
                    {"key": "disk", "operator": "In", "values": ["ssd"]}
                ]}}
            ]
        }});
        let harness = PluginHarness::from_registry(NAME, Some(args), Handle::builder())
            .expect("builds from the registry");
        let pod = PodBuilder::new("pinned")
            .required_node_term(field_term("In", "a1"))
            .required_node_term(field_term("In", "b1"))
            .required_node_term(field_term("In", "c1"))
            .info();
        let run = harness.run(&pod, &node_infos(zoned_nodes(), &[]));
        insta::assert_yaml_snapshot!(run);
    }

    #[test]
    fn remedies_name_the_failing_requirement_of_each_term() {
        let h = PluginHarness::new(NodeAffinity::default());
        let node = || {
            node_info(
                NodeBuilder::new("n1")
                    .label("disktype", "hdd")
                    .label("zone", "x"),
                &[],
            )
        };
        let selector = PodBuilder::new("p").node_selector(&[("disktype", "ssd"), ("rack", "r1")]);
        assert_eq!(
            h.remedies(&selector.info(), &[node()])[0].1,
            vec![
                "nodeSelector needs disktype In [ssd]; node has \"hdd\"".to_string(),
                "nodeSelector needs rack In [r1]; node has no such label".to_string(),
            ]
        );
        let two_terms = PodBuilder::new("p")
            .required_node_term(term(&[("zone", "In", &["x"]), ("gpu", "Exists", &[])]))
            .required_node_term(term(&[(NODE_NAME_FIELD, "In", &["n9"])]));
        assert_eq!(
            h.remedies(&two_terms.info(), &[node()])[0].1,
            vec![
                "nodeAffinity term 0 needs gpu Exists; node has no such label".to_string(),
                "nodeAffinity term 1 needs metadata.name In [n9]; node has \"n1\"".to_string(),
            ]
        );
        let matching = PodBuilder::new("p").node_affinity("zone", "In", &["x", "y"]);
        assert!(h.remedies(&matching.info(), &[node()]).is_empty());
    }
}
