//! WebAssembly scheduler plugins: runs the guests of kubernetes-sigs/kube-scheduler-wasm-extension
//! unchanged, with wasmtime, as ordinary kubesched plugins.
//!
//! This crate owns the host side of that project's guest ABI (the `k8s.io/api`,
//! `k8s.io/scheduler` and `k8s.io/klog` import modules, the minimal WASI preview1 its TinyGo
//! guests need, the exported functions per extension point), the Kubernetes protobuf encoding
//! of the objects it hands a guest, and the guest instances' life cycle. It must not let a
//! guest take the scheduler down: a trap, a call that runs past its deadline or a guest that
//! grows its memory past the limit fails that one plugin call with an Error status naming the
//! plugin, and the instance is thrown away. It holds no scheduling logic of its own.
//!
//! # Configuration
//!
//! As upstream's extension: the plugin is enabled under a name of the user's choice (usually in
//! `multiPoint`), and its `pluginConfig` entry carries `guestURL` (a path, `file://` URL, or an
//! `http(s)://` URL, which must then be pinned by `guestSHA256`), `guestConfig` (a string the
//! guest reads with `get_config`) and `logSeverity`. kubesched's registry is by name at link
//! time, so the crate registers a [`PluginSource`](kubesched_framework::registry::PluginSource):
//! a name that is not a registered plugin, whose args carry `guestURL`, is built by this crate
//! under that name, as `wasm.PluginFactory(name)` does upstream. Several guests sit side by side
//! under their own names.
//!
//! # How the ABI is bridged
//!
//! * **Extension points** come from the guest's exports (`prefilter`, `filter`, `postfilter`,
//!   `prescore`, `score`, `normalizescore`, `reserve`/`unreserve`, `permit`, `prebind`, `bind`,
//!   `postbind`, `addpod`/`removepod`, `enqueue`), with upstream's signature checks and its
//!   grouping: Filter brings PreFilter, PostFilter and the PreFilter extensions the guest
//!   exports; Score brings PreScore and NormalizeScore; Bind brings PreBind and PostBind. A
//!   guest exporting none of filter, score, reserve, permit or bind (and not only prefilter) is
//!   refused, as upstream refuses it, with its message and the file.
//! * **Objects** are sent as `k8s.io.api.core.v1.Pod` / `Node` / `NodeList` protobuf messages
//!   encoded from the k8s-openapi objects: nearly every v1.37 field, volumes, pod affinity
//!   and spread constraints included (the `proto` module lists the few left out). Lists
//!   and maps the ABI sends as JSON (filtered node names, node scores, node-to-status codes,
//!   image states) are JSON, NUL-separated strings are NUL-separated.
//! * **Instances**: one guest instance serves a pod's scheduling cycle (kubesched's Filter runs
//!   over nodes in parallel; calls into one instance are serialised, as upstream does). At
//!   Permit (or Reserve, or the first binding call) the instance moves to the pod's binding
//!   cycle, and the next pod's cycle takes a free instance or instantiates a new one, so a
//!   guest's cycle state written in PreScore is there in Score and in Bind of the same pod.
//!   Upstream calls the guest's `prefilter` at the start of each cycle to reset its cycle
//!   state; kubesched does the same (a guest that exports `prefilter` is a PreFilter plugin).
//! * **Results** a guest reports through `result.*` imports are collected per call; PreFilter's
//!   node names narrow the candidates, NormalizeScore's map replaces the scores of the nodes
//!   it names. PostFilter's result packs upstream's nominating mode in its high word: Noop (0)
//!   is no result (the pod keeps the nomination it has, whatever name the guest set),
//!   Override (1) is kubesched's `PostFilterResult` with the guest's node, or without one
//!   (which clears the nomination) when the name is empty; another mode fails the call.
//! * **Queueing hints**: upstream converts the guest's events to events without hints; so does
//!   this crate. A guest without `enqueue` registers for every event of the resources upstream
//!   lists.
//! * **Handle**: `handle.eventrecorder.eventf` records the guest's event through the handle's
//!   cluster client, as the scheduler's own events (events.k8s.io in cluster mode, the
//!   report's events in a simulation): regarding and related objects, type, reason, action,
//!   note. As client-go's events recorder, an event whose type is not `Normal` or `Warning`
//!   (upstream's NodeNumber sends `PreScore`) or that is about no named object is not
//!   recorded; the first of each kind is logged as a warning, the rest at debug level
//!   (client-go logs an error each time, a line per pod for NodeNumber). The note is taken
//!   as written (upstream's host passes it to `Eventf` as a format string).
//!   `handle.get_waiting_pod` and `handle.reject_waiting_pod` use the framework's waiting
//!   pods.
//!
//! # Limits
//!
//! Each call has a deadline (`callTimeoutMillis`, default 1000 ms; wasmtime epochs) and each
//! instance a memory limit (`memoryLimitBytes`, default 256 MiB); both are kubesched additions to
//! upstream's args.
//!
//! # Features
//!
//! `bench-twins` registers `NativeNodeNumber` and `NativeNoZeroNodes`, the logic of the
//! NodeNumber guest and of `examples/wasm/no-zero-nodes.wat` in Rust: the baseline of
//! `kubesched bench --config benchmarks/wasm/…` (docs/benchmarks.md). No default build
//! has them.

