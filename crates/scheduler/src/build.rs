//! Assembles a scheduler from a loaded configuration.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kubesched_cache::Cache;
use kubesched_config::LoadedConfig;
use kubesched_framework::clock::Clock;
use kubesched_framework::{ClusterClient, Framework, Handle, Nominator, ObjectStore, WaitingPods};
use kubesched_queue::{QueueConfig, SchedulingQueue};

use crate::compiled_pods::CompiledPods;
use crate::extender::build_extenders;
use crate::metrics::SchedulerMetrics;
use crate::{Scheduler, SchedulerOptions};

/// A profile could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", if profile.is_empty() { String::new() } else { format!("profile {profile:?}: ") })]
pub struct BuildError {
    /// The profile's scheduler name.
    pub profile: String,
    /// What went wrong.
    pub message: String,
}

/// What a backend provides to build a scheduler.
pub struct SchedulerParts {
    /// Writes to the cluster.
    pub client: Arc<dyn ClusterClient>,
    /// The store of non-pod, non-node objects the backend keeps filled.
    pub objects: Arc<ObjectStore>,
    /// The clock (a fake one in simulations).
    pub clock: Arc<dyn Clock>,
    /// The tie-breaking seed.
    pub seed: Option<u64>,
    /// The building thread drives every scheduling cycle (a simulation on a
    /// current-thread runtime): make it one of the parallel workers, so a cycle's
    /// parallel passes need no thread hand-off.
    pub caller_joins_pool: bool,
}

/// Builds the extenders, frameworks for every profile, the cache, the queue and the
/// scheduler.
pub fn build_scheduler(
    loaded: &LoadedConfig,
    parts: SchedulerParts,
) -> Result<Arc<Scheduler>, BuildError> {
    let cfg = &loaded.config;
    let extenders = build_extenders(&cfg.extenders).map_err(|message| BuildError {
        profile: String::new(),
        message,
    })?;
    let specs = &loaded.profiles;
    let metrics = Arc::new(SchedulerMetrics::new());
    let nominator = Arc::new(Nominator::new());
    let compiled_pods = Arc::new(CompiledPods::default());
    let mut builder = Handle::builder();
    // Both modes build the scheduler on the runtime that drives it: plugins' background
    // work (started from any extension point, any thread) runs there.
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        builder = builder.runtime(runtime);
    }
    let handle = builder
        .client(parts.client)
        .live_pods(compiled_pods.clone())
        .objects(parts.objects)
        .nominator(nominator.clone())
        .waiting_pods(Arc::new(WaitingPods::default()))
        .parallelism(cfg.parallelism.max(1) as usize)
        .caller_joins_pool(parts.caller_joins_pool)
        .clock(parts.clock.clone())
        .extenders(extenders)
        .features(loaded.feature_gates.clone())
        .plugin_metrics(metrics.plugin_metrics().clone())
        .build_with_control();
    let mut profiles = BTreeMap::new();
    for spec in specs {
        let fw = Framework::with_metrics(spec.clone(), handle.handle().clone(), metrics.clone())
            .map_err(|e| BuildError {
                profile: spec.scheduler_name.clone(),
                message: e.to_string(),
            })?;
        profiles.insert(spec.scheduler_name.clone(), Arc::new(fw));
    }
    let cache = Arc::new(Cache::new(Duration::ZERO, parts.clock.clone()));
    let queue = Arc::new(SchedulingQueue::new(
        profiles.clone(),
        nominator,
        parts.clock,
        QueueConfig {
            initial_backoff: Duration::from_secs(cfg.pod_initial_backoff_seconds.max(1) as u64),
            max_backoff: Duration::from_secs(cfg.pod_max_backoff_seconds.max(1) as u64),
            max_in_unschedulable: Duration::from_secs(5 * 60),
            pop_from_backoff: loaded
                .feature_gates
                .enabled(kubesched_framework::Feature::SchedulerPopFromBackoffQ),
        },
        Some(metrics.clone() as Arc<dyn kubesched_queue::QueueMetrics>),
    ));
    handle.set_activator(queue.clone());
    let options = SchedulerOptions {
        percentage_of_nodes_to_score: cfg.percentage_of_nodes_to_score,
        seed: parts.seed,
    };
    Ok(Arc::new(Scheduler::with_compiled_pods(
        profiles,
        cache,
        queue,
        handle,
        metrics,
        options,
        compiled_pods,
    )))
}
