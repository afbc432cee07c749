//! Upstream's callExtenders: extenders with a preempt verb narrow the candidates found by
//! the dry run before one is chosen.

use std::collections::BTreeMap;

use kubesched_framework::model::PodInfo;
use kubesched_framework::{Handle, Snapshot, Status, Victims};

use crate::evaluator::Candidate;

/// Passes the candidates through every interested extender that supports preemption, in
/// order; each answer replaces the candidate set the next extender sees. An extender's
/// error, or a node it returns without victims, fails the preemption unless the extender
/// is ignorable (its error is skipped; its empty nodes are dropped).
pub(crate) async fn call_extenders(
    handle: &Handle,
    snapshot: &Snapshot,
    pod: &PodInfo,
    candidates: Vec<Candidate>,
) -> Result<Vec<Candidate>, Status> {
    let extenders = handle.extenders();
    if extenders.is_empty() || candidates.is_empty() {
        return Ok(candidates);
    }
    let mut victims: BTreeMap<String, Victims> = candidates
        .iter()
        .map(|c| {
            let v = Victims {
                pods: c.victims.clone(),
                num_pdb_violations: c.num_pdb_violations as i64,
            };
            (c.name.clone(), v)
        })
        .collect();
    let mut asked = false;
    for ext in extenders {
        if !ext.supports_preemption() || !ext.is_interested(pod) {
            continue;
        }
        asked = true;
        let mut answer = match ext.process_preemption(pod, &victims, snapshot).await {
            Ok(a) => a,
            Err(e) if ext.is_ignorable() => {
                tracing::info!(extender = ext.name(), error = %e, "skipped extender as it returned error and has ignorable flag set");
                continue;
            }
            Err(e) => return Err(Status::error(e.to_string())),
        };
        let empty: Vec<String> = answer
            .iter()
            .filter(|(_, v)| v.pods.is_empty())
            .map(|(n, _)| n.clone())
            .collect();
        for node in empty {
            if !ext.is_ignorable() {
                return Err(Status::error(format!(
                    "expected at least one victim pod on node {node:?}"
                )));
            }
            tracing::info!(node = %node, extender = ext.name(), "ignored node for which the extender didn't report victims");
            answer.remove(&node);
        }
        victims = answer;
        if victims.is_empty() {
            break;
        }
    }
    if !asked {
        return Ok(candidates);
    }
    // Candidates keep the dry run's order (it decides ties); nodes an extender added
    // follow, by name.
    let mut out: Vec<Candidate> = Vec::with_capacity(victims.len());
    for c in &candidates {
        if let Some(v) = victims.remove(&c.name) {
            // The dry run's violators that the extender kept, for explanations.
            let pdb_violating = c
                .pdb_violating
                .iter()
                .filter(|uid| v.pods.iter().any(|p| &p.uid == *uid))
                .cloned()
                .collect();
            out.push(Candidate {
                name: c.name.clone(),
                victims: v.pods,
                num_pdb_violations: usize::try_from(v.num_pdb_violations).unwrap_or(0),
                pdb_violating,
            });
        }
    }
    for (name, v) in victims {
        out.push(Candidate {
            name,
            victims: v.pods,
            num_pdb_violations: usize::try_from(v.num_pdb_violations).unwrap_or(0),
            pdb_violating: Vec::new(),
        });
    }
    Ok(out)
}
