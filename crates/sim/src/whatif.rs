//! Capacity what-ifs on a dump: how many copies of a node template let every pending pod
//! schedule (`--add-nodes`), where a drained node's pods would go (`--drain`), and where
//! more replicas of a workload would land (`--scale-workload`).
//!
//! Each question re-runs the ordinary simulation with a change applied the way the cluster
//! (or kubectl, or a controller) would apply it; the answers come from the scheduler's own
//! decisions, never from a separate estimate.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1 as api;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kubesched_config::LoadedConfig;
use kubesched_framework::model::{LabelSelector, PodObject};

use crate::cluster::pod_key;
use crate::load::{InputProblem, Manifests};
pub use crate::outcomes::{
    AddNodesAnswer, BudgetCheck, ConsolidateAnswer, ConsolidateTrial, DrainAnswer, DrainedPod,
    ExplainAnswer, Outcome, PodOutcome, ScaleAnswer, SkippedPod, Trial, WhatIf,
};
use crate::report::{PodState, SimReport};
use crate::runner::{SimError, Simulation, SimulationOptions};

/// What a what-if starts from: the dump, the configuration and the run's options.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The scheduler configuration.
    pub config: LoadedConfig,
    /// The dump.
    pub manifests: Manifests,
    /// Problems found while reading it.
    pub problems: Vec<InputProblem>,
    /// Seed of the tie-breaking RNG.
    pub seed: u64,
    /// `namespace/name` of a pod to explain (in the run that answers).
    pub explain: Option<String>,
    /// Names the input in input problems.
    pub file_hint: String,
}

impl Scenario {
    /// The dump loaded into a fresh simulation, nothing scheduled yet.
    fn start(&self) -> Result<Simulation, SimError> {
        let mut sim = Simulation::new(
            &self.config,
            SimulationOptions {
                seed: Some(self.seed),
                explain: self.explain.clone(),
                progress: None,
            },
        )?;
        sim.add_problems(self.problems.clone());
        sim.load(self.manifests.clone(), &self.file_hint);
        Ok(sim)
    }
}

fn what_if_error(message: impl Into<String>) -> SimError {
    SimError::WhatIf(message.into())
}

fn outcome_of(report: &SimReport, key: &str) -> PodOutcome {
    match report.pods.iter().find(|p| p.key() == key) {
        Some(p) => PodOutcome {
            pod: key.to_string(),
            status: p.status,
            node: p.node.clone(),
            message: p.message.clone(),
        },
        None => PodOutcome {
            pod: key.to_string(),
            status: PodState::Pending,
            node: None,
            message: Some("not seen by this scheduler".into()),
        },
    }
}

/// Pods of a run that count against "every pending pod schedules": pending pods that did
/// not, and running pods that were evicted to make room.
fn failing(report: &SimReport) -> Vec<PodOutcome> {
    report
        .pods
        .iter()
        .filter(|p| {
            matches!(
                p.status,
                PodState::Unschedulable
                    | PodState::Error
                    | PodState::Preempted
                    | PodState::Terminating
            )
        })
        .map(|p| outcome_of(report, &p.key()))
        .collect()
}

/// Adds `copies` copies of each template: `<template>-<i>` for i in 1..=copies.
fn add_copies(
    sim: &mut Simulation,
    templates: &[api::Node],
    copies: usize,
) -> Result<Vec<String>, SimError> {
    let mut added = Vec::new();
    for i in 1..=copies {
        for t in templates {
            let base = t.metadata.name.clone().unwrap_or_else(|| "node".into());
            let name = format!("{base}-{i}");
            if sim.cluster().node(&name).is_some() {
                return Err(what_if_error(format!(
                    "--add-nodes: node {name} (copy {i} of template {base}) already exists; rename the template"
                )));
            }
            let mut node = t.clone();
            node.metadata.name = Some(name.clone());
            node.metadata.uid = Some(format!("what-if-{name}"));
            node.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert("kubernetes.io/hostname".into(), name.clone());
            sim.add_node(node, "--add-nodes");
            added.push(name);
        }
    }
    Ok(added)
}

