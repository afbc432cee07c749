//! The link-time plugin registry.
//!
//! Each plugin crate calls [`register_plugin!`](crate::register_plugin) once. The macro
//! places a [`PluginDescriptor`] in a link-time collection; [`plugins`] reads it. Two
//! backends exist, chosen by this crate's features: `inventory` (default; a constructor
//! runs before `main`) and `linkme` (a linker section, nothing runs before `main`). When
//! both are on, `linkme` is used, so Cargo's feature unification can never break a build.
//! A crate is only linked when some source line names it: the binary's `plugins.rs` does
//! that, one `use … as _;` per enabled plugin feature.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::kinds::{KindWrite, ObjectKind};
use crate::{FeatureGates, Handle, Plugin, PointSet};

#[cfg(not(any(feature = "inventory", feature = "linkme")))]
compile_error!(
    "kubesched-framework needs a registry backend: enable its `inventory` (default) or `linkme` feature"
);

/// A plugin's typed arguments (`pluginConfig[].args`).
pub trait PluginArgs:
    DeserializeOwned + Serialize + Default + Clone + Send + Sync + 'static
{
    /// The `kind` of the args object, e.g. `NodeResourcesFitArgs`.
    const KIND: &'static str;

    /// Fills the defaults that depend on feature gates (upstream's `SetDefaults_*` reading
    /// the gates: kube-scheduler parses `--feature-gates` before it decodes its
    /// configuration file, so a gate's default shows in `/configz` exactly when it is on).
    fn default_with_gates(&mut self, _gates: &FeatureGates) {}

    /// Checks values the type system cannot (ranges, non-empty lists), and the fields a
    /// gate that is off forbids, as upstream validates a configuration under the gates in
    /// effect.
    fn validate(&self, _gates: &FeatureGates) -> Result<(), String> {
        Ok(())
    }
}

/// Why a plugin's args were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ArgsError {
    /// What is wrong, with the field when known.
    pub message: String,
}

/// A plugin's args, decoded once and carried typed to its factory.
///
/// The config crate decodes every `pluginConfig` entry (and the defaults of every enabled
/// plugin that takes args) with the plugin's [`ArgsCodec`] when the file is loaded; the
/// [`ProfileSpec`](crate::ProfileSpec) carries the result, and the framework hands it to the
/// factory as it is: no second decode, no `serde_json::Value` on the way. The typed value is
/// type-erased here (each plugin's codec knows its type, [`get`](Self::get) recovers it);
/// `effective` is its JSON form with the defaults filled in, what `config defaults` and
/// `/configz` print.
#[derive(Clone)]
pub struct DecodedArgs {
    value: Option<Arc<dyn Any + Send + Sync>>,
    /// The args as they take effect, for `config defaults` and `/configz`.
    pub effective: Option<serde_json::Value>,
}

impl std::fmt::Debug for DecodedArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecodedArgs")
            .field("effective", &self.effective)
            .finish()
    }
}

/// Two decoded args are equal when their effective forms are: decoding is a function of
/// that form, so equal forms mean equal values.
impl PartialEq for DecodedArgs {
    fn eq(&self, other: &Self) -> bool {
        self.effective == other.effective && self.value.is_some() == other.value.is_some()
    }
}

impl DecodedArgs {
    /// No args.
    pub fn none() -> Self {
        Self {
            value: None,
            effective: None,
        }
    }

    /// Args a decoder made: the typed `value` and the JSON form it shows for it (a
    /// [`PluginSource`]'s decoder uses this; registered plugins get theirs from
    /// [`ArgsCodec::of`]).
    pub fn new<T: Any + Send + Sync>(value: T, effective: Option<serde_json::Value>) -> Self {
        Self {
            value: Some(Arc::new(value)),
            effective,
        }
    }

    /// The typed args.
    pub fn get<T: 'static>(&self) -> Option<&T> {
        self.value.as_ref().and_then(|v| v.downcast_ref())
    }
}

