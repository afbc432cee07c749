//! The host functions a guest imports: `k8s.io/api`, `k8s.io/scheduler`, `k8s.io/klog`, and the
//! part of WASI preview1 TinyGo guests call (arguments, environment, clocks, stdout/stderr,
//! exit, random bytes). Buffers follow the ABI: a host function that returns data writes it
//! at `buf` only when it fits in `buf_limit`, and always returns its length, so the guest
//! grows its buffer and calls again.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1 as api;
use kubesched_framework::{Event, EventType, Handle, ObjectRef};
use parking_lot::Mutex;
use wasmtime::{Caller, Linker, Memory, StoreLimits};

use crate::proto;

/// WASI preview1's import module.
pub(crate) const WASI_MODULE: &str = "wasi_snapshot_preview1";
const K8S_API: &str = "k8s.io/api";
const K8S_KLOG: &str = "k8s.io/klog";
const K8S_SCHEDULER: &str = "k8s.io/scheduler";

/// The most of a guest's stdout/stderr kept per call (for error messages).
const MAX_OUT: usize = 16 << 10;

/// A node object and its protobuf.
type EncodedNode = (Arc<api::Node>, Arc<[u8]>);

/// What every instance of one plugin shares.
pub(crate) struct Shared {
    /// The plugin's configured name.
    pub plugin: String,
    pub guest_config: String,
    pub log_severity: i32,
    pub args: Vec<String>,
    pub handle: Handle,
    /// Encoded nodes by name, valid while the snapshot holds the same object.
    nodes: Mutex<HashMap<String, EncodedNode>>,
    /// Why events were dropped, each said once at warning level (then at debug): a guest
    /// such as NodeNumber sends the same unsupported event for every pod.
    dropped_events: Mutex<std::collections::HashSet<String>>,
}

impl Shared {
    pub fn new(plugin: &str, args: &crate::WasmArgs, handle: &Handle) -> Self {
        Self {
            plugin: plugin.to_string(),
            guest_config: args.guest_config.clone(),
            log_severity: args.log_severity,
            args: args.args.clone(),
            handle: handle.clone(),
            nodes: Mutex::new(HashMap::new()),
            dropped_events: Mutex::new(std::collections::HashSet::new()),
        }
    }

    /// Logs an event the guest sent that is not recorded: at warning level the first time
    /// for this reason, at debug level after that.
    fn dropped_event(&self, why: DroppedEvent) {
        let first = self.dropped_events.lock().insert(why.kind.clone());
        if first {
            tracing::warn!(plugin = %self.plugin, "{} (said once for this plugin)", why.message);
        } else {
            tracing::debug!(plugin = %self.plugin, "{}", why.message);
        }
    }

    /// The protobuf of node `name` in the current snapshot.
    fn node_bytes(&self, name: &str) -> Option<Arc<[u8]>> {
        let snapshot = self.handle.snapshot();
        let node = snapshot.get(name)?.node()?.node.clone();
        let mut cache = self.nodes.lock();
        if let Some((cached, bytes)) = cache.get(name)
            && Arc::ptr_eq(cached, &node)
        {
            return Some(bytes.clone());
        }
        let bytes: Arc<[u8]> = proto::node(&node).into();
        cache.insert(name.to_string(), (node, bytes.clone()));
        Some(bytes)
    }
}

/// A pod object a call may send to the guest: a cheap clone of `PodInfo::pod`, whichever
/// handle type that is, encoded only when the guest asks for it.
pub(crate) struct PodHandle(Box<dyn EncodePod>);

trait EncodePod: Send + Sync {
    fn encode(&self) -> Vec<u8>;
}

impl<T: std::ops::Deref<Target = api::Pod> + Send + Sync> EncodePod for T {
    fn encode(&self) -> Vec<u8> {
        proto::pod(self)
    }
}

impl PodHandle {
    pub fn new<T: std::ops::Deref<Target = api::Pod> + Send + Sync + 'static>(pod: T) -> Self {
        Self(Box::new(pod))
    }

    fn encode(&self) -> Vec<u8> {
        self.0.encode()
    }
}

