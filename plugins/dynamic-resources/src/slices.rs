//! The ResourceSlices of the cluster, indexed by the node they serve, with each device's
//! CEL input built once and its selector results remembered. Rebuilt only when the slice
//! store changes, so pods after the first pay nothing for slices they have already seen.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use kubesched_framework::Store;
use kubesched_framework::model::k8s_openapi::api::core::v1::NodeSelector as ApiNodeSelector;
use kubesched_framework::model::k8s_openapi::api::resource::v1::{Device, ResourceSlice};
use kubesched_framework::model::{Labels, NodeSelector};
use parking_lot::Mutex;

use crate::cel::{CompiledExpression, DeviceValue};

/// A device's identity: driver, pool, device name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    /// The driver.
    pub driver: Arc<str>,
    /// The pool.
    pub pool: Arc<str>,
    /// The device's name in its pool.
    pub device: Arc<str>,
}

impl DeviceId {
    /// A device id from its parts.
    pub fn new(driver: &str, pool: &str, device: &str) -> Self {
        Self {
            driver: driver.into(),
            pool: pool.into(),
            device: device.into(),
        }
    }
}

/// A set of devices (the devices in use). Fx-hashed: the set is rebuilt or copied per
/// scheduling attempt, and its keys are not attacker-chosen hash floods but API names.
pub type DeviceSet = std::collections::HashSet<DeviceId, rustc_hash::FxBuildHasher>;

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// Which nodes a slice's devices are reachable from.
#[derive(Debug)]
pub enum SliceNodes {
    /// Exactly one node.
    Name(String),
    /// Every node.
    All,
    /// Nodes matching a selector (or a selector that does not compile).
    Selector(Result<NodeSelector, String>),
    /// Per device (`perDeviceNodeSelection`): partitionable devices, off in v1.34 defaults.
    PerDevice,
    /// Nothing known is set: some future field; the slice is ignored.
    Unknown,
}

/// One device of a slice.
#[derive(Debug)]
pub struct IndexedDevice {
    /// Its identity.
    pub id: DeviceId,
    /// The API object.
    pub device: Device,
    value: OnceLock<Result<DeviceValue, String>>,
    /// Selector results already computed for this device: (expression, matched).
    memo: Mutex<Vec<(Arc<CompiledExpression>, bool)>>,
}

impl IndexedDevice {
    /// The device as CEL sees it, built on first use.
    pub fn cel_value(&self) -> &Result<DeviceValue, String> {
        self.value.get_or_init(|| {
            DeviceValue::new(
                &self.id.driver,
                self.device.attributes.as_ref(),
                self.device.capacity.as_ref(),
            )
        })
    }

    /// Whether `expr` selects this device; remembered when it evaluates without error.
    pub fn selected_by(&self, expr: &Arc<CompiledExpression>) -> Result<bool, String> {
        if let Some((_, m)) = self
            .memo
            .lock()
            .iter()
            .find(|(e, _)| Arc::ptr_eq(e, expr) || e.expression == expr.expression)
        {
            return Ok(*m);
        }
        let value = self.cel_value().as_ref().map_err(Clone::clone)?;
        let matched = expr.matches(value)?;
        self.memo.lock().push((expr.clone(), matched));
        Ok(matched)
    }
}

/// One slice with what the allocator needs from it.
#[derive(Debug)]
pub struct IndexedSlice {
    /// The slice's name.
    pub name: String,
    /// Its driver.
    pub driver: Arc<str>,
    /// Its pool's name.
    pub pool: Arc<str>,
    /// The pool generation it belongs to.
    pub generation: i64,
    /// How many slices the pool has in that generation.
    pub slice_count: i64,
    /// The nodes it serves.
    pub nodes: SliceNodes,
    /// The slice's node selector as written, for allocation results.
    pub api_node_selector: Option<ApiNodeSelector>,
    /// Its devices, in order.
    pub devices: Vec<IndexedDevice>,
}