/// How a plugin's args are decoded, and what their defaults are.
#[derive(Clone, Copy)]
pub struct ArgsCodec {
    /// The args kind, None for plugins without args.
    pub kind: Option<&'static str>,
    /// Decodes raw args (None: defaults) under the feature gates in effect. `apiVersion`
    /// and `kind` keys are ignored.
    pub decode: fn(Option<&serde_json::Value>, &FeatureGates) -> Result<DecodedArgs, ArgsError>,
}

impl ArgsCodec {
    /// The codec of a plugin without args: any non-empty args object is refused.
    pub const fn none() -> Self {
        Self {
            kind: None,
            decode: decode_none,
        }
    }

    /// The codec of args type `T`.
    pub const fn of<T: PluginArgs>() -> Self {
        Self {
            kind: Some(T::KIND),
            decode: decode_typed::<T>,
        }
    }
}

fn strip_type_meta(value: Option<&serde_json::Value>) -> serde_json::Value {
    let mut v = value
        .cloned()
        .unwrap_or_else(|| serde_json::Value::Object(Default::default()));
    if let Some(map) = v.as_object_mut() {
        map.remove("apiVersion");
        map.remove("kind");
    }
    if v.is_null() {
        v = serde_json::Value::Object(Default::default());
    }
    v
}

fn decode_none(
    value: Option<&serde_json::Value>,
    _gates: &FeatureGates,
) -> Result<DecodedArgs, ArgsError> {
    let v = strip_type_meta(value);
    match v.as_object() {
        Some(m) if m.is_empty() => Ok(DecodedArgs::none()),
        _ => Err(ArgsError {
            message: "this plugin takes no args".into(),
        }),
    }
}

fn decode_typed<T: PluginArgs>(
    value: Option<&serde_json::Value>,
    gates: &FeatureGates,
) -> Result<DecodedArgs, ArgsError> {
    let v = strip_type_meta(value);
    let mut args: T = serde_path_to_error::deserialize(v).map_err(|e| {
        // The field where decoding stopped, when it is below the top (`scoringStrategy.type`);
        // for an unknown field, the object holding it (serde names the field itself).
        let mut path = e.path().to_string();
        if e.inner().to_string().starts_with("unknown field") {
            path = path
                .rsplit_once('.')
                .map_or("", |(parent, _)| parent)
                .to_string();
        }
        let at = if path == "." || path.is_empty() {
            String::new()
        } else {
            format!("{path}: ")
        };
        ArgsError {
            message: format!("decoding {}: {at}{}", T::KIND, e.inner()),
        }
    })?;
    args.default_with_gates(gates);
    args.validate(gates).map_err(|e| ArgsError {
        message: format!("invalid {}: {e}", T::KIND),
    })?;
    let mut effective = serde_json::to_value(&args).map_err(|e| ArgsError {
        message: format!("encoding {}: {e}", T::KIND),
    })?;
    if let Some(m) = effective.as_object_mut() {
        m.insert(
            "kind".into(),
            serde_json::Value::String(T::KIND.to_string()),
        );
        m.insert(
            "apiVersion".into(),
            serde_json::Value::String(crate::CONFIG_API_VERSION.to_string()),
        );
    }
    Ok(DecodedArgs {
        value: Some(Arc::new(args)),
        effective: Some(effective),
    })
}

/// Builds a plugin from decoded args.
pub type PluginFactory = fn(&DecodedArgs, &Handle) -> Result<Arc<dyn Plugin>, crate::PluginError>;

/// What a plugin crate registers.
#[derive(Clone, Copy)]
pub struct PluginDescriptor {
    /// The plugin's name, e.g. `NodeResourcesFit`.
    pub name: &'static str,
    /// The extension points the plugin type implements, read from its trait impls (see
    /// [`register_plugin!`](crate::register_plugin)).
    pub points: fn() -> PointSet,
    /// Its args codec.
    pub args: ArgsCodec,
    /// Its factory.
    pub factory: PluginFactory,
    /// The crate that registered it (for duplicate reports).
    pub crate_name: &'static str,
    /// The object kinds it reads (`kinds: [...]` in `register_plugin!`): the backends
    /// watch, load and store exactly the kinds the compiled-in plugins declare.
    pub kinds: &'static [ObjectKind],
    /// The writes it makes in cluster mode (`writes: [...]`), for RBAC.
    pub writes: &'static [KindWrite],
}

