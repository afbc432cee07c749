//! The plugin object: guest instances, their pool, and one framework trait impl per point.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kubesched_framework::events::{ActionType, ClusterEventWithHint, EventResource};
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{
    BindPlugin, Code, CycleState, EnqueueExtensions, FilterPlugin, Framework, Handle, NodeToStatus,
    PermitPlugin, Plugin, PointSet, PostBindPlugin, PostFilterPlugin, PostFilterResult,
    PreBindPlugin, PreFilterExtensions, PreFilterPlugin, PreFilterResult, PreScorePlugin,
    ReservePlugin, ScorePlugin, Status,
};
use parking_lot::Mutex;
use wasmtime::{Instance, InstancePre, Store, StoreLimitsBuilder, TypedFunc};

use crate::host::{Call, Exit, HostState, PodHandle, Shared, linker};
use crate::load::{self, EPOCH_TICK, Guest, LoadError, engine, root};
use crate::{DEFAULT_CALL_TIMEOUT_MILLIS, DEFAULT_MEMORY_LIMIT_BYTES, Interfaces, WasmArgs};

/// The guest's exported functions, looked up once per instance.
#[derive(Default)]
struct Funcs {
    enqueue: Option<TypedFunc<(), ()>>,
    prefilter: Option<TypedFunc<(), u32>>,
    filter: Option<TypedFunc<(), u32>>,
    postfilter: Option<TypedFunc<(), u64>>,
    prescore: Option<TypedFunc<(), u32>>,
    score: Option<TypedFunc<(), u64>>,
    normalizescore: Option<TypedFunc<(), u32>>,
    reserve: Option<TypedFunc<(), u32>>,
    unreserve: Option<TypedFunc<(), ()>>,
    permit: Option<TypedFunc<(), u64>>,
    prebind: Option<TypedFunc<(), u32>>,
    bind: Option<TypedFunc<(), u32>>,
    postbind: Option<TypedFunc<(), ()>>,
    addpod: Option<TypedFunc<(), u32>>,
    removepod: Option<TypedFunc<(), u32>>,
}

/// One instantiated guest with its store.
struct GuestInstance {
    store: Store<HostState>,
    funcs: Funcs,
}

/// The instance serving the scheduling cycle, and the pod it serves.
#[derive(Default)]
struct Scheduling {
    uid: String,
    instance: Option<GuestInstance>,
}

/// A WebAssembly guest as a scheduling plugin under its configured name.
pub struct WasmPlugin {
    name: String,
    interfaces: Interfaces,
    points: PointSet,
    pre: InstancePre<HostState>,
    shared: Arc<Shared>,
    deadline_ticks: u64,
    timeout_millis: u64,
    memory_limit: usize,
    scheduling: Mutex<Scheduling>,
    binding: Mutex<HashMap<String, GuestInstance>>,
    free: Mutex<Vec<GuestInstance>>,
}

impl std::fmt::Debug for WasmPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmPlugin")
            .field("name", &self.name)
            .field("points", &self.points)
            .finish()
    }
}

/// Which export a call runs, with the name upstream's messages use.
#[derive(Clone, Copy)]
enum Export {
    Enqueue,
    PreFilter,
    Filter,
    PostFilter,
    PreScore,
    Score,
    NormalizeScore,
    Reserve,
    Unreserve,
    Permit,
    PreBind,
    Bind,
    PostBind,
    AddPod,
    RemovePod,
}

impl Export {
    fn name(self) -> &'static str {
        match self {
            Self::Enqueue => "enqueue",
            Self::PreFilter => "prefilter",
            Self::Filter => "filter",
            Self::PostFilter => "postfilter",
            Self::PreScore => "prescore",
            Self::Score => "score",
            Self::NormalizeScore => "normalizescore",
            Self::Reserve => "reserve",
            Self::Unreserve => "unreserve",
            Self::Permit => "permit",
            Self::PreBind => "prebind",
            Self::Bind => "bind",
            Self::PostBind => "postbind",
            Self::AddPod => "addpod",
            Self::RemovePod => "removepod",
        }
    }
}

