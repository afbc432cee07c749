//! Scheduler extenders over HTTP, as upstream's `HTTPExtender`: the configured verbs are
//! POSTed to `urlPrefix/verb` with upstream's JSON ([`wire`]), within `httpTimeout`.
//!
//! [`build_extenders`] makes the [`Extender`](kubesched_framework::Extender) objects the
//! scheduling loop and DefaultPreemption consult (through the handle). The
//! `ignoredByScheduler` resources reach NodeResourcesFit through the config crate, which
//! puts them in its args before it decodes them.

pub(crate) mod cycle;
mod transport;
pub mod wire;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1 as api;
use kubesched_config::Extender as ExtenderConfig;
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{
    Extender, ExtenderError, ExtenderFilterOutcome, HostPriority, Snapshot, Victims,
};
use serde::Serialize;

use transport::Transport;

/// An extender reached over HTTP.
#[derive(Debug)]
pub struct HttpExtender {
    url_prefix: String,
    filter_verb: String,
    prioritize_verb: String,
    preempt_verb: String,
    bind_verb: String,
    weight: i64,
    node_cache_capable: bool,
    managed_resources: BTreeSet<String>,
    ignorable: bool,
    transport: Transport,
}

/// The configured extenders, in the order they are consulted: the ones whose errors fail
/// scheduling first, the ignorable ones after them (each group in configuration order).
pub fn build_extenders(configs: &[ExtenderConfig]) -> Result<Vec<Arc<dyn Extender>>, String> {
    let mut required: Vec<Arc<dyn Extender>> = Vec::new();
    let mut ignorable: Vec<Arc<dyn Extender>> = Vec::new();
    for (i, cfg) in configs.iter().enumerate() {
        let ext = HttpExtender::new(cfg).map_err(|e| format!("extenders[{i}]: {e}"))?;
        tracing::info!(extender = %cfg.url_prefix, ignorable = cfg.ignorable, "created extender");
        if cfg.ignorable {
            ignorable.push(Arc::new(ext));
        } else {
            required.push(Arc::new(ext));
        }
    }
    required.extend(ignorable);
    Ok(required)
}

/// `ExtenderArgs` written from the scheduler's objects without copying them.
#[derive(Serialize)]
struct ArgsRef<'a> {
    #[serde(rename = "Pod")]
    pod: &'a api::Pod,
    #[serde(rename = "Nodes")]
    nodes: Option<NodeListRef<'a>>,
    #[serde(rename = "NodeNames")]
    node_names: Option<Vec<&'a str>>,
}

#[derive(Serialize)]
struct NodeListRef<'a> {
    metadata: wire::ListMeta,
    items: Vec<&'a api::Node>,
}

/// `ExtenderPreemptionArgs` written from the scheduler's objects without copying them.
#[derive(Serialize)]
struct PreemptionArgsRef<'a> {
    #[serde(rename = "Pod")]
    pod: &'a api::Pod,
    #[serde(rename = "NodeNameToVictims")]
    node_name_to_victims: Option<BTreeMap<&'a str, VictimsRef<'a>>>,
    #[serde(rename = "NodeNameToMetaVictims")]
    node_name_to_meta_victims: Option<BTreeMap<&'a str, wire::MetaVictims>>,
}

#[derive(Serialize)]
struct VictimsRef<'a> {
    #[serde(rename = "Pods")]
    pods: Vec<&'a api::Pod>,
    #[serde(rename = "NumPDBViolations")]
    num_pdb_violations: i64,
}

fn encode(value: &impl Serialize) -> Result<Vec<u8>, ExtenderError> {
    serde_json::to_vec(value).map_err(|e| ExtenderError::new(format!("json: {e}")))
}

fn node_object(n: &NodeInfo) -> Option<&api::Node> {
    n.node().map(|n| n.node.as_ref())
}

impl HttpExtender {
    /// The extender of one configuration entry.
    pub fn new(cfg: &ExtenderConfig) -> Result<Self, String> {
        Ok(Self {
            url_prefix: cfg.url_prefix.clone(),
            filter_verb: cfg.filter_verb.clone(),
            prioritize_verb: cfg.prioritize_verb.clone(),
            preempt_verb: cfg.preempt_verb.clone(),
            bind_verb: cfg.bind_verb.clone(),
            weight: cfg.weight,
            node_cache_capable: cfg.node_cache_capable,
            managed_resources: cfg
                .managed_resources
                .iter()
                .map(|r| r.name.clone())
                .collect(),
            ignorable: cfg.ignorable,
            transport: Transport::new(cfg)?,
        })
    }

