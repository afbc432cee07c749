//! `Framework`: one profile's plugins, run at each extension point with upstream's rules.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kubesched_model::{NodeInfo, PodInfo};

use crate::events::ClusterEventWithHint;
use crate::metrics::{MetricsSink, NoMetrics};
use crate::plugin::{MAX_NODE_SCORE, MIN_NODE_SCORE, PreBindPlugin};
use crate::registry::{self, DecodedArgs};
use crate::waiting::is_rejection;
use crate::{
    Code, CycleState, ExtensionPoint, Handle, NodeToStatus, NominatedView, Plugin, PluginError,
    PointSet, PostFilterResult, PreFilterExtensions, PreFilterResult, ScorePlugin, Status,
};

/// The plugin that handles `spec.resourceClaims`.
pub const DYNAMIC_RESOURCES: &str = "DynamicResources";

/// Why a pod with resource claims is not scheduled by a binary without DynamicResources:
/// scheduling it while ignoring its claims would start it without its devices.
pub const DYNAMIC_RESOURCES_MISSING: &str = "pod has resource claims (spec.resourceClaims) but the DynamicResources plugin is not compiled into this binary";

/// The rejection of a pod with resource claims when no plugin named DynamicResources is
/// registered (decided from the registry, once per process: registration is link-time).
fn missing_dynamic_resources(pod: &PodInfo) -> Option<Status> {
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // Read without decoding the object (a dump's pods are packed).
    let has_claims = pod.pod.has_resource_claims();
    if !has_claims || *REGISTERED.get_or_init(|| registry::find(DYNAMIC_RESOURCES).is_some()) {
        return None;
    }
    Some(Status::unresolvable(DYNAMIC_RESOURCES_MISSING).with_plugin(DYNAMIC_RESOURCES))
}

/// The longest a Permit plugin may ask a pod to wait.
pub const MAX_PERMIT_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// Score plugins scored together in one pass over the nodes (more fall back to a pass each).
const MAX_FUSED_SCORE_PLUGINS: usize = 16;
/// Highest total score: guards against overflow when weights are summed.
pub const MAX_TOTAL_SCORE: i64 = i64::MAX;

/// A plugin enabled at an extension point, with its weight (Score only).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PluginRef {
    /// The plugin's name.
    pub name: String,
    /// The score weight (0 means 1).
    pub weight: i64,
}

impl PluginRef {
    /// A reference with the default weight.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            weight: 0,
        }
    }

    /// A reference with a weight.
    pub fn weighted(name: &str, weight: i64) -> Self {
        Self {
            name: name.to_string(),
            weight,
        }
    }
}

/// A profile fully resolved from configuration: the ordered enabled plugins of each point
/// (multiPoint already expanded) and each plugin's args, decoded once (with its codec's
/// defaults and validation) when the configuration was loaded. The config crate builds it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProfileSpec {
    /// `schedulerName`.
    pub scheduler_name: String,
    /// Enabled plugins per extension point, in order.
    pub plugins: BTreeMap<ExtensionPoint, Vec<PluginRef>>,
    /// Decoded args per plugin name, handed to each factory as they are. A plugin that
    /// takes args and has no entry (a spec written by hand, in tests) gets its defaults.
    pub plugin_args: BTreeMap<String, DecodedArgs>,
    /// The profile's percentageOfNodesToScore, overriding the global one.
    pub percentage_of_nodes_to_score: Option<i32>,
}

impl ProfileSpec {
    /// The enabled plugins of a point.
    pub fn at(&self, point: ExtensionPoint) -> &[PluginRef] {
        self.plugins.get(&point).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Every plugin name the profile uses, sorted.
    pub fn plugin_names(&self) -> BTreeSet<String> {
        self.plugins
            .values()
            .flatten()
            .map(|p| p.name.clone())
            .collect()
    }
}

/// One plugin's scores over the feasible nodes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PluginScores {
    /// The plugin.
    pub plugin: String,
    /// Its weight.
    pub weight: i64,
    /// Scores as the plugin gave them.
    pub raw: Vec<i64>,
    /// After NormalizeScore.
    pub normalized: Vec<i64>,
}

/// Scores of every Score plugin over the feasible nodes (aligned with the node list).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ScoreTable {
    /// Per plugin, in profile order.
    pub plugins: Vec<PluginScores>,
    /// Σ weight × normalised score, per node.
    pub totals: Vec<i64>,
}

/// Scores of every PlacementScore plugin over a group's feasible placements (aligned with
/// the placements).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PlacementScoreTable {
    /// Per plugin, in profile order.
    pub plugins: Vec<PluginScores>,
    /// Σ weight × normalised score, per placement.
    pub totals: Vec<i64>,
}

/// Outcome of PreFilter.
#[derive(Debug, Clone)]
pub struct PreFilterOutcome {
    /// The merged node narrowing.
    pub result: Option<PreFilterResult>,
    /// Success, or the first failure.
    pub status: Status,
    /// Plugins that rejected the pod (for queueing).
    pub unschedulable_plugins: BTreeSet<String>,
}

type PluginList = Vec<Arc<dyn Plugin>>;

/// Per-node Filter timings gathered by one worker during a sampled cycle (made by
/// [`Framework::filter_timings`]). Dropping it records them into the plugin duration
/// metric, one batch per plugin and status.
pub struct FilterTimings<'a> {
    fw: &'a Framework,
    /// Per Filter plugin (profile order), the times of its calls that answered Success.
    success: Vec<Vec<Duration>>,
    /// Calls that answered anything else: plugin index, code, time.
    other: Vec<(usize, Code, Duration)>,
}

impl FilterTimings<'_> {
    fn push(&mut self, plugin: usize, code: Code, took: Duration) {
        match code {
            Code::Success => self.success[plugin].push(took),
            _ => self.other.push((plugin, code, took)),
        }
    }
}

impl std::fmt::Debug for FilterTimings<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilterTimings")
            .field("success", &self.success.iter().map(Vec::len).sum::<usize>())
            .field("other", &self.other.len())
            .finish()
    }
}

impl Drop for FilterTimings<'_> {
    fn drop(&mut self) {
        let metrics = &self.fw.metrics;
        for (p, times) in self.fw.filter.iter().zip(&self.success) {
            if !times.is_empty() {
                metrics.plugin_durations(p.name(), ExtensionPoint::Filter, Code::Success, times);
            }
        }
        for &(i, code, took) in &self.other {
            metrics.plugin_duration(self.fw.filter[i].name(), ExtensionPoint::Filter, code, took);
        }
    }
}

/// One profile's plugins and the rules for running them.
pub struct Framework {
    profile_name: String,
    handle: Handle,
    metrics: Arc<dyn MetricsSink>,
    percentage_of_nodes_to_score: Option<i32>,
    instances: BTreeMap<String, Arc<dyn Plugin>>,
    /// The instances with a [`PodEventsPlugin`] side, found once: every pod event reads it.
    pod_event_observers: PluginList,
    /// The instances with a PlacementFeasible side (GenericWorkload's group cycle).
    placement_feasible: PluginList,
    /// PlacementGenerate plugins, in order (TopologyAwareWorkloadScheduling).
    placement_generate: PluginList,
    /// PlacementScore plugins with their weights (TopologyAwareWorkloadScheduling).
    placement_score: Vec<(Arc<dyn Plugin>, i64)>,
    effective_args: BTreeMap<String, serde_json::Value>,
    queue_sort: Option<Arc<dyn Plugin>>,
    pre_enqueue: PluginList,
    pre_filter: PluginList,
    filter: PluginList,
    /// The Filter plugins' names, shared by every rejection they give.
    filter_names: Vec<Arc<str>>,
    post_filter: PluginList,
    pre_score: PluginList,
    score: Vec<(Arc<dyn Plugin>, i64)>,
    reserve: PluginList,
    permit: PluginList,
    pre_bind: PluginList,
    bind: PluginList,
    post_bind: PluginList,
    spec: ProfileSpec,
}

