//! The structured-parameters allocator: given the claims a pod still needs allocated,
//! finds devices for all of them on one node, as upstream's `structured` allocator does
//! with v1.37's default gates (its "incubating" variant, which those gates select:
//! admin access, prioritized lists, device taints, partitionable devices, consumable
//! capacity and binding conditions on); [`Features`] turns each off as older releases
//! had it.
//!
//! The search is exhaustive with early exit: claims in order, requests in order, one
//! device after the other, backtracking when a later device cannot be found. The first
//! complete solution wins. Pools and slices are visited in name order so results are
//! deterministic.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use kubesched_framework::model::k8s_openapi::api::core::v1::{
    NodeSelector as ApiNodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
};
use kubesched_framework::model::k8s_openapi::api::resource::v1::{
    AllocationResult, CapacityRequirements, DeviceAllocationConfiguration, DeviceAllocationResult,
    DeviceAttribute, DeviceClass, DeviceRequestAllocationResult, DeviceSelector, DeviceTaint,
    DeviceTaintRule, DeviceTaintSelector, DeviceToleration, ResourceClaim,
};
use kubesched_framework::model::k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use kubesched_framework::model::{Labels, Quantity};

use crate::cel::{CelCache, CompiledExpression};
use crate::manager::{AllocatedState, Capacity, kobj};
use crate::slices::{
    Amount, Counters, DeviceId, DeviceNodes, IndexedDevice, IndexedSlice, SliceIndex, SliceNodes,
};

/// Upstream's `AllocationResultsMaxSize`: devices one claim may get.
pub const ALLOCATION_RESULTS_MAX_SIZE: usize = 32;

/// Which optional allocator features are on; the default is v1.37's gates (all on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// `DRAAdminAccess`.
    pub admin_access: bool,
    /// `DRAPrioritizedList` (`firstAvailable`).
    pub prioritized_list: bool,
    /// `DRADeviceTaints` (GA in v1.37): a tainted device goes only to a request that
    /// tolerates its taints.
    pub device_taints: bool,
    /// `DRAPartitionableDevices` (beta, on in v1.36): shared counter sets, devices that
    /// consume counters, `perDeviceNodeSelection`. Off, such slices are left out and
    /// devices consuming counters are never allocated.
    pub partitionable_devices: bool,
    /// `DRAConsumableCapacity` (beta, on in v1.36): devices with
    /// `allowMultipleAllocations` are shared by several requests, each consuming the
    /// capacity it asks for (rounded by the capacity's `requestPolicy`);
    /// `distinctAttribute` constraints. Off, a request with capacity requests is an
    /// error and shared allocations count as whole ones.
    pub consumable_capacity: bool,
    /// `DRADeviceBindingConditions` and `DRAResourceClaimDeviceStatus` (beta, on in
    /// v1.36): devices with binding conditions are offered, and their results carry the
    /// conditions PreBind waits for. Off, such devices are never allocated.
    pub binding_conditions: bool,
}

impl Default for Features {
    fn default() -> Self {
        Self {
            admin_access: true,
            prioritized_list: true,
            device_taints: true,
            partitionable_devices: true,
            consumable_capacity: true,
            binding_conditions: true,
        }
    }
}

/// One request, or one subrequest of a `firstAvailable` list, ready to match devices.
#[derive(Debug)]
struct RequestData {
    /// `request` or `request/subrequest`.
    full_name: String,
    /// The top-level request's name.
    base: String,
    /// The subrequest's name, if any.
    sub: Option<String>,
    class: Arc<DeviceClass>,
    class_selectors: Vec<Arc<CompiledExpression>>,
    selectors: Vec<Arc<CompiledExpression>>,
    all: bool,
    count: usize,
    admin_access: bool,
    /// The request's tolerations of device taints; None when taints are not looked at
    /// (DRADeviceTaints off).
    tolerations: Option<Vec<DeviceToleration>>,
    /// `capacity.requests` (DRAConsumableCapacity).
    capacity: Option<BTreeMap<String, Amount>>,
}

/// A claim's constraint on the devices of the requests it names (empty: all).
#[derive(Debug)]
enum Constraint {
    /// `matchAttribute`: every device has the same value.
    Match(String, Vec<String>),
    /// `distinctAttribute` (DRAConsumableCapacity): no two devices share a value.
    Distinct(String, Vec<String>),
}

impl Constraint {
    fn requests(&self) -> &[String] {
        match self {
            Self::Match(_, r) | Self::Distinct(_, r) => r,
        }
    }
}

/// Where a constraint is in one attempt.
#[derive(Debug)]
enum ConstraintState {
    /// The value the first device fixed and how many devices share it.
    Match(Option<(DeviceAttribute, usize)>),
    /// The values taken so far.
    Distinct(Vec<DeviceAttribute>),
}

/// A top-level request: one alternative, or several in priority order.
#[derive(Debug)]
struct RequestPlan {
    alternatives: Vec<RequestData>,
    first_available: bool,
}

#[derive(Debug)]
struct ClaimPlan {
    claim: Arc<ResourceClaim>,
    requests: Vec<RequestPlan>,
    constraints: Vec<Constraint>,
}

/// An allocator for one pod's pending claims; built in PreFilter, used by every Filter.
#[derive(Debug)]
pub struct Allocator {
    features: Features,
    plans: Result<Vec<ClaimPlan>, String>,
    allocated: Arc<AllocatedState>,
    index: Arc<SliceIndex>,
    /// Taints DeviceTaintRules add to the devices they select.
    taint_rules: Vec<TaintRule>,
}

/// A DeviceTaintRule: the taint, and which devices get it (each part unset: any).
#[derive(Debug, Clone)]
pub struct TaintRule {
    /// `spec.deviceSelector.driver`.
    pub driver: Option<String>,
    /// `spec.deviceSelector.pool`.
    pub pool: Option<String>,
    /// `spec.deviceSelector.device`.
    pub device: Option<String>,
    /// `spec.taint`.
    pub taint: DeviceTaint,
}

impl TaintRule {
    /// The rule of a DeviceTaintRule object.
    pub fn of(rule: &DeviceTaintRule) -> Self {
        let selector = rule.spec.device_selector.as_ref();
        let part = |f: fn(&DeviceTaintSelector) -> &Option<String>| {
            selector
                .and_then(|s| f(s).clone())
                .filter(|v| !v.is_empty())
        };
        Self {
            driver: part(|s| &s.driver),
            pool: part(|s| &s.pool),
            device: part(|s| &s.device),
            taint: rule.spec.taint.clone(),
        }
    }

    fn selects(&self, id: &DeviceId) -> bool {
        self.driver.as_deref().is_none_or(|d| d == &*id.driver)
            && self.pool.as_deref().is_none_or(|p| p == &*id.pool)
            && self.device.as_deref().is_none_or(|d| d == &*id.device)
    }
}

/// The node an allocation is attempted on.
#[derive(Debug, Clone, Copy)]
pub struct NodeRef<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its labels.
    pub labels: &'a Labels,
}