/// `--add-nodes`: the smallest number of copies of `templates` (at most `max`) with which
/// every pending pod schedules and no running pod is evicted. Found by re-running the
/// simulation: zero copies, then `max`, then a binary search between them (more nodes never
/// make a pod's Filter fail, so the count is monotone except through preferences that
/// ordering alone changes; the search is deterministic for a seed).
pub async fn add_nodes(
    scenario: &Scenario,
    templates: &[api::Node],
    max: usize,
) -> Result<SimReport, SimError> {
    if templates.is_empty() {
        return Err(what_if_error("--add-nodes: the template file has no Node"));
    }
    let mut tried = Vec::new();
    let mut runs: BTreeMap<usize, (SimReport, Vec<String>)> = BTreeMap::new();
    let mut run = async |copies: usize| -> Result<bool, SimError> {
        let mut sim = scenario.start()?;
        let added = add_copies(&mut sim, templates, copies)?;
        sim.settle().await;
        let report = sim.report();
        let fails = failing(&report);
        let ok = fails.is_empty();
        tried.push(Trial {
            copies,
            unschedulable: fails
                .iter()
                .filter(|f| !matches!(f.status, PodState::Preempted | PodState::Terminating))
                .count(),
            preempted: fails
                .iter()
                .filter(|f| matches!(f.status, PodState::Preempted | PodState::Terminating))
                .count(),
        });
        runs.insert(copies, (report, added));
        Ok(ok)
    };
    let answer = if run(0).await? {
        Some(0)
    } else if max == 0 || !run(max).await? {
        None
    } else {
        // Invariant: `bad` fails, `good` succeeds.
        let (mut bad, mut good) = (0, max);
        while good - bad > 1 {
            let mid = bad + (good - bad) / 2;
            if run(mid).await? {
                good = mid;
            } else {
                bad = mid;
            }
        }
        Some(good)
    };
    let shown = answer.unwrap_or(max);
    let Some((mut report, added_nodes)) = runs.remove(&shown) else {
        return Err(what_if_error("--add-nodes: the answering run is missing"));
    };
    report.what_if = Some(WhatIf::AddNodes(AddNodesAnswer {
        templates: templates
            .iter()
            .map(|t| t.metadata.name.clone().unwrap_or_else(|| "node".into()))
            .collect(),
        max,
        nodes_to_add: answer,
        added_nodes,
        tried,
        still_failing: failing(&report),
    }));
    Ok(report)
}

/// The annotation the kubelet puts on the API copy of a static pod.
const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

fn controller_of(pod: &api::Pod) -> Option<&OwnerReference> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

fn node_of(pod: &api::Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn decode_others<T: serde::de::DeserializeOwned>(manifests: &Manifests, kind: &str) -> Vec<T> {
    manifests
        .others
        .iter()
        .filter(|(k, _)| k == kind)
        .filter_map(|(_, doc)| {
            let mut doc = doc.clone();
            if let Some(meta) = doc.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                meta.entry("namespace").or_insert_with(|| "default".into());
            }
            serde_json::from_value(doc).ok()
        })
        .collect()
}

fn labels_of(meta: &ObjectMeta) -> BTreeMap<String, String> {
    meta.labels.clone().unwrap_or_default()
}

/// Evictions a budget allows: its status when the dump has one (what the eviction API
/// reads), else computed from its spec over the running pods it selects, as the
/// disruption controller would (the pods' count stands in for the controller's scale).
fn budget_allows(
    pdb: &PodDisruptionBudget,
    selector: &LabelSelector,
    pods: &[Arc<api::Pod>],
) -> (i32, &'static str) {
    if let Some(status) = &pdb.status {
        return (status.disruptions_allowed.unwrap_or(0), "status");
    }
    let ns = pdb.metadata.namespace.as_deref().unwrap_or("default");
    let selected: Vec<&Arc<api::Pod>> = pods
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns))
        .filter(|p| selector.matches(&labels_of(&p.metadata)))
        .collect();
    let expected = selected.len() as i32;
    let healthy = selected
        .iter()
        .filter(|p| node_of(p).is_some() && p.metadata.deletion_timestamp.is_none())
        .count() as i32;
    let scaled = |v: &IntOrString, round_up: bool| -> i32 {
        match v {
            IntOrString::Int(i) => *i,
            IntOrString::String(s) => {
                let pct: f64 = s.trim_end_matches('%').parse().unwrap_or(0.0);
                let exact = pct * f64::from(expected) / 100.0;
                if round_up {
                    exact.ceil() as i32
                } else {
                    exact.floor() as i32
                }
            }
        }
    };
    let spec = pdb.spec.clone().unwrap_or_default();
    let desired = match (&spec.min_available, &spec.max_unavailable) {
        (Some(min), _) => scaled(min, true),
        (None, Some(max)) => expected - scaled(max, true),
        (None, None) => expected,
    };
    ((healthy - desired).max(0), "spec")
}