impl std::fmt::Debug for Framework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Framework")
            .field("profile", &self.profile_name)
            .field("plugins", &self.instances.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn implements(p: &dyn Plugin, point: ExtensionPoint) -> bool {
    match point {
        ExtensionPoint::QueueSort => p.as_queue_sort().is_some(),
        ExtensionPoint::PreEnqueue => p.as_pre_enqueue().is_some(),
        ExtensionPoint::PreFilter => p.as_pre_filter().is_some(),
        ExtensionPoint::Filter => p.as_filter().is_some(),
        ExtensionPoint::PostFilter => p.as_post_filter().is_some(),
        ExtensionPoint::PreScore => p.as_pre_score().is_some(),
        ExtensionPoint::Score => p.as_score().is_some(),
        ExtensionPoint::Reserve => p.as_reserve().is_some(),
        ExtensionPoint::Permit => p.as_permit().is_some(),
        ExtensionPoint::PreBind => p.as_pre_bind().is_some(),
        ExtensionPoint::Bind => p.as_bind().is_some(),
        ExtensionPoint::PostBind => p.as_post_bind().is_some(),
        ExtensionPoint::PlacementGenerate => p.as_placement_generate().is_some(),
        ExtensionPoint::PlacementScore => p.as_placement_score().is_some(),
        ExtensionPoint::EnqueueExtensions => p.as_enqueue_extensions().is_some(),
    }
}

/// The extension points a plugin object really implements.
pub fn implemented_points(p: &dyn Plugin) -> Vec<ExtensionPoint> {
    PointSet::ALL
        .into_iter()
        .filter(|pt| implements(p, *pt))
        .collect()
}

/// The object a factory built must be the one its registration describes: same name, same
/// extension points. `register_plugin!` derives both from one type, so this only fails for a
/// descriptor written by hand; it runs once per plugin at start-up, never per pod.
/// A plugin's error, worded as upstream words it: `running <Point> plugin "<name>": <status>`.
fn plugin_error(point: &str, plugin: &str, s: &Status) -> Status {
    Status::error(format!("running {point} plugin {plugin:?}: {s}")).with_plugin(plugin)
}

/// A plugin's answer that stops a point: a rejection stays one (naming the plugin),
/// anything else becomes the plugin's error.
/// Runs a batch of PreBind plugins at the same time and returns the first failure (a
/// status neither Success nor Skip) with its plugin, or `None` when all of them passed.
/// The plugins still running when one fails are dropped, which cancels them.
async fn first_pre_bind_failure<'a>(
    batch: &[(&'a str, &'a dyn PreBindPlugin)],
    state: &'a CycleState,
    pod: &'a PodInfo,
    node_name: &'a str,
) -> Option<(&'a str, Status)> {
    use std::future::Future;
    use std::pin::Pin;
    type Running<'f> = Pin<Box<dyn Future<Output = Status> + Send + 'f>>;
    let mut running: Vec<Option<(&str, Running<'_>)>> = batch
        .iter()
        .map(|(name, pb)| Some((*name, pb.pre_bind(state, pod, node_name))))
        .collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for slot in running.iter_mut() {
            let Some((name, fut)) = slot else { continue };
            match fut.as_mut().poll(cx) {
                std::task::Poll::Ready(s) => {
                    let name = *name;
                    *slot = None;
                    if !s.is_success() && !s.is_skip() {
                        return std::task::Poll::Ready(Some((name, s)));
                    }
                }
                std::task::Poll::Pending => pending = true,
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(None)
        }
    })
    .await
}

fn plugin_failure(point: &str, plugin: &str, s: Status) -> Status {
    if s.is_rejected() {
        s.with_plugin(plugin)
    } else {
        plugin_error(point, plugin, &s)
    }
}

fn check_declaration(
    desc: &registry::PluginDescriptor,
    plugin: &dyn Plugin,
) -> Result<(), PluginError> {
    if plugin.name() != desc.name {
        return Err(PluginError(format!(
            "plugin {:?}: its factory built an object named {:?}",
            desc.name,
            plugin.name()
        )));
    }
    let declared = desc.extension_points().to_vec();
    let built = implemented_points(plugin);
    if declared != built {
        let names =
            |v: &[ExtensionPoint]| v.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ");
        return Err(PluginError(format!(
            "plugin {:?}: registered with extension points [{}] but its object implements [{}]",
            desc.name,
            names(&declared),
            names(&built)
        )));
    }
    Ok(())
}

impl Framework {
    /// Where this framework reports its metrics.
    pub fn metrics(&self) -> &Arc<dyn MetricsSink> {
        &self.metrics
    }

    /// Instantiates the profile's plugins from the registry.
    pub fn new(spec: ProfileSpec, handle: Handle) -> Result<Self, PluginError> {
        Self::with_metrics(spec, handle, Arc::new(NoMetrics))
    }

    /// Like [`Framework::new`], reporting timings to `metrics`.
    pub fn with_metrics(
        spec: ProfileSpec,
        handle: Handle,
        metrics: Arc<dyn MetricsSink>,
    ) -> Result<Self, PluginError> {
        let mut instances = BTreeMap::new();
        let mut effective_args = BTreeMap::new();
        for name in spec.plugin_names() {
            let args = spec.plugin_args.get(&name);
            let Some(desc) = registry::find(&name) else {
                // A plugin built under a configured name (e.g. a WebAssembly guest): the
                // source that decoded its args when the configuration was loaded builds it.
                let source = args.and_then(|a| registry::source_for(a.effective.as_ref()));
                let (Some(args), Some(source)) = (args, source) else {
                    return Err(PluginError(format!(
                        "plugin {name:?} is not compiled into this binary (enable the Cargo feature `{}` of kubesched)",
                        registry::feature_for(&name)
                    )));
                };
                let plugin = (source.build)(&name, args, &handle)
                    .map_err(|e| PluginError(format!("building plugin {name}: {e}")))?;
                if let Some(eff) = &args.effective {
                    effective_args.insert(name.clone(), eff.clone());
                }
                instances.insert(name, plugin);
                continue;
            };
            let defaults;
            let args: &DecodedArgs = match args {
                Some(args) => args,
                None => {
                    // Not decoded by the config crate (a spec written by hand): the
                    // plugin's defaults, decoded here, once.
                    defaults = (desc.args.decode)(None, handle.features())
                        .map_err(|e| PluginError(format!("plugin {name}: {e}")))?;
                    &defaults
                }
            };
            if let Some(eff) = &args.effective {
                effective_args.insert(name.clone(), eff.clone());
            }
            let plugin = (desc.factory)(args, &handle)
                .map_err(|e| PluginError(format!("building plugin {name}: {e}")))?;
            check_declaration(desc, plugin.as_ref())?;
            instances.insert(name, plugin);
        }
        Self::from_instances(spec, handle, metrics, instances, effective_args)
    }