fn compile_selectors(
    cel: &CelCache,
    selectors: Option<&Vec<DeviceSelector>>,
    owner: &dyn Fn(usize) -> String,
) -> Result<Vec<Arc<CompiledExpression>>, String> {
    let mut out = Vec::new();
    for (i, s) in selectors.into_iter().flatten().enumerate() {
        let Some(c) = &s.cel else {
            return Err(format!(
                "{}, selector #{i}: CEL expression empty (unsupported selector type?)",
                owner(i)
            ));
        };
        out.push(cel.get_or_compile(&c.expression));
    }
    Ok(out)
}

impl Allocator {
    /// Prepares the allocation of `claims`. `allocated` are the devices in use by other
    /// claims; `class_of` looks device classes up.
    pub fn new(
        features: Features,
        claims: &[Arc<ResourceClaim>],
        allocated: Arc<AllocatedState>,
        class_of: &dyn Fn(&str) -> Option<Arc<DeviceClass>>,
        index: Arc<SliceIndex>,
        cel: &CelCache,
    ) -> Self {
        let plans = claims
            .iter()
            .map(|c| plan_claim(features, c, class_of, cel))
            .collect();
        Self {
            features,
            plans,
            allocated,
            index,
            taint_rules: Vec::new(),
        }
    }

    /// Adds the taints of DeviceTaintRules (DRADeviceTaintRules) to the devices they
    /// select.
    pub fn with_taint_rules(mut self, rules: Vec<TaintRule>) -> Self {
        self.taint_rules = rules;
        self
    }

    /// How many claims this allocator allocates.
    pub fn num_claims(&self) -> usize {
        self.plans.as_ref().map(Vec::len).unwrap_or(0)
    }

    /// Allocates every claim on `node`: `Ok(None)` when they do not all fit, `Err` when
    /// something is wrong with a claim, class, selector or slice.
    pub fn allocate(&self, node: NodeRef<'_>) -> Result<Option<Vec<AllocationResult>>, String> {
        self.allocate_until(node, None).map_err(|e| match e {
            Stopped::Deadline => TIMED_OUT.to_string(),
            Stopped::Failed(e) | Stopped::OnNode(e) => e,
        })
    }

    /// [`Allocator::allocate`], giving up when the search is still going at `deadline`
    /// (DynamicResourcesArgs' `filterTimeout`).
    pub fn allocate_until(
        &self,
        node: NodeRef<'_>,
        deadline: Option<Instant>,
    ) -> Result<Option<Vec<AllocationResult>>, Stopped> {
        let plans = self
            .plans
            .as_ref()
            .map_err(|e| Stopped::Failed(e.clone()))?;
        let pools = gather_pools(&self.index, node, self.features)
            .map_err(|e| Stopped::Failed(format!("gather pool information: {e}")))?;
        let mut run = Run {
            node,
            features: self.features,
            available: pools.iter().map(|_| None).collect(),
            consumed: pools.iter().map(|_| HashMap::new()).collect(),
            taint_rules: &self.taint_rules,
            deadline,
            steps: 0,
            plans,
            allocated: &self.allocated,
            pools: &pools,
            allocating: HashMap::new(),
            results: plans.iter().map(|_| Vec::new()).collect(),
            all_devices: HashMap::new(),
            constraint_state: plans
                .iter()
                .map(|p| {
                    p.constraints
                        .iter()
                        .map(|c| match c {
                            Constraint::Match(..) => ConstraintState::Match(None),
                            Constraint::Distinct(..) => ConstraintState::Distinct(Vec::new()),
                        })
                        .collect()
                })
                .collect(),
            allocating_capacity: HashMap::new(),
            selected: HashMap::new(),
        };
        // Count what each claim needs and resolve "all" requests on this node.
        for (ci, plan) in plans.iter().enumerate() {
            let mut min_devices = 0usize;
            for (ri, req) in plan.requests.iter().enumerate() {
                let mut min_for_request = usize::MAX;
                for (si, alt) in req.alternatives.iter().enumerate() {
                    let n = if alt.all {
                        let devices = run.all_devices_for(ci, alt).map_err(Stopped::Failed)?;
                        let n = devices.len();
                        run.all_devices.insert((ci, ri, si), devices);
                        n
                    } else {
                        alt.count
                    };
                    min_for_request = min_for_request.min(n);
                }
                min_devices += if min_for_request == usize::MAX {
                    0
                } else {
                    min_for_request
                };
            }
            if min_devices > ALLOCATION_RESULTS_MAX_SIZE {
                return Err(Stopped::Failed(format!(
                    "claim {}: number of requested devices {min_devices} exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}",
                    kobj(&plan.claim)
                )));
            }
        }
        match run.allocate_one(Pos::default(), false) {
            Ok(true) => {}
            Ok(false) | Err(Stop::MaxSize) => {
                if pools.iter().any(|p| p.invalid.is_some()) {
                    // Only this node: upstream's ErrFailedAllocationOnNode.
                    return Err(Stopped::OnNode(INVALID_POOLS.into()));
                }
                return Ok(None);
            }
            Err(Stop::Deadline) => return Err(Stopped::Deadline),
            Err(Stop::Fatal(e)) => return Err(Stopped::Failed(e)),
        }
        let mut out = Vec::with_capacity(plans.len());
        for (ci, plan) in plans.iter().enumerate() {
            out.push(run.result_of(ci, plan).map_err(Stopped::Failed)?);
        }
        Ok(Some(out))
    }
}

/// The devices on `node` that `class` selects, and how many of them claims hold: what
/// v1.37's NodeResourcesFit scores a DRA-backed extended resource by (its allocatable and
/// requested on the node). Pools that are being updated or are invalid count for nothing;
/// devices with binding conditions count only with the gate on, as the allocator offers
/// them.
pub fn class_device_tally(
    index: &SliceIndex,
    allocated: &AllocatedState,
    node: NodeRef<'_>,
    features: Features,
    class: &DeviceClass,
    cel: &CelCache,
) -> Result<(i64, i64), String> {
    let class_name = class.metadata.name.as_deref().unwrap_or("");
    let owner = |_: usize| format!("class {class_name}");
    let selectors = compile_selectors(
        cel,
        class.spec.as_ref().and_then(|s| s.selectors.as_ref()),
        &owner,
    )?;
    let pools = gather_pools(index, node, features)?;
    let (mut devices, mut taken) = (0i64, 0i64);
    for pool in pools
        .iter()
        .filter(|p| !p.incomplete && p.invalid.is_none())
    {
        for slice in &pool.slices {
            for device in &slice.devices {
                if !features.binding_conditions
                    && device
                        .device
                        .binding_conditions
                        .as_ref()
                        .is_some_and(|c| !c.is_empty())
                {
                    continue;
                }
                if !device.serves(node.name, node.labels, &slice.name)? {
                    continue;
                }
                let mut selected = true;
                for (i, expr) in selectors.iter().enumerate() {
                    if let Some(e) = expr.error() {
                        return Err(format!(
                            "class {class_name}: selector #{i}: CEL compile error: {e}"
                        ));
                    }
                    if !device.selected_by(expr).map_err(|e| {
                        format!(
                            "class {class_name}: selector #{i} on device {}: CEL runtime error: {e}",
                            device.id
                        )
                    })? {
                        selected = false;
                        break;
                    }
                }
                if !selected {
                    continue;
                }
                devices += 1;
                if allocated.has(&device.id) {
                    taken += 1;
                }
            }
        }
    }
    Ok((devices, taken))
}