impl PluginDescriptor {
    /// The extension points the plugin implements.
    pub fn extension_points(&self) -> PointSet {
        (self.points)()
    }
}

/// What a set of plugins declared: the kinds they read and the writes they make, each
/// once, sorted by group, kind and version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeclaredKinds {
    /// The kinds read.
    pub reads: Vec<ObjectKind>,
    /// The writes, merged per kind.
    pub writes: Vec<KindWrite>,
}

/// The union of the declarations of `plugins` (e.g. [`plugins`], or the enabled ones).
pub fn declared_kinds<'a>(
    plugins: impl IntoIterator<Item = &'a PluginDescriptor>,
) -> DeclaredKinds {
    let mut out = DeclaredKinds::default();
    for p in plugins {
        for k in p.kinds {
            if !out.reads.contains(k) {
                out.reads.push(*k);
            }
        }
        for w in p.writes {
            match out.writes.iter_mut().find(|x| x.kind == w.kind) {
                Some(x) => {
                    x.verbs = merged(x.verbs, w.verbs);
                    x.status_verbs = merged(x.status_verbs, w.status_verbs);
                }
                None => out.writes.push(*w),
            }
        }
    }
    let order = |k: &ObjectKind| (k.group, k.kind, k.version);
    out.reads.sort_by_key(order);
    out.writes.sort_by_key(|w| order(&w.kind));
    out
}

/// The union of two verb lists, sorted (leaked once per distinct union: declarations are
/// few and fixed at build time).
fn merged(a: &'static [&'static str], b: &'static [&'static str]) -> &'static [&'static str] {
    if b.iter().all(|v| a.contains(v)) {
        return a;
    }
    if a.iter().all(|v| b.contains(v)) {
        return b;
    }
    let mut all: Vec<&'static str> = a.iter().chain(b).copied().collect();
    all.sort_unstable();
    all.dedup();
    Box::leak(all.into_boxed_slice())
}

impl std::fmt::Debug for PluginDescriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginDescriptor")
            .field("name", &self.name)
            .field("extension_points", &self.extension_points())
            .field("crate", &self.crate_name)
            .finish()
    }
}

#[cfg(all(feature = "inventory", not(feature = "linkme")))]
inventory::collect!(PluginDescriptor);

/// The distributed slice the `linkme` backend collects descriptors in.
#[cfg(feature = "linkme")]
#[linkme::distributed_slice]
pub static PLUGINS: [PluginDescriptor];

fn raw() -> Vec<&'static PluginDescriptor> {
    #[cfg(feature = "linkme")]
    {
        PLUGINS.iter().collect()
    }
    #[cfg(all(feature = "inventory", not(feature = "linkme")))]
    {
        inventory::iter::<PluginDescriptor>.into_iter().collect()
    }
}

/// Which backend collected the plugins.
pub fn backend() -> &'static str {
    if cfg!(feature = "linkme") {
        "linkme"
    } else {
        "inventory"
    }
}

/// Every registered plugin, sorted by name.
pub fn plugins() -> Vec<&'static PluginDescriptor> {
    let mut all = raw();
    all.sort_by(|a, b| a.name.cmp(b.name).then(a.crate_name.cmp(b.crate_name)));
    all
}

/// The plugin registered under `name`.
pub fn find(name: &str) -> Option<&'static PluginDescriptor> {
    raw().into_iter().find(|d| d.name == name)
}

/// Names registered more than once, with the crates that registered them.
pub fn duplicates() -> BTreeMap<&'static str, Vec<&'static str>> {
    let mut by_name: BTreeMap<&'static str, Vec<&'static str>> = BTreeMap::new();
    for d in raw() {
        by_name.entry(d.name).or_default().push(d.crate_name);
    }
    by_name.retain(|_, crates| crates.len() > 1);
    by_name
}

