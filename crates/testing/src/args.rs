//! One check of a plugin's args codec, the same for every plugin: what `config defaults`
//! prints decodes back to itself, a sample set by the test survives encoding and decoding,
//! and a field the args kind does not have is refused (kube-scheduler decodes strictly).

use kubesched_framework::registry::{self, PluginArgs};
use kubesched_framework::{CONFIG_API_VERSION, FeatureGates, Version};
use serde_json::{Value, json};

/// The field no args kind has, used to check strict decoding.
const UNKNOWN_FIELD: &str = "noSuchFieldInAnyArgs";

fn with_unknown_field(mut args: Value) -> Value {
    if let Some(map) = args.as_object_mut() {
        map.insert(UNKNOWN_FIELD.to_string(), json!(1));
    }
    args
}

/// Checks the args codec of the registered plugin `name`:
///
/// - a plugin without args decodes no args and refuses any;
/// - otherwise the defaults carry the kind and `apiVersion`, decode back to themselves
///   (what `config defaults` prints is a config that means the same), and an unknown
///   field is refused with an error that names it.
///
/// Each check is made under the default gates of every release `--emulated-version`
/// accepts, since defaults and validation may follow gates.
///
/// Panics (it is a test helper) when the plugin is not linked in or a check fails.
pub fn assert_args_codec(name: &str) {
    for version in [
        Version::V1_34,
        Version::V1_35,
        Version::V1_36,
        Version::V1_37,
    ] {
        assert_args_codec_at(name, &FeatureGates::defaults_at(version), version);
    }
}

fn assert_args_codec_at(name: &str, gates: &FeatureGates, version: Version) {
    let desc = registry::find(name)
        .unwrap_or_else(|| panic!("plugin {name} is not registered in this test binary"));
    let decode = |args: Option<&Value>| (desc.args.decode)(args, gates);
    let name = format!("{name} at {version}");
    let Some(kind) = desc.args.kind else {
        let none = decode(None).unwrap_or_else(|e| panic!("{name}: no args refused: {e}"));
        assert!(
            none.effective.is_none(),
            "{name}: a plugin without args has no effective args"
        );
        assert!(
            decode(Some(&json!({"anything": 1}))).is_err(),
            "{name} takes no args but accepted some"
        );
        return;
    };

    let defaults = decode(None)
        .unwrap_or_else(|e| panic!("{name}: the defaults do not decode: {e}"))
        .effective
        .unwrap_or_else(|| panic!("{name}: {kind} has no effective form"));
    assert_eq!(defaults["kind"], kind, "{name}: the defaults' kind");
    assert_eq!(
        defaults["apiVersion"], CONFIG_API_VERSION,
        "{name}: the defaults' apiVersion"
    );
    let again = decode(Some(&defaults))
        .unwrap_or_else(|e| panic!("{name}: its own defaults are refused: {e}"))
        .effective;
    assert_eq!(
        again.as_ref(),
        Some(&defaults),
        "{name}: the defaults are not a fixed point"
    );

    let refused = decode(Some(&with_unknown_field(defaults)))
        .err()
        .unwrap_or_else(|| panic!("{name}: {kind} accepted the unknown field {UNKNOWN_FIELD}"));
    assert!(
        refused.message.contains(UNKNOWN_FIELD),
        "{name}: the error should name the unknown field: {}",
        refused.message
    );
}

/// As [`assert_args_codec`], and `sample` (args a test sets away from the defaults) decodes
/// to itself through the plugin's codec, with its effective form a fixed point too.
pub fn assert_args_round_trip<A>(name: &str, sample: &A)
where
    A: PluginArgs + PartialEq + std::fmt::Debug,
{
    assert_args_codec(name);
    let gates = FeatureGates::defaults();
    let codec = registry::find(name).expect("checked above").args.decode;
    let decode = |args: Option<&Value>| codec(args, &gates);
    let mut raw = serde_json::to_value(sample).expect("args encode");
    if let Some(map) = raw.as_object_mut() {
        map.insert("kind".into(), json!(A::KIND));
        map.insert("apiVersion".into(), json!(CONFIG_API_VERSION));
    }
    let decoded =
        decode(Some(&raw)).unwrap_or_else(|e| panic!("{name}: the sample is refused: {e}"));
    assert_eq!(
        decoded.get::<A>(),
        Some(sample),
        "{name}: the sample changed on decoding"
    );
    let effective = decoded
        .effective
        .expect("typed args have an effective form");
    let again = decode(Some(&effective)).expect("the effective form decodes");
    assert_eq!(
        again.effective,
        Some(effective),
        "{name}: the sample's effective form moved"
    );
}