/// `--drain NODE,...`: cordons the nodes, evicts their pods as `kubectl drain
/// --ignore-daemonsets` would (pods with a controller; DaemonSet and mirror pods stay; a
/// pod without a controller is refused, as without `--force`), recreates each evicted pod
/// without its node as its controller would (same name), and lets the scheduler place
/// them. The PodDisruptionBudgets covering evicted pods are reported with the evictions
/// they allow now.
pub async fn drain(scenario: &Scenario, nodes: &[String]) -> Result<SimReport, SimError> {
    let mut sim = scenario.start()?;
    sim.settle().await;
    let drained: BTreeSet<&str> = nodes.iter().map(String::as_str).collect();
    for name in &drained {
        let Some(node) = sim.cluster().node(name) else {
            return Err(what_if_error(format!(
                "--drain: no node {name} in the input"
            )));
        };
        let mut cordoned = (*node).clone();
        cordoned
            .spec
            .get_or_insert_with(Default::default)
            .unschedulable = Some(true);
        sim.cluster().apply_node(cordoned);
    }
    // Every pod once, decoded for this what-if (a dump's pods are kept packed).
    let pods: Vec<Arc<api::Pod>> = sim.cluster().pods().iter().map(PodObject::read).collect();
    let mut evict = Vec::new();
    let mut not_evicted = Vec::new();
    for pod in &pods {
        let Some(node) = node_of(pod).filter(|n| drained.contains(n)) else {
            continue;
        };
        let key = pod_key(pod);
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let skip = |reason: &str| SkippedPod {
            pod: key.clone(),
            node: node.to_string(),
            reason: reason.to_string(),
        };
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        if annotations.contains_key(MIRROR_POD_ANNOTATION) {
            not_evicted.push(skip("mirror pod of a static pod: the kubelet runs it"));
        } else if matches!(phase, Some("Succeeded" | "Failed")) {
            not_evicted.push(skip("finished: deleted, nothing to reschedule"));
        } else {
            match controller_of(pod) {
                Some(o) if o.kind == "DaemonSet" => {
                    not_evicted.push(skip("DaemonSet pod: left alone (--ignore-daemonsets)"));
                }
                Some(o) => evict.push((pod.clone(), node.to_string(), format!("{}/{}", o.kind, o.name))),
                None => not_evicted.push(skip(
                    "no controller: kubectl drain refuses it without --force, and nothing would recreate it",
                )),
            }
        }
    }
    // Budgets are judged on the cluster as it is before the first eviction.
    let mut budgets = Vec::new();
    for pdb in decode_others::<PodDisruptionBudget>(&scenario.manifests, "PodDisruptionBudget") {
        let ns = pdb.metadata.namespace.clone().unwrap_or_default();
        let Ok(selector) = LabelSelector::compile(
            pdb.spec.as_ref().and_then(|s| s.selector.as_ref()),
            "spec.selector",
        ) else {
            continue;
        };
        if selector.is_empty() || selector.matches_nothing {
            continue;
        }
        let covered: Vec<String> = evict
            .iter()
            .filter(|(p, _, _)| p.metadata.namespace.as_deref() == Some(ns.as_str()))
            .filter(|(p, _, _)| selector.matches(&labels_of(&p.metadata)))
            .map(|(p, _, _)| pod_key(p))
            .collect();
        if covered.is_empty() {
            continue;
        }
        let (allowed, source) = budget_allows(&pdb, &selector, &pods);
        let verdict = if covered.len() as i32 <= allowed {
            "allows these evictions".to_string()
        } else if allowed <= 0 {
            "blocks the drain: it allows no eviction now, so kubectl drain retries until the workload has more healthy pods".to_string()
        } else {
            format!(
                "allows {allowed} eviction(s) at a time: the drain waits for replacements to run"
            )
        };
        budgets.push(BudgetCheck {
            budget: format!("{ns}/{}", pdb.metadata.name.clone().unwrap_or_default()),
            disruptions_allowed: allowed,
            source,
            pods: covered,
            verdict,
        });
    }
    for (pod, _, _) in &evict {
        let key = pod_key(pod);
        sim.cluster().delete_pod_by_key(&key);
        let mut replacement = api::Pod::clone(pod);
        replacement.metadata.uid = Some(format!(
            "{}-replacement",
            pod.metadata.uid.clone().unwrap_or_else(|| key.clone())
        ));
        replacement.metadata.resource_version = None;
        replacement.metadata.deletion_timestamp = None;
        replacement.metadata.creation_timestamp = None;
        if let Some(spec) = replacement.spec.as_mut() {
            spec.node_name = None;
        }
        replacement.status = None;
        sim.add_pod(replacement, "--drain", false);
    }
    sim.settle().await;
    let mut report = sim.report();
    let evicted: Vec<DrainedPod> = evict
        .iter()
        .map(|(pod, from, owner)| {
            let o = outcome_of(&report, &pod_key(pod));
            DrainedPod {
                pod: o.pod,
                from: from.clone(),
                owner: owner.clone(),
                outcome: Outcome {
                    status: o.status,
                    to: o.node,
                    message: o.message,
                },
            }
        })
        .collect();
    let all_rescheduled = evicted
        .iter()
        .all(|d| d.outcome.status == PodState::Scheduled);
    report.what_if = Some(WhatIf::Drain(DrainAnswer {
        nodes: drained.iter().map(|n| n.to_string()).collect(),
        evicted,
        not_evicted,
        budgets,
        all_rescheduled,
    }));
    Ok(report)
}