impl IndexedSlice {
    fn new(slice: &ResourceSlice) -> Self {
        let spec = &slice.spec;
        let driver: Arc<str> = spec.driver.as_str().into();
        let pool: Arc<str> = spec.pool.name.as_str().into();
        let nodes = if let Some(n) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
            SliceNodes::Name(n.to_string())
        } else if spec.all_nodes == Some(true) {
            SliceNodes::All
        } else if let Some(sel) = &spec.node_selector {
            SliceNodes::Selector(
                NodeSelector::compile(sel, "spec.nodeSelector").map_err(|e| e.to_string()),
            )
        } else if spec.per_device_node_selection.is_some() {
            SliceNodes::PerDevice
        } else {
            SliceNodes::Unknown
        };
        let devices = spec
            .devices
            .iter()
            .flatten()
            .map(|d| IndexedDevice {
                id: DeviceId {
                    driver: driver.clone(),
                    pool: pool.clone(),
                    device: d.name.as_str().into(),
                },
                device: d.clone(),
                value: OnceLock::new(),
                memo: Mutex::new(Vec::new()),
            })
            .collect();
        Self {
            name: slice.metadata.name.clone().unwrap_or_default(),
            driver,
            pool,
            generation: spec.pool.generation,
            slice_count: spec.pool.resource_slice_count,
            nodes,
            api_node_selector: spec.node_selector.clone(),
            devices,
        }
    }

    /// Whether the slice serves the node; an error when its node selector is broken.
    pub fn serves(&self, node_name: &str, labels: &Labels) -> Result<bool, String> {
        match &self.nodes {
            SliceNodes::Name(n) => Ok(n == node_name),
            SliceNodes::All => Ok(true),
            SliceNodes::Selector(Ok(sel)) => Ok(sel.matches(labels, node_name)),
            SliceNodes::Selector(Err(e)) => Err(format!(
                "failed to perform node selection for slice {}: {e}",
                self.name
            )),
            SliceNodes::PerDevice | SliceNodes::Unknown => Ok(false),
        }
    }
}

/// Every slice, by node.
#[derive(Debug, Default)]
pub struct SliceIndex {
    generation: u64,
    by_node: HashMap<String, Vec<Arc<IndexedSlice>>>,
    others: Vec<Arc<IndexedSlice>>,
    /// Number of slices indexed.
    pub len: usize,
}

impl SliceIndex {
    /// Builds the index from the store's content.
    pub fn build(store: &Store<ResourceSlice>) -> Self {
        let generation = store.generation();
        let mut index = Self {
            generation,
            ..Self::default()
        };
        for slice in store.list() {
            let s = Arc::new(IndexedSlice::new(&slice));
            index.len += 1;
            match &s.nodes {
                SliceNodes::Name(n) => index.by_node.entry(n.clone()).or_default().push(s),
                SliceNodes::PerDevice | SliceNodes::Unknown => {}
                _ => index.others.push(s),
            }
        }
        index
    }

    /// The store generation this index reflects.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The slices that may serve `node_name`: its own, then those with selectors or for
    /// all nodes (the caller checks those).
    pub fn candidates<'a>(
        &'a self,
        node_name: &str,
    ) -> impl Iterator<Item = &'a Arc<IndexedSlice>> + 'a {
        self.by_node
            .get(node_name)
            .into_iter()
            .flatten()
            .chain(self.others.iter())
    }
}

/// Keeps one index and rebuilds it when the slice store changes.
#[derive(Debug, Default)]
pub struct SliceIndexCache {
    current: Mutex<Option<Arc<SliceIndex>>>,
}

impl SliceIndexCache {
    /// The index of the store as it is now.
    pub fn get(&self, store: &Store<ResourceSlice>) -> Arc<SliceIndex> {
        let generation = store.generation();
        let mut current = self.current.lock();
        if let Some(idx) = current.as_ref()
            && idx.generation == generation
        {
            return idx.clone();
        }
        let idx = Arc::new(SliceIndex::build(store));
        *current = Some(idx.clone());
        idx
    }
}