/// The parameters and results of one guest call.
#[derive(Default)]
pub(crate) struct Call {
    pub pod: Option<PodHandle>,
    pub pod_bytes: Option<Vec<u8>>,
    pub target_pod: Option<PodHandle>,
    pub node_name: String,
    pub filtered_nodes: Vec<String>,
    pub node_scores: BTreeMap<String, i64>,
    pub node_statuses: BTreeMap<String, i32>,
    pub reason: Option<String>,
    pub node_names: Option<Vec<String>>,
    pub nominated_node_name: Option<String>,
    pub cluster_events: Vec<(u32, u32)>,
    pub normalized_scores: Option<BTreeMap<String, i64>>,
}

/// An object reference as the guest's event recorder sends it (upstream's `ObjectReference`;
/// its APIVersion and ResourceVersion are not part of a recorded event's reference here).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct GuestObjectRef {
    kind: String,
    name: String,
    namespace: String,
    #[serde(rename = "UID")]
    uid: String,
}

impl GuestObjectRef {
    fn into_ref(self) -> Option<ObjectRef> {
        (!self.name.is_empty()).then_some(ObjectRef {
            kind: self.kind,
            namespace: self.namespace,
            name: self.name,
            uid: self.uid,
        })
    }
}

/// Why a guest's event is not recorded: the kind of reason (said once) and the message.
struct DroppedEvent {
    kind: String,
    message: String,
}

/// What `handle.eventrecorder.eventf` sends (upstream's `EventMessage`).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct GuestEvent {
    regarding_reference: GuestObjectRef,
    related_reference: GuestObjectRef,
    eventtype: String,
    reason: String,
    action: String,
    note: String,
}

impl GuestEvent {
    /// The event the scheduler records, or why it is not recorded: as the events recorder
    /// of client-go drops it, an event of a type other than Normal or Warning, or about no
    /// object, is not recorded (client-go logs an error each time; here the first of each
    /// kind is a warning, the rest debug lines).
    fn into_event(self) -> Result<Event, DroppedEvent> {
        let event_type = match self.eventtype.as_str() {
            "Normal" => EventType::Normal,
            "Warning" => EventType::Warning,
            other => {
                return Err(DroppedEvent {
                    kind: format!("type {other}"),
                    message: format!(
                        "unsupported event type {other:?} (reason {:?}): not recorded",
                        self.reason
                    ),
                });
            }
        };
        let Some(regarding) = self.regarding_reference.into_ref() else {
            return Err(DroppedEvent {
                kind: "no object".into(),
                message: format!(
                    "an event (reason {:?}) about no named object: not recorded",
                    self.reason
                ),
            });
        };
        Ok(Event {
            regarding,
            event_type,
            reason: self.reason,
            action: self.action,
            note: self.note,
            related: self.related_reference.into_ref(),
        })
    }
}

/// A store's data: limits, the guest's memory, its captured output, the call in progress.
pub(crate) struct HostState {
    pub limits: StoreLimits,
    pub memory: Option<Memory>,
    pub out: Vec<u8>,
    pub shared: Arc<Shared>,
    pub call: Call,
}

/// The guest called `proc_exit`.
#[derive(Debug)]
pub(crate) struct Exit(pub i32);

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "module exited with exit_code({})", self.0)
    }
}

impl std::error::Error for Exit {}

type C<'a> = Caller<'a, HostState>;

fn memory(c: &C<'_>) -> wasmtime::Result<Memory> {
    c.data()
        .memory
        .ok_or_else(|| wasmtime::Error::msg("guest has no memory"))
}

/// Bytes of guest memory at `ptr..ptr+len`.
fn read(c: &mut C<'_>, ptr: u32, len: u32, what: &str) -> wasmtime::Result<Vec<u8>> {
    let mem = memory(c)?;
    let data = mem.data(&*c);
    let (start, end) = (ptr as usize, ptr as usize + len as usize);
    data.get(start..end)
        .map(<[u8]>::to_vec)
        .ok_or_else(|| wasmtime::Error::msg(format!("out of memory reading {what}")))
}