/// Which nodes can be removed (`--consolidate`): the nodes of the settled cluster, emptiest
/// first (fewest requested millicores, then fewest pods, then name), each added to the
/// removable set when draining the set with it still passes: every evicted pod's
/// replacement finds a node, every pod that was scheduled stays scheduled, no
/// PodDisruptionBudget allows no eviction at all, and no pod without a controller (which
/// `kubectl drain` refuses, and nothing would recreate) sits on it. Greedy and
/// deterministic: one drain simulation per node.
pub async fn consolidate(scenario: &Scenario) -> Result<SimReport, SimError> {
    let mut sim = scenario.start()?;
    sim.settle().await;
    let mut report = sim.report();
    let failing_before: BTreeSet<String> = failing(&report).into_iter().map(|f| f.pod).collect();
    let usage = sim.node_usage();
    let mut order: Vec<_> = usage
        .iter()
        .map(|u| (u.cpu_requested, u.pods, u.node.clone()))
        .collect();
    order.sort();
    let nodes = order.len();
    let mut removable: Vec<String> = Vec::new();
    let mut tried = Vec::new();
    for (_, _, node) in order {
        if removable.len() + 1 >= nodes {
            tried.push(ConsolidateTrial {
                node,
                removable: false,
                reason: Some("the last node stays".into()),
            });
            continue;
        }
        let mut set = removable.clone();
        set.push(node.clone());
        let drained = drain(scenario, &set).await?;
        let Some(WhatIf::Drain(answer)) = &drained.what_if else {
            return Err(what_if_error("--consolidate: the drain gave no answer"));
        };
        let reason = consolidation_blocker(answer, &drained, &failing_before);
        tried.push(ConsolidateTrial {
            node: node.clone(),
            removable: reason.is_none(),
            reason,
        });
        if tried.last().is_some_and(|t| t.removable) {
            removable.push(node);
        }
    }
    report.what_if = Some(WhatIf::Consolidate(ConsolidateAnswer {
        nodes,
        removable,
        tried,
    }));
    Ok(report)
}