/// Fails when a plugin name was registered twice (called once at start-up).
pub fn check_unique() -> Result<(), crate::PluginError> {
    let dups = duplicates();
    if dups.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = dups
        .iter()
        .map(|(n, c)| format!("{n} (registered by {})", c.join(", ")))
        .collect();
    Err(crate::PluginError(format!(
        "plugin names registered more than once: {}",
        list.join("; ")
    )))
}

/// Builds plugins under names the configuration picks, for one factory that serves any
/// number of names (kube-scheduler-wasm-extension's `wasm.PluginFactory(name)`: each
/// WebAssembly guest is its own plugin). A profile naming a plugin that is not registered,
/// whose `pluginConfig` args the source [`claims`](Self::claims), gets the source's plugin
/// under that name; any other unknown name stays an error. Registered with
/// [`register_plugin_source!`](crate::register_plugin_source).
///
/// Its args follow the registered plugins' rule: [`decode`](Self::decode) runs once, when
/// the configuration is loaded, and [`build`](Self::build) gets what it returned.
#[derive(Clone, Copy)]
pub struct PluginSource {
    /// What the source builds, for messages (e.g. `wasm`).
    pub kind: &'static str,
    /// Whether args of a `pluginConfig` entry are meant for this source (e.g. they carry a
    /// `guestURL`). A look at the keys, not a decode.
    pub claims: fn(&serde_json::Value) -> bool,
    /// Decodes the args of one configured plugin: the typed value [`build`](Self::build)
    /// gets, and the extension points the plugin built from it will implement.
    pub decode: fn(&serde_json::Value) -> Result<SourcedArgs, ArgsError>,
    /// Builds the plugin named `name` from its decoded args.
    pub build: SourceFactory,
    /// The crate that registered it.
    pub crate_name: &'static str,
}

/// What a [`PluginSource`] decoded from one plugin's args.
#[derive(Debug, Clone)]
pub struct SourcedArgs {
    /// The typed args (make them with [`DecodedArgs::new`]), handed to the source's
    /// `build`.
    pub args: DecodedArgs,
    /// The extension points the plugin built from these args implements.
    pub points: PointSet,
}

/// Builds a plugin of a [`PluginSource`] under the configured name, from the args its
/// `decode` returned.
pub type SourceFactory = fn(
    name: &str,
    args: &DecodedArgs,
    handle: &Handle,
) -> Result<Arc<dyn Plugin>, crate::PluginError>;

impl std::fmt::Debug for PluginSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginSource")
            .field("kind", &self.kind)
            .field("crate", &self.crate_name)
            .finish()
    }
}

#[cfg(all(feature = "inventory", not(feature = "linkme")))]
inventory::collect!(PluginSource);

/// The distributed slice the `linkme` backend collects plugin sources in.
#[cfg(feature = "linkme")]
#[linkme::distributed_slice]
pub static PLUGIN_SOURCES: [PluginSource];

/// The source that builds an unregistered plugin configured with `args`, if one claims them.
pub fn source_for(args: Option<&serde_json::Value>) -> Option<&'static PluginSource> {
    let args = args?;
    #[cfg(feature = "linkme")]
    let mut all = PLUGIN_SOURCES.iter();
    #[cfg(all(feature = "inventory", not(feature = "linkme")))]
    let mut all = inventory::iter::<PluginSource>.into_iter();
    all.find(|s| (s.claims)(args))
}