fn plan_claim(
    features: Features,
    claim: &Arc<ResourceClaim>,
    class_of: &dyn Fn(&str) -> Option<Arc<DeviceClass>>,
    cel: &CelCache,
) -> Result<ClaimPlan, String> {
    let name = kobj(claim);
    let devices = claim.spec.as_ref().and_then(|s| s.devices.as_ref());
    let mut requests = Vec::new();
    for request in devices
        .and_then(|d| d.requests.as_ref())
        .into_iter()
        .flatten()
    {
        let subs = request.first_available.as_deref().unwrap_or_default();
        if !subs.is_empty() {
            if !features.prioritized_list {
                return Err(format!(
                    "claim {name}, request {}: has subrequests, but the DRAPrioritizedList feature is disabled",
                    request.name
                ));
            }
            let mut alternatives = Vec::new();
            for sub in subs {
                if !features.consumable_capacity && sub.capacity.is_some() {
                    return Err(format!(
                        "claim {name}, subrequest {}: has capacity requests, but the DRAConsumableCapacity feature is disabled",
                        sub.name
                    ));
                }
                let full = format!("{}/{}", request.name, sub.name);
                let capacity = capacity_requests(&name, &full, sub.capacity.as_ref())?;
                alternatives.push(request_data(
                    &name,
                    full,
                    request.name.clone(),
                    Some(sub.name.clone()),
                    &sub.device_class_name,
                    sub.allocation_mode.as_deref(),
                    sub.count,
                    None,
                    sub.selectors.as_ref(),
                    sub.tolerations.as_deref(),
                    features,
                    class_of,
                    cel,
                )?);
                if let Some(last) = alternatives.last_mut() {
                    last.capacity = capacity;
                }
            }
            requests.push(RequestPlan {
                alternatives,
                first_available: true,
            });
        } else if let Some(exact) = &request.exactly {
            if !features.consumable_capacity && exact.capacity.is_some() {
                return Err(format!(
                    "claim {name}, request {}: has capacity requests, but the DRAConsumableCapacity feature is disabled",
                    request.name
                ));
            }
            let mut data = request_data(
                &name,
                request.name.clone(),
                request.name.clone(),
                None,
                &exact.device_class_name,
                exact.allocation_mode.as_deref(),
                exact.count,
                exact.admin_access,
                exact.selectors.as_ref(),
                exact.tolerations.as_deref(),
                features,
                class_of,
                cel,
            )?;
            data.capacity = capacity_requests(&name, &request.name, exact.capacity.as_ref())?;
            requests.push(RequestPlan {
                alternatives: vec![data],
                first_available: false,
            });
        } else {
            return Err(format!(
                "claim {name}, request {}: missing device class name (unsupported request type?)",
                request.name
            ));
        }
    }
    let mut constraints = Vec::new();
    for (i, c) in devices
        .and_then(|d| d.constraints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        let requests = c.requests.clone().unwrap_or_default();
        match (&c.match_attribute, &c.distinct_attribute) {
            (Some(attr), _) => constraints.push(Constraint::Match(attr.clone(), requests)),
            (None, Some(attr)) if features.consumable_capacity => {
                constraints.push(Constraint::Distinct(attr.clone(), requests));
            }
            _ => {
                return Err(format!(
                    "claim {name}, constraint #{i}: empty constraint (unsupported constraint type?)"
                ));
            }
        }
    }
    Ok(ClaimPlan {
        claim: claim.clone(),
        requests,
        constraints,
    })
}

/// A request's `capacity.requests`, read once.
fn capacity_requests(
    claim: &str,
    request: &str,
    capacity: Option<&CapacityRequirements>,
) -> Result<Option<BTreeMap<String, Amount>>, String> {
    let Some(requests) = capacity.and_then(|c| c.requests.as_ref()) else {
        return Ok(None);
    };
    let mut out = BTreeMap::new();
    for (name, q) in requests {
        let n = Quantity::parse(&q.0).map_err(|e| {
            format!("claim {claim}, request {request}: capacity.requests[{name}]: {e}")
        })?;
        out.insert(
            name.clone(),
            Amount {
                text: q.0.clone(),
                nanos: n.nanos(),
            },
        );
    }
    Ok(Some(out))
}

#[allow(clippy::too_many_arguments)]
fn request_data(
    claim: &str,
    full_name: String,
    base: String,
    sub: Option<String>,
    class_name: &str,
    mode: Option<&str>,
    count: Option<i64>,
    admin_access: Option<bool>,
    selectors: Option<&Vec<DeviceSelector>>,
    tolerations: Option<&[DeviceToleration]>,
    features: Features,
    class_of: &dyn Fn(&str) -> Option<Arc<DeviceClass>>,
    cel: &CelCache,
) -> Result<RequestData, String> {
    let owner = |_: usize| format!("claim {claim}, request {full_name}");
    let selectors = compile_selectors(cel, selectors, &owner)?;
    if !features.admin_access && admin_access.is_some() {
        return Err(format!(
            "claim {claim}, request {full_name}: admin access is requested, but the feature is disabled"
        ));
    }
    if class_name.is_empty() {
        return Err(format!(
            "claim {claim}, request {full_name}: missing device class name (unsupported request type?)"
        ));
    }
    let class = class_of(class_name).ok_or_else(|| {
        format!(
            "claim {claim}, request {full_name}: could not retrieve device class {class_name}: deviceclass.resource.k8s.io \"{class_name}\" not found"
        )
    })?;
    let class_owner = |_: usize| format!("class {class_name}");
    let class_selectors = compile_selectors(
        cel,
        class.spec.as_ref().and_then(|s| s.selectors.as_ref()),
        &class_owner,
    )?;
    let (all, count) = match mode.unwrap_or("ExactCount") {
        "ExactCount" => {
            let n = count.unwrap_or(1);
            let n = usize::try_from(n).map_err(|_| {
                format!("claim {claim}, request {full_name}: exact count {n} is too large")
            })?;
            (false, n)
        }
        "All" => (true, 0),
        other => {
            return Err(format!(
                "claim {claim}, request {full_name}: unsupported count mode {other}"
            ));
        }
    };
    Ok(RequestData {
        full_name,
        base,
        sub,
        class,
        class_selectors,
        selectors,
        all,
        count,
        admin_access: admin_access == Some(true),
        tolerations: features.device_taints.then(|| {
            tolerations
                .map(<[DeviceToleration]>::to_vec)
                .unwrap_or_default()
        }),
        capacity: None,
    })
}

/// The slices of one pool that serve the node, at the pool's newest generation.
#[derive(Debug)]
struct Pool<'a> {
    id: (Arc<str>, Arc<str>),
    /// Slices with devices for the node, in name order.
    slices: Vec<&'a IndexedSlice>,
    /// The pool's other slices (other nodes): their allocated devices use up counters.
    others: Vec<&'a IndexedSlice>,
    /// The pool's counter sets by name (DRAPartitionableDevices).
    counter_sets: HashMap<&'a str, &'a Counters>,
    incomplete: bool,
    invalid: Option<String>,
}