fn read_string(c: &mut C<'_>, ptr: u32, len: u32, what: &str) -> wasmtime::Result<String> {
    read(c, ptr, len, what).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Writes `v` at `buf` when it fits in `limit`; returns its length either way.
fn write_if_under_limit(c: &mut C<'_>, v: &[u8], buf: u32, limit: u32) -> wasmtime::Result<u32> {
    let len = u32::try_from(v.len()).map_err(|_| wasmtime::Error::msg("value too large"))?;
    if len == 0 || len > limit {
        return Ok(len);
    }
    let mem = memory(c)?;
    mem.write(&mut *c, buf as usize, v)
        .map_err(|_| wasmtime::Error::msg("out of memory writing a result"))?;
    Ok(len)
}

fn nul_separated(b: &[u8]) -> Vec<String> {
    b.split(|c| *c == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

fn to_json<T: serde::Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

/// A linker with every host module the ABI defines.
pub(crate) fn linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<HostState>> {
    let mut l: Linker<HostState> = Linker::new(engine);
    k8s_api(&mut l)?;
    k8s_scheduler(&mut l)?;
    klog(&mut l)?;
    wasi(&mut l)?;
    Ok(l)
}

fn k8s_api(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    l.func_wrap(
        K8S_API,
        "node",
        |mut c: C<'_>, name: u32, name_len: u32, buf: u32, limit: u32| -> wasmtime::Result<u32> {
            let name = read_string(&mut c, name, name_len, "nodeName")?;
            let bytes = c.data().shared.node_bytes(&name);
            match bytes {
                Some(b) => write_if_under_limit(&mut c, &b, buf, limit),
                None => Ok(0),
            }
        },
    )?;
    l.func_wrap(
        K8S_API,
        "nodeList",
        |mut c: C<'_>, buf: u32, limit: u32| -> wasmtime::Result<u32> {
            let snapshot = c.data().shared.handle.snapshot();
            let bytes = proto::node_list(
                snapshot
                    .list()
                    .iter()
                    .filter_map(|n| n.node().map(|n| n.node.as_ref())),
            );
            write_if_under_limit(&mut c, &bytes, buf, limit)
        },
    )?;
    Ok(())
}

fn k8s_scheduler(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    l.func_wrap(
        K8S_SCHEDULER,
        "get_config",
        |mut c: C<'_>, buf: u32, limit: u32| -> wasmtime::Result<u32> {
            let config = c.data().shared.guest_config.clone();
            write_if_under_limit(&mut c, config.as_bytes(), buf, limit)
        },
    )?;
    l.func_wrap(
        K8S_SCHEDULER,
        "filteredNodeList",
        |mut c: C<'_>, buf: u32, limit: u32| -> wasmtime::Result<u32> {
            let json = to_json(&c.data().call.filtered_nodes);
            write_if_under_limit(&mut c, &json, buf, limit)
        },
    )?;
    l.func_wrap(
        K8S_SCHEDULER,
        "currentNodeName",
        |mut c: C<'_>, buf: u32, limit: u32| -> wasmtime::Result<u32> {
            let name = c.data().call.node_name.clone();
            write_if_under_limit(&mut c, name.as_bytes(), buf, limit)
        },
    )?;
    l.func_wrap(
        K8S_SCHEDULER,
        "currentPod",
        |mut c: C<'_>, buf: u32, limit: u32| -> wasmtime::Result<u32> {
            let call = &mut c.data_mut().call;
            if call.pod_bytes.is_none() {
                call.pod_bytes = call.pod.as_ref().map(|p| p.encode());
            }
            let bytes = call.pod_bytes.clone().unwrap_or_default();
            write_if_under_limit(&mut c, &bytes, buf, limit)
        },
    )?;
    l.func_wrap(
        K8S_SCHEDULER,
        "targetPod",
        |mut c: C<'_>, buf: u32, limit: u32| -> wasmtime::Result<u32> {
            let bytes = c
                .data()
                .call
                .target_pod
                .as_ref()
                .map(|p| p.encode())
                .unwrap_or_default();
            write_if_under_limit(&mut c, &bytes, buf, limit)
        },
    )?;
    l.func_wrap(
        K8S_SCHEDULER,
        "nodeImageStates",
        |mut c: C<'_>, name: u32, name_len: u32, buf: u32, limit: u32| -> wasmtime::Result<u32> {
            let name = read_string(&mut c, name, name_len, "nodeName")?;
            let snapshot = c.data().shared.handle.snapshot();
            let states: BTreeMap<&str, serde_json::Value> = snapshot
                .get(&name)
                .map(|n| {
                    n.image_states
                        .iter()
                        .map(|(image, s)| {
                            (
                                image.as_str(),
                                serde_json::json!({"Size": s.size, "NumNodes": s.num_nodes}),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            let json = if snapshot.get(&name).is_some() {
                to_json(&states)
            } else {
                b"null".to_vec()
            };
            write_if_under_limit(&mut c, &json, buf, limit)
        },
    )?;
    l.func_wrap(
        K8S_SCHEDULER,
        "nodeToStatusMap",
        |mut c: C<'_>, buf: u32, limit: u32| -> wasmtime::Result<u32> {
            let json = to_json(&c.data().call.node_statuses);
            write_if_under_limit(&mut c, &json, buf, limit)
        },
    )?;
    l.func_wrap(
        K8S_SCHEDULER,
        "nodeScoreList",
        |mut c: C<'_>, buf: u32, limit: u32| -> wasmtime::Result<u32> {
            let json = to_json(&c.data().call.node_scores);
            write_if_under_limit(&mut c, &json, buf, limit)
        },
    )?;
    l.func_wrap(
        K8S_SCHEDULER,
        "result.cluster_events",
        |mut c: C<'_>, buf: u32, len: u32| -> wasmtime::Result<()> {
            let b = read(&mut c, buf, len, "clusterEvents")?;
            c.data_mut().call.cluster_events = b
                .chunks_exact(8)
                .map(|e| {
                    let word = |i: usize| u32::from_le_bytes([e[i], e[i + 1], e[i + 2], e[i + 3]]);
                    (word(0), word(4))
                })
                .collect();
            Ok(())
        },
    )?;
    l.func_wrap(
        K8S_SCHEDULER,
        "result.node_names",
        |mut c: C<'_>, buf: u32, len: u32| -> wasmtime::Result<()> {
            let b = read(&mut c, buf, len, "nodeNames")?;
            c.data_mut().call.node_names = Some(nul_separated(&b));
            Ok(())
        },
    )?;
    l.func_wrap(
        K8S_SCHEDULER,
        "result.nominated_node_name",
        |mut c: C<'_>, buf: u32, len: u32| -> wasmtime::Result<()> {
            let name = read_string(&mut c, buf, len, "nominatedNodeName")?;
            c.data_mut().call.nominated_node_name = Some(name);
            Ok(())
        },
    )?;
    l.func_wrap(
        K8S_SCHEDULER,
        "result.status_reason",
        |mut c: C<'_>, buf: u32, len: u32| -> wasmtime::Result<()> {
            let reason = read_string(&mut c, buf, len, "reason")
                .unwrap_or_else(|_| "BUG: out of memory reading message".into());
            c.data_mut().call.reason = Some(reason);
            Ok(())
        },
    )?;
    l.func_wrap(
        K8S_SCHEDULER,
        "result.normalized_score_list",
        |mut c: C<'_>, buf: u32, len: u32| -> wasmtime::Result<()> {
            let b = read(&mut c, buf, len, "normalized score list")?;
            // A guest without a NormalizeScore of its own reports `null`: the scores stay.
            let scores: Option<BTreeMap<String, i64>> = serde_json::from_slice(&b)
                .map_err(|e| wasmtime::Error::msg(format!("normalized score list: {e}")))?;
            c.data_mut().call.normalized_scores = scores;
            Ok(())
        },
    )?;
    l.func_wrap(
        K8S_SCHEDULER,
        "handle.eventrecorder.eventf",
        |mut c: C<'_>, buf: u32, len: u32| -> wasmtime::Result<()> {
            let b = read(&mut c, buf, len, "eventrecorder event")?;
            let msg: GuestEvent = serde_json::from_slice(&b)
                .map_err(|e| wasmtime::Error::msg(format!("eventrecorder event: {e}")))?;
            let shared = &c.data().shared;
            match msg.into_event() {
                Ok(event) => shared.handle.client().record_event(event),
                Err(why) => shared.dropped_event(why),
            }
            Ok(())
        },
    )?;
    l.func_wrap(
        K8S_SCHEDULER,
        "handle.reject_waiting_pod",
        |mut c: C<'_>, buf: u32, len: u32, out: u32, _limit: u32| -> wasmtime::Result<()> {
            let uid = read_string(&mut c, buf, len, "rejectWaitingPod")?;
            let plugin = c.data().shared.plugin.clone();
            let rejected = c.data().shared.handle.waiting_pods().reject(
                &uid,
                &plugin,
                "removed by the wasm guest",
            );
            let mem = memory(&c)?;
            mem.write(&mut c, out as usize, &u64::from(rejected).to_le_bytes())
                .map_err(|_| wasmtime::Error::msg("out of memory writing rejectWaitingPod"))
        },
    )?;
    l.func_wrap(
        K8S_SCHEDULER,
        "handle.get_waiting_pod",
        |mut c: C<'_>, buf: u32, len: u32, out: u32, limit: u32| -> wasmtime::Result<()> {
            let uid = read_string(&mut c, buf, len, "getWaitingPod")?;
            let waiting = c.data().shared.handle.waiting_pods().get(&uid);
            match waiting {
                Some(w) => {
                    let bytes = proto::pod(&w.pod().pod);
                    write_if_under_limit(&mut c, &bytes, out, limit)?;
                }
                None => {
                    let mem = memory(&c)?;
                    mem.write(&mut c, out as usize, &0u64.to_le_bytes())
                        .map_err(|_| wasmtime::Error::msg("out of memory writing getWaitingPod"))?;
                }
            }
            Ok(())
        },
    )?;
    Ok(())
}