/// The raw result of an export: nothing, an i32 or an i64.
enum Raw {
    Unit,
    I32(u32),
    I64(u64),
}

fn code_of(raw: i32, reason: Option<String>) -> Status {
    let reasons: Vec<String> = reason.into_iter().collect();
    let code = match raw {
        0 => Code::Success,
        1 => return Status::error(reasons.join("; ")),
        2 => Code::Unschedulable,
        3 => Code::UnschedulableAndUnresolvable,
        4 => Code::Wait,
        5 => Code::Skip,
        6 => Code::Pending,
        other => {
            return Status::error(format!(
                "wasm: the guest returned the unknown status code {other}{}",
                reasons
                    .first()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ));
        }
    };
    if code == Code::Success {
        return Status::success();
    }
    Status::new(code, reasons)
}

impl WasmPlugin {
    /// Loads and checks the guest the args name, and instantiates its first instance (so a
    /// guest whose start fails is refused now, as upstream's eager pool does).
    pub fn new(name: &str, args: &WasmArgs, handle: &Handle) -> Result<Self, LoadError> {
        let guest = load::load(args)?;
        Self::from_guest(name, args, guest, handle)
    }

    /// The plugin of an already compiled guest (WebAssembly binary or text), for tests and
    /// benchmarks that keep their guest in memory.
    pub fn from_bytes(
        name: &str,
        args: &WasmArgs,
        bytes: &[u8],
        handle: &Handle,
    ) -> Result<Self, LoadError> {
        let guest = load::compile(bytes).map_err(|reason| LoadError::Guest {
            url: "<bytes>".into(),
            reason,
        })?;
        Self::from_guest(name, args, guest, handle)
    }

    fn from_guest(
        name: &str,
        args: &WasmArgs,
        guest: Guest,
        handle: &Handle,
    ) -> Result<Self, LoadError> {
        let url = args.guest_url.clone();
        let refuse = |reason: String| LoadError::Guest {
            url: url.clone(),
            reason,
        };
        let linker = linker(engine()).map_err(|e| refuse(root(&e)))?;
        let pre = linker
            .instantiate_pre(&guest.module)
            .map_err(|e| refuse(format!("wasm: error instantiating guest: {}", root(&e))))?;
        let timeout_millis = args
            .call_timeout_millis
            .unwrap_or(DEFAULT_CALL_TIMEOUT_MILLIS)
            .max(1);
        let tick = EPOCH_TICK.as_millis() as u64;
        let plugin = Self {
            name: name.to_string(),
            interfaces: guest.interfaces,
            points: guest.interfaces.points(),
            pre,
            shared: Arc::new(Shared::new(name, args, handle)),
            // One tick more than the timeout: the deadline can fall just after a tick.
            deadline_ticks: timeout_millis.div_ceil(tick) + 1,
            timeout_millis,
            memory_limit: usize::try_from(
                args.memory_limit_bytes
                    .unwrap_or(DEFAULT_MEMORY_LIMIT_BYTES),
            )
            .unwrap_or(usize::MAX),
            scheduling: Mutex::new(Scheduling::default()),
            binding: Mutex::new(HashMap::new()),
            free: Mutex::new(Vec::new()),
        };
        let first = plugin.instantiate().map_err(LoadError::Instantiate)?;
        plugin.free.lock().push(first);
        let _ = guest.imports_wasi;
        Ok(plugin)
    }

    /// The extension points this guest implements.
    pub fn points(&self) -> PointSet {
        self.points
    }

    /// What the guest exports.
    pub fn interfaces(&self) -> Interfaces {
        self.interfaces
    }