    /// Builds a framework from plugin objects made by the caller (tests, harnesses),
    /// without the registry. Every plugin the spec names must be in `instances`.
    pub fn from_instances(
        spec: ProfileSpec,
        handle: Handle,
        metrics: Arc<dyn MetricsSink>,
        instances: BTreeMap<String, Arc<dyn Plugin>>,
        effective_args: BTreeMap<String, serde_json::Value>,
    ) -> Result<Self, PluginError> {
        for name in spec.plugin_names() {
            if !instances.contains_key(&name) {
                return Err(PluginError(format!("plugin {name:?} has no instance")));
            }
        }
        let list = |point: ExtensionPoint| -> Result<PluginList, PluginError> {
            let mut seen = BTreeSet::new();
            let mut out = Vec::new();
            for r in spec.at(point) {
                if !seen.insert(r.name.clone()) {
                    return Err(PluginError(format!(
                        "plugin {:?} is enabled twice at {}",
                        r.name,
                        point.as_str()
                    )));
                }
                let p = instances[&r.name].clone();
                if !implements(p.as_ref(), point) {
                    return Err(PluginError(format!(
                        "plugin {:?} does not extend {} plugin",
                        r.name,
                        point.as_str()
                    )));
                }
                out.push(p);
            }
            Ok(out)
        };
        let queue_sort_list = list(ExtensionPoint::QueueSort)?;
        if queue_sort_list.len() > 1 {
            return Err(PluginError(
                "only one QueueSort plugin may be enabled in a profile".into(),
            ));
        }
        let mut score = Vec::new();
        let mut total: i64 = 0;
        for (p, r) in list(ExtensionPoint::Score)?
            .into_iter()
            .zip(spec.at(ExtensionPoint::Score))
        {
            if r.weight < 0 {
                return Err(PluginError(format!(
                    "score plugin {:?} has a negative weight {}",
                    r.name, r.weight
                )));
            }
            let w = if r.weight == 0 { 1 } else { r.weight };
            if w.saturating_mul(MAX_NODE_SCORE) > MAX_TOTAL_SCORE - total {
                return Err(PluginError(
                    "total score of Score plugins could overflow".into(),
                ));
            }
            total += w * MAX_NODE_SCORE;
            score.push((p, w));
        }
        let mut placement_score = Vec::new();
        for (p, r) in list(ExtensionPoint::PlacementScore)?
            .into_iter()
            .zip(spec.at(ExtensionPoint::PlacementScore))
        {
            if r.weight < 0 {
                return Err(PluginError(format!(
                    "placement score plugin {:?} has a negative weight {}",
                    r.name, r.weight
                )));
            }
            placement_score.push((p, r.weight.max(1)));
        }
        let placement_generate = list(ExtensionPoint::PlacementGenerate)?;
        let filter = list(ExtensionPoint::Filter)?;
        Ok(Self {
            profile_name: spec.scheduler_name.clone(),
            percentage_of_nodes_to_score: spec.percentage_of_nodes_to_score,
            queue_sort: queue_sort_list.into_iter().next(),
            pre_enqueue: list(ExtensionPoint::PreEnqueue)?,
            pre_filter: list(ExtensionPoint::PreFilter)?,
            filter_names: filter.iter().map(|p| Arc::from(p.name())).collect(),
            filter,
            post_filter: list(ExtensionPoint::PostFilter)?,
            pre_score: list(ExtensionPoint::PreScore)?,
            score,
            reserve: list(ExtensionPoint::Reserve)?,
            permit: list(ExtensionPoint::Permit)?,
            pre_bind: list(ExtensionPoint::PreBind)?,
            bind: list(ExtensionPoint::Bind)?,
            post_bind: list(ExtensionPoint::PostBind)?,
            pod_event_observers: instances
                .values()
                .filter(|p| p.as_pod_events().is_some())
                .cloned()
                .collect(),
            placement_feasible: instances
                .values()
                .filter(|p| p.as_placement_feasible().is_some())
                .cloned()
                .collect(),
            placement_generate,
            placement_score,
            instances,
            effective_args,
            handle,
            metrics,
            spec,
        })
    }

    /// The profile's scheduler name.
    pub fn profile_name(&self) -> &str {
        &self.profile_name
    }

    /// The handle plugins were built with.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// The resolved profile this framework was built from.
    pub fn spec(&self) -> &ProfileSpec {
        &self.spec
    }

    /// The profile's percentageOfNodesToScore, if it sets one.
    pub fn percentage_of_nodes_to_score(&self) -> Option<i32> {
        self.percentage_of_nodes_to_score
    }

    /// Effective args of every plugin that takes args (defaults filled in).
    pub fn effective_args(&self) -> &BTreeMap<String, serde_json::Value> {
        &self.effective_args
    }

    /// Whether some plugin of the profile observes pod changes.
    pub fn has_pod_event_plugins(&self) -> bool {
        !self.pod_event_observers.is_empty()
    }

    /// Tells every plugin of the profile with a [`PodEventsPlugin`] side of a pod change.
    pub fn run_pod_event_plugins(
        &self,
        old: Option<&k8s_openapi::api::core::v1::Pod>,
        new: Option<&k8s_openapi::api::core::v1::Pod>,
    ) {
        for p in &self.pod_event_observers {
            if let Some(observer) = p.as_pod_events() {
                observer.on_pod_event(old, new);
            }
        }
    }

    /// Whether some plugin of the profile takes part in group cycles' PlacementFeasible.
    pub fn has_placement_feasible_plugins(&self) -> bool {
        !self.placement_feasible.is_empty()
    }

    /// Runs the PlacementFeasible plugins of a group cycle (by name): an Unschedulable,
    /// UnschedulableAndUnresolvable or Error answer stops at once and is returned with its
    /// plugin; a Wait is kept while the others run and returned when none refused; Success
    /// otherwise.
    pub fn run_placement_feasible_plugins(
        &self,
        state: &mut crate::workload::PlacementCycleState,
        group: &crate::workload::PodGroupInfo,
        progress: crate::workload::PlacementProgress,
    ) -> Status {
        let mut wait: Option<Status> = None;
        for p in &self.placement_feasible {
            let Some(pf) = p.as_placement_feasible() else {
                continue;
            };
            let s = pf.placement_feasible(state, group, progress);
            if s.is_success() || s.is_skip() {
                continue;
            }
            if s.is_wait() {
                wait.get_or_insert(s.with_plugin(p.name()));
                continue;
            }
            return plugin_failure("PlacementFeasible", p.name(), s);
        }
        wait.unwrap_or_else(Status::success)
    }

    /// Whether the profile has PlacementGenerate plugins (without them a group cycle under
    /// TopologyAwareWorkloadScheduling tries one placement of every node).
    pub fn has_placement_generate_plugins(&self) -> bool {
        !self.placement_generate.is_empty()
    }

    /// Runs the PlacementGenerate plugins of a group cycle: starting from `parent`, each
    /// plugin in order splits every placement the ones before it produced (so the result is
    /// the intersections of their placements; empty ones are dropped). A plugin's
    /// rejection ends it with that status and the plugin named, an error as
    /// `running PlacementGenerate plugin "X": …`.
    pub fn run_placement_generate_plugins(
        &self,
        state: &mut CycleState,
        group: &crate::workload::PodGroupInfo,
        parent: crate::workload::Placement,
    ) -> Result<Vec<crate::workload::Placement>, Status> {
        let mut current = vec![parent];
        for p in &self.placement_generate {
            let Some(pg) = p.as_placement_generate() else {
                continue;
            };
            let mut next = Vec::new();
            for placement in &current {
                let generated = pg
                    .generate_placements(state, group, placement)
                    .map_err(|s| plugin_failure("PlacementGenerate", p.name(), s))?;
                next.extend(generated.into_iter().filter(|g| !g.nodes.is_empty()));
            }
            current = next;
        }
        Ok(current)
    }