fn klog(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    fn emit(c: &C<'_>, severity: i32, msg: &str, kvs: &[String]) {
        let plugin = c.data().shared.plugin.as_str();
        let kvs = kvs.join(" ");
        match severity {
            0 => tracing::info!(plugin, kvs, "{msg}"),
            1 => tracing::warn!(plugin, kvs, "{msg}"),
            _ => tracing::error!(plugin, kvs, "{msg}"),
        }
    }
    l.func_wrap(
        K8S_KLOG,
        "log",
        |mut c: C<'_>, severity: i32, msg: u32, msg_len: u32| -> wasmtime::Result<()> {
            if severity < c.data().shared.log_severity {
                return Ok(());
            }
            if let Ok(m) = read_string(&mut c, msg, msg_len, "message") {
                emit(&c, severity, &m, &[]);
            }
            Ok(())
        },
    )?;
    l.func_wrap(
        K8S_KLOG,
        "logs",
        |mut c: C<'_>,
         severity: i32,
         msg: u32,
         msg_len: u32,
         kvs: u32,
         kvs_len: u32|
         -> wasmtime::Result<()> {
            if severity < c.data().shared.log_severity {
                return Ok(());
            }
            let Ok(m) = read_string(&mut c, msg, msg_len, "message") else {
                return Ok(());
            };
            let kvs = read(&mut c, kvs, kvs_len, "kvs")
                .map(|b| nul_separated(&b))
                .unwrap_or_default();
            emit(&c, severity, &m, &kvs);
            Ok(())
        },
    )?;
    l.func_wrap(K8S_KLOG, "severity", |c: C<'_>| -> i32 {
        c.data().shared.log_severity
    })?;
    Ok(())
}

