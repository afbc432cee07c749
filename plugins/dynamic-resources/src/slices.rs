//! The ResourceSlices of the cluster, indexed by the node they serve and by pool, with
//! each device's CEL input built once and its selector results remembered, and the
//! counters of partitionable devices (shared counter sets, each device's consumption)
//! parsed once. Rebuilt only when the slice store changes, so pods after the first pay
//! nothing for slices they have already seen.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use kubesched_framework::Store;
use kubesched_framework::model::k8s_openapi::api::core::v1::NodeSelector as ApiNodeSelector;
use kubesched_framework::model::k8s_openapi::api::resource::v1::{Device, ResourceSlice};
use kubesched_framework::model::{Labels, NodeSelector, Quantity};
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
    /// Per device (`perDeviceNodeSelection: true`, DRAPartitionableDevices): each device
    /// says where it is reachable; the slice serves a node when one of them does.
    PerDevice,
    /// Nothing known is set: some future field; the slice is ignored.
    Unknown,
}

/// Counters one device consumes from one counter set of its pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterUse {
    /// The counter set's name.
    pub set: String,
    /// Counter name and amount.
    pub counters: Vec<(String, Quantity)>,
}

/// A counter set: counter name and value.
pub type Counters = BTreeMap<String, Quantity>;

/// A quantity as written (for allocation results) and its value in nano-units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Amount {
    /// The text of the API object.
    pub text: String,
    /// The value.
    pub nanos: i128,
}

impl Amount {
    fn parse(text: &str, what: impl FnOnce() -> String) -> Result<Self, String> {
        Ok(Self {
            text: text.to_string(),
            nanos: quantity(text, what)?.nanos(),
        })
    }
}

/// A capacity's `requestPolicy` (DRAConsumableCapacity).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestPolicy {
    /// What a request that does not name the capacity consumes.
    pub default: Option<Amount>,
    /// `validRange`: min, optional max and step.
    pub range: Option<(Amount, Option<Amount>, Option<Amount>)>,
    /// `validValues`, ascending.
    pub valid_values: Option<Vec<Amount>>,
}

/// One capacity of a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceCapacity {
    /// Its name as the device publishes it.
    pub name: String,
    /// The total.
    pub value: Amount,
    /// How requests for it are rounded and checked.
    pub policy: Option<RequestPolicy>,
}

/// Where a device of a `perDeviceNodeSelection` slice is reachable.
#[derive(Debug)]
pub enum DeviceNodes {
    /// Exactly one node.
    Name(String),
    /// Every node.
    All,
    /// Nodes matching a selector (or a selector that does not compile).
    Selector(Result<NodeSelector, String>),
    /// None of the fields is set: no node.
    None,
}

/// One device of a slice.
#[derive(Debug)]
pub struct IndexedDevice {
    /// Its identity.
    pub id: DeviceId,
    /// The API object.
    pub device: Device,
    /// What it takes from its pool's counter sets, or why that cannot be read.
    pub counters: Result<Vec<CounterUse>, String>,
    /// Where it is reachable, for a slice with `perDeviceNodeSelection` (else None).
    pub nodes: Option<DeviceNodes>,
    /// Its capacities, or why they cannot be read.
    pub capacity: Result<Vec<DeviceCapacity>, String>,
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
            .map(|v| v.with_allow_multiple(self.allows_multiple()))
        })
    }

    /// Whether several claims may share the device (`allowMultipleAllocations`).
    pub fn allows_multiple(&self) -> bool {
        self.device.allow_multiple_allocations == Some(true)
    }

    /// Whether the device consumes counters (a partitionable device).
    pub fn consumes_counters(&self) -> bool {
        self.device
            .consumes_counters
            .as_ref()
            .is_some_and(|c| !c.is_empty())
    }

    /// For a device of a `perDeviceNodeSelection` slice: whether it is reachable from the
    /// node (`Ok(true)` for devices of other slices, which the slice decides for).
    pub fn serves(&self, node_name: &str, labels: &Labels, slice: &str) -> Result<bool, String> {
        match &self.nodes {
            None => Ok(true),
            Some(DeviceNodes::Name(n)) => Ok(n == node_name),
            Some(DeviceNodes::All) => Ok(true),
            Some(DeviceNodes::Selector(Ok(sel))) => Ok(sel.matches(labels, node_name)),
            Some(DeviceNodes::Selector(Err(e))) => Err(format!(
                "failed to perform node selection for device {} in slice {slice}: {e}",
                self.id.device
            )),
            Some(DeviceNodes::None) => Ok(false),
        }
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
    /// `spec.sharedCounters` is not empty: the slice holds counter sets for its pool and
    /// belongs to the pool on every node.
    pub has_shared_counters: bool,
    /// `spec.perDeviceNodeSelection` is set (to anything: with DRAPartitionableDevices off
    /// such slices are left out).
    pub per_device_field: bool,
    /// Its counter sets by name, or why they cannot be read.
    pub counter_sets: Result<Vec<(String, Counters)>, String>,
}