/// Registers a [`PluginSource`] at link time (once per source crate, at its top level).
///
/// ```ignore
/// kubesched_framework::register_plugin_source! {
///     kind: "wasm",
///     claims: claims,   // fn(&serde_json::Value) -> bool
///     decode: decode,   // fn(&serde_json::Value) -> Result<SourcedArgs, ArgsError>
///     build: build,     // fn(&str, &DecodedArgs, &Handle) -> Result<Arc<dyn Plugin>, PluginError>
/// }
/// ```
///
/// The form of earlier versions (`points:`, a build from raw JSON) is refused with a
/// pointer to this one:
///
/// ```compile_fail
/// kubesched_framework::register_plugin_source! {
///     kind: "old",
///     claims: |_: &serde_json::Value| true,
///     points: |_: &serde_json::Value| Ok(kubesched_framework::PointSet::EMPTY),
///     build: |_: &str, _: &serde_json::Value, _: &kubesched_framework::Handle| unreachable!(),
/// }
/// ```
#[macro_export]
macro_rules! register_plugin_source {
    (kind: $kind:expr, claims: $claims:expr, decode: $decode:expr, build: $build:expr $(,)?) => {
        $crate::__kubesched_submit_source! {
            $crate::registry::PluginSource {
                kind: $kind,
                claims: $claims,
                decode: $decode,
                build: $build,
                crate_name: env!("CARGO_PKG_NAME"),
            }
        }
    };
    (kind: $kind:expr, claims: $claims:expr, points: $($rest:tt)*) => {
        ::std::compile_error!(
            "register_plugin_source!: `points:` is gone; write `decode:` (fn(&serde_json::Value) -> \
             Result<SourcedArgs, ArgsError>: the typed args, decoded once when the configuration \
             is loaded, and their points) and make `build` take `&DecodedArgs`"
        );
    };
}

/// Puts a plugin source in the link-time collection (linkme backend).
#[cfg(feature = "linkme")]
#[doc(hidden)]
#[macro_export]
macro_rules! __kubesched_submit_source {
    ($source:expr) => {
        #[$crate::__private::linkme::distributed_slice($crate::registry::PLUGIN_SOURCES)]
        #[linkme(crate = $crate::__private::linkme)]
        static __KUBESCHED_PLUGIN_SOURCE: $crate::registry::PluginSource = $source;
    };
}

/// Puts a plugin source in the link-time collection (inventory backend).
#[cfg(all(feature = "inventory", not(feature = "linkme")))]
#[doc(hidden)]
#[macro_export]
macro_rules! __kubesched_submit_source {
    ($source:expr) => {
        $crate::__private::inventory::submit! { $source }
    };
}

/// The plugin features a binary offers: every `plugin-*` Cargo feature it declares, on or
/// off in this build. The binary registers them once with
/// [`register_plugin_features!`](crate::register_plugin_features) (its build script writes
/// the call from its own Cargo.toml), so a configuration naming a plugin this build lacks is
/// sent to a feature that exists, and only then.
#[derive(Debug, Clone, Copy)]
pub struct PluginFeatures {
    /// The features, e.g. `plugin-node-name`.
    pub features: &'static [&'static str],
}

#[cfg(all(feature = "inventory", not(feature = "linkme")))]
inventory::collect!(PluginFeatures);

/// The distributed slice the `linkme` backend collects offered features in.
#[cfg(feature = "linkme")]
#[linkme::distributed_slice]
pub static PLUGIN_FEATURE_SETS: [PluginFeatures];

/// Every plugin feature the binary offers, sorted (none when nothing registered them: a
/// library's own tests, xtask).
pub fn offered_features() -> Vec<&'static str> {
    #[cfg(feature = "linkme")]
    let sets = PLUGIN_FEATURE_SETS.iter();
    #[cfg(all(feature = "inventory", not(feature = "linkme")))]
    let sets = inventory::iter::<PluginFeatures>.into_iter();
    let mut all: Vec<&'static str> = sets.flat_map(|s| s.features.iter().copied()).collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// Registers the plugin features a binary offers (once, at the binary crate's top level):
/// `register_plugin_features!("plugin-node-name", "plugin-wasm")`.
#[macro_export]
macro_rules! register_plugin_features {
    ($($feature:expr),* $(,)?) => {
        $crate::__kubesched_submit_features! {
            $crate::registry::PluginFeatures { features: &[$($feature),*] }
        }
    };
}