const ERRNO_SUCCESS: i32 = 0;
const ERRNO_BADF: i32 = 8;
const ERRNO_FAULT: i32 = 21;
const ERRNO_INVAL: i32 = 28;

fn put(c: &mut C<'_>, at: u32, bytes: &[u8]) -> bool {
    match memory(c) {
        Ok(mem) => mem.write(&mut *c, at as usize, bytes).is_ok(),
        Err(_) => false,
    }
}

/// argv or environ as WASI lays them out: pointers at `ptrs`, NUL-terminated strings at `buf`.
fn put_strings(c: &mut C<'_>, items: &[String], ptrs: u32, buf: u32) -> i32 {
    let mut at = buf;
    for (i, s) in items.iter().enumerate() {
        let slot = ptrs + 4 * i as u32;
        let mut bytes = s.as_bytes().to_vec();
        bytes.push(0);
        if !put(c, slot, &at.to_le_bytes()) || !put(c, at, &bytes) {
            return ERRNO_FAULT;
        }
        at += bytes.len() as u32;
    }
    ERRNO_SUCCESS
}

fn sizes(c: &mut C<'_>, items: &[String], count: u32, size: u32) -> i32 {
    let n = items.len() as u32;
    let bytes: u32 = items.iter().map(|s| s.len() as u32 + 1).sum();
    if put(c, count, &n.to_le_bytes()) && put(c, size, &bytes.to_le_bytes()) {
        ERRNO_SUCCESS
    } else {
        ERRNO_FAULT
    }
}