    /// Runs the PlacementScore plugins over a group's feasible placements (aligned with
    /// `assignments` and `states`): each plugin scores every placement, normalises the
    /// scores when it does, and the weighted sums are returned per placement with each
    /// plugin's part. A failure is `running PlacementScore plugin "X": …`; a normalised score
    /// outside 0..=100 is upstream's invalid-score error.
    pub fn run_placement_score_plugins(
        &self,
        group: &crate::workload::PodGroupInfo,
        assignments: &[crate::workload::PodGroupAssignments],
        states: &[crate::workload::PlacementCycleState],
    ) -> Result<PlacementScoreTable, Status> {
        let mut table = PlacementScoreTable {
            plugins: Vec::with_capacity(self.placement_score.len()),
            totals: vec![0; assignments.len()],
        };
        for (p, weight) in &self.placement_score {
            let Some(ps) = p.as_placement_score() else {
                continue;
            };
            let raw = assignments
                .iter()
                .zip(states)
                .map(|(a, st)| ps.score_placement(st, group, a))
                .collect::<Result<Vec<i64>, Status>>()
                .map_err(|s| plugin_error("PlacementScore", p.name(), &s))?;
            let mut normalized = raw.clone();
            if ps.has_normalize_placement_score() {
                let s = ps.normalize_placement_scores(group, &mut normalized);
                if !s.is_success() {
                    return Err(plugin_error("Normalize on PlacementScore", p.name(), &s));
                }
            }
            for (i, v) in normalized.iter().enumerate() {
                if !(MIN_NODE_SCORE..=MAX_NODE_SCORE).contains(v) {
                    return Err(Status::error(format!(
                        "plugin {:?} returns an invalid score {v}, it should in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing",
                        p.name()
                    ))
                    .with_plugin(p.name()));
                }
                table.totals[i] = table.totals[i].saturating_add(v.saturating_mul(*weight));
            }
            table.plugins.push(PluginScores {
                plugin: p.name().to_string(),
                weight: *weight,
                raw,
                normalized,
            });
        }
        Ok(table)
    }

    /// A plugin instance by name.
    pub fn plugin(&self, name: &str) -> Option<&Arc<dyn Plugin>> {
        self.instances.get(name)
    }

    /// The enabled plugin names of a point, in order.
    pub fn plugin_names_at(&self, point: ExtensionPoint) -> Vec<String> {
        self.spec.at(point).iter().map(|r| r.name.clone()).collect()
    }

    /// Whether any Filter plugin is enabled.
    pub fn has_filter_plugins(&self) -> bool {
        !self.filter.is_empty()
    }

    /// Whether any PostFilter plugin is enabled.
    pub fn has_post_filter_plugins(&self) -> bool {
        !self.post_filter.is_empty()
    }

    /// Whether any Score plugin is enabled.
    pub fn has_score_plugins(&self) -> bool {
        !self.score.is_empty()
    }

    /// The QueueSort plugin's ordering; None when the profile has none.
    pub fn queue_sort(&self) -> Option<&Arc<dyn Plugin>> {
        self.queue_sort.as_ref()
    }

    /// The PreEnqueue plugins.
    pub fn pre_enqueue_plugins(&self) -> &[Arc<dyn Plugin>] {
        &self.pre_enqueue
    }

    /// Cluster events per plugin, as the queue needs them. Plugins that can reject a pod
    /// but register no events are listed with a wildcard event, so their pods still move;
    /// so is [`EXTENDER_NAME`](crate::EXTENDER_NAME) when extenders are configured.
    pub fn events_to_register(&self) -> BTreeMap<String, Vec<ClusterEventWithHint>> {
        let mut out = BTreeMap::new();
        for (name, p) in &self.instances {
            let rejects = p.as_pre_enqueue().is_some()
                || p.as_pre_filter().is_some()
                || p.as_filter().is_some()
                || p.as_reserve().is_some()
                || p.as_permit().is_some()
                || p.as_pre_bind().is_some();
            match p.as_enqueue_extensions() {
                Some(ext) => {
                    out.insert(name.clone(), ext.events_to_register());
                }
                None if rejects => {
                    out.insert(
                        name.clone(),
                        vec![ClusterEventWithHint::new(
                            crate::events::EventResource::WildCard,
                            crate::events::ActionType::ALL,
                        )],
                    );
                }
                None => {}
            }
        }
        if !self.handle.extenders().is_empty() {
            // Extenders register no events: a pod they rejected moves on any event.
            out.insert(
                crate::EXTENDER_NAME.to_string(),
                vec![ClusterEventWithHint::new(
                    crate::events::EventResource::WildCard,
                    crate::events::ActionType::ALL,
                )],
            );
        }
        out
    }

    /// Runs `f`, timing it into the plugin duration metric when `record` is set. The
    /// plugin is passed whole so its name is only asked for when recording.
    fn timed<R>(
        &self,
        record: bool,
        plugin: &Arc<dyn Plugin>,
        point: ExtensionPoint,
        f: impl FnOnce() -> (R, Code),
    ) -> R {
        if record {
            let start = Instant::now();
            let (r, code) = f();
            self.metrics
                .plugin_duration(plugin.name(), point, code, start.elapsed());
            r
        } else {
            f().0
        }
    }

    fn point_done(&self, point: ExtensionPoint, status: &Status, start: Instant) {
        self.metrics.extension_point_duration(
            &self.profile_name,
            point,
            status.code(),
            start.elapsed(),
        );
    }

    /// PreEnqueue: the first plugin that does not answer Success keeps the pod gated.
    pub fn run_pre_enqueue_plugins(&self, pod: &PodInfo) -> Status {
        let start = Instant::now();
        let mut result = Status::success();
        for p in &self.pre_enqueue {
            let Some(pe) = p.as_pre_enqueue() else {
                continue;
            };
            let s = pe.pre_enqueue(pod);
            if !s.is_success() {
                result = plugin_failure("PreEnqueue", p.name(), s);
                break;
            }
        }
        self.point_done(ExtensionPoint::PreEnqueue, &result, start);
        result
    }

