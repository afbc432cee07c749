//! Runs one plugin's extension points for a pod over nodes, returning a serialisable
//! record for snapshot tests.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kubesched_framework::{
    CycleState, ExtensionPoint, Framework, Handle, HandleBuilder, HandleControl, Plugin, PluginRef,
    ProfileSpec, Snapshot, Status, metrics::NoMetrics, registry,
};
use kubesched_model::{ImageStateSummary, NodeInfo, PodInfo};
use serde::Serialize;

/// A status as recorded in snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusView {
    /// The code's name.
    pub code: String,
    /// The reasons.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

impl From<&Status> for StatusView {
    fn from(s: &Status) -> Self {
        Self {
            code: s.code().as_str().to_string(),
            reasons: s.reasons().to_vec(),
        }
    }
}

/// One node's results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeOutcome {
    /// The node.
    pub node: String,
    /// Filter's status (absent when the plugin has no Filter or PreFilter said Skip).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<StatusView>,
    /// Raw score (absent when not scored).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<i64>,
    /// Score after NormalizeScore.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub normalized_score: Option<i64>,
}

/// Everything one plugin said about one pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginRun {
    /// The plugin.
    pub plugin: String,
    /// The pod, `namespace/name`.
    pub pod: String,
    /// PreFilter's status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_filter: Option<StatusView>,
    /// PreFilter's node narrowing, when it narrowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_filter_nodes: Option<Vec<String>>,
    /// PreScore's status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_score: Option<StatusView>,
    /// Per node, in the order given.
    pub nodes: Vec<NodeOutcome>,
}

impl PluginRun {
    /// The filter status of a node.
    pub fn filter_of(&self, node: &str) -> Option<&StatusView> {
        self.nodes.iter().find(|n| n.node == node)?.filter.as_ref()
    }

    /// The normalised score of a node.
    pub fn score_of(&self, node: &str) -> Option<i64> {
        self.nodes.iter().find(|n| n.node == node)?.normalized_score
    }

    /// The nodes whose Filter passed (or that had no Filter), in order.
    pub fn feasible(&self) -> Vec<&str> {
        self.nodes
            .iter()
            .filter(|n| n.filter.as_ref().is_none_or(|s| s.code == "Success"))
            .map(|n| n.node.as_str())
            .collect()
    }
}

/// Runs one plugin, built directly or from the registry, against a snapshot of nodes.
#[derive(Clone)]
pub struct PluginHarness {
    plugin: Arc<dyn Plugin>,
    /// The harness plays the scheduler: it installs the snapshot of each run.
    handle: Arc<HandleControl>,
}

fn fill_image_states(nodes: &[Arc<NodeInfo>]) -> Vec<Arc<NodeInfo>> {
    let mut counts: HashMap<String, (i64, usize)> = HashMap::new();
    for n in nodes {
        if let Some(node) = n.node() {
            for (names, size) in &node.images {
                for name in names {
                    let e = counts.entry(name.clone()).or_insert((*size, 0));
                    e.1 += 1;
                }
            }
        }
    }
    nodes
        .iter()
        .map(|n| {
            let mut info = (**n).clone();
            info.image_states.clear();
            if let Some(node) = n.node() {
                for (names, _) in &node.images {
                    for name in names {
                        let (size, num_nodes) = counts[name];
                        info.image_states
                            .insert(name.clone(), ImageStateSummary { size, num_nodes });
                    }
                }
            }
            Arc::new(info)
        })
        .collect()
}

impl PluginHarness {
    /// A harness around a plugin object, with a default handle.
    pub fn new(plugin: impl Plugin) -> Self {
        Self {
            plugin: Arc::new(plugin),
            handle: Arc::new(Handle::builder().build_with_control()),
        }
    }

    /// A harness around the registered plugin `name`, built with `args` (None: defaults)
    /// and the handle `handle` builds (so the plugin sees its object store and nominator;
    /// `Handle::builder()` for the defaults).
    pub fn from_registry(
        name: &str,
        args: Option<serde_json::Value>,
        handle: HandleBuilder,
    ) -> Result<Self, String> {
        let desc =
            registry::find(name).ok_or_else(|| format!("plugin {name} is not registered"))?;
        let handle = handle.build_with_control();
        // Decoded under the handle's gates, as the config crate decodes under the run's.
        let decoded = (desc.args.decode)(args.as_ref(), handle.handle().features())
            .map_err(|e| e.to_string())?;
        let plugin = (desc.factory)(&decoded, handle.handle()).map_err(|e| e.to_string())?;
        Ok(Self {
            plugin,
            handle: Arc::new(handle),
        })
    }

    /// The handle the plugin sees.
    pub fn handle(&self) -> &Handle {
        self.handle.handle()
    }

    /// The plugin.
    pub fn plugin(&self) -> &Arc<dyn Plugin> {
        &self.plugin
    }

    /// Installs the nodes as the handle's snapshot (image spread filled in) and returns
    /// the snapshot's node list.
    pub fn set_nodes(&self, nodes: &[Arc<NodeInfo>]) -> Vec<Arc<NodeInfo>> {
        let nodes = fill_image_states(nodes);
        self.handle
            .set_snapshot(Arc::new(Snapshot::new(nodes.clone())));
        nodes
    }