    /// The `ExtenderArgs` body of a filter or prioritize call.
    fn args_body(&self, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Result<Vec<u8>, ExtenderError> {
        let args = if self.node_cache_capable {
            ArgsRef {
                pod: &pod.pod,
                nodes: None,
                node_names: Some(nodes.iter().map(|n| n.name()).collect()),
            }
        } else {
            ArgsRef {
                pod: &pod.pod,
                nodes: Some(NodeListRef {
                    metadata: wire::ListMeta {},
                    items: nodes.iter().filter_map(|n| node_object(n)).collect(),
                }),
                node_names: None,
            }
        };
        encode(&args)
    }

    /// The `ExtenderPreemptionArgs` body: victims by UID to an extender that caches
    /// nodes, whole otherwise.
    fn preemption_body(
        &self,
        pod: &PodInfo,
        victims: &BTreeMap<String, Victims>,
    ) -> Result<Vec<u8>, ExtenderError> {
        let args = if self.node_cache_capable {
            PreemptionArgsRef {
                pod: &pod.pod,
                node_name_to_victims: None,
                node_name_to_meta_victims: Some(
                    victims
                        .iter()
                        .map(|(node, v)| {
                            let meta = wire::MetaVictims {
                                pods: Some(
                                    v.pods
                                        .iter()
                                        .map(|p| wire::MetaPod { uid: p.uid.clone() })
                                        .collect(),
                                ),
                                num_pdb_violations: v.num_pdb_violations,
                            };
                            (node.as_str(), meta)
                        })
                        .collect(),
                ),
            }
        } else {
            PreemptionArgsRef {
                pod: &pod.pod,
                node_name_to_victims: Some(
                    victims
                        .iter()
                        .map(|(node, v)| {
                            let whole = VictimsRef {
                                pods: v.pods.iter().map(|p| p.pod.as_ref()).collect(),
                                num_pdb_violations: v.num_pdb_violations,
                            };
                            (node.as_str(), whole)
                        })
                        .collect(),
                ),
                node_name_to_meta_victims: None,
            }
        };
        encode(&args)
    }

    fn call_blocking<T: wire::Answer>(
        &self,
        verb: &str,
        body: Vec<u8>,
    ) -> Result<T, ExtenderError> {
        let start = Instant::now();
        let result = self
            .transport
            .post_blocking(verb, body)
            .and_then(|bytes| decode(&bytes));
        tracing::debug!(extender = %self.url_prefix, verb, elapsed = ?start.elapsed(), ok = result.is_ok(), "extender call");
        result
    }

    async fn call_async<T: wire::Answer>(
        &self,
        verb: &str,
        body: Vec<u8>,
    ) -> Result<T, ExtenderError> {
        let start = Instant::now();
        let result = self
            .transport
            .post_async(verb, body)
            .await
            .and_then(|bytes| decode(&bytes));
        tracing::debug!(extender = %self.url_prefix, verb, elapsed = ?start.elapsed(), ok = result.is_ok(), "extender call");
        result
    }

    fn claims_missing_node(&self, node: &str) -> ExtenderError {
        ExtenderError::new(format!(
            "extender {:?} claims a filtered node {node:?} which is not found in the input node list",
            self.url_prefix
        ))
    }

    /// Victims named by UID back to the pods of the snapshot's nodes.
    fn to_victims(
        &self,
        answer: BTreeMap<String, Option<wire::MetaVictims>>,
        snapshot: &Snapshot,
    ) -> Result<BTreeMap<String, Victims>, ExtenderError> {
        let mut out = BTreeMap::new();
        for (node_name, meta) in answer {
            let Some(node) = snapshot.get(&node_name).filter(|n| n.node().is_some()) else {
                return Err(ExtenderError::new(format!(
                    "nodeinfo not found for node name {node_name:?}"
                )));
            };
            let meta = meta.unwrap_or_default();
            let mut victims = Victims {
                pods: Vec::new(),
                num_pdb_violations: meta.num_pdb_violations,
            };
            for m in meta.pods.unwrap_or_default() {
                let Some(p) = node.pods.iter().find(|p| p.uid == m.uid) else {
                    return Err(ExtenderError::new(format!(
                        "extender: {} claims to preempt pod (UID: &{{{}}}) on node: {node_name}, but the pod is not found on that node",
                        self.url_prefix, m.uid
                    )));
                };
                victims.pods.push(p.clone());
            }
            out.insert(node_name, victims);
        }
        Ok(out)
    }
}

/// The `ExtenderBindingArgs` body.
fn binding_body(pod: &PodInfo, node_name: &str) -> Result<Vec<u8>, ExtenderError> {
    encode(&wire::ExtenderBindingArgs {
        pod_name: pod.name.clone(),
        pod_namespace: pod.namespace.clone(),
        pod_uid: pod.uid.clone(),
        node: node_name.to_string(),
    })
}

fn decode<T: wire::Answer>(bytes: &[u8]) -> Result<T, ExtenderError> {
    wire::decode_answer(bytes).map_err(|e| ExtenderError::new(format!("json: {e}")))
}

/// Whether a container list requests or limits one of `managed`.
fn uses_any(containers: &[api::Container], managed: &BTreeSet<String>) -> bool {
    containers.iter().any(|c| {
        c.resources.as_ref().is_some_and(|r| {
            let named = |m: &Option<BTreeMap<String, _>>| {
                m.as_ref()
                    .is_some_and(|m| m.keys().any(|k| managed.contains(k)))
            };
            named(&r.requests) || named(&r.limits)
        })
    })
}

#[kubesched_framework::async_trait]
impl Extender for HttpExtender {
    fn name(&self) -> &str {
        &self.url_prefix
    }