    /// Runs the PreFilter plugins, as upstream: UnschedulableAndUnresolvable stops at once;
    /// Unschedulable is remembered while the remaining plugins still run (preemption needs
    /// their state); Skip removes the plugin's Filter for this pod; node narrowings are
    /// intersected, and an empty intersection rejects the pod. `unschedulable_plugins` holds
    /// the plugins that narrowed the node set. A pod with resource claims is rejected here,
    /// before any plugin, when this binary has no DynamicResources plugin (see
    /// [`DYNAMIC_RESOURCES_MISSING`]).
    pub fn run_pre_filter_plugins(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> PreFilterOutcome {
        let start = Instant::now();
        let mut result: Option<PreFilterResult> = None;
        let mut narrowing_plugins: BTreeSet<String> = BTreeSet::new();
        let mut status = Status::success();
        let done = |state: &mut CycleState, status: Status, result, plugins| {
            state.filter_skip_mask = self.filter_skip_mask(state);
            self.point_done(ExtensionPoint::PreFilter, &status, start);
            PreFilterOutcome {
                result,
                status,
                unschedulable_plugins: plugins,
            }
        };
        if let Some(s) = missing_dynamic_resources(pod) {
            return done(state, s, None, BTreeSet::new());
        }
        for p in &self.pre_filter {
            let Some(pf) = p.as_pre_filter() else {
                continue;
            };
            self.metrics.plugin_evaluations(
                &self.profile_name,
                ExtensionPoint::PreFilter,
                p.name(),
                1,
            );
            let (r, s) = self.timed(
                state.record_plugin_metrics,
                p,
                ExtensionPoint::PreFilter,
                || {
                    let (r, s) = pf.pre_filter(state, pod, nodes);
                    let code = s.code();
                    ((r, s), code)
                },
            );
            if s.is_skip() {
                state.skip_filter_plugins.insert(p.name().to_string());
                continue;
            }
            if !s.is_success() {
                match s.code() {
                    Code::UnschedulableAndUnresolvable => {
                        return done(state, s.with_plugin(p.name()), None, BTreeSet::new());
                    }
                    Code::Unschedulable => {
                        status = s.with_plugin(p.name());
                        continue;
                    }
                    _ => {
                        let e = plugin_error("PreFilter", p.name(), &s);
                        return done(state, e, None, BTreeSet::new());
                    }
                }
            }
            let Some(r) = r.filter(|r| !r.all()) else {
                continue;
            };
            narrowing_plugins.insert(p.name().to_string());
            let merged = match result {
                None => r,
                Some(prev) => prev.merge(&r),
            };
            let empty = merged.node_names.as_ref().is_some_and(|n| n.is_empty());
            result = Some(merged);
            if empty {
                let names: Vec<&str> = narrowing_plugins.iter().map(String::as_str).collect();
                let msg = if names.len() == 1 {
                    format!("node(s) didn't satisfy plugin {}", names[0])
                } else {
                    format!(
                        "node(s) didn't satisfy plugin(s) [{}] simultaneously",
                        names.join(" ")
                    )
                };
                return done(state, Status::unresolvable(msg), result, narrowing_plugins);
            }
        }
        done(state, status, result, narrowing_plugins)
    }

    /// The bits of the Filter plugins named in `state.skip_filter_plugins`.
    fn filter_skip_mask(&self, state: &CycleState) -> u64 {
        if state.skip_filter_plugins.is_empty() {
            return 0;
        }
        self.filter
            .iter()
            .enumerate()
            .filter(|(i, p)| *i < 64 && state.skip_filter_plugins.contains(p.name()))
            .fold(0, |m, (i, _)| m | (1u64 << i))
    }

    fn filter_skipped(&self, state: &CycleState, i: usize, p: &Arc<dyn Plugin>) -> bool {
        if i < 64 {
            state.filter_skip_mask & (1u64 << i) != 0
        } else {
            state.skip_filter_plugins.contains(p.name())
        }
    }

    /// Counts Filter's plugin runs of one cycle in one go (`scheduler_plugin_evaluation_total`
    /// for Filter): every plugin not skipped ran on the `passed` nodes, and on a rejected node
    /// every plugin up to the one that rejected it. Counting per cycle keeps a shared counter
    /// off Filter's per-node path.
    pub fn record_filter_evaluations<'a>(
        &self,
        state: &CycleState,
        passed: usize,
        rejected: impl IntoIterator<Item = &'a Status>,
    ) {
        if self.filter.is_empty() {
            return;
        }
        // How many nodes each plugin rejected (the last plugin stands for a status that
        // names no filter plugin); rejections mostly come from a few plugins in a row, so
        // the previous answer is tried first.
        let mut rejected_by = vec![0u64; self.filter.len()];
        let mut previous: Option<(&str, usize)> = None;
        for status in rejected {
            let at = match (status.plugin(), previous) {
                (Some(name), Some((prev, at))) if prev == name => at,
                (Some(name), _) => {
                    let at = self
                        .filter
                        .iter()
                        .position(|p| p.name() == name)
                        .unwrap_or(self.filter.len() - 1);
                    previous = Some((name, at));
                    at
                }
                (None, _) => self.filter.len() - 1,
            };
            rejected_by[at] += 1;
        }
        // A plugin ran on every node that passed and on every node rejected by it or by a
        // later plugin.
        let mut ran = vec![passed as u64; self.filter.len()];
        let mut later = 0;
        for i in (0..self.filter.len()).rev() {
            later += rejected_by[i];
            ran[i] += later;
        }
        for (i, (p, n)) in self.filter.iter().zip(ran).enumerate() {
            if n > 0 && !self.filter_skipped(state, i, p) {
                self.metrics.plugin_evaluations(
                    &self.profile_name,
                    ExtensionPoint::Filter,
                    p.name(),
                    n,
                );
            }
        }
    }

    /// Filter on one node: the first plugin that does not answer Success decides.
    pub fn run_filter_plugins(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if state.record_plugin_metrics {
            let mut timings = self.filter_timings();
            return self.filter_timed(state, pod, node, &mut timings);
        }
        for (i, p) in self.filter.iter().enumerate() {
            if self.filter_skipped(state, i, p) {
                continue;
            }
            let Some(f) = p.as_filter() else { continue };
            let s = f.filter(state, pod, node);
            if !s.is_success() {
                return self.filter_rejection(i, s);
            }
        }
        Status::success()
    }

    fn filter_rejection(&self, i: usize, s: Status) -> Status {
        let name = &self.filter_names[i];
        if !s.is_rejected() {
            return Status::error(format!("running {name:?} filter plugin: {s}"))
                .with_plugin_shared(name);
        }
        s.with_plugin_shared(name)
    }

    /// Filter on one node timing every plugin into `timings`: one clock read per plugin
    /// (each plugin's time ends where the next one's starts) and no shared metric touched.
    fn filter_timed(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        timings: &mut FilterTimings<'_>,
    ) -> Status {
        let mut started = Instant::now();
        for (i, p) in self.filter.iter().enumerate() {
            if self.filter_skipped(state, i, p) {
                continue;
            }
            let Some(f) = p.as_filter() else { continue };
            let s = f.filter(state, pod, node);
            let now = Instant::now();
            timings.push(i, s.code(), now - started);
            started = now;
            if !s.is_success() {
                return self.filter_rejection(i, s);
            }
        }
        Status::success()
    }

