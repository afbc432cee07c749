//! `CycleState`: typed storage that lives for one scheduling cycle of one pod.

use std::any::{Any, TypeId};
use std::collections::{HashMap, HashSet};

use rustc_hash::FxBuildHasher;

/// Data a plugin keeps in the cycle state. Any `Clone + Send + Sync` type qualifies; the
/// clone is what preemption's dry runs mutate.
pub trait StateData: Any + Send + Sync {
    /// A boxed copy.
    fn clone_data(&self) -> Box<dyn StateData>;
    /// Upcast for downcasting.
    fn as_any(&self) -> &dyn Any;
    /// Upcast for downcasting.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + Send + Sync + Clone> StateData for T {
    fn clone_data(&self) -> Box<dyn StateData> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Per-cycle storage keyed by type: each plugin stores its own state type, so lookups are
/// a cheap hash of a `TypeId` (Filter and Score read it once per node), never a string.
#[derive(Default)]
pub struct CycleState {
    data: HashMap<TypeId, Box<dyn StateData>, FxBuildHasher>,
    /// Filter plugins whose PreFilter said Skip.
    pub skip_filter_plugins: HashSet<String>,
    /// Score plugins whose PreScore said Skip.
    pub skip_score_plugins: HashSet<String>,
    /// PreBind plugins whose PreBindPreFlight said Skip: PreBind does not call them.
    pub skip_pre_bind_plugins: HashSet<String>,
    /// PreBind plugins whose PreBindPreFlight allowed parallel PreBind: neighbours in this
    /// set run at the same time (v1.36, #135393).
    pub parallel_pre_bind_plugins: HashSet<String>,
    /// Whether per-plugin durations are recorded in this cycle (a sample of cycles).
    pub record_plugin_metrics: bool,
    /// `skip_filter_plugins` as bits over the profile's Filter plugins, set by the framework
    /// after PreFilter so the per-node loop tests a bit instead of hashing a name.
    pub(crate) filter_skip_mask: u64,
    /// The nominations this cycle's Filter runs see, taken from the nominator at the first
    /// node that needs them (see `Framework::run_filter_plugins_with_nominated_pods`).
    pub(crate) nominations: std::sync::OnceLock<std::sync::Arc<crate::NominatedView>>,
}

impl Clone for CycleState {
    fn clone(&self) -> Self {
        Self {
            data: self
                .data
                .iter()
                .map(|(k, v)| (*k, (**v).clone_data()))
                .collect(),
            skip_filter_plugins: self.skip_filter_plugins.clone(),
            skip_score_plugins: self.skip_score_plugins.clone(),
            skip_pre_bind_plugins: self.skip_pre_bind_plugins.clone(),
            parallel_pre_bind_plugins: self.parallel_pre_bind_plugins.clone(),
            record_plugin_metrics: self.record_plugin_metrics,
            filter_skip_mask: self.filter_skip_mask,
            nominations: self.nominations.clone(),
        }
    }
}

impl std::fmt::Debug for CycleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CycleState")
            .field("entries", &self.data.len())
            .field("skip_filter_plugins", &self.skip_filter_plugins)
            .field("skip_score_plugins", &self.skip_score_plugins)
            .field("skip_pre_bind_plugins", &self.skip_pre_bind_plugins)
            .field("parallel_pre_bind_plugins", &self.parallel_pre_bind_plugins)
            .finish()
    }
}

impl CycleState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores a value, replacing one of the same type.
    pub fn write<T: Any + Send + Sync + Clone>(&mut self, value: T) {
        self.data.insert(TypeId::of::<T>(), Box::new(value));
    }

    /// Reads the value of a type.
    pub fn read<T: Any>(&self) -> Option<&T> {
        self.data
            .get(&TypeId::of::<T>())
            .and_then(|v| (**v).as_any().downcast_ref())
    }

    /// Mutable access to the value of a type.
    pub fn read_mut<T: Any>(&mut self) -> Option<&mut T> {
        self.data
            .get_mut(&TypeId::of::<T>())
            .and_then(|v| (**v).as_any_mut().downcast_mut())
    }

    /// Removes the value of a type.
    pub fn delete<T: Any>(&mut self) {
        self.data.remove(&TypeId::of::<T>());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct Counts(Vec<u32>);

    #[test]
    fn typed_round_trip_and_clone_is_deep() {
        let mut state = CycleState::new();
        assert!(state.read::<Counts>().is_none());
        state.write(Counts(vec![1]));
        let copy = state.clone();
        state.read_mut::<Counts>().unwrap().0.push(2);
        assert_eq!(state.read::<Counts>(), Some(&Counts(vec![1, 2])));
        assert_eq!(copy.read::<Counts>(), Some(&Counts(vec![1])));
        state.delete::<Counts>();
        assert!(state.read::<Counts>().is_none());
    }
}