    fn instantiate(&self) -> Result<GuestInstance, String> {
        let limits = StoreLimitsBuilder::new()
            .memory_size(self.memory_limit)
            .trap_on_grow_failure(true)
            .build();
        let mut store = Store::new(
            engine(),
            HostState {
                limits,
                memory: None,
                out: Vec::new(),
                shared: self.shared.clone(),
                call: Call::default(),
            },
        );
        store.limiter(|s| &mut s.limits);
        store.set_epoch_deadline(self.deadline_ticks);
        let instance = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| self.decorate(&mut store, "instantiate", &e))?;
        let memory = instance.get_memory(&mut store, "memory");
        store.data_mut().memory = memory;
        for start in ["_initialize", "_start"] {
            let Ok(f) = instance.get_typed_func::<(), ()>(&mut store, start) else {
                continue;
            };
            if let Err(e) = f.call(&mut store, ()) {
                // TinyGo's `_start` may end in proc_exit(0): the guest stays usable.
                if !matches!(e.downcast_ref::<Exit>(), Some(Exit(0))) {
                    return Err(self.decorate(&mut store, "instantiate", &e));
                }
            }
        }
        store.data_mut().out.clear();
        let funcs = Self::funcs(&instance, &mut store);
        Ok(GuestInstance { store, funcs })
    }

    fn funcs(i: &Instance, s: &mut Store<HostState>) -> Funcs {
        Funcs {
            enqueue: i.get_typed_func(&mut *s, "enqueue").ok(),
            prefilter: i.get_typed_func(&mut *s, "prefilter").ok(),
            filter: i.get_typed_func(&mut *s, "filter").ok(),
            postfilter: i.get_typed_func(&mut *s, "postfilter").ok(),
            prescore: i.get_typed_func(&mut *s, "prescore").ok(),
            score: i.get_typed_func(&mut *s, "score").ok(),
            normalizescore: i.get_typed_func(&mut *s, "normalizescore").ok(),
            reserve: i.get_typed_func(&mut *s, "reserve").ok(),
            unreserve: i.get_typed_func(&mut *s, "unreserve").ok(),
            permit: i.get_typed_func(&mut *s, "permit").ok(),
            prebind: i.get_typed_func(&mut *s, "prebind").ok(),
            bind: i.get_typed_func(&mut *s, "bind").ok(),
            postbind: i.get_typed_func(&mut *s, "postbind").ok(),
            addpod: i.get_typed_func(&mut *s, "addpod").ok(),
            removepod: i.get_typed_func(&mut *s, "removepod").ok(),
        }
    }

    /// Upstream's `decorateError`: the guest's output (e.g. a panic message) before the error.
    fn decorate(&self, store: &mut Store<HostState>, what: &str, e: &wasmtime::Error) -> String {
        let cause = if let Some(exit) = e.downcast_ref::<Exit>() {
            exit.to_string()
        } else if matches!(
            e.downcast_ref::<wasmtime::Trap>(),
            Some(wasmtime::Trap::Interrupt)
        ) {
            format!(
                "wasm error: the call ran past its deadline of {} ms and was stopped",
                self.timeout_millis
            )
        } else if let Some(trap) = e.downcast_ref::<wasmtime::Trap>() {
            match trap {
                wasmtime::Trap::UnreachableCodeReached => "wasm error: unreachable".to_string(),
                wasmtime::Trap::AllocationTooLarge => format!(
                    "wasm error: the guest's memory would grow past its limit of {} bytes",
                    self.memory_limit
                ),
                other => format!("wasm error: {other}"),
            }
        } else {
            let text = root(e);
            if text.contains("forcing trap when growing memory") {
                format!(
                    "wasm error: the guest's memory would grow past its limit of {} bytes",
                    self.memory_limit
                )
            } else {
                format!("wasm error: {text}")
            }
        };
        let out = String::from_utf8_lossy(&store.data().out)
            .trim_end()
            .to_string();
        store.data_mut().out.clear();
        if out.is_empty() {
            format!("wasm: {what} error: {cause}")
        } else {
            format!("wasm: {what} error: {out}\n{cause}")
        }
    }

    /// Calls `export` on `instance` with `call`'s parameters; returns the raw result and the
    /// call's results, or the decorated error (the instance must then be dropped).
    fn run(
        &self,
        instance: &mut GuestInstance,
        export: Export,
        call: Call,
    ) -> Result<(Raw, Call), String> {
        let store = &mut instance.store;
        store.data_mut().call = call;
        store.data_mut().out.clear();
        store.set_epoch_deadline(self.deadline_ticks);
        let f = &instance.funcs;
        let missing = || wasmtime::Error::msg("the guest does not export this function");
        let result = match export {
            Export::Enqueue => f
                .enqueue
                .as_ref()
                .ok_or_else(missing)
                .and_then(|g| g.call(&mut *store, ()))
                .map(|()| Raw::Unit),
            Export::Unreserve => f
                .unreserve
                .as_ref()
                .ok_or_else(missing)
                .and_then(|g| g.call(&mut *store, ()))
                .map(|()| Raw::Unit),
            Export::PostBind => f
                .postbind
                .as_ref()
                .ok_or_else(missing)
                .and_then(|g| g.call(&mut *store, ()))
                .map(|()| Raw::Unit),
            Export::PostFilter | Export::Score | Export::Permit => {
                let g = match export {
                    Export::PostFilter => &f.postfilter,
                    Export::Score => &f.score,
                    _ => &f.permit,
                };
                g.as_ref()
                    .ok_or_else(missing)
                    .and_then(|g| g.call(&mut *store, ()))
                    .map(Raw::I64)
            }
            _ => {
                let g = match export {
                    Export::PreFilter => &f.prefilter,
                    Export::Filter => &f.filter,
                    Export::PreScore => &f.prescore,
                    Export::NormalizeScore => &f.normalizescore,
                    Export::Reserve => &f.reserve,
                    Export::PreBind => &f.prebind,
                    Export::Bind => &f.bind,
                    Export::AddPod => &f.addpod,
                    _ => &f.removepod,
                };
                g.as_ref()
                    .ok_or_else(missing)
                    .and_then(|g| g.call(&mut *store, ()))
                    .map(Raw::I32)
            }
        };
        match result {
            Ok(raw) => Ok((raw, std::mem::take(&mut store.data_mut().call))),
            Err(e) => Err(self.decorate(store, export.name(), &e)),
        }
    }

    fn fail(&self, message: String) -> Status {
        tracing::warn!(plugin = %self.name, error = %message, "wasm guest call failed");
        Status::error(message).with_plugin(&self.name)
    }

    fn take_free(&self) -> Result<GuestInstance, String> {
        if let Some(i) = self.free.lock().pop() {
            return Ok(i);
        }
        self.instantiate()
    }

    /// Runs `export` on the instance of `pod`'s scheduling cycle (serialised: Filter runs in
    /// parallel over nodes, one instance serves the cycle).
    fn scheduling(&self, pod: &PodInfo, export: Export, call: Call) -> Result<(Raw, Call), Status> {
        let mut slot = self.scheduling.lock();
        if slot.uid != pod.uid {
            slot.uid = pod.uid.clone();
        }
        let mut instance = match slot.instance.take() {
            Some(i) => i,
            None => self.take_free().map_err(|e| self.fail(e))?,
        };
        match self.run(&mut instance, export, call) {
            Ok(done) => {
                slot.instance = Some(instance);
                Ok(done)
            }
            // A guest that failed may have broken its own state: the instance is dropped.
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Moves the scheduling instance of `uid` to its binding cycle, when the guest has one.
    fn to_binding(&self, uid: &str) {
        if !self.interfaces.bind {
            return;
        }
        let mut slot = self.scheduling.lock();
        if slot.uid == uid
            && let Some(i) = slot.instance.take()
        {
            slot.uid.clear();
            self.binding.lock().insert(uid.to_string(), i);
        }
    }

    /// Runs `export` in `pod`'s binding cycle: on the instance that scheduled it when it is
    /// still known, else on a fresh one.
    fn binding(&self, pod: &PodInfo, export: Export, call: Call) -> Result<(Raw, Call), Status> {
        self.to_binding(&pod.uid);
        let taken = self.binding.lock().remove(&pod.uid);
        let mut instance = match taken {
            Some(i) => i,
            None => self.instantiate().map_err(|e| self.fail(e))?,
        };
        match self.run(&mut instance, export, call) {
            Ok(done) => {
                self.binding.lock().insert(pod.uid.clone(), instance);
                Ok(done)
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// The binding cycle of `uid` is over: its instance goes back to the free pool.
    fn end_binding(&self, uid: &str) {
        if let Some(i) = self.binding.lock().remove(uid) {
            self.free.lock().push(i);
        }
    }

    fn call_for(pod: &PodInfo, node_name: &str) -> Call {
        Call {
            pod: Some(PodHandle::new(pod.pod.clone())),
            node_name: node_name.to_string(),
            ..Call::default()
        }
    }

    fn status_of(raw: &Raw, call: Call) -> Status {
        match raw {
            Raw::I32(v) => code_of(*v as i32, call.reason),
            Raw::I64(v) => code_of(*v as i32, call.reason),
            Raw::Unit => Status::success(),
        }
    }
}

/// The guest ABI's nominating modes (the high word of `postfilter`'s result), upstream's
/// `framework.NominatingMode`.
const MODE_NOOP: i32 = 0;
const MODE_OVERRIDE: i32 = 1;

/// PostFilter's result for a guest's nominating mode and nominated node, as upstream's
/// scheduler reads a `NominatingInfo`: Noop leaves the pod's nomination as it is, whatever
/// name the guest set (no result); Override sets it to the guest's node, and clears it when
/// the guest names none.
fn nomination(mode: i32, name: Option<String>) -> Result<Option<PostFilterResult>, String> {
    match mode {
        MODE_NOOP => Ok(None),
        MODE_OVERRIDE => Ok(Some(PostFilterResult {
            nominated_node_name: name.filter(|n| !n.is_empty()),
        })),
        other => Err(format!(
            "wasm: postfilter error: the guest returned the unknown nominating mode {other} (0 Noop, 1 Override)"
        )),
    }
}

/// Upstream's fallback when a guest does not export `enqueue`, or registers nothing.
pub(crate) fn all_cluster_events() -> Vec<ClusterEventWithHint> {
    [
        EventResource::Pod,
        EventResource::Node,
        EventResource::CSINode,
        EventResource::PersistentVolume,
        EventResource::PersistentVolumeClaim,
        EventResource::StorageClass,
    ]
    .into_iter()
    .map(|r| ClusterEventWithHint::new(r, ActionType::ALL))
    .collect()
}

/// The guest ABI's resource numbers (its GVK enum).
fn resource_of(gvk: u32) -> EventResource {
    match gvk {
        0 => EventResource::Pod,
        1 => EventResource::Node,
        2 => EventResource::PersistentVolume,
        3 => EventResource::PersistentVolumeClaim,
        5 => EventResource::ResourceClaim,
        6 => EventResource::StorageClass,
        7 => EventResource::CSINode,
        8 => EventResource::CSIDriver,
        9 => EventResource::CSIStorageCapacity,
        // PodSchedulingContext (gone from Kubernetes), the wildcard and unknown numbers.
        _ => EventResource::WildCard,
    }
}

/// The guest ABI's action bits (Add, Delete, four node updates; 63 is All).
fn action_of(bits: u32) -> ActionType {
    if bits & 63 == 63 {
        ActionType::ALL
    } else {
        ActionType(bits & ActionType::ALL.0)
    }
}

impl Plugin for WasmPlugin {
    fn name(&self) -> &str {
        &self.name
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        self.interfaces.pre_filter.then_some(self as _)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        self.interfaces.filter.then_some(self as _)
    }
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        (self.interfaces.filter && self.interfaces.post_filter).then_some(self as _)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        (self.interfaces.score && self.interfaces.pre_score).then_some(self as _)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        self.interfaces.score.then_some(self as _)
    }
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        self.interfaces.reserve.then_some(self as _)
    }
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        self.interfaces.permit.then_some(self as _)
    }
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        (self.interfaces.bind && self.interfaces.pre_bind).then_some(self as _)
    }
    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        self.interfaces.bind.then_some(self as _)
    }
    fn as_post_bind(&self) -> Option<&dyn PostBindPlugin> {
        (self.interfaces.bind && self.interfaces.post_bind).then_some(self as _)
    }
    fn as_enqueue_extensions(&self) -> Option<&dyn EnqueueExtensions> {
        Some(self)
    }
}