/// Why draining this set is not a consolidation, if it is not.
fn consolidation_blocker(
    answer: &DrainAnswer,
    drained: &SimReport,
    failing_before: &BTreeSet<String>,
) -> Option<String> {
    if let Some(bare) = answer
        .not_evicted
        .iter()
        .find(|s| s.reason.starts_with("no controller"))
    {
        return Some(format!("{} has no controller: it would be lost", bare.pod));
    }
    if let Some(b) = answer.budgets.iter().find(|b| b.disruptions_allowed <= 0) {
        return Some(format!(
            "PodDisruptionBudget {} allows no eviction",
            b.budget
        ));
    }
    if let Some(e) = answer
        .evicted
        .iter()
        .find(|e| e.outcome.status != PodState::Scheduled)
    {
        return Some(format!(
            "{} would not find a node: {}",
            e.pod,
            e.outcome.message.as_deref().unwrap_or("no message")
        ));
    }
    failing(drained)
        .into_iter()
        .find(|f| !failing_before.contains(&f.pod))
        .map(|f| {
            format!(
                "{} would stop running: {}",
                f.pod,
                f.message.as_deref().unwrap_or("no message")
            )
        })
}

/// A workload named on the command line: `KIND/NAMESPACE/NAME=REPLICAS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleTarget {
    /// `Deployment`, `StatefulSet` or `ReplicaSet`.
    pub kind: &'static str,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Replicas wanted.
    pub replicas: usize,
}

impl std::str::FromStr for ScaleTarget {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let usage = || {
            format!(
                "{s:?}: expected KIND/NAMESPACE/NAME=REPLICAS, KIND one of deployment, statefulset, replicaset"
            )
        };
        let (object, replicas) = s.split_once('=').ok_or_else(usage)?;
        let replicas = replicas.trim().parse().map_err(|_| usage())?;
        let parts: Vec<&str> = object.split('/').collect();
        let [kind, namespace, name] = parts.as_slice() else {
            return Err(usage());
        };
        let kind = match kind.to_ascii_lowercase().as_str() {
            "deployment" | "deployments" | "deploy" => "Deployment",
            "statefulset" | "statefulsets" | "sts" => "StatefulSet",
            "replicaset" | "replicasets" | "rs" => "ReplicaSet",
            _ => return Err(usage()),
        };
        if namespace.is_empty() || name.is_empty() {
            return Err(usage());
        }
        Ok(Self {
            kind,
            namespace: (*namespace).to_string(),
            name: (*name).to_string(),
            replicas,
        })
    }
}

/// What the what-if needs of a workload.
struct Workload {
    uid: String,
    api_version: &'static str,
    selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    template: api::PodTemplateSpec,
    stateful: Option<StatefulSet>,
}

fn find_workload(scenario: &Scenario, t: &ScaleTarget) -> Option<Workload> {
    let is_it = |meta: &ObjectMeta| {
        meta.name.as_deref() == Some(t.name.as_str())
            && meta.namespace.as_deref().unwrap_or("default") == t.namespace
    };
    let uid = |meta: &ObjectMeta| {
        meta.uid
            .clone()
            .unwrap_or_else(|| format!("{}/{}", t.namespace, t.name))
    };
    match t.kind {
        "Deployment" => scenario
            .manifests
            .deployments
            .iter()
            .find(|d| is_it(&d.metadata))
            .map(|d| {
                let spec = d.spec.clone();
                Workload {
                    uid: uid(&d.metadata),
                    api_version: "apps/v1",
                    selector: Some(spec.selector),
                    template: spec.template,
                    stateful: None,
                }
            }),
        "ReplicaSet" => decode_others::<ReplicaSet>(&scenario.manifests, "ReplicaSet")
            .into_iter()
            .find(|r| is_it(&r.metadata))
            .map(|r| {
                let spec = r.spec.clone();
                Workload {
                    uid: uid(&r.metadata),
                    api_version: "apps/v1",
                    selector: Some(spec.selector),
                    template: spec.template.unwrap_or_default(),
                    stateful: None,
                }
            }),
        _ => decode_others::<StatefulSet>(&scenario.manifests, "StatefulSet")
            .into_iter()
            .find(|s| is_it(&s.metadata))
            .map(|s| {
                let spec = s.spec.clone();
                Workload {
                    uid: uid(&s.metadata),
                    api_version: "apps/v1",
                    selector: Some(spec.selector.clone()),
                    template: spec.template.clone(),
                    stateful: Some(s),
                }
            }),
    }
}