/// Puts a binary's feature list in the link-time collection (linkme backend).
#[cfg(feature = "linkme")]
#[doc(hidden)]
#[macro_export]
macro_rules! __kubesched_submit_features {
    ($features:expr) => {
        #[$crate::__private::linkme::distributed_slice($crate::registry::PLUGIN_FEATURE_SETS)]
        #[linkme(crate = $crate::__private::linkme)]
        static __KUBESCHED_PLUGIN_FEATURES: $crate::registry::PluginFeatures = $features;
    };
}

/// Puts a binary's feature list in the link-time collection (inventory backend).
#[cfg(all(feature = "inventory", not(feature = "linkme")))]
#[doc(hidden)]
#[macro_export]
macro_rules! __kubesched_submit_features {
    ($features:expr) => {
        $crate::__private::inventory::submit! { $features }
    };
}

/// The Cargo feature of the `kubesched` binary that compiles a plugin in:
/// `plugin-` and the kebab-case of its name (`NodeResourcesFit` → `plugin-node-resources-fit`).
pub fn feature_for(name: &str) -> String {
    let mut out = String::from("plugin-");
    let chars: Vec<char> = name.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev_lower =
                i > 0 && (chars[i - 1].is_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let prev_upper = i > 0 && chars[i - 1].is_uppercase();
            if i > 0 && (prev_lower || (prev_upper && next_lower)) {
                out.push('-');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(*c);
        }
    }
    out
}

/// Registers a plugin at link time. Use once per plugin, at the crate's top level.
///
/// The plugin's trait impls are its declaration: the macro implements
/// [`Plugin`](crate::Plugin) for the type (through [`impl_plugin!`](crate::impl_plugin)) and
/// derives the extension points the registry reports from the same impls, so a point
/// cannot be listed without an impl nor implemented without being used. Do not write
/// `impl Plugin` yourself.
///
/// ```ignore
/// kubesched_framework::register_plugin! {
///     name: "NodeName",
///     plugin: NodeName,                // implements FilterPlugin and EnqueueExtensions
///     factory: NodeName::new,          // fn(&Handle) -> Result<NodeName, PluginError>
/// }
/// kubesched_framework::register_plugin! {
///     name: "NodeResourcesFit",
///     plugin: NodeResourcesFit,
///     args: NodeResourcesFitArgs,      // implements PluginArgs
///     factory: NodeResourcesFit::new,  // fn(&NodeResourcesFitArgs, &Handle) -> Result<NodeResourcesFit, PluginError>
/// }
/// kubesched_framework::register_plugin! {
///     name: "Coscheduling",
///     plugin: Coscheduling,
///     args: CoschedulingArgs,
///     kinds: [PodGroup],                          // the kinds it reads (any `kinds::Kind` type)
///     writes: [KindWrite::status::<PodGroup>()],  // update/patch of its status (RBAC)
///     factory: Coscheduling::new,
/// }
/// ```
///
/// `kinds` and `writes` are optional and come after `args` (when there is one), in that
/// order.
///
/// The list of earlier versions is refused with a pointer to the new form:
///
/// ```compile_fail
/// kubesched_framework::register_plugin! {
///     name: "Old",
///     extension_points: [Filter],
///     factory: |_h: &kubesched_framework::Handle| -> Result<(), kubesched_framework::PluginError> { Ok(()) },
/// }
/// ```
#[macro_export]
macro_rules! register_plugin {
    (
        name: $name:expr,
        plugin: $plugin:ty,
        args: $args:ty,
        $(kinds: [$($kind:ty),* $(,)?],)?
        $(writes: [$($write:expr),* $(,)?],)?
        factory: $factory:expr $(,)?
    ) => {
        $crate::__kubesched_register! {
            name: $name,
            plugin: $plugin,
            codec: $crate::registry::ArgsCodec::of::<$args>(),
            kinds: [$($($kind),*)?],
            writes: [$($($write),*)?],
            build: |args, handle| {
                let typed = args.get::<$args>().ok_or_else(|| {
                    $crate::PluginError(format!("{}: args of the wrong type", $name))
                })?;
                ($factory)(typed, handle)?
            },
        }
    };
    (
        name: $name:expr,
        plugin: $plugin:ty,
        $(kinds: [$($kind:ty),* $(,)?],)?
        $(writes: [$($write:expr),* $(,)?],)?
        factory: $factory:expr $(,)?
    ) => {
        $crate::__kubesched_register! {
            name: $name,
            plugin: $plugin,
            codec: $crate::registry::ArgsCodec::none(),
            kinds: [$($($kind),*)?],
            writes: [$($($write),*)?],
            build: |_args, handle| ($factory)(handle)?,
        }
    };
    (name: $name:expr, extension_points: $($rest:tt)*) => {
        ::std::compile_error!(
            "register_plugin!: `extension_points: [...]` is gone; write `plugin: YourType,` instead \
             (the points come from its trait impls) and delete your `impl Plugin` block; \
             see docs/writing-a-plugin.md, \"Migrating a plugin\""
        );
    };
}