impl EnqueueExtensions for WasmPlugin {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        if !self.interfaces.enqueue {
            return all_cluster_events();
        }
        let mut instance = match self.take_free() {
            Ok(i) => i,
            Err(e) => {
                self.fail(e);
                return all_cluster_events();
            }
        };
        match self.run(&mut instance, Export::Enqueue, Call::default()) {
            Ok((_, call)) => {
                self.free.lock().push(instance);
                if call.cluster_events.is_empty() {
                    return all_cluster_events();
                }
                call.cluster_events
                    .into_iter()
                    .map(|(gvk, action)| {
                        ClusterEventWithHint::new(resource_of(gvk), action_of(action))
                    })
                    .collect()
            }
            Err(e) => {
                self.fail(e);
                all_cluster_events()
            }
        }
    }
}

impl PreFilterPlugin for WasmPlugin {
    fn pre_filter(
        &self,
        _state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        match self.scheduling(pod, Export::PreFilter, Self::call_for(pod, "")) {
            Ok((raw, mut call)) => {
                let names = call.node_names.take();
                let status = Self::status_of(&raw, call);
                (names.map(PreFilterResult::nodes), status)
            }
            Err(status) => (None, status),
        }
    }

    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        (self.interfaces.filter && self.interfaces.pre_filter_extensions).then_some(self as _)
    }
}