fn wasi(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    l.func_wrap(
        WASI_MODULE,
        "args_sizes_get",
        |mut c: C<'_>, count: u32, size: u32| -> i32 {
            let args = program_args(&c);
            sizes(&mut c, &args, count, size)
        },
    )?;
    l.func_wrap(
        WASI_MODULE,
        "args_get",
        |mut c: C<'_>, ptrs: u32, buf: u32| -> i32 {
            let args = program_args(&c);
            put_strings(&mut c, &args, ptrs, buf)
        },
    )?;
    l.func_wrap(
        WASI_MODULE,
        "environ_sizes_get",
        |mut c: C<'_>, count: u32, size: u32| -> i32 { sizes(&mut c, &[], count, size) },
    )?;
    l.func_wrap(
        WASI_MODULE,
        "environ_get",
        |_c: C<'_>, _ptrs: u32, _buf: u32| -> i32 { ERRNO_SUCCESS },
    )?;
    l.func_wrap(
        WASI_MODULE,
        "clock_time_get",
        |mut c: C<'_>, id: u32, _precision: u64, out: u32| -> i32 {
            let nanos: u64 = match id {
                // realtime
                0 => std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0),
                // monotonic, process and thread CPU time
                1..=3 => monotonic_nanos(),
                _ => return ERRNO_INVAL,
            };
            if put(&mut c, out, &nanos.to_le_bytes()) {
                ERRNO_SUCCESS
            } else {
                ERRNO_FAULT
            }
        },
    )?;
    l.func_wrap(
        WASI_MODULE,
        "fd_write",
        |mut c: C<'_>, fd: u32, iovs: u32, iovs_len: u32, written: u32| -> i32 {
            if fd != 1 && fd != 2 {
                return ERRNO_BADF;
            }
            let Ok(mem) = memory(&c) else {
                return ERRNO_FAULT;
            };
            let mut text = Vec::new();
            {
                let data = mem.data(&c);
                for i in 0..iovs_len as usize {
                    let at = iovs as usize + 8 * i;
                    let Some(iov) = data.get(at..at + 8) else {
                        return ERRNO_FAULT;
                    };
                    let ptr = u32::from_le_bytes([iov[0], iov[1], iov[2], iov[3]]) as usize;
                    let len = u32::from_le_bytes([iov[4], iov[5], iov[6], iov[7]]) as usize;
                    let Some(bytes) = data.get(ptr..ptr + len) else {
                        return ERRNO_FAULT;
                    };
                    text.extend_from_slice(bytes);
                }
            }
            let n = text.len() as u32;
            let out = &mut c.data_mut().out;
            let room = MAX_OUT.saturating_sub(out.len());
            out.extend_from_slice(&text[..text.len().min(room)]);
            if put(&mut c, written, &n.to_le_bytes()) {
                ERRNO_SUCCESS
            } else {
                ERRNO_FAULT
            }
        },
    )?;
    l.func_wrap(
        WASI_MODULE,
        "proc_exit",
        |_c: C<'_>, code: i32| -> wasmtime::Result<()> { Err(wasmtime::Error::new(Exit(code))) },
    )?;
    l.func_wrap(
        WASI_MODULE,
        "random_get",
        |mut c: C<'_>, buf: u32, len: u32| -> i32 {
            let bytes: Vec<u8> = (0..len).map(|_| fastrand::u8(..)).collect();
            if put(&mut c, buf, &bytes) {
                ERRNO_SUCCESS
            } else {
                ERRNO_FAULT
            }
        },
    )?;
    Ok(())
}

/// The guest's `os.Args`: the configured `args` (upstream passes `config.Args` as given).
fn program_args(c: &C<'_>) -> Vec<String> {
    c.data().shared.args.clone()
}

fn monotonic_nanos() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
}