/// The body of [`register_plugin!`] once its arms have said how the plugin is built from
/// the decoded args and the handle (`build`, an expression over the two names given).
#[doc(hidden)]
#[macro_export]
macro_rules! __kubesched_register {
    (
        name: $name:expr,
        plugin: $plugin:ty,
        codec: $codec:expr,
        kinds: [$($kind:ty),*],
        writes: [$($write:expr),*],
        build: |$args:ident, $handle:ident| $build:expr,
    ) => {
        $crate::impl_plugin!($plugin, name: $name);
        const _: () = {
            const __KUBESCHED_KINDS: &[$crate::kinds::ObjectKind] =
                &[$($crate::kinds::ObjectKind::of::<$kind>(),)*];
            const __KUBESCHED_WRITES: &[$crate::kinds::KindWrite] = &[$($write,)*];
            fn __kubesched_points() -> $crate::PointSet {
                $crate::__kubesched_points_of!($plugin)
            }
            fn __kubesched_factory(
                $args: &$crate::registry::DecodedArgs,
                $handle: &$crate::Handle,
            ) -> ::std::result::Result<::std::sync::Arc<dyn $crate::Plugin>, $crate::PluginError> {
                let plugin: $plugin = $build;
                Ok(::std::sync::Arc::new(plugin))
            }
            $crate::__kubesched_submit! {
                $crate::registry::PluginDescriptor {
                    name: $name,
                    points: __kubesched_points,
                    args: $codec,
                    factory: __kubesched_factory,
                    crate_name: env!("CARGO_PKG_NAME"),
                    kinds: __KUBESCHED_KINDS,
                    writes: __KUBESCHED_WRITES,
                }
            }
        };
    };
}

/// Puts a descriptor in the link-time collection (linkme backend).
#[cfg(feature = "linkme")]
#[doc(hidden)]
#[macro_export]
macro_rules! __kubesched_submit {
    ($descriptor:expr) => {
        #[$crate::__private::linkme::distributed_slice($crate::registry::PLUGINS)]
        #[linkme(crate = $crate::__private::linkme)]
        static __KUBESCHED_PLUGIN: $crate::registry::PluginDescriptor = $descriptor;
    };
}

/// Puts a descriptor in the link-time collection (inventory backend).
#[cfg(all(feature = "inventory", not(feature = "linkme")))]
#[doc(hidden)]
#[macro_export]
macro_rules! __kubesched_submit {
    ($descriptor:expr) => {
        $crate::__private::inventory::submit! { $descriptor }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_names() {
        assert_eq!(feature_for("NodeResourcesFit"), "plugin-node-resources-fit");
        assert_eq!(feature_for("NodeName"), "plugin-node-name");
        assert_eq!(feature_for("InterPodAffinity"), "plugin-inter-pod-affinity");
        assert_eq!(feature_for("HintNode"), "plugin-hint-node");
        assert_eq!(feature_for("VolumeZone"), "plugin-volume-zone");
        assert_eq!(feature_for("CSILimits"), "plugin-csi-limits");
    }
}