impl PreFilterExtensions for WasmPlugin {
    fn add_pod(
        &self,
        _state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_add: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        let mut call = Self::call_for(pod_to_schedule, node.name());
        call.target_pod = Some(PodHandle::new(pod_to_add.pod.clone()));
        match self.scheduling(pod_to_schedule, Export::AddPod, call) {
            Ok((raw, call)) => Self::status_of(&raw, call),
            Err(s) => s,
        }
    }

    fn remove_pod(
        &self,
        _state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        let mut call = Self::call_for(pod_to_schedule, node.name());
        call.target_pod = Some(PodHandle::new(pod_to_remove.pod.clone()));
        match self.scheduling(pod_to_schedule, Export::RemovePod, call) {
            Ok((raw, call)) => Self::status_of(&raw, call),
            Err(s) => s,
        }
    }
}

impl FilterPlugin for WasmPlugin {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        match self.scheduling(pod, Export::Filter, Self::call_for(pod, node.name())) {
            Ok((raw, call)) => Self::status_of(&raw, call),
            Err(s) => s,
        }
    }
}

#[async_trait]
impl PostFilterPlugin for WasmPlugin {
    async fn post_filter(
        &self,
        _framework: &Framework,
        _state: &CycleState,
        pod: &Arc<PodInfo>,
        statuses: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status) {
        let mut call = Self::call_for(pod, "");
        let snapshot = self.shared.handle.snapshot();
        call.node_statuses = snapshot
            .list()
            .iter()
            .filter_map(|n| {
                let name = n.name();
                statuses
                    .get(name)
                    .map(|s| (name.to_string(), s.code() as i32))
            })
            .collect();
        match self.scheduling(pod, Export::PostFilter, call) {
            Ok((Raw::I64(v), mut call)) => {
                let name = call.nominated_node_name.take();
                let mode = (v >> 32) as i32;
                let status = code_of(v as i32, call.reason);
                match nomination(mode, name) {
                    Ok(result) => (result, status),
                    Err(e) => (None, self.fail(e)),
                }
            }
            Ok(_) => (None, self.fail("wasm: postfilter error: no result".into())),
            Err(s) => (None, s),
        }
    }
}