    fn is_ignorable(&self) -> bool {
        self.ignorable
    }

    fn is_interested(&self, pod: &PodInfo) -> bool {
        if self.managed_resources.is_empty() {
            return true;
        }
        let Some(spec) = pod.pod.spec.as_ref() else {
            return false;
        };
        uses_any(&spec.containers, &self.managed_resources)
            || spec
                .init_containers
                .as_deref()
                .is_some_and(|c| uses_any(c, &self.managed_resources))
    }

    fn is_filter(&self) -> bool {
        !self.filter_verb.is_empty()
    }

    fn is_prioritizer(&self) -> bool {
        !self.prioritize_verb.is_empty()
    }

    fn is_binder(&self) -> bool {
        !self.bind_verb.is_empty()
    }

    fn supports_preemption(&self) -> bool {
        !self.preempt_verb.is_empty()
    }

    fn filter(
        &self,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Result<ExtenderFilterOutcome, ExtenderError> {
        if self.filter_verb.is_empty() {
            return Ok(ExtenderFilterOutcome {
                nodes: nodes.to_vec(),
                ..Default::default()
            });
        }
        let body = self.args_body(pod, nodes)?;
        let answer: wire::ExtenderFilterResult = self.call_blocking(&self.filter_verb, body)?;
        if !answer.error.is_empty() {
            return Err(ExtenderError::new(answer.error));
        }
        let by_name: HashMap<&str, &Arc<NodeInfo>> = nodes.iter().map(|n| (n.name(), n)).collect();
        let names: Vec<String> = match (self.node_cache_capable, answer.node_names, answer.nodes) {
            (true, Some(names), _) => names,
            (_, _, Some(list)) => list.items.into_iter().map(|n| n.metadata.name).collect(),
            // Neither form answered: no node passes.
            _ => Vec::new(),
        };
        let mut passed = Vec::with_capacity(names.len());
        for name in names {
            match by_name.get(name.as_str()) {
                Some(n) => passed.push(Arc::clone(n)),
                None => return Err(self.claims_missing_node(&name)),
            }
        }
        Ok(ExtenderFilterOutcome {
            nodes: passed,
            failed: answer.failed_nodes.unwrap_or_default(),
            failed_and_unresolvable: answer.failed_and_unresolvable_nodes.unwrap_or_default(),
        })
    }

    fn prioritize(
        &self,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Result<(Vec<HostPriority>, i64), ExtenderError> {
        if self.prioritize_verb.is_empty() {
            let zeros = nodes
                .iter()
                .map(|n| HostPriority {
                    host: n.name().to_string(),
                    score: 0,
                })
                .collect();
            return Ok((zeros, 0));
        }
        let body = self.args_body(pod, nodes)?;
        let answer: wire::HostPriorityList = self.call_blocking(&self.prioritize_verb, body)?;
        let scores = answer
            .into_iter()
            .map(|h| HostPriority {
                host: h.host,
                score: h.score,
            })
            .collect();
        Ok((scores, self.weight))
    }

    async fn bind(&self, pod: &PodInfo, node_name: &str) -> Result<(), ExtenderError> {
        if self.bind_verb.is_empty() {
            return Err(ExtenderError::new("unexpected empty bindVerb in extender"));
        }
        let answer: wire::ExtenderBindingResult = self
            .call_async(&self.bind_verb, binding_body(pod, node_name)?)
            .await?;
        if answer.error.is_empty() {
            Ok(())
        } else {
            Err(ExtenderError::new(answer.error))
        }
    }

    async fn process_preemption(
        &self,
        pod: &PodInfo,
        victims: &BTreeMap<String, Victims>,
        snapshot: &Snapshot,
    ) -> Result<BTreeMap<String, Victims>, ExtenderError> {
        if self.preempt_verb.is_empty() {
            return Err(ExtenderError::new(format!(
                "preempt verb is not defined for extender {} but run into ProcessPreemption",
                self.url_prefix
            )));
        }
        let body = self.preemption_body(pod, victims)?;
        let answer: wire::ExtenderPreemptionResult =
            self.call_async(&self.preempt_verb, body).await?;
        self.to_victims(
            answer.node_name_to_meta_victims.unwrap_or_default(),
            snapshot,
        )
    }
}

#[cfg(test)]
mod tests;