/// `--scale-workload KIND/NS/NAME=REPLICAS`: adds pods from the workload's template until
/// it has `REPLICAS` pods (those the dump has count), as its controller would create
/// them, and lets the scheduler place them. A StatefulSet's pods get the next free
/// ordinal names and their volumeClaimTemplates' claims (`<template>-<set>-<ordinal>`);
/// other workloads' pods are named `<name>-whatif-<n>`.
pub async fn scale_workload(
    scenario: &Scenario,
    target: &ScaleTarget,
) -> Result<SimReport, SimError> {
    let spec_text = format!(
        "{}/{}/{}",
        target.kind.to_ascii_lowercase(),
        target.namespace,
        target.name
    );
    let workload = find_workload(scenario, target).ok_or_else(|| {
        what_if_error(format!(
            "--scale-workload: no {} {}/{} (with a spec) in the input",
            target.kind, target.namespace, target.name
        ))
    })?;
    let selector = LabelSelector::compile(workload.selector.as_ref(), "spec.selector")
        .map_err(|e| what_if_error(format!("--scale-workload {spec_text}: {e}")))?;
    let mut sim = scenario.start()?;
    sim.settle().await;
    let pods: Vec<Arc<api::Pod>> = sim.cluster().pods().iter().map(PodObject::read).collect();
    let existing: BTreeSet<String> = pods
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(target.namespace.as_str()))
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| selector.matches(&labels_of(&p.metadata)))
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let current = existing.len();
    if target.replicas <= current {
        return Err(what_if_error(format!(
            "--scale-workload {spec_text}: it has {current} pod(s) already; ask for more replicas than that"
        )));
    }
    let names: Vec<(String, Option<usize>)> = if workload.stateful.is_some() {
        (0..target.replicas)
            .map(|i| (format!("{}-{i}", target.name), Some(i)))
            .filter(|(n, _)| !existing.contains(n))
            .collect()
    } else {
        (1..)
            .map(|i| format!("{}-whatif-{i}", target.name))
            .filter(|n| {
                sim.cluster()
                    .pod(&format!("{}/{n}", target.namespace))
                    .is_none()
            })
            .take(target.replicas - current)
            .map(|n| (n, None))
            .collect()
    };
    let mut added = Vec::new();
    let mut claims = Vec::new();
    for (name, ordinal) in names {
        let mut pod = api::Pod {
            metadata: workload.template.metadata.clone().unwrap_or_default(),
            spec: workload.template.spec.clone(),
            status: None,
        };
        pod.metadata.name = Some(name.clone());
        pod.metadata.namespace = Some(target.namespace.clone());
        pod.metadata.uid = Some(format!("what-if-{}-{name}", target.namespace));
        pod.metadata.owner_references = Some(vec![OwnerReference {
            api_version: workload.api_version.into(),
            kind: target.kind.into(),
            name: target.name.clone(),
            uid: workload.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        if let (Some(set), Some(ordinal)) = (&workload.stateful, ordinal) {
            claims.extend(stateful_identity(&mut sim, &mut pod, set, ordinal));
        }
        added.push(pod_key(&pod));
        sim.add_pod(pod, "--scale-workload", false);
    }
    sim.settle().await;
    let mut report = sim.report();
    let added = added.iter().map(|k| outcome_of(&report, k)).collect();
    report.what_if = Some(WhatIf::ScaleWorkload(ScaleAnswer {
        kind: target.kind.to_string(),
        namespace: target.namespace.clone(),
        name: target.name.clone(),
        current,
        replicas: target.replicas,
        added,
        claims,
    }));
    Ok(report)
}

/// What the StatefulSet controller gives pod `ordinal`: its identity labels, hostname and
/// subdomain, and one claim per volumeClaimTemplate (created when missing, labelled with
/// the set's matchLabels) mounted in place of any volume of the same name. Returns the
/// claims created.
fn stateful_identity(
    sim: &mut Simulation,
    pod: &mut api::Pod,
    set: &StatefulSet,
    ordinal: usize,
) -> Vec<String> {
    let set_name = set.metadata.name.clone().unwrap_or_default();
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let labels = pod.metadata.labels.get_or_insert_with(Default::default);
    labels.insert(
        "statefulset.kubernetes.io/pod-name".into(),
        pod_name.clone(),
    );
    labels.insert("apps.kubernetes.io/pod-index".into(), ordinal.to_string());
    let set_spec = &set.spec;
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.hostname = Some(pod_name.clone());
    if let Some(service) = set_spec.service_name.as_ref().filter(|s| !s.is_empty()) {
        spec.subdomain = Some(service.clone());
    }
    let mut created = Vec::new();
    for template in set_spec.volume_claim_templates.iter().flatten() {
        let template_name = template.metadata.name.clone().unwrap_or_default();
        let claim = format!("{template_name}-{set_name}-{ordinal}");
        let volumes = spec.volumes.get_or_insert_with(Default::default);
        volumes.retain(|v| v.name != template_name);
        volumes.push(api::Volume {
            name: template_name.clone(),
            persistent_volume_claim: Some(api::PersistentVolumeClaimVolumeSource {
                claim_name: claim.clone(),
                read_only: None,
            }),
            ..Default::default()
        });
        if sim.cluster().persistent_volume_claim(&ns, &claim).is_some() {
            continue;
        }
        let mut labels = template.metadata.labels.clone().unwrap_or_default();
        if let Some(match_labels) = &set_spec.selector.match_labels {
            labels.extend(match_labels.clone());
        }
        let pvc = api::PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(claim.clone()),
                namespace: Some(ns.clone()),
                uid: Some(format!("what-if-{ns}-{claim}")),
                labels: Some(labels),
                annotations: template.metadata.annotations.clone(),
                ..Default::default()
            },
            spec: template.spec.clone(),
            status: Some(api::PersistentVolumeClaimStatus {
                phase: Some("Pending".into()),
                ..Default::default()
            }),
        };
        match serde_json::to_value(&pvc) {
            Ok(mut doc) => {
                doc["apiVersion"] = "v1".into();
                doc["kind"] = "PersistentVolumeClaim".into();
                sim.add_other("PersistentVolumeClaim", doc, "--scale-workload");
                created.push(format!("{ns}/{claim}"));
            }
            Err(e) => tracing::warn!(claim, error = %e, "could not encode a StatefulSet claim"),
        }
    }
    created
}