impl PreScorePlugin for WasmPlugin {
    fn pre_score(&self, _state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Status {
        let mut call = Self::call_for(pod, "");
        call.filtered_nodes = nodes.iter().map(|n| n.name().to_string()).collect();
        match self.scheduling(pod, Export::PreScore, call) {
            Ok((raw, call)) => Self::status_of(&raw, call),
            Err(s) => s,
        }
    }
}

impl ScorePlugin for WasmPlugin {
    fn score(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let (raw, call) = self.scheduling(pod, Export::Score, Self::call_for(pod, node.name()))?;
        let Raw::I64(v) = raw else {
            return Err(self.fail("wasm: score error: no result".into()));
        };
        let score = i64::from((v >> 32) as i32);
        let status = code_of(v as i32, call.reason);
        if status.is_success() {
            Ok(score)
        } else {
            Err(status)
        }
    }

    fn has_normalize_score(&self) -> bool {
        self.interfaces.normalize_score
    }

    fn normalize_score(
        &self,
        _state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        scores: &mut [i64],
    ) -> Status {
        let mut call = Self::call_for(pod, "");
        call.node_scores = nodes
            .iter()
            .zip(scores.iter())
            .map(|(n, s)| (n.name().to_string(), *s))
            .collect::<BTreeMap<_, _>>();
        match self.scheduling(pod, Export::NormalizeScore, call) {
            Ok((raw, mut call)) => {
                // A guest without NormalizeScore of its own reports no list: scores stay.
                if let Some(updated) = call.normalized_scores.take().filter(|m| !m.is_empty()) {
                    for (n, s) in nodes.iter().zip(scores.iter_mut()) {
                        match updated.get(n.name()) {
                            Some(v) => *s = *v,
                            None => {
                                return self.fail(format!(
                                    "wasm: normalizescore error: the guest's list has no score for node {}",
                                    n.name()
                                ));
                            }
                        }
                    }
                }
                Self::status_of(&raw, call)
            }
            Err(s) => s,
        }
    }
}

impl ReservePlugin for WasmPlugin {
    fn reserve(&self, _state: &mut CycleState, pod: &PodInfo, node_name: &str) -> Status {
        match self.scheduling(pod, Export::Reserve, Self::call_for(pod, node_name)) {
            Ok((raw, call)) => Self::status_of(&raw, call),
            Err(s) => s,
        }
    }