    /// A buffer for the per-node Filter timings of a sampled cycle: give it to
    /// [`Framework::run_filter_plugins_with_nominated_pods_into`] for every node a worker
    /// filters; it records what it holds into the metrics when dropped, so a Filter pass
    /// touches the shared histograms once per worker and plugin instead of once per node
    /// and plugin.
    pub fn filter_timings(&self) -> FilterTimings<'_> {
        FilterTimings {
            fw: self,
            success: vec![Vec::new(); self.filter.len()],
            other: Vec::new(),
        }
    }

    /// Runs every PreFilter extension's AddPod for a pod added to `node` hypothetically.
    pub fn run_pre_filter_extension_add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        pod_to_add: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        self.run_pre_filter_extensions(state, "AddPod", |ext, state| {
            ext.add_pod(state, pod, pod_to_add, node)
        })
    }

    /// Runs every PreFilter extension's RemovePod for a pod removed from `node`.
    pub fn run_pre_filter_extension_remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        pod_to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        self.run_pre_filter_extensions(state, "RemovePod", |ext, state| {
            ext.remove_pod(state, pod, pod_to_remove, node)
        })
    }

    /// Calls `call` on the PreFilter extensions of the plugins whose Filter runs for this
    /// pod, stopping at the first answer that is not Success (an error naming `what`).
    fn run_pre_filter_extensions(
        &self,
        state: &mut CycleState,
        what: &str,
        call: impl Fn(&dyn PreFilterExtensions, &mut CycleState) -> Status,
    ) -> Status {
        for p in &self.pre_filter {
            if state.skip_filter_plugins.contains(p.name()) {
                continue;
            }
            let Some(ext) = p.as_pre_filter().and_then(|pf| pf.pre_filter_extensions()) else {
                continue;
            };
            let s = call(ext, state);
            if !s.is_success() {
                return plugin_error(&format!("{what} on PreFilter"), p.name(), &s);
            }
        }
        Status::success()
    }

    /// The nominations Filter sees in the cycle of `state`: the nominator's view, taken
    /// at the first call of the cycle that finds any pod nominated and kept in the state
    /// for the rest of the cycle (every node, the preemption dry runs), so a node costs
    /// one lookup without a lock. None while no pod is nominated anywhere.
    pub fn nominations<'a>(&self, state: &'a CycleState) -> Option<&'a NominatedView> {
        if let Some(v) = state.nominations.get() {
            return Some(v);
        }
        let nominator = self.handle.nominator();
        if nominator.is_empty() {
            return None;
        }
        Some(state.nominations.get_or_init(|| nominator.view()))
    }

    /// Adds the pods nominated to `node` with priority ≥ the pod's to a copy of the node
    /// and tells the PreFilter extensions, on a copy of the state. Returns None when there
    /// are none. When no PreFilter extension runs in this cycle the state is not copied:
    /// AddPod would call nothing.
    fn with_nominated_pods<'s>(
        &self,
        state: &'s CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
    ) -> Result<Option<(Cow<'s, CycleState>, NodeInfo)>, Status> {
        let Some(view) = self.nominations(state) else {
            return Ok(None);
        };
        let relevant = |p: &&Arc<PodInfo>| p.priority >= pod.priority && p.uid != pod.uid;
        let nominated = view.pods_for_node(node.name());
        if !nominated.iter().any(|p| relevant(&p)) {
            return Ok(None);
        }
        let extensions = self.has_active_pre_filter_extensions(state);
        let mut state_out = if extensions {
            Cow::Owned(state.clone())
        } else {
            Cow::Borrowed(state)
        };
        let mut node_out = node.clone();
        for p in nominated.iter().filter(relevant) {
            node_out.add_pod(p.clone());
            if !extensions {
                continue;
            }
            let s = self.run_pre_filter_extension_add_pod(state_out.to_mut(), pod, p, &node_out);
            if !s.is_success() {
                return Err(s);
            }
        }
        Ok(Some((state_out, node_out)))
    }

    /// Whether a PreFilter plugin whose Filter runs in this cycle has AddPod/RemovePod.
    fn has_active_pre_filter_extensions(&self, state: &CycleState) -> bool {
        self.pre_filter.iter().any(|p| {
            p.as_pre_filter()
                .and_then(|pf| pf.pre_filter_extensions())
                .is_some()
                && !state.skip_filter_plugins.contains(p.name())
        })
    }

    /// Explain mode only: what would make each Filter plugin that rejects `node` accept
    /// it. Unlike Filter, every plugin runs (not only up to the first rejection), so the
    /// answer lists everything standing in the way; plugins see the node with the pods
    /// nominated to it, as Filter does. Not timed nor counted in metrics.
    pub fn filter_remedies(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
    ) -> Vec<crate::NodeRemedy> {
        let with = self.with_nominated_pods(state, pod, node).ok().flatten();
        let mut out = Vec::new();
        for (i, p) in self.filter.iter().enumerate() {
            if self.filter_skipped(state, i, p) {
                continue;
            }
            let Some(f) = p.as_filter() else { continue };
            let rejecting = with
                .as_ref()
                .map(|(s2, n2)| (&**s2, n2))
                .filter(|(s2, n2)| f.filter(s2, pod, n2).is_rejected())
                .or_else(|| {
                    f.filter(state, pod, node)
                        .is_rejected()
                        .then_some((state, node))
                });
            if let Some((s, n)) = rejecting {
                out.extend(
                    f.remedies(s, pod, n)
                        .into_iter()
                        .map(|r| crate::NodeRemedy::new(p.name(), r)),
                );
            }
        }
        out
    }

    /// Filter with nominated pods taken into account, as upstream does: first with the
    /// higher-or-equal priority pods nominated to the node added (they must fit too), then,
    /// if that passed and pods were added, without them (anti-affinity to them must not
    /// be what lets the pod in).
    pub fn run_filter_plugins_with_nominated_pods(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        self.filter_with_nominated_pods(state, pod, node, |state, node| {
            self.run_filter_plugins(state, pod, node)
        })
    }

    /// As [`Framework::run_filter_plugins_with_nominated_pods`]; in a cycle that samples
    /// plugin metrics the plugins' times go into `timings` (see
    /// [`Framework::filter_timings`]) instead of straight into the metrics.
    pub fn run_filter_plugins_with_nominated_pods_into(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        timings: &mut FilterTimings<'_>,
    ) -> Status {
        self.filter_with_nominated_pods(state, pod, node, |state, node| {
            if state.record_plugin_metrics {
                self.filter_timed(state, pod, node, timings)
            } else {
                self.run_filter_plugins(state, pod, node)
            }
        })
    }

    fn filter_with_nominated_pods(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        mut filter: impl FnMut(&CycleState, &NodeInfo) -> Status,
    ) -> Status {
        let with = match self.with_nominated_pods(state, pod, node) {
            Ok(w) => w,
            Err(s) => return s,
        };
        match with {
            None => filter(state, node),
            Some((state2, node2)) => {
                let s = filter(&state2, &node2);
                if !s.is_success() {
                    return s;
                }
                filter(state, node)
            }
        }
    }

    /// PostFilter: the first plugin that succeeds wins; otherwise the reasons of all are
    /// joined.
    pub async fn run_post_filter_plugins(
        &self,
        state: &CycleState,
        pod: &Arc<PodInfo>,
        statuses: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status) {
        let start = Instant::now();
        let mut reasons = Vec::new();
        let mut rejector: Option<String> = None;
        let mut result = None;
        for p in &self.post_filter {
            let Some(pf) = p.as_post_filter() else {
                continue;
            };
            let t0 = Instant::now();
            let (r, s) = pf.post_filter(self, state, pod, statuses).await;
            if state.record_plugin_metrics {
                self.metrics.plugin_duration(
                    p.name(),
                    ExtensionPoint::PostFilter,
                    s.code(),
                    t0.elapsed(),
                );
            }
            if s.is_success() {
                self.point_done(ExtensionPoint::PostFilter, &s, start);
                return (r, s);
            }
            if s.code() == Code::UnschedulableAndUnresolvable {
                let s = s.with_plugin(p.name());
                self.point_done(ExtensionPoint::PostFilter, &s, start);
                return (r, s);
            }
            if !s.is_rejected() {
                let s = Status::error(s.message()).with_plugin(p.name());
                self.point_done(ExtensionPoint::PostFilter, &s, start);
                return (None, s);
            }
            if r.is_some() {
                result = r;
            }
            reasons.extend(s.reasons().iter().cloned());
            rejector.get_or_insert_with(|| p.name().to_string());
        }
        let mut s = Status::new(Code::Unschedulable, reasons);
        if let Some(r) = rejector {
            s = s.with_plugin(&r);
        }
        self.point_done(ExtensionPoint::PostFilter, &s, start);
        (result, s)
    }

    /// PreScore: Skip removes the plugin's Score for this pod.
    pub fn run_pre_score_plugins(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Status {
        let start = Instant::now();
        let mut status = Status::success();
        for p in &self.pre_score {
            let Some(ps) = p.as_pre_score() else { continue };
            self.metrics.plugin_evaluations(
                &self.profile_name,
                ExtensionPoint::PreScore,
                p.name(),
                1,
            );
            let s = self.timed(
                state.record_plugin_metrics,
                p,
                ExtensionPoint::PreScore,
                || {
                    let s = ps.pre_score(state, pod, nodes);
                    let c = s.code();
                    (s, c)
                },
            );
            if s.is_skip() {
                state.skip_score_plugins.insert(p.name().to_string());
                continue;
            }
            if !s.is_success() {
                status = plugin_error("PreScore", p.name(), &s);
                break;
            }
        }
        self.point_done(ExtensionPoint::PreScore, &status, start);
        status
    }

    /// Score, NormalizeScore and weights over the feasible nodes (in parallel per plugin).
    pub fn run_score_plugins(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Result<ScoreTable, Status> {
        let start = Instant::now();
        let out = self.score_inner(state, pod, nodes);
        let status = match &out {
            Ok(_) => Status::success(),
            Err(s) => s.clone(),
        };
        self.point_done(ExtensionPoint::Score, &status, start);
        out
    }

    fn score_inner(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Result<ScoreTable, Status> {
        let active: Vec<(&Arc<dyn Plugin>, &dyn ScorePlugin, i64)> = self
            .score
            .iter()
            .filter(|(p, _)| !state.skip_score_plugins.contains(p.name()))
            .filter_map(|(p, w)| p.as_score().map(|sp| (p, sp, *w)))
            .collect();
        for (p, _, _) in &active {
            self.metrics
                .plugin_evaluations(&self.profile_name, ExtensionPoint::Score, p.name(), 1);
        }
        let raw_by_plugin = if state.record_plugin_metrics || active.len() > MAX_FUSED_SCORE_PLUGINS
        {
            self.score_per_plugin(state, pod, nodes, &active)?
        } else {
            self.score_fused(state, pod, nodes, &active)?
        };
        let mut table = ScoreTable {
            plugins: Vec::with_capacity(active.len()),
            totals: vec![0; nodes.len()],
        };
        for ((p, sp, weight), raw) in active.iter().zip(raw_by_plugin) {
            let mut normalized = raw.clone();
            if sp.has_normalize_score() {
                let s = sp.normalize_score(state, pod, nodes, &mut normalized);
                if !s.is_success() {
                    return Err(plugin_error("Normalize on Score", p.name(), &s));
                }
            }
            for (i, v) in normalized.iter().enumerate() {
                if !(MIN_NODE_SCORE..=MAX_NODE_SCORE).contains(v) {
                    return Err(Status::error(format!(
                        "plugin {:?} returns an invalid score {v}, it should in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing",
                        p.name()
                    ))
                    .with_plugin(p.name()));
                }
                table.totals[i] += v * weight;
            }
            table.plugins.push(PluginScores {
                plugin: p.name().to_string(),
                weight: *weight,
                raw,
                normalized,
            });
        }
        Ok(table)
    }

    /// One pass over the nodes per plugin, timing each plugin (sampled cycles).
    fn score_per_plugin(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        active: &[(&Arc<dyn Plugin>, &dyn ScorePlugin, i64)],
    ) -> Result<Vec<Vec<i64>>, Status> {
        let par = self.handle.parallelizer();
        let mut out = Vec::with_capacity(active.len());
        for (p, sp, _) in active {
            let results = self.timed(
                state.record_plugin_metrics,
                p,
                ExtensionPoint::Score,
                || {
                    (
                        par.map(nodes.len(), |i| sp.score(state, pod, &nodes[i])),
                        Code::Success,
                    )
                },
            );
            let raw = results
                .into_iter()
                .collect::<Result<Vec<i64>, Status>>()
                .map_err(|s| plugin_error("Score", p.name(), &s))?;
            out.push(raw);
        }
        Ok(out)
    }

    /// One pass over the nodes for all plugins at once: one parallel dispatch per cycle
    /// instead of one per plugin, and each node's data is touched while it is in cache.
    fn score_fused(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        active: &[(&Arc<dyn Plugin>, &dyn ScorePlugin, i64)],
    ) -> Result<Vec<Vec<i64>>, Status> {
        let rows = self.handle.parallelizer().map(nodes.len(), |i| {
            let mut row = [0i64; MAX_FUSED_SCORE_PLUGINS];
            for (k, (_, sp, _)) in active.iter().enumerate() {
                match sp.score(state, pod, &nodes[i]) {
                    Ok(v) => row[k] = v,
                    Err(s) => return Err((k, s)),
                }
            }
            Ok(row)
        });
        let mut out = vec![Vec::with_capacity(nodes.len()); active.len()];
        for row in rows {
            let row = row.map_err(|(k, s)| plugin_error("Score", active[k].0.name(), &s))?;
            for (k, raw) in out.iter_mut().enumerate() {
                raw.push(row[k]);
            }
        }
        Ok(out)
    }

    /// Reserve: stops at the first failure.
    pub fn run_reserve_plugins_reserve(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node_name: &str,
    ) -> Status {
        let start = Instant::now();
        let mut status = Status::success();
        for p in &self.reserve {
            let Some(r) = p.as_reserve() else { continue };
            let s = r.reserve(state, pod, node_name);
            if !s.is_success() {
                status = plugin_failure("Reserve", p.name(), s);
                break;
            }
        }
        self.point_done(ExtensionPoint::Reserve, &status, start);
        status
    }

    /// Unreserve: every Reserve plugin, in reverse order.
    pub fn run_reserve_plugins_unreserve(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node_name: &str,
    ) {
        let start = Instant::now();
        for p in self.reserve.iter().rev() {
            if let Some(r) = p.as_reserve() {
                r.unreserve(state, pod, node_name);
            }
        }
        self.point_done(ExtensionPoint::Reserve, &Status::success(), start);
    }

    /// Permit: a rejection stops; Waits are collected and the pod is registered as waiting.
    pub fn run_permit_plugins(
        &self,
        state: &CycleState,
        pod: &Arc<PodInfo>,
        node_name: &str,
    ) -> Status {
        let start = Instant::now();
        let mut waits: HashMap<String, Duration> = HashMap::new();
        let mut status = Status::success();
        for p in &self.permit {
            let Some(pm) = p.as_permit() else { continue };
            let (s, timeout) = pm.permit(state, pod, node_name);
            if s.is_success() {
                continue;
            }
            if s.is_rejected() {
                status = s.with_plugin(p.name());
                break;
            }
            if s.is_wait() {
                waits.insert(p.name().to_string(), timeout.min(MAX_PERMIT_TIMEOUT));
                continue;
            }
            status = plugin_error("Permit", p.name(), &s);
            break;
        }
        if status.is_success() && !waits.is_empty() {
            self.handle
                .waiting_pods()
                .add_at(pod.clone(), waits, self.handle.clock().now());
            status = Status::new(
                Code::Wait,
                [format!(
                    "one or more plugins asked to wait and no plugin rejected pod {:?}",
                    pod.name
                )],
            );
        }
        self.point_done(ExtensionPoint::Permit, &status, start);
        status
    }

    /// Waits for a pod held at Permit; Success at once when it is not waiting.
    pub async fn wait_on_permit(&self, pod: &PodInfo) -> Status {
        let Some(wp) = self.handle.waiting_pods().get(&pod.uid) else {
            return Status::success();
        };
        let waited = Instant::now();
        let s = wp.wait().await;
        self.metrics.permit_wait(s.code(), waited.elapsed());
        self.handle.waiting_pods().remove(&pod.uid);
        if s.is_success() {
            return s;
        }
        if is_rejection(s.code()) {
            return s;
        }
        // A pod preempted while it waited ends here (v1.36, kubernetes#135719): an error,
        // so it goes to backoffQ rather than waiting for an event.
        let plugin = s.plugin().unwrap_or_default().to_string();
        Status::error(format!("waiting on permit for pod: {}", s.message())).with_plugin(&plugin)
    }

    /// PreBind: Skip is fine; anything else but Success stops. Plugins run in their
    /// configured order, except that neighbours whose pre-flight allowed parallel PreBind
    /// (`CycleState::parallel_pre_bind_plugins`) run at the same time, as v1.36's
    /// framework does (#135393): the first of them to fail stops the others, which are
    /// dropped (cancelled) unfinished.
    pub async fn run_pre_bind_plugins(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node_name: &str,
    ) -> Status {
        let start = Instant::now();
        let mut status = Status::success();
        let plugins: Vec<(&str, &dyn PreBindPlugin)> = self
            .pre_bind
            .iter()
            .filter(|p| !state.skip_pre_bind_plugins.contains(p.name()))
            .filter_map(|p| p.as_pre_bind().map(|pb| (p.name(), pb)))
            .collect();
        let parallel = &state.parallel_pre_bind_plugins;
        let mut first = 0;
        while first < plugins.len() {
            // A batch: one plugin, or a run of neighbours that all allow parallel PreBind.
            let mut end = first + 1;
            if parallel.contains(plugins[first].0) {
                while end < plugins.len() && parallel.contains(plugins[end].0) {
                    end += 1;
                }
            }
            let failed = if end - first == 1 {
                let (name, pb) = plugins[first];
                let s = pb.pre_bind(state, pod, node_name).await;
                (!s.is_success() && !s.is_skip()).then_some((name, s))
            } else {
                first_pre_bind_failure(&plugins[first..end], state, pod, node_name).await
            };
            if let Some((plugin, s)) = failed {
                status = plugin_failure("PreBind", plugin, s);
                break;
            }
            first = end;
        }
        self.point_done(ExtensionPoint::PreBind, &status, start);
        status
    }

    /// PreBindPreFlight of every PreBind plugin: Success when one or more will have work,
    /// Skip when none will (those that said Skip are left out of PreBind), an error at the
    /// first plugin that fails or answers anything but Success, Skip or Error.
    pub fn run_pre_bind_pre_flights(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node_name: &str,
    ) -> Status {
        let mut result = Status::skip();
        let mut skipped = HashSet::new();
        let mut parallel = HashSet::new();
        for p in &self.pre_bind {
            let Some(pb) = p.as_pre_bind() else { continue };
            let s = pb.pre_bind_pre_flight(state, pod, node_name);
            match s.code() {
                Code::Success => {
                    result = Status::success();
                    if pb.pre_bind_allows_parallel(state, pod, node_name) {
                        parallel.insert(p.name().to_string());
                    }
                }
                Code::Skip => {
                    skipped.insert(p.name().to_string());
                }
                Code::Error => {
                    return Status::error(format!(
                        "running PreBindPreFlight {:?}: {}",
                        p.name(),
                        s.message()
                    ));
                }
                other => {
                    return Status::error(format!(
                        "PreBindPreFlight {} returned {:?}, which is unsupported. It is supposed to return Success, Skip, or Error status",
                        p.name(),
                        other.as_str()
                    ));
                }
            }
        }
        state.skip_pre_bind_plugins = skipped;
        state.parallel_pre_bind_plugins = parallel;
        result
    }

    /// Whether the pod waits at Permit (a Permit plugin said Wait and nothing decided yet).
    pub fn will_wait_on_permit(&self, pod: &PodInfo) -> bool {
        self.handle.waiting_pods().get(&pod.uid).is_some()
    }

    /// Bind: plugins in order until one does not Skip. Skip from all (or none enabled)
    /// is returned as Skip.
    pub async fn run_bind_plugins(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node_name: &str,
    ) -> Status {
        let start = Instant::now();
        let mut status = Status::skip();
        for p in &self.bind {
            let Some(b) = p.as_bind() else { continue };
            let s = b.bind(state, pod, node_name).await;
            if s.is_skip() {
                continue;
            }
            status = if s.is_success() {
                s
            } else {
                plugin_failure("Bind", p.name(), s)
            };
            break;
        }
        self.point_done(ExtensionPoint::Bind, &status, start);
        status
    }

    /// PostBind: informational, every plugin.
    pub fn run_post_bind_plugins(&self, state: &CycleState, pod: &PodInfo, node_name: &str) {
        let start = Instant::now();
        for p in &self.post_bind {
            if let Some(pb) = p.as_post_bind() {
                pb.post_bind(state, pod, node_name);
            }
        }
        self.point_done(ExtensionPoint::PostBind, &Status::success(), start);
    }
}

#[cfg(test)]
mod declaration_tests {
    use std::sync::Arc;

    use kubesched_model::{NodeInfo, PodInfo};

    use super::check_declaration;
    use crate::registry::{ArgsCodec, DecodedArgs, PluginDescriptor};
    use crate::{
        CycleState, ExtensionPoint, FilterPlugin, Handle, Plugin, PluginError, PointSet, Status,
    };

    struct OnlyFilter;
    impl FilterPlugin for OnlyFilter {
        fn filter(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
            Status::success()
        }
    }
    crate::impl_plugin!(OnlyFilter, name: "OnlyFilter");

    fn build(_: &DecodedArgs, _: &Handle) -> Result<Arc<dyn Plugin>, PluginError> {
        Ok(Arc::new(OnlyFilter))
    }

    fn descriptor(name: &'static str, points: fn() -> PointSet) -> PluginDescriptor {
        PluginDescriptor {
            name,
            points,
            args: ArgsCodec::none(),
            factory: build,
            crate_name: "test",
            kinds: &[],
            writes: &[],
        }
    }

    #[test]
    fn a_hand_written_descriptor_that_disagrees_is_refused_with_the_name() {
        let plugin = OnlyFilter;
        let right = descriptor("OnlyFilter", || {
            PointSet::EMPTY.with(ExtensionPoint::Filter)
        });
        assert!(check_declaration(&right, &plugin).is_ok());

        let extra = descriptor("OnlyFilter", || {
            PointSet::EMPTY
                .with(ExtensionPoint::Filter)
                .with(ExtensionPoint::Score)
        });
        let err = check_declaration(&extra, &plugin).expect_err("Score listed without impl");
        assert_eq!(
            err.0,
            "plugin \"OnlyFilter\": registered with extension points [Filter, Score] but its object implements [Filter]"
        );

        let missing = descriptor("OnlyFilter", || PointSet::EMPTY);
        let err = check_declaration(&missing, &plugin).expect_err("Filter impl not listed");
        assert!(
            err.0.contains("registered with extension points []"),
            "{}",
            err.0
        );

        let renamed = descriptor("Other", || PointSet::EMPTY.with(ExtensionPoint::Filter));
        let err = check_declaration(&renamed, &plugin).expect_err("name differs");
        assert!(
            err.0.contains("\"Other\"") && err.0.contains("\"OnlyFilter\""),
            "{}",
            err.0
        );
    }
}

#[cfg(test)]
mod failure_tests {
    use super::{plugin_error, plugin_failure};
    use crate::{Code, Status};

    #[test]
    fn a_rejection_stays_one_and_names_the_plugin() {
        for s in [
            Status::unschedulable("node(s) are full"),
            Status::unresolvable("node(s) didn't match"),
        ] {
            let code = s.code();
            let out = plugin_failure("Reserve", "A", s.clone());
            assert_eq!(out.code(), code);
            assert_eq!(out.message(), s.message());
            assert_eq!(out.plugin(), Some("A"));
        }
    }

    #[test]
    fn anything_else_is_the_plugin_error_in_upstream_words() {
        let out = plugin_failure("PreEnqueue", "A", Status::error("boom"));
        assert_eq!(out.code(), Code::Error);
        assert_eq!(out.message(), "running PreEnqueue plugin \"A\": boom");
        assert_eq!(out.plugin(), Some("A"));
        let out = plugin_error("Normalize on Score", "B", &Status::error("bad"));
        assert_eq!(
            out.message(),
            "running Normalize on Score plugin \"B\": bad"
        );
        assert_eq!(out.plugin(), Some("B"));
    }
}