impl<'a> Pool<'a> {
    fn unusable(id: (Arc<str>, Arc<str>), incomplete: bool, invalid: Option<String>) -> Self {
        Self {
            id,
            slices: Vec::new(),
            others: Vec::new(),
            counter_sets: HashMap::new(),
            incomplete,
            invalid,
        }
    }
}

/// Upstream's `GatherPools`: the pools with devices for the node. A slice with counter
/// sets belongs to its pool on every node; a pool missing slices for the node is checked
/// against all of its slices (a newer generation elsewhere makes it obsolete, a missing
/// slice incomplete).
fn gather_pools<'a>(
    index: &'a SliceIndex,
    node: NodeRef<'_>,
    features: Features,
) -> Result<Vec<Pool<'a>>, String> {
    let mut groups: BTreeMap<(Arc<str>, Arc<str>), Vec<&'a IndexedSlice>> = BTreeMap::new();
    for slice in index.candidates(node.name) {
        if !features.partitionable_devices && (slice.per_device_field || slice.has_shared_counters)
        {
            continue;
        }
        let wanted = slice.has_shared_counters
            || (!matches!(slice.nodes, SliceNodes::Unknown)
                && slice.serves(node.name, node.labels)?);
        if !wanted {
            continue;
        }
        let group = groups
            .entry((slice.driver.clone(), slice.pool.clone()))
            .or_default();
        match group.first().map(|s| s.generation) {
            Some(g) if slice.generation < g => continue,
            Some(g) if slice.generation > g => group.clear(),
            _ => {}
        }
        group.push(slice);
    }
    let mut out = Vec::with_capacity(groups.len());
    for (id, mut group) in groups {
        group.sort_by(|a, b| a.name.cmp(&b.name));
        let (generation, count) = (group[0].generation, group[0].slice_count);
        if group.len() as i64 == count {
            out.push(build_pool(id, group, &[], features));
            continue;
        }
        let all = index.pool_slices(&id.0, &id.1);
        if all.iter().any(|s| s.generation > generation) {
            // The driver is replacing this generation; its newer slices have nothing for
            // the node.
            continue;
        }
        let others: Vec<&IndexedSlice> = all
            .iter()
            .filter(|s| s.generation == generation)
            .map(|s| &**s)
            .collect();
        if others.len() as i64 != count {
            out.push(Pool::unusable(id, true, None));
            continue;
        }
        let others: Vec<&IndexedSlice> = others
            .into_iter()
            .filter(|s| !group.iter().any(|g| g.name == s.name))
            .collect();
        out.push(build_pool(id, group, &others, features));
    }
    Ok(out)
}

/// Upstream's `buildPool`: device names must be unique among the slices for the node;
/// counter set names in the pool; every counter a device consumes must exist.
fn build_pool<'a>(
    id: (Arc<str>, Arc<str>),
    slices: Vec<&'a IndexedSlice>,
    others: &[&'a IndexedSlice],
    features: Features,
) -> Pool<'a> {
    let (counter_slices, device_slices): (Vec<&IndexedSlice>, Vec<&IndexedSlice>) =
        if features.partitionable_devices {
            slices.iter().partition(|s| s.has_shared_counters)
        } else {
            (Vec::new(), slices.clone())
        };
    let mut seen = HashSet::new();
    for s in &device_slices {
        for d in &s.devices {
            if !seen.insert(&d.id.device) {
                let reason = format!("duplicate device name {}", d.id.device);
                return Pool::unusable(id, false, Some(reason));
            }
        }
    }
    let mut counter_sets: HashMap<&'a str, &'a Counters> = HashMap::new();
    if features.partitionable_devices {
        for s in &counter_slices {
            let sets = match &s.counter_sets {
                Ok(sets) => sets,
                Err(e) => return Pool::unusable(id, false, Some(e.clone())),
            };
            for (name, counters) in sets {
                if counter_sets.insert(name.as_str(), counters).is_some() {
                    let reason = format!("duplicate counter set name {name}");
                    return Pool::unusable(id, false, Some(reason));
                }
            }
        }
        for s in slices.iter().chain(others) {
            if let Err(reason) = check_consumption(&counter_sets, s) {
                return Pool::unusable(id, false, Some(reason));
            }
        }
    }
    Pool {
        id,
        slices: device_slices,
        others: if features.partitionable_devices {
            others.to_vec()
        } else {
            Vec::new()
        },
        counter_sets,
        incomplete: false,
        invalid: None,
    }
}

/// Every counter the slice's devices consume exists in the pool's counter sets.
fn check_consumption(sets: &HashMap<&str, &Counters>, slice: &IndexedSlice) -> Result<(), String> {
    for d in &slice.devices {
        for u in d.counters.as_ref().map_err(Clone::clone)? {
            let Some(set) = sets.get(u.set.as_str()) else {
                return Err(format!("counter set {} not found", u.set));
            };
            if let Some((c, _)) = u.counters.iter().find(|(c, _)| !set.contains_key(c)) {
                return Err(format!("counter {c} not found in counter set {}", u.set));
            }
        }
    }
    Ok(())
}

/// Counter values (nano-units) by counter set and counter.
type CounterTotals = HashMap<String, HashMap<String, i128>>;

/// Where the search is: claim, request, alternative (subrequest), device of the request.
#[derive(Debug, Clone, Copy, Default)]
struct Pos {
    claim: usize,
    request: usize,
    alt: usize,
    device: usize,
}

/// Why [`Allocator::allocate_until`] gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// The search was still going at the deadline.
    Deadline,
    /// Something is wrong with a claim, class, selector or slice.
    Failed(String),
    /// The claims cannot be allocated on this node for a reason that concerns only it
    /// (upstream's `ErrFailedAllocationOnNode`): the node is unschedulable, the others
    /// may still do.
    OnNode(String),
}

/// Why no device of a node could be used when some of its pools are invalid (a
/// duplicate device or counter set name, a counter that does not exist).
pub const INVALID_POOLS: &str = "invalid resource pools were encountered";

/// What the allocation of a timed-out search says, without the node upstream's error
/// puts in front.
pub const TIMED_OUT: &str = "timed out trying to allocate devices";

/// How many search steps pass between two looks at the clock.
const STEPS_PER_CLOCK_READ: u32 = 64;

enum Stop {
    /// A claim would get more than [`ALLOCATION_RESULTS_MAX_SIZE`] devices.
    MaxSize,
    /// The deadline passed.
    Deadline,
    /// Something is broken; allocation must not go on.
    Fatal(String),
}

/// A share of a device (DRAConsumableCapacity): its ID and what it consumes.
struct Share {
    id: String,
    consumed: BTreeMap<String, Amount>,
}