    fn unreserve(&self, _state: &mut CycleState, pod: &PodInfo, node_name: &str) {
        let call = Self::call_for(pod, node_name);
        let known_for_binding = self.binding.lock().contains_key(&pod.uid);
        let done = if known_for_binding {
            self.binding(pod, Export::Unreserve, call)
        } else {
            self.scheduling(pod, Export::Unreserve, call)
        };
        if let Err(s) = done {
            tracing::error!(plugin = %self.name, status = ?s, "failed unreserve");
        }
        self.end_binding(&pod.uid);
    }
}

impl PermitPlugin for WasmPlugin {
    fn permit(&self, _state: &CycleState, pod: &PodInfo, node_name: &str) -> (Status, Duration) {
        let done = self.scheduling(pod, Export::Permit, Self::call_for(pod, node_name));
        self.to_binding(&pod.uid);
        match done {
            Ok((Raw::I64(v), call)) => {
                let code = (v >> 32) as i32;
                let millis = u64::from(v as u32);
                (code_of(code, call.reason), Duration::from_millis(millis))
            }
            Ok((_, _)) => (
                self.fail("wasm: permit error: no result".into()),
                Duration::ZERO,
            ),
            Err(s) => (s, Duration::ZERO),
        }
    }
}

#[async_trait]
impl PreBindPlugin for WasmPlugin {
    async fn pre_bind(&self, _state: &CycleState, pod: &PodInfo, node_name: &str) -> Status {
        match self.binding(pod, Export::PreBind, Self::call_for(pod, node_name)) {
            Ok((raw, call)) => Self::status_of(&raw, call),
            Err(s) => s,
        }
    }
}

#[async_trait]
impl BindPlugin for WasmPlugin {
    async fn bind(&self, _state: &CycleState, pod: &PodInfo, node_name: &str) -> Status {
        let status = match self.binding(pod, Export::Bind, Self::call_for(pod, node_name)) {
            Ok((raw, call)) => Self::status_of(&raw, call),
            Err(s) => s,
        };
        if !self.interfaces.post_bind && status.is_success() {
            self.end_binding(&pod.uid);
        }
        status
    }
}

impl PostBindPlugin for WasmPlugin {
    fn post_bind(&self, _state: &CycleState, pod: &PodInfo, node_name: &str) {
        if let Err(s) = self.binding(pod, Export::PostBind, Self::call_for(pod, node_name)) {
            tracing::error!(plugin = %self.name, status = ?s, "failed postbind");
        }
        self.end_binding(&pod.uid);
    }
}