fn quantity(value: &str, what: impl FnOnce() -> String) -> Result<Quantity, String> {
    Quantity::parse(value).map_err(|e| format!("{}: {e}", what()))
}

fn device_nodes(d: &Device) -> DeviceNodes {
    if let Some(n) = d.node_name.as_deref().filter(|n| !n.is_empty()) {
        DeviceNodes::Name(n.to_string())
    } else if d.all_nodes == Some(true) {
        DeviceNodes::All
    } else if let Some(sel) = &d.node_selector {
        DeviceNodes::Selector(NodeSelector::compile(sel, "nodeSelector").map_err(|e| e.to_string()))
    } else {
        DeviceNodes::None
    }
}

fn counter_uses(slice: &str, d: &Device) -> Result<Vec<CounterUse>, String> {
    let mut out = Vec::new();
    for (i, c) in d.consumes_counters.iter().flatten().enumerate() {
        let mut counters = Vec::with_capacity(c.counters.len());
        for (name, counter) in &c.counters {
            let q = quantity(&counter.value.0, || {
                format!(
                    "slice {slice}, device {}: consumesCounters[{i}].counters[{name}].value",
                    d.name
                )
            })?;
            counters.push((name.clone(), q));
        }
        out.push(CounterUse {
            set: c.counter_set.clone(),
            counters,
        });
    }
    Ok(out)
}