    /// Installs exactly these node objects as the handle's snapshot (no image states
    /// filled in).
    pub fn set_nodes_as_is(&self, nodes: &[Arc<NodeInfo>]) {
        self.handle
            .set_snapshot(Arc::new(Snapshot::new(nodes.to_vec())));
    }

    /// Runs PreFilter, Filter on every node, then PreScore, Score and NormalizeScore on
    /// the nodes that passed, as the framework would.
    pub fn run(&self, pod: &Arc<PodInfo>, nodes: &[Arc<NodeInfo>]) -> PluginRun {
        let nodes = self.set_nodes(nodes);
        self.run_as_is(pod, &nodes)
    }

    /// As [`PluginHarness::run`], but installs exactly these node objects as the snapshot
    /// (no image states filled in), so a plugin that keeps results per node object
    /// between runs sees the same objects again.
    pub fn run_as_is(&self, pod: &Arc<PodInfo>, nodes: &[Arc<NodeInfo>]) -> PluginRun {
        self.set_nodes_as_is(nodes);
        let mut state = CycleState::new();
        let mut run = PluginRun {
            plugin: self.plugin.name().to_string(),
            pod: pod.key(),
            pre_filter: None,
            pre_filter_nodes: None,
            pre_score: None,
            nodes: nodes
                .iter()
                .map(|n| NodeOutcome {
                    node: n.name().to_string(),
                    filter: None,
                    score: None,
                    normalized_score: None,
                })
                .collect(),
        };
        let mut filter_skipped = false;
        if let Some(pf) = self.plugin.as_pre_filter() {
            let (result, status) = pf.pre_filter(&mut state, pod, nodes);
            filter_skipped = status.is_skip();
            run.pre_filter_nodes = result
                .and_then(|r| r.node_names)
                .map(|n| n.into_iter().collect());
            let failed = !status.is_success() && !status.is_skip();
            run.pre_filter = Some((&status).into());
            if failed {
                return run;
            }
        }
        let mut feasible = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            match self.plugin.as_filter() {
                Some(f) if !filter_skipped => {
                    let s = f.filter(&state, pod, n);
                    if s.is_success() {
                        feasible.push(i);
                    }
                    run.nodes[i].filter = Some((&s).into());
                }
                _ => feasible.push(i),
            }
        }
        let Some(score) = self.plugin.as_score() else {
            return run;
        };
        let scored: Vec<Arc<NodeInfo>> = feasible.iter().map(|&i| nodes[i].clone()).collect();
        if let Some(ps) = self.plugin.as_pre_score() {
            let s = ps.pre_score(&mut state, pod, &scored);
            run.pre_score = Some((&s).into());
            if !s.is_success() {
                return run;
            }
        }
        let mut raw = Vec::with_capacity(scored.len());
        for n in &scored {
            match score.score(&state, pod, n) {
                Ok(v) => raw.push(v),
                Err(s) => {
                    run.pre_score = Some((&s).into());
                    return run;
                }
            }
        }
        let mut normalized = raw.clone();
        if score.has_normalize_score() {
            let _ = score.normalize_score(&state, pod, &scored, &mut normalized);
        }
        for (k, &i) in feasible.iter().enumerate() {
            run.nodes[i].score = Some(raw[k]);
            run.nodes[i].normalized_score = Some(normalized[k]);
        }
        run
    }

    /// Explain mode: runs PreFilter, then Filter on every node, and for each node Filter
    /// rejected, the plugin's remedies in words (`(node, remedies)` in node order; nodes
    /// that passed are left out). Empty when PreFilter skipped or failed.
    pub fn remedies(
        &self,
        pod: &Arc<PodInfo>,
        nodes: &[Arc<NodeInfo>],
    ) -> Vec<(String, Vec<String>)> {
        let nodes = self.set_nodes(nodes);
        let mut state = CycleState::new();
        if let Some(pf) = self.plugin.as_pre_filter() {
            let (_, status) = pf.pre_filter(&mut state, pod, &nodes);
            if !status.is_success() {
                return Vec::new();
            }
        }
        let Some(f) = self.plugin.as_filter() else {
            return Vec::new();
        };
        nodes
            .iter()
            .filter(|n| f.filter(&state, pod, n).is_rejected())
            .map(|n| {
                let words = f
                    .remedies(&state, pod, n)
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                (n.name().to_string(), words)
            })
            .collect()
    }

    /// A one-plugin framework around this plugin, enabled at every point it implements.
    pub fn framework(&self) -> Framework {
        let mut plugins = BTreeMap::new();
        for p in kubesched_framework::implemented_points(self.plugin.as_ref()) {
            if p != ExtensionPoint::EnqueueExtensions {
                plugins.insert(p, vec![PluginRef::new(self.plugin.name())]);
            }
        }
        let spec = ProfileSpec {
            scheduler_name: "test-scheduler".into(),
            plugins,
            ..Default::default()
        };
        let instances = BTreeMap::from([(self.plugin.name().to_string(), self.plugin.clone())]);
        Framework::from_instances(
            spec,
            self.handle.handle().clone(),
            Arc::new(NoMetrics),
            instances,
            BTreeMap::new(),
        )
        .expect("a one-plugin framework is always valid")
    }
}