mod host;
mod load;
mod plugin;
pub mod proto;
#[cfg(feature = "bench-twins")]
pub mod twins;

use serde::{Deserialize, Serialize};

pub use load::{Interfaces, LoadError};
pub use plugin::WasmPlugin;

/// The kind the plugin source reports in messages.
pub const SOURCE_KIND: &str = "wasm";

/// Default deadline of one guest call.
pub const DEFAULT_CALL_TIMEOUT_MILLIS: u64 = 1000;

/// Default limit of one guest instance's linear memory.
pub const DEFAULT_MEMORY_LIMIT_BYTES: u64 = 256 << 20;

/// A wasm plugin's `pluginConfig` args (upstream's `wasm.PluginConfig`, plus the limits).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WasmArgs {
    /// Where the guest is: a file path, `file://` URL or `http(s)://` URL.
    #[serde(rename = "guestURL")]
    pub guest_url: String,
    /// Any configuration for the guest, read with `get_config`.
    #[serde(default)]
    pub guest_config: String,
    /// 0 info (default), 1 warning, 2 error, 3 fatal: the lowest severity the guest logs.
    #[serde(default)]
    pub log_severity: i32,
    /// The guest's `os.Args` (upstream exposes it for tests).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Hex SHA-256 the guest's bytes must have (required for an http(s) URL).
    #[serde(
        default,
        rename = "guestSHA256",
        skip_serializing_if = "Option::is_none"
    )]
    pub guest_sha256: Option<String>,
    /// Deadline of one guest call, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_timeout_millis: Option<u64>,
    /// Limit of an instance's linear memory, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u64>,
}

impl WasmArgs {
    /// Decodes args as a `pluginConfig` entry holds them (`apiVersion`/`kind` ignored).
    pub fn from_json(value: &serde_json::Value) -> Result<Self, LoadError> {
        let mut v = value.clone();
        if let Some(m) = v.as_object_mut() {
            m.remove("apiVersion");
            m.remove("kind");
        }
        serde_json::from_value(v).map_err(|e| LoadError::Args(e.to_string()))
    }
}

fn claims(args: &serde_json::Value) -> bool {
    args.get("guestURL").is_some()
}

/// Decodes a guest's args once, when the configuration is loaded: the typed args `build`
/// gets (shown as written), and the points the guest's exports implement.
fn decode(
    raw: &serde_json::Value,
) -> Result<kubesched_framework::registry::SourcedArgs, kubesched_framework::registry::ArgsError> {
    let to_err = |e: LoadError| kubesched_framework::registry::ArgsError {
        message: e.to_string(),
    };
    let args = WasmArgs::from_json(raw).map_err(to_err)?;
    let guest = load::load(&args).map_err(to_err)?;
    Ok(kubesched_framework::registry::SourcedArgs {
        points: guest.interfaces.points(),
        args: kubesched_framework::registry::DecodedArgs::new(args, Some(raw.clone())),
    })
}

fn build(
    name: &str,
    args: &kubesched_framework::registry::DecodedArgs,
    handle: &kubesched_framework::Handle,
) -> Result<std::sync::Arc<dyn kubesched_framework::Plugin>, kubesched_framework::PluginError> {
    let args = args.get::<WasmArgs>().ok_or_else(|| {
        kubesched_framework::PluginError(format!("{name}: args of the wrong type"))
    })?;
    let plugin = WasmPlugin::new(name, args, handle)
        .map_err(|e| kubesched_framework::PluginError(e.to_string()))?;
    Ok(std::sync::Arc::new(plugin))
}

kubesched_framework::register_plugin_source! {
    kind: SOURCE_KIND,
    claims: claims,
    decode: decode,
    build: build,
}

#[cfg(test)]
mod tests;

/// The source's hook end to end: its args decoded once into the spec, the runtime building
/// the guest from them under the configured name.
#[cfg(test)]
mod source_tests {
    use kubesched_framework::{ExtensionPoint, Framework, Handle, PluginRef, ProfileSpec};

    #[test]
    fn a_guest_is_built_from_the_args_its_source_decoded() {
        let guest = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/wasm/no-zero-nodes.wat"
        );
        let raw = serde_json::json!({"guestURL": guest});
        assert!(super::claims(&raw));
        let sourced = super::decode(&raw).expect("the example guest decodes");
        assert!(sourced.points.contains(ExtensionPoint::Filter));
        assert_eq!(
            sourced
                .args
                .get::<super::WasmArgs>()
                .map(|a| a.guest_url.as_str()),
            Some(guest)
        );
        let mut spec = ProfileSpec {
            scheduler_name: "wasm".into(),
            ..Default::default()
        };
        spec.plugins
            .insert(ExtensionPoint::Filter, vec![PluginRef::new("NoZeroNodes")]);
        spec.plugin_args.insert("NoZeroNodes".into(), sourced.args);
        let control = Handle::builder().build_with_control();
        let fw = Framework::new(spec, control.handle().clone()).expect("builds the guest");
        assert_eq!(fw.effective_args()["NoZeroNodes"], raw, "shown as written");
        let refused = super::decode(&serde_json::json!({"guestURL": ""}))
            .expect_err("no guest")
            .message;
        assert_eq!(refused, "wasm: guestURL is required");
    }
}
