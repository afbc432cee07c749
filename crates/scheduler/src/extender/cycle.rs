//! Where the scheduling and binding cycles consult extenders, with upstream's rules:
//! filter after the Filter plugins on the feasible nodes (findNodesThatPassExtenders),
//! scores added to the plugin totals (prioritizeNodes), and binding before the Bind
//! plugins (extendersBinding).

use std::collections::HashMap;
use std::sync::Arc;

use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{
    Code, Extender, ExtenderError, ExtenderFilterOutcome, HostPriority, MAX_EXTENDER_PRIORITY,
    MAX_NODE_SCORE, Status,
};

use crate::metrics::SchedulerMetrics;

/// The `operation` label of the goroutines gauge for prioritize calls in flight.
pub const PRIORITIZING_EXTENDER: &str = "prioritizing_extender";

/// What one extender did in a filter pass, for `--explain`.
#[derive(Debug, Clone)]
pub(crate) enum FilterTrace {
    /// The pod does not use the extender's managed resources.
    NotInterested,
    /// The call failed; `ignored` when the extender is ignorable.
    Failed {
        /// The error.
        error: String,
        /// Skipped because the extender is ignorable.
        ignored: bool,
    },
    /// The extender answered.
    Answered(ExtenderFilterOutcome),
}

/// The extenders' filter pass over the nodes the Filter plugins accepted.
pub(crate) struct FilterPass {
    /// The nodes every extender accepted.
    pub feasible: Vec<Arc<NodeInfo>>,
    /// Statuses of the nodes extenders rejected, in the order they were set (a later
    /// status of the same node replaces an earlier one).
    pub statuses: Vec<(String, Status)>,
    /// Each extender consulted, with what it did.
    pub traces: Vec<(String, FilterTrace)>,
    /// Set when an extender that is not ignorable failed: the attempt fails with it.
    pub error: Option<Status>,
}

/// findNodesThatPassExtenders: each extender in turn narrows the feasible nodes; an error
/// fails the attempt unless the extender is ignorable. Unresolvable rejections win over
/// plain ones for the same node.
pub(crate) fn filter(
    extenders: &[Arc<dyn Extender>],
    pod: &PodInfo,
    mut feasible: Vec<Arc<NodeInfo>>,
) -> FilterPass {
    let mut statuses = Vec::new();
    let mut traces = Vec::new();
    for ext in extenders {
        if feasible.is_empty() {
            break;
        }
        // Without a filter verb an extender passes every node: no call, nothing to show.
        if !ext.is_filter() {
            continue;
        }
        if !ext.is_interested(pod) {
            traces.push((ext.name().to_string(), FilterTrace::NotInterested));
            continue;
        }
        let outcome = match ext.filter(pod, &feasible) {
            Ok(o) => o,
            Err(ExtenderError(e)) if ext.is_ignorable() => {
                tracing::info!(pod = %pod.key(), extender = ext.name(), error = %e, "skipping extender as it returned error and has ignorable flag set");
                traces.push((
                    ext.name().to_string(),
                    FilterTrace::Failed {
                        error: e,
                        ignored: true,
                    },
                ));
                continue;
            }
            Err(ExtenderError(e)) => {
                traces.push((
                    ext.name().to_string(),
                    FilterTrace::Failed {
                        error: e.clone(),
                        ignored: false,
                    },
                ));
                return FilterPass {
                    feasible: Vec::new(),
                    statuses,
                    traces,
                    error: Some(Status::error(e)),
                };
            }
        };
        for (node, msg) in &outcome.failed_and_unresolvable {
            statuses.push((
                node.clone(),
                Status::new(Code::UnschedulableAndUnresolvable, [msg.clone()]),
            ));
        }
        for (node, msg) in &outcome.failed {
            if outcome.failed_and_unresolvable.contains_key(node) {
                continue;
            }
            statuses.push((node.clone(), Status::unschedulable(msg.clone())));
        }
        feasible = outcome.nodes.clone();
        traces.push((ext.name().to_string(), FilterTrace::Answered(outcome)));
    }
    FilterPass {
        feasible,
        statuses,
        traces,
        error: None,
    }
}