fn capacities(slice: &str, d: &Device) -> Result<Vec<DeviceCapacity>, String> {
    let field = |name: &str, rest: &str| {
        format!("slice {slice}, device {}: capacity[{name}]{rest}", d.name)
    };
    let mut out = Vec::new();
    for (name, cap) in d.capacity.iter().flatten() {
        let value = Amount::parse(&cap.value.0, || field(name, ".value"))?;
        let policy = match &cap.request_policy {
            None => None,
            Some(p) => Some(RequestPolicy {
                default: p
                    .default
                    .as_ref()
                    .map(|q| Amount::parse(&q.0, || field(name, ".requestPolicy.default")))
                    .transpose()?,
                range: match &p.valid_range {
                    None => None,
                    Some(r) => Some((
                        Amount::parse(&r.min.0, || field(name, ".requestPolicy.validRange.min"))?,
                        r.max
                            .as_ref()
                            .map(|q| {
                                Amount::parse(&q.0, || field(name, ".requestPolicy.validRange.max"))
                            })
                            .transpose()?,
                        r.step
                            .as_ref()
                            .map(|q| {
                                Amount::parse(&q.0, || {
                                    field(name, ".requestPolicy.validRange.step")
                                })
                            })
                            .transpose()?,
                    )),
                },
                valid_values: p
                    .valid_values
                    .as_ref()
                    .map(|v| {
                        v.iter()
                            .enumerate()
                            .map(|(i, q)| {
                                Amount::parse(&q.0, || {
                                    field(name, &format!(".requestPolicy.validValues[{i}]"))
                                })
                            })
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .transpose()?,
            }),
        };
        out.push(DeviceCapacity {
            name: name.clone(),
            value,
            policy,
        });
    }
    Ok(out)
}

fn counter_sets(slice: &ResourceSlice) -> Result<Vec<(String, Counters)>, String> {
    let name = slice.metadata.name.as_deref().unwrap_or("");
    let mut out = Vec::new();
    for (i, set) in slice.spec.shared_counters.iter().flatten().enumerate() {
        let mut counters = Counters::new();
        for (counter, value) in &set.counters {
            let q = quantity(&value.value.0, || {
                format!("slice {name}: sharedCounters[{i}].counters[{counter}].value")
            })?;
            counters.insert(counter.clone(), q);
        }
        out.push((set.name.clone(), counters));
    }
    Ok(out)
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
        } else if spec.per_device_node_selection == Some(true) {
            SliceNodes::PerDevice
        } else {
            SliceNodes::Unknown
        };
        let per_device = matches!(nodes, SliceNodes::PerDevice);
        let slice_name = slice.metadata.name.as_deref().unwrap_or("");
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
                counters: counter_uses(slice_name, d),
                capacity: capacities(slice_name, d),
                nodes: per_device.then(|| device_nodes(d)),
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
            has_shared_counters: spec.shared_counters.as_ref().is_some_and(|c| !c.is_empty()),
            per_device_field: spec.per_device_node_selection.is_some(),
            counter_sets: counter_sets(slice),
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
            SliceNodes::PerDevice => {
                for d in &self.devices {
                    if d.serves(node_name, labels, &self.name)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            SliceNodes::Unknown => Ok(false),
        }
    }
}

/// A pool: driver and pool name.
type PoolKey = (Arc<str>, Arc<str>);

/// Every slice, by node and by pool.
#[derive(Debug, Default)]
pub struct SliceIndex {
    generation: u64,
    by_node: HashMap<String, Vec<Arc<IndexedSlice>>>,
    /// Slices for all nodes, with node selectors, or with devices choosing their nodes.
    others: Vec<Arc<IndexedSlice>>,
    /// Slices with shared counters: part of their pool wherever the pool is used.
    counter_slices: Vec<Arc<IndexedSlice>>,
    /// Every slice, by driver and pool (a pool's slices elsewhere decide whether it is
    /// complete, and their allocated devices use up its counters).
    by_pool: HashMap<PoolKey, Vec<Arc<IndexedSlice>>>,
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
            index
                .by_pool
                .entry((s.driver.clone(), s.pool.clone()))
                .or_default()
                .push(s.clone());
            if s.has_shared_counters {
                index.counter_slices.push(s);
                continue;
            }
            match &s.nodes {
                SliceNodes::Name(n) => index.by_node.entry(n.clone()).or_default().push(s),
                SliceNodes::Unknown => {}
                _ => index.others.push(s),
            }
        }
        // Name order, so what the allocator sees does not depend on the store's order.
        for slices in index.by_pool.values_mut() {
            slices.sort_by(|a, b| a.name.cmp(&b.name));
        }
        index
    }

    /// Every slice of a pool, in name order.
    pub fn pool_slices(&self, driver: &Arc<str>, pool: &Arc<str>) -> &[Arc<IndexedSlice>] {
        self.by_pool
            .get(&(driver.clone(), pool.clone()))
            .map_or(&[], Vec::as_slice)
    }

    /// The store generation this index reflects.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The slices that may serve `node_name`: its own, then those with selectors, for
    /// all nodes or choosing per device (the caller checks those), then those with
    /// counter sets.
    pub fn candidates<'a>(
        &'a self,
        node_name: &str,
    ) -> impl Iterator<Item = &'a Arc<IndexedSlice>> + 'a {
        self.by_node
            .get(node_name)
            .into_iter()
            .flatten()
            .chain(self.others.iter())
            .chain(self.counter_slices.iter())
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