/// Schedules one pod of a cluster read once as a dry run, with its explanation: every
/// other bound pod counts on its node, other pending pods are left out (they would compete
/// in the queue, which is not the question), and a bound pod is taken off its node first
/// ("would it go there again?"). `profile` overrides the pod's `schedulerName`. Nothing
/// leaves the in-memory cluster.
pub async fn explain_pod(
    scenario: &Scenario,
    pod: &str,
    profile: Option<&str>,
) -> Result<SimReport, SimError> {
    let mut scenario = scenario.clone();
    scenario.explain = Some(pod.to_string());
    let mut target = None;
    // Read without decoding: a dump's pods stay packed.
    scenario.manifests.pods.retain(|p| {
        if p.name_key() == pod {
            target = Some(api::Pod::clone(&p.read()));
            return false;
        }
        p.is_assigned()
    });
    let Some(mut target) = target else {
        return Err(SimError::PodNotFound {
            pod: pod.to_string(),
            hint: " (finished pods are not read)".into(),
        });
    };
    let bound_to = node_of(&target).map(str::to_string);
    let spec = target.spec.get_or_insert_with(Default::default);
    spec.node_name = None;
    if let Some(p) = profile {
        spec.scheduler_name = Some(p.to_string());
    }
    let profile = spec
        .scheduler_name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| kubesched_framework::model::DEFAULT_SCHEDULER_NAME.to_string());
    if let Some(status) = target.status.as_mut() {
        status.nominated_node_name = None;
        status.conditions = None;
    }
    target.metadata.deletion_timestamp = None;
    scenario.manifests.pods.push(PodObject::from(target));
    let mut sim = scenario.start()?;
    if !sim.scheduler().profiles().contains_key(&profile) {
        let mut known: Vec<&String> = sim.scheduler().profiles().keys().collect();
        known.sort();
        return Err(what_if_error(format!(
            "{pod} names scheduler {profile:?}, which no profile of the configuration is (profiles: {}); pick one with --profile",
            known
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    sim.settle().await;
    let mut report = sim.report();
    let o = outcome_of(&report, pod);
    let same_node = bound_to
        .as_ref()
        .map(|b| o.status == PodState::Scheduled && o.node.as_deref() == Some(b.as_str()));
    report.what_if = Some(WhatIf::Explain(ExplainAnswer {
        pod: pod.to_string(),
        profile,
        bound_to,
        outcome: Outcome {
            status: o.status,
            to: o.node,
            message: o.message,
        },
        same_node,
    }));
    Ok(report)
}