struct DeviceChoice<'a> {
    share: Option<Share>,
    slice: &'a IndexedSlice,
    device: &'a IndexedDevice,
    request: String,
    admin_access: bool,
    /// The request's tolerations, recorded in the result as upstream does.
    tolerations: Option<Vec<DeviceToleration>>,
    /// The device's pool (index into the run's pools).
    pool: usize,
    /// Its counters were added to the pool's consumption (undone with the choice).
    counted: bool,
}

/// A device with its pool (index) and the slice it is in.
type SliceDevice<'a> = (usize, &'a IndexedSlice, &'a IndexedDevice);

struct Run<'a> {
    node: NodeRef<'a>,
    features: Features,
    /// Per pool: its counter sets less what allocated devices consume, computed on first
    /// use.
    available: Vec<Option<CounterTotals>>,
    /// Per pool: what the devices chosen in this attempt consume.
    consumed: Vec<CounterTotals>,
    taint_rules: &'a [TaintRule],
    /// When to give up (`filterTimeout`), read every [`STEPS_PER_CLOCK_READ`] steps.
    deadline: Option<Instant>,
    steps: u32,
    plans: &'a [ClaimPlan],
    allocated: &'a AllocatedState,
    pools: &'a [Pool<'a>],
    /// Devices taken in this attempt, with the claims taking them.
    allocating: HashMap<&'a DeviceId, Vec<usize>>,
    results: Vec<Vec<DeviceChoice<'a>>>,
    all_devices: HashMap<(usize, usize, usize), Vec<SliceDevice<'a>>>,
    /// Per claim, per constraint: where it is.
    constraint_state: Vec<Vec<ConstraintState>>,
    /// Capacity the shared devices picked in this attempt consume.
    allocating_capacity: HashMap<&'a DeviceId, Capacity>,
    /// The alternative picked for each `firstAvailable` request.
    selected: HashMap<(usize, usize), usize>,
}