/// One extender's prioritize answer, aligned with the scored nodes.
#[derive(Debug, Clone)]
pub(crate) struct ExtenderScores {
    /// The extender.
    pub extender: String,
    /// Raw scores by node index (None: the extender did not score the node), and the weight;
    /// or the error (ignored, as upstream).
    pub result: Result<(Vec<Option<i64>>, i64), String>,
}

impl ExtenderScores {
    /// What the extender adds to a node's total: score × weight × (MaxNodeScore /
    /// MaxExtenderPriority), with Go's wrapping integer arithmetic.
    pub fn weighted(raw: i64, weight: i64) -> i64 {
        raw.wrapping_mul(weight)
            .wrapping_mul(MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY)
    }
}

/// prioritizeNodes' extender half: every interested extender scores `nodes`, concurrently
/// when more than one calls out.
pub(crate) fn prioritize(
    extenders: &[Arc<dyn Extender>],
    pod: &PodInfo,
    nodes: &[Arc<NodeInfo>],
    metrics: &SchedulerMetrics,
) -> Vec<ExtenderScores> {
    let interested: Vec<&Arc<dyn Extender>> =
        extenders.iter().filter(|e| e.is_interested(pod)).collect();
    let call = |ext: &Arc<dyn Extender>| {
        if !ext.is_prioritizer() {
            return ext.prioritize(pod, nodes);
        }
        metrics.goroutine_started(PRIORITIZING_EXTENDER);
        let r = ext.prioritize(pod, nodes);
        metrics.goroutine_finished(PRIORITIZING_EXTENDER);
        r
    };
    let answers: Vec<Result<(Vec<HostPriority>, i64), ExtenderError>> =
        if interested.iter().filter(|e| e.is_prioritizer()).count() > 1 {
            std::thread::scope(|s| {
                let handles: Vec<_> = interested
                    .iter()
                    .map(|ext| s.spawn(move || call(ext)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(ExtenderError::new("extender prioritize call panicked"))
                        })
                    })
                    .collect()
            })
        } else {
            interested.iter().map(|ext| call(ext)).collect()
        };
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name(), i))
        .collect();
    interested
        .iter()
        .zip(answers)
        .map(|(ext, answer)| {
            let result = match answer {
                Ok((list, weight)) => {
                    let mut raw: Vec<Option<i64>> = vec![None; nodes.len()];
                    for h in list {
                        if let Some(&i) = index.get(h.host.as_str()) {
                            // A node scored twice keeps both, as upstream sums them.
                            raw[i] = Some(raw[i].unwrap_or(0).wrapping_add(h.score));
                        }
                    }
                    Ok((raw, weight))
                }
                Err(ExtenderError(e)) => {
                    tracing::debug!(pod = %pod.key(), extender = ext.name(), error = %e, "failed to run extender's priority function; no score given by this extender");
                    Err(e)
                }
            };
            ExtenderScores {
                extender: ext.name().to_string(),
                result,
            }
        })
        .collect()
}

/// Adds the extenders' weighted scores to the plugin totals.
pub(crate) fn add_to_totals(scores: &[ExtenderScores], totals: &mut [i64]) {
    for s in scores {
        let Ok((raw, weight)) = &s.result else {
            continue;
        };
        for (total, r) in totals.iter_mut().zip(raw) {
            if let Some(r) = r {
                *total = total.wrapping_add(ExtenderScores::weighted(*r, *weight));
            }
        }
    }
}

/// extendersBinding: the first binder extender interested in the pod binds it. None when
/// no extender bound it (the Bind plugins run then); an ignorable extender's error passes
/// the pod on to the next binder.
pub(crate) async fn bind(
    extenders: &[Arc<dyn Extender>],
    pod: &PodInfo,
    node: &str,
) -> Option<Result<(), String>> {
    for ext in extenders {
        if !ext.is_binder() || !ext.is_interested(pod) {
            continue;
        }
        match ext.bind(pod, node).await {
            Err(ExtenderError(e)) if ext.is_ignorable() => {
                tracing::info!(pod = %pod.key(), extender = ext.name(), error = %e, "skipping extender in bind as it returned error and has ignorable flag set");
            }
            Err(ExtenderError(e)) => return Some(Err(e)),
            Ok(()) => return Some(Ok(())),
        }
    }
    None
}