impl<'a> Run<'a> {
    fn all_devices_for(
        &self,
        ci: usize,
        req: &RequestData,
    ) -> Result<Vec<SliceDevice<'a>>, String> {
        let claim = kobj(&self.plans[ci].claim);
        let mut out = Vec::new();
        for (pi, pool) in self.pools.iter().enumerate() {
            if pool.incomplete {
                return Err(format!(
                    "claim {claim}, request {}: asks for all devices, but resource pool {}/{} is currently being updated",
                    req.full_name, pool.id.0, pool.id.1
                ));
            }
            if pool.invalid.is_some() {
                return Err(format!(
                    "claim {claim}, request {}: asks for all devices, but resource pool {}/{} is currently invalid",
                    req.full_name, pool.id.0, pool.id.1
                ));
            }
            for slice in &pool.slices {
                for device in &slice.devices {
                    if selectable(&claim, req, device, self.taint_rules, self.features)?
                        && device.serves(self.node.name, self.node.labels, &slice.name)?
                        && (!self.features.consumable_capacity
                            || self.capacity_check(req, device)?.is_some())
                    {
                        out.push((pi, *slice, device));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Taken whole by another claim or by a claim of this pod. With consumable capacity
    /// off, shared allocations count as whole ones.
    fn in_use(&self, id: &DeviceId) -> bool {
        let allocated = if self.features.consumable_capacity {
            self.allocated.devices.contains(id)
        } else {
            self.allocated.has(id)
        };
        allocated || self.allocating.get(id).is_some_and(|c| !c.is_empty())
    }

    /// Whether some capacity of the shared device is taken (upstream's
    /// `deviceCapacityInUse`): its counters are already counted then.
    fn capacity_in_use(&self, id: &DeviceId) -> bool {
        self.allocated.capacity.contains_key(id) || self.allocating_capacity.contains_key(id)
    }

    /// Upstream's `CmpRequestOverCapacity`: what the request consumes of the device's
    /// capacities, given what allocated claims and this attempt take already; None when
    /// it does not fit.
    fn capacity_check(
        &self,
        req: &RequestData,
        device: &IndexedDevice,
    ) -> Result<Option<BTreeMap<String, Amount>>, String> {
        let capacity = device.capacity.as_ref().map_err(Clone::clone)?;
        if capacity.is_empty() && req.capacity.is_none() {
            // Nothing to consume (most devices): no need to look further.
            return Ok(Some(BTreeMap::new()));
        }
        let allocated = self.allocated.capacity.get(&device.id);
        let allocating = self.allocating_capacity.get(&device.id);
        let used = |name: &str| {
            allocated.and_then(|c| c.get(name)).copied().unwrap_or(0)
                + allocating.and_then(|c| c.get(name)).copied().unwrap_or(0)
        };
        Ok(crate::capacity::fits(
            req.capacity.as_ref(),
            capacity,
            &used,
        ))
    }

    fn allocating_for_claim(&self, id: &DeviceId, ci: usize) -> bool {
        self.allocating.get(id).is_some_and(|c| c.contains(&ci))
    }

    fn allocate_one(&mut self, r: Pos, in_alternative: bool) -> Result<bool, Stop> {
        if let Some(deadline) = self.deadline {
            // The first step looks too, so a deadline already past stops every search.
            let look = self.steps.is_multiple_of(STEPS_PER_CLOCK_READ);
            self.steps = self.steps.wrapping_add(1);
            if look && Instant::now() >= deadline {
                return Err(Stop::Deadline);
            }
        }
        if r.claim >= self.plans.len() {
            return Ok(true);
        }
        let plan = &self.plans[r.claim];
        if r.request >= plan.requests.len() {
            return match self.allocate_one(
                Pos {
                    claim: r.claim + 1,
                    ..Pos::default()
                },
                false,
            ) {
                // A later claim hitting the size limit says nothing about this one.
                Err(Stop::MaxSize) => Ok(false),
                other => other,
            };
        }
        let request = &plan.requests[r.request];
        if request.first_available && !in_alternative {
            let mut all_exceeded = true;
            for alt in 0..request.alternatives.len() {
                match self.allocate_one(Pos { alt, ..r }, true) {
                    Err(Stop::MaxSize) => continue,
                    Err(e) => return Err(e),
                    Ok(done) => {
                        all_exceeded = false;
                        if done {
                            self.selected.insert((r.claim, r.request), alt);
                            return Ok(true);
                        }
                    }
                }
            }
            return if all_exceeded {
                Err(Stop::MaxSize)
            } else {
                Ok(false)
            };
        }
        let req = &request.alternatives[r.alt];
        let all = self.all_devices.get(&(r.claim, r.request, r.alt));
        let needed = match all {
            Some(devices) => {
                if devices.is_empty() {
                    // "All" needs at least one device.
                    return Ok(false);
                }
                devices.len()
            }
            None => req.count,
        };
        if r.device >= needed {
            return self.allocate_one(
                Pos {
                    claim: r.claim,
                    request: r.request + 1,
                    ..Pos::default()
                },
                false,
            );
        }
        if self.results[r.claim].len() + needed - r.device > ALLOCATION_RESULTS_MAX_SIZE {
            return Err(Stop::MaxSize);
        }
        let next = Pos {
            device: r.device + 1,
            ..r
        };
        if let Some(devices) = all {
            let (pool, slice, device) = devices[r.device];
            if !self.try_device(r, req, pool, slice, device, true)? {
                return Ok(false);
            }
            let done = self.allocate_one(next, in_alternative);
            if !matches!(done, Ok(true)) {
                self.undo_device(r, req, device);
            }
            return done;
        }
        let claim_name = kobj(&plan.claim);
        let pools = self.pools;
        for (pi, pool) in pools.iter().enumerate() {
            if pool.incomplete || pool.invalid.is_some() {
                continue;
            }
            for slice in &pool.slices {
                for device in &slice.devices {
                    if req.admin_access {
                        if self.allocating_for_claim(&device.id, r.claim) {
                            continue;
                        }
                    } else if self.in_use(&device.id) {
                        continue;
                    }
                    if !selectable(&claim_name, req, device, self.taint_rules, self.features)
                        .map_err(Stop::Fatal)?
                        || !device
                            .serves(self.node.name, self.node.labels, &slice.name)
                            .map_err(Stop::Fatal)?
                    {
                        continue;
                    }
                    if !self.try_device(r, req, pi, slice, device, false)? {
                        continue;
                    }
                    match self.allocate_one(next, in_alternative) {
                        Ok(true) => return Ok(true),
                        Ok(false) => self.undo_device(r, req, device),
                        Err(e) => {
                            self.undo_device(r, req, device);
                            return Err(e);
                        }
                    }
                }
            }
        }
        Ok(false)
    }

    /// Takes the device for the request if it is free and the claim's constraints allow
    /// it. `must`: the device is required ("all" mode), so a constraint violation is an
    /// error.
    /// Takes the device for the request if it is free, its pool's counters and its
    /// capacity hold it and the claim's constraints allow it. `must`: the device is
    /// required ("all" mode), so a constraint violation is an error.
    #[allow(clippy::too_many_arguments)]
    fn try_device(
        &mut self,
        r: Pos,
        req: &RequestData,
        pool: usize,
        slice: &'a IndexedSlice,
        device: &'a IndexedDevice,
        must: bool,
    ) -> Result<bool, Stop> {
        let multiple = self.features.consumable_capacity && device.allows_multiple();
        if req.admin_access {
            if !multiple && self.allocating_for_claim(&device.id, r.claim) {
                return Ok(false);
            }
        } else if self.in_use(&device.id) {
            return Ok(false);
        }
        let consumes = device.consumes_counters();
        if consumes && !self.features.partitionable_devices {
            return Ok(false);
        }
        let share = if self.features.consumable_capacity {
            match self.capacity_check(req, device).map_err(Stop::Fatal)? {
                None => return Ok(false),
                Some(consumed) => multiple.then_some(consumed),
            }
        } else {
            None
        };
        // A shared device already in use has its counters counted with that use.
        let counted = consumes && !(multiple && self.capacity_in_use(&device.id));
        if counted && !self.take_counters(pool, device) {
            return Ok(false);
        }
        if !self.add_to_constraints(r.claim, req, device) {
            if counted {
                self.release_counters(pool, device);
            }
            return self.constraint_failed(must, r, req, device);
        }
        let entry = self.allocating.entry(&device.id).or_default();
        if !multiple {
            entry.push(r.claim);
        }
        let share = share.map(|consumed| {
            let total = self.allocating_capacity.entry(&device.id).or_default();
            for (name, a) in &consumed {
                *total.entry(name.clone()).or_default() += a.nanos;
            }
            let seed = format!(
                "{}/{}/{}/{}",
                crate::manager::uid(&self.plans[r.claim].claim),
                req.full_name,
                device.id,
                self.results[r.claim].len()
            );
            Share {
                id: crate::capacity::share_id(&seed),
                consumed,
            }
        });
        self.results[r.claim].push(DeviceChoice {
            share,
            slice,
            device,
            request: req.full_name.clone(),
            admin_access: req.admin_access,
            tolerations: req.tolerations.clone().filter(|t| !t.is_empty()),
            pool,
            counted,
        });
        Ok(true)
    }

    /// Adds the device to every constraint of the claim that applies to the request;
    /// false (and nothing changed) when one refuses it.
    fn add_to_constraints(
        &mut self,
        claim: usize,
        req: &RequestData,
        device: &IndexedDevice,
    ) -> bool {
        let plan = &self.plans[claim];
        for (i, c) in plan.constraints.iter().enumerate() {
            if !constraint_applies(c.requests(), &req.base, req.sub.as_deref()) {
                continue;
            }
            let value = match c {
                Constraint::Match(attr, _) | Constraint::Distinct(attr, _) => {
                    lookup_attribute(device, attr)
                }
            };
            let added = match (value, &mut self.constraint_state[claim][i]) {
                (None, _) => false,
                (Some(v), ConstraintState::Match(state)) => match state {
                    None => {
                        *state = Some((v.clone(), 1));
                        true
                    }
                    Some((first, n)) if same_value(first, v) => {
                        *n += 1;
                        true
                    }
                    Some(_) => false,
                },
                (Some(v), ConstraintState::Distinct(taken)) => {
                    if distinct_from(taken, v) {
                        taken.push(v.clone());
                        true
                    } else {
                        false
                    }
                }
            };
            if !added {
                self.undo_constraints(claim, i, req);
                return false;
            }
        }
        true
    }

    /// Whether a device of a pool counts as allocated for the pool's counters.
    fn is_allocated(&self, id: &DeviceId) -> bool {
        self.allocated.has(id)
    }

    /// The pool's counters less what its allocated devices (on any node) consume.
    fn available_counters(&self, pool: usize) -> CounterTotals {
        let p = &self.pools[pool];
        let mut available: CounterTotals = p
            .counter_sets
            .iter()
            .map(|(name, counters)| {
                let values = counters
                    .iter()
                    .map(|(c, q)| (c.clone(), q.nanos()))
                    .collect();
                ((*name).to_string(), values)
            })
            .collect();
        for slice in p.slices.iter().chain(&p.others) {
            for d in &slice.devices {
                if !self.is_allocated(&d.id) {
                    continue;
                }
                for u in d.counters.iter().flatten() {
                    let Some(set) = available.get_mut(&u.set) else {
                        continue;
                    };
                    for (c, q) in &u.counters {
                        // May go below zero (an over-committed pool): then nothing is left.
                        if let Some(v) = set.get_mut(c) {
                            *v -= q.nanos();
                        }
                    }
                }
            }
        }
        available
    }

    /// Adds the device's counters to its pool's consumption if every counter set still
    /// holds them (upstream's `checkAvailableCounters`); false leaves nothing changed.
    fn take_counters(&mut self, pool: usize, device: &IndexedDevice) -> bool {
        if self.available[pool].is_none() {
            self.available[pool] = Some(self.available_counters(pool));
        }
        let consumed = &mut self.consumed[pool];
        for u in device.counters.iter().flatten() {
            let set = consumed.entry(u.set.clone()).or_default();
            for (c, q) in &u.counters {
                *set.entry(c.clone()).or_default() += q.nanos();
            }
        }
        let fits = self.available[pool]
            .iter()
            .flatten()
            .all(|(name, counters)| {
                counters.iter().all(|(c, available)| {
                    let used = consumed
                        .get(name)
                        .and_then(|s| s.get(c))
                        .copied()
                        .unwrap_or(0);
                    used <= *available
                })
            });
        if !fits {
            self.release_counters(pool, device);
        }
        fits
    }

    fn release_counters(&mut self, pool: usize, device: &IndexedDevice) {
        let consumed = &mut self.consumed[pool];
        for u in device.counters.iter().flatten() {
            if let Some(set) = consumed.get_mut(&u.set) {
                for (c, q) in &u.counters {
                    if let Some(v) = set.get_mut(c) {
                        *v -= q.nanos();
                    }
                }
            }
        }
    }

    fn constraint_failed(
        &self,
        must: bool,
        r: Pos,
        req: &RequestData,
        device: &IndexedDevice,
    ) -> Result<bool, Stop> {
        if must {
            return Err(Stop::Fatal(format!(
                "claim {}, request {}: cannot add device {} because a claim constraint would not be satisfied",
                kobj(&self.plans[r.claim].claim),
                req.full_name,
                device.id
            )));
        }
        Ok(false)
    }

    /// Rolls back the first `upto` constraints of a claim for one device.
    fn undo_constraints(&mut self, claim: usize, upto: usize, req: &RequestData) {
        let plan = &self.plans[claim];
        for (i, c) in plan.constraints.iter().enumerate().take(upto) {
            if constraint_applies(c.requests(), &req.base, req.sub.as_deref()) {
                release(&mut self.constraint_state[claim][i]);
            }
        }
    }

    fn undo_device(&mut self, r: Pos, req: &RequestData, device: &IndexedDevice) {
        let n = self.plans[r.claim].constraints.len();
        self.undo_constraints(r.claim, n, req);
        if let Some(claims) = self.allocating.get_mut(&device.id)
            && let Some(pos) = claims.iter().rposition(|c| *c == r.claim)
        {
            claims.remove(pos);
        }
        if let Some(choice) = self.results[r.claim].pop() {
            if choice.counted {
                self.release_counters(choice.pool, choice.device);
            }
            if let Some(share) = &choice.share
                && let Some(total) = self.allocating_capacity.get_mut(&choice.device.id)
            {
                for (name, a) in &share.consumed {
                    if let Some(v) = total.get_mut(name) {
                        *v -= a.nanos;
                    }
                }
                if total.values().all(|v| *v == 0) {
                    self.allocating_capacity.remove(&choice.device.id);
                }
            }
        }
    }

    fn result_of(&self, ci: usize, plan: &ClaimPlan) -> Result<AllocationResult, String> {
        let results: Vec<DeviceRequestAllocationResult> =
            self.results[ci]
                .iter()
                .map(|c| DeviceRequestAllocationResult {
                    request: c.request.clone(),
                    driver: c.device.id.driver.to_string(),
                    pool: c.device.id.pool.to_string(),
                    device: c.device.id.device.to_string(),
                    admin_access: c.admin_access.then_some(true),
                    tolerations: c.tolerations.clone(),
                    share_id: c.share.as_ref().map(|s| s.id.clone()),
                    binding_conditions: self
                        .features
                        .binding_conditions
                        .then(|| c.device.device.binding_conditions.clone())
                        .flatten(),
                    binding_failure_conditions: self
                        .features
                        .binding_conditions
                        .then(|| c.device.device.binding_failure_conditions.clone())
                        .flatten(),
                    consumed_capacity: c.share.as_ref().filter(|s| !s.consumed.is_empty()).map(
                        |s| {
                            s.consumed
                                .iter()
                                .map(|(name, a)| (name.clone(), K8sQuantity(a.text.clone())))
                                .collect()
                        },
                    ),
                    ..Default::default()
                })
                .collect();
        // Class configurations first, once per class, naming the requests they serve;
        // then the claim's own.
        let mut config: Vec<DeviceAllocationConfiguration> = Vec::new();
        let mut class_ranges: HashMap<String, (usize, usize)> = HashMap::new();
        for (ri, req) in plan.requests.iter().enumerate() {
            let alt = self.selected.get(&(ci, ri)).copied().unwrap_or(0);
            let data = &req.alternatives[alt];
            let class_name = data.class.metadata.name.clone().unwrap_or_default();
            if let Some((start, end)) = class_ranges.get(&class_name) {
                for c in &mut config[*start..*end] {
                    c.requests
                        .get_or_insert_with(Vec::new)
                        .push(data.full_name.clone());
                }
                continue;
            }
            let start = config.len();
            for c in data
                .class
                .spec
                .iter()
                .flat_map(|s| s.config.iter().flatten())
            {
                config.push(DeviceAllocationConfiguration {
                    source: "FromClass".into(),
                    requests: Some(vec![data.full_name.clone()]),
                    opaque: c.opaque.clone(),
                });
            }
            class_ranges.insert(class_name, (start, config.len()));
        }
        let devices = plan.claim.spec.as_ref().and_then(|s| s.devices.as_ref());
        for c in devices
            .and_then(|d| d.config.as_ref())
            .into_iter()
            .flatten()
        {
            let listed = c.requests.as_deref().unwrap_or_default();
            let applies = listed.is_empty()
                || plan.requests.iter().enumerate().any(|(ri, req)| {
                    let alt = self.selected.get(&(ci, ri)).copied().unwrap_or(0);
                    let data = &req.alternatives[alt];
                    listed.contains(&data.base) || listed.contains(&data.full_name)
                });
            if applies {
                config.push(DeviceAllocationConfiguration {
                    source: "FromClaim".into(),
                    requests: c.requests.clone().filter(|r| !r.is_empty()),
                    opaque: c.opaque.clone(),
                });
            }
        }
        let num_requests = plan.requests.len();
        for c in &mut config {
            if c.requests.as_ref().is_some_and(|r| r.len() == num_requests) {
                c.requests = None;
            }
        }
        let node_selector = node_selector_of(&self.results[ci], self.node.name).map_err(|e| {
            let name = plan.claim.metadata.name.as_deref().unwrap_or("");
            format!("create NodeSelector for claim {name}: {e}")
        })?;
        Ok(AllocationResult {
            devices: Some(DeviceAllocationResult {
                results: Some(results),
                config: (!config.is_empty()).then_some(config),
            }),
            node_selector,
            allocation_timestamp: None,
        })
    }
}

fn release(state: &mut ConstraintState) {
    match state {
        ConstraintState::Match(m) => {
            if let Some((_, n)) = m {
                *n -= 1;
                if *n == 0 {
                    *m = None;
                }
            }
        }
        ConstraintState::Distinct(taken) => {
            taken.pop();
        }
    }
}

/// Whether `value` differs from every value taken so far. As upstream's
/// `distinctAttributeConstraint`, a value of another type than one taken ends the
/// comparison with a yes.
fn distinct_from(taken: &[DeviceAttribute], value: &DeviceAttribute) -> bool {
    for t in taken {
        let same_type = (t.string.is_some() && value.string.is_some())
            || (t.int.is_some() && value.int.is_some())
            || (t.bool.is_some() && value.bool.is_some())
            || (t.version.is_some() && value.version.is_some());
        if t.string.is_none() && t.int.is_none() && t.bool.is_none() && t.version.is_none() {
            // Unknown value type: cannot be compared.
            return false;
        }
        if !same_type {
            return true;
        }
        if same_value(t, value) {
            return false;
        }
    }
    true
}

fn constraint_applies(requests: &[String], base: &str, sub: Option<&str>) -> bool {
    if requests.is_empty() {
        return true;
    }
    match sub {
        None => requests.iter().any(|r| r == base),
        Some(sub) => requests.iter().any(|r| {
            r == base || r.strip_prefix(base).and_then(|x| x.strip_prefix('/')) == Some(sub)
        }),
    }
}

/// An attribute by fully qualified name; the driver's own domain may be left out on the
/// device.
fn lookup_attribute<'d>(device: &'d IndexedDevice, name: &str) -> Option<&'d DeviceAttribute> {
    let attrs = device.device.attributes.as_ref()?;
    if let Some(a) = attrs.get(name) {
        return Some(a);
    }
    let (domain, id) = name.split_once('/')?;
    if domain != &*device.id.driver {
        return None;
    }
    attrs.get(id)
}

fn same_value(a: &DeviceAttribute, b: &DeviceAttribute) -> bool {
    if let Some(s) = &b.string {
        return a.string.as_ref() == Some(s);
    }
    if let Some(i) = b.int {
        return a.int == Some(i);
    }
    if let Some(x) = b.bool {
        return a.bool == Some(x);
    }
    if let Some(v) = &b.version {
        return a.version.as_ref() == Some(v);
    }
    false
}

/// Whether a taint is tolerated: one that keeps pods away (`NoSchedule`, `NoExecute`)
/// needs a matching toleration; `None` and effects kubesched does not know are ignored,
/// as upstream's `resourceclaim.ToleratesTaint` asks of its callers.
fn taint_tolerated(taint: &DeviceTaint, tolerations: &[DeviceToleration]) -> bool {
    !matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
        || tolerations.iter().any(|tol| tolerates(tol, taint))
}

/// One toleration against one taint: an empty effect or key matches any, `Exists`
/// matches any value, `Equal` (or no operator) the same value.
fn tolerates(toleration: &DeviceToleration, taint: &DeviceTaint) -> bool {
    if toleration
        .effect
        .as_deref()
        .is_some_and(|e| !e.is_empty() && e != taint.effect)
    {
        return false;
    }
    if toleration
        .key
        .as_deref()
        .is_some_and(|k| !k.is_empty() && k != taint.key)
    {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("") {
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        "Exists" => true,
        _ => false,
    }
}

/// Whether the class's and the request's selectors all select the device.
fn selectable(
    claim: &str,
    req: &RequestData,
    device: &IndexedDevice,
    taint_rules: &[TaintRule],
    features: Features,
) -> Result<bool, String> {
    if !features.binding_conditions
        && device
            .device
            .binding_conditions
            .as_ref()
            .is_some_and(|c| !c.is_empty())
    {
        return Ok(false);
    }
    if let Some(tolerations) = &req.tolerations {
        let own = device.device.taints.as_deref().unwrap_or_default();
        let ruled = taint_rules
            .iter()
            .filter(|r| r.selects(&device.id))
            .map(|r| &r.taint);
        if !own
            .iter()
            .chain(ruled)
            .all(|t| taint_tolerated(t, tolerations))
        {
            return Ok(false);
        }
    }
    let class_name = req.class.metadata.name.as_deref().unwrap_or("");
    for (i, expr) in req.class_selectors.iter().enumerate() {
        if let Some(e) = expr.error() {
            return Err(format!(
                "class {class_name}: selector #{i}: CEL compile error: {e}"
            ));
        }
        match device.selected_by(expr) {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(e) => {
                return Err(format!(
                    "class {class_name}: selector #{i} on device {}: CEL runtime error: {e}",
                    device.id
                ));
            }
        }
    }
    for (i, expr) in req.selectors.iter().enumerate() {
        if let Some(e) = expr.error() {
            return Err(format!(
                "claim {claim}: selector #{i}: CEL compile error: {e}"
            ));
        }
        match device.selected_by(expr) {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(e) => {
                return Err(format!(
                    "claim {claim}: selector #{i} on device {}: CEL runtime error: {e}",
                    device.id
                ));
            }
        }
    }
    Ok(true)
}

/// The node selector of an allocation: pinned to the node when a device is node-local,
/// the merged requirements of the slices' (or, with `perDeviceNodeSelection`, the
/// devices') node selectors, or none for devices on all nodes.
fn node_selector_of(
    choices: &[DeviceChoice<'_>],
    node_name: &str,
) -> Result<Option<ApiNodeSelector>, String> {
    let mut fields: Vec<NodeSelectorRequirement> = Vec::new();
    let mut exprs: Vec<NodeSelectorRequirement> = Vec::new();
    for c in choices {
        let (local, selector) = match (&c.device.nodes, &c.slice.nodes) {
            (Some(DeviceNodes::Name(_)), _) => (true, None),
            (Some(_), _) => (false, c.device.device.node_selector.as_ref()),
            (None, SliceNodes::Name(_)) => (true, None),
            (None, SliceNodes::Selector(_)) => (false, c.slice_node_selector()),
            (None, _) => (false, None),
        };
        // A device that binds to a node (binding conditions) is for the chosen node only.
        if local || c.device.device.binds_to_node == Some(true) {
            return Ok(Some(ApiNodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_fields: Some(vec![NodeSelectorRequirement {
                        key: "metadata.name".into(),
                        operator: "In".into(),
                        values: Some(vec![node_name.to_string()]),
                    }]),
                    match_expressions: None,
                }],
            }));
        }
        let terms = selector
            .map(|s| s.node_selector_terms.as_slice())
            .unwrap_or_default();
        match terms.len() {
            0 => {}
            1 => {
                merge(
                    &mut fields,
                    terms[0].match_fields.as_deref().unwrap_or_default(),
                );
                merge(
                    &mut exprs,
                    terms[0].match_expressions.as_deref().unwrap_or_default(),
                );
            }
            n => {
                return Err(format!(
                    "unsupported ResourceSlice.NodeSelector with {n} terms"
                ));
            }
        }
    }
    if fields.is_empty() && exprs.is_empty() {
        return Ok(None);
    }
    Ok(Some(ApiNodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: (!fields.is_empty()).then_some(fields),
            match_expressions: (!exprs.is_empty()).then_some(exprs),
        }],
    }))
}

impl DeviceChoice<'_> {
    fn slice_node_selector(&self) -> Option<&ApiNodeSelector> {
        self.slice.api_node_selector.as_ref()
    }
}

fn merge(to: &mut Vec<NodeSelectorRequirement>, from: &[NodeSelectorRequirement]) {
    for r in from {
        let values: HashSet<&String> = r.values.iter().flatten().collect();
        let present = to.iter().any(|e| {
            e.key == r.key
                && e.operator == r.operator
                && e.values.iter().flatten().collect::<HashSet<_>>() == values
        });
        if !present {
            to.push(r.clone());
        }
    }
}
