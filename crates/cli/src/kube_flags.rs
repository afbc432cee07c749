//! kube-scheduler v1.37's command line, as data: every flag of `kube-scheduler --help`
//! (cmd/kube-scheduler/app/options and the component-base and apiserver option sets it
//! adds), each either accepted with upstream's meaning and default or refused with the
//! reason, plus the flags earlier releases removed (refused with what replaced them).
//!
//! [`args`] turns the table into clap arguments (the binary adds them to its top level and
//! to `run`), [`plan`] maps the parsed flags onto the configuration and the
//! [`RunOptions`] exactly as upstream maps them:
//! - without `--config`, the deprecated flags (`--kube-api-qps`, `--kube-api-burst`,
//!   `--kube-api-content-type`, `--profiling`, `--contention-profiling`) set their fields of
//!   the default configuration when given; with `--config` kube-scheduler ignores them, and
//!   so does kubesched, saying so (`--kubeconfig` is the one exception: kubesched's own
//!   `run --kubeconfig` always won over `clientConnection.kubeconfig`, and still does);
//! - the `--leader-elect*` flags override the file's `leaderElection` fields when given;
//! - the result is validated again, as upstream validates after applying them.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};
use kubesched_config::LoadedConfig;
use kubesched_framework::FeatureGates;

/// Whether a flag takes a value (`--flag=value` or `--flag value`) or is a boolean (`--flag`,
/// `--flag=true`, `--flag=false`, as pflag takes booleans).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A boolean: bare means true.
    Bool,
    /// A flag with a value.
    Value,
}

/// What kubesched does with a flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Accepted with upstream's meaning (the text says how kubesched honours it).
    Accepted(&'static str),
    /// Accepted with upstream's meaning and upstream's deprecation warning (the text).
    Deprecated(&'static str),
    /// A v1.37 flag of something kubesched has not got: refused, the text says why.
    Refused(&'static str),
    /// A flag earlier kube-scheduler releases removed: refused, the text says what replaced it.
    Removed(&'static str),
}

/// One kube-scheduler flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KubeFlag {
    /// The long name, without the dashes.
    pub name: &'static str,
    /// Boolean or with a value.
    pub kind: Kind,
    /// Upstream's default, as `kube-scheduler --help` prints it (empty: none).
    pub default: &'static str,
    /// Upstream's help section (`Leader election flags`, ...).
    pub section: &'static str,
    /// Accepted or refused, and how or why.
    pub verdict: Verdict,
}

impl KubeFlag {
    /// Whether kubesched takes the flag.
    pub fn accepted(&self) -> bool {
        matches!(self.verdict, Verdict::Accepted(_) | Verdict::Deprecated(_))
    }

    /// The meaning (accepted) or the reason (refused).
    pub fn text(&self) -> &'static str {
        match self.verdict {
            Verdict::Accepted(t)
            | Verdict::Deprecated(t)
            | Verdict::Refused(t)
            | Verdict::Removed(t) => t,
        }
    }

    /// Whether the binary defines the flag itself (as a global flag of every command), so
    /// [`args`] leaves it out.
    pub fn global(&self) -> bool {
        GLOBAL.contains(&self.name)
    }
}

/// Flags every kubesched command takes, defined by the binary: the log and feature gate
/// flags, help and version.
const GLOBAL: &[&str] = &[
    "v",
    "logging-format",
    "feature-gates",
    "emulated-version",
    "min-compatibility-version",
    "help",
    "version",
];

const MISC: &str = "Misc flags";
const SERVING: &str = "Secure serving flags";
const AUTHN: &str = "Authentication flags";
const AUTHZ: &str = "Authorization flags";
const DEPRECATED: &str = "Deprecated flags";
const LEADER: &str = "Leader election flags";
const GATES: &str = "Feature gate flags";
const METRICS: &str = "Metrics flags";
const LOGS: &str = "Logs flags";
const GLOBAL_SECTION: &str = "Global flags";
const REMOVED: &str = "Removed flags";

const METRICS_REGISTRY: &str = "kubesched's metrics registry serves every metric it has: it \
     has no label allow-lists, no disabled metrics and no hidden metrics to show";
const SPLIT: &str = "kubesched writes every log line to standard error as it happens: \
     split streams and info buffers are not supported";
const KLOG_REMOVED: &str = "klog's own flags were removed from kube-scheduler in v1.26: \
     logs go to standard error; use --v, --logging-format, or a log collector";

const fn flag(
    name: &'static str,
    kind: Kind,
    default: &'static str,
    section: &'static str,
    verdict: Verdict,
) -> KubeFlag {
    KubeFlag {
        name,
        kind,
        default,
        section,
        verdict,
    }
}

use Kind::{Bool, Value};
use Verdict::{Accepted, Deprecated, Refused, Removed};

/// Every flag of kube-scheduler v1.37, then the flags earlier releases removed.
#[rustfmt::skip]
pub const FLAGS: &[KubeFlag] = &[
    // Misc (cmd/kube-scheduler/app/options/options.go).
    flag("config", Value, "", MISC, Accepted("the KubeSchedulerConfiguration file (YAML or JSON, v1 or v1beta3)")),
    flag("master", Value, "", MISC, Accepted("the API server's address; overrides the server of the kubeconfig in use")),
    flag("write-config-to", Value, "", MISC, Accepted("writes the configuration in effect (file, defaults and flags) to this file as YAML and exits")),
    // Secure serving (apiserver's SecureServingOptions).
    flag("bind-address", Value, "0.0.0.0", SERVING, Accepted("the address /healthz, /livez, /readyz, /metrics and /configz listen on")),
    flag("cert-dir", Value, "", SERVING, Accepted("where the self-signed pair is kept (kube-scheduler.crt and .key, reused when present) when no --tls-cert-file is given; in memory when empty")),
    flag("http2-max-streams-per-connection", Value, "0", SERVING, Refused("kubesched's endpoints keep the HTTP/2 library's stream limit; it cannot be changed")),
    flag("permit-address-sharing", Bool, "false", SERVING, Refused("kubesched binds its port without SO_REUSEADDR sharing")),
    flag("permit-port-sharing", Bool, "false", SERVING, Refused("kubesched binds its port without SO_REUSEPORT, so two processes cannot share it")),
    flag("secure-port", Value, "10259", SERVING, Accepted("the port of the endpoints; 0 serves none")),
    flag("tls-cert-file", Value, "", SERVING, Accepted("the serving certificate (PEM); a self-signed one is made when absent")),
    flag("tls-cipher-suites", Value, "", SERVING, Refused("kubesched's TLS library (rustls) offers only its own modern cipher suites; the list cannot be chosen")),
    flag("tls-min-version", Value, "", SERVING, Accepted("VersionTLS12 (what kubesched always enforces: its TLS library speaks only TLS 1.2 and 1.3); other values are refused")),
    flag("tls-private-key-file", Value, "", SERVING, Accepted("the serving certificate's private key (PEM)")),
    flag("tls-sni-cert-key", Value, "", SERVING, Refused("kubesched serves one certificate; certificates chosen by SNI are not supported")),
    // Authentication (apiserver's DelegatingAuthenticationOptions).
    flag("authentication-kubeconfig", Value, "", AUTHN, Accepted("where TokenReviews go; the in-cluster configuration when absent")),
    flag("authentication-skip-lookup", Bool, "false", AUTHN, Accepted("do not look up the client CA and request-header settings the flags leave unset in the extension-apiserver-authentication ConfigMap")),
    flag("authentication-token-webhook-cache-ttl", Value, "10s", AUTHN, Accepted("how long token review answers are cached")),
    flag("authentication-tolerate-lookup-failure", Bool, "true", AUTHN, Accepted("go on (with a warning) when that ConfigMap cannot be read")),
    flag("client-ca-file", Value, "", AUTHN, Accepted("a client certificate signed by this CA authenticates as its CN, with its O fields as groups")),
    flag("requestheader-allowed-names", Value, "", AUTHN, Accepted("common names a front proxy's certificate may have (comma-separated); any when empty")),
    flag("requestheader-client-ca-file", Value, "", AUTHN, Accepted("the CA of front proxies whose request headers name the user; from the ConfigMap when empty")),
    flag("requestheader-extra-headers-prefix", Value, "x-remote-extra-", AUTHN, Accepted("header prefixes of the user's extra attributes")),
    flag("requestheader-group-headers", Value, "x-remote-group", AUTHN, Accepted("headers holding the user's groups")),
    flag("requestheader-uid-headers", Value, "", AUTHN, Accepted("headers holding the user's UID")),
    flag("requestheader-username-headers", Value, "x-remote-user", AUTHN, Accepted("headers holding the user name; the first one set wins")),
    // Authorization (apiserver's DelegatingAuthorizationOptions).
    flag("authorization-always-allow-paths", Value, "/healthz,/readyz,/livez", AUTHZ, Accepted("paths served without authorization (a trailing * matches a prefix)")),
    flag("authorization-kubeconfig", Value, "", AUTHZ, Accepted("where SubjectAccessReviews go; the in-cluster configuration when absent")),
    flag("authorization-webhook-cache-authorized-ttl", Value, "10s", AUTHZ, Accepted("how long 'authorized' answers are cached")),
    flag("authorization-webhook-cache-unauthorized-ttl", Value, "10s", AUTHZ, Accepted("how long 'unauthorized' answers are cached")),
    // Deprecated (cmd/kube-scheduler/app/options/deprecated.go).
    flag("contention-profiling", Bool, "true", DEPRECATED, Deprecated("enableContentionProfiling; ignored when --config is given")),
    flag("kube-api-burst", Value, "100", DEPRECATED, Deprecated("clientConnection.burst; ignored when --config is given")),
    flag("kube-api-content-type", Value, "application/vnd.kubernetes.protobuf", DEPRECATED, Deprecated("clientConnection.contentType (kubesched sends JSON whatever it says); ignored when --config is given")),
    flag("kube-api-qps", Value, "50", DEPRECATED, Deprecated("clientConnection.qps; ignored when --config is given")),
    flag("kubeconfig", Value, "", DEPRECATED, Deprecated("the kubeconfig of the cluster; kubesched lets it win over clientConnection.kubeconfig even with --config (kube-scheduler ignores it then)")),
    flag("pod-max-in-unschedulable-pods-duration", Value, "5m0s", DEPRECATED, Deprecated("how long a pod may stay in unschedulablePods; kubesched keeps upstream's 5m0s and refuses other values")),
    flag("profiling", Bool, "true", DEPRECATED, Deprecated("enableProfiling; ignored when --config is given")),
    // Leader election (component-base's BindLeaderElectionFlags).
    flag("leader-elect", Bool, "true", LEADER, Accepted("leaderElection.leaderElect")),
    flag("leader-elect-lease-duration", Value, "15s", LEADER, Accepted("leaderElection.leaseDuration")),
    flag("leader-elect-renew-deadline", Value, "10s", LEADER, Accepted("leaderElection.renewDeadline")),
    flag("leader-elect-resource-lock", Value, "leases", LEADER, Accepted("leaderElection.resourceLock (leases, the only lock v1.37 has)")),
    flag("leader-elect-resource-name", Value, "kube-scheduler", LEADER, Accepted("leaderElection.resourceName")),
    flag("leader-elect-resource-namespace", Value, "kube-system", LEADER, Accepted("leaderElection.resourceNamespace")),
    flag("leader-elect-retry-period", Value, "2s", LEADER, Accepted("leaderElection.retryPeriod")),
    // Feature gates (component-base's compatibility registry).
    flag("emulated-version", Value, "kube=1.37", GATES, Accepted("the release whose feature gates apply: 1.34 to 1.37, or kube=1.36")),
    flag("feature-gates", Value, "", GATES, Accepted("Name=true,Other=false (or kube:Name=true), checked against --emulated-version")),
    flag("min-compatibility-version", Value, "", GATES, Accepted("the oldest control-plane release to stay compatible with (1.35, or kube=1.35), at most --emulated-version; no gate kubesched honours depends on it")),
    // Metrics (component-base's metrics options).
    flag("allow-metric-labels", Value, "", METRICS, Refused(METRICS_REGISTRY)),
    flag("allow-metric-labels-manifest", Value, "", METRICS, Refused(METRICS_REGISTRY)),
    flag("disabled-metrics", Value, "", METRICS, Refused(METRICS_REGISTRY)),
    flag("show-hidden-metrics-for-version", Value, "", METRICS, Refused(METRICS_REGISTRY)),
    // Logs (component-base's logs API).
    flag("log-flush-frequency", Value, "5s", LOGS, Accepted("kubesched writes each line unbuffered, so no line waits longer than any flush frequency")),
    flag("log-json-info-buffer-size", Value, "0", LOGS, Refused(SPLIT)),
    flag("log-json-split-stream", Bool, "false", LOGS, Refused(SPLIT)),
    flag("log-text-info-buffer-size", Value, "0", LOGS, Refused(SPLIT)),
    flag("log-text-split-stream", Bool, "false", LOGS, Refused(SPLIT)),
    flag("logging-format", Value, "text", LOGS, Accepted("text (klog-like lines) or json (upstream's JSON lines: ts, caller, msg, v, keys)")),
    flag("v", Value, "0", LOGS, Accepted("klog verbosity: 0-1 errors, warnings and info, 2-3 also the scheduling loop's per-pod lines, 4 debug, 5 and up trace")),
    flag("vmodule", Value, "", LOGS, Refused("per-file verbosity names kube-scheduler's Go source files, which kubesched has not got; use KUBESCHED_LOG=target=level")),
    // Global (verflag and cobra).
    flag("help", Bool, "false", GLOBAL_SECTION, Accepted("prints the help")),
    flag("version", Value, "false", GLOBAL_SECTION, Accepted("--version prints the version and exits, --version=raw the same as JSON; --version=vX.Y.Z (setting the reported version) is refused")),
    // Removed before v1.37.
    flag("address", Value, "", REMOVED, Removed("removed with insecure serving in kube-scheduler v1.24: use --bind-address and --secure-port")),
    flag("port", Value, "", REMOVED, Removed("removed with insecure serving in kube-scheduler v1.24: use --secure-port")),
    flag("algorithm-provider", Value, "", REMOVED, Removed("removed in kube-scheduler v1.23 with the Policy API: use profiles in a --config file")),
    flag("policy-config-file", Value, "", REMOVED, Removed("removed in kube-scheduler v1.23 with the Policy API: use profiles in a --config file")),
    flag("policy-configmap", Value, "", REMOVED, Removed("removed in kube-scheduler v1.23 with the Policy API: use profiles in a --config file")),
    flag("policy-configmap-namespace", Value, "", REMOVED, Removed("removed in kube-scheduler v1.23 with the Policy API: use profiles in a --config file")),
    flag("use-legacy-policy-config", Bool, "", REMOVED, Removed("removed in kube-scheduler v1.23 with the Policy API: use profiles in a --config file")),
    flag("hard-pod-affinity-symmetric-weight", Value, "", REMOVED, Removed("removed in kube-scheduler v1.22: set InterPodAffinityArgs.hardPodAffinityWeight in a --config file")),
    flag("scheduler-name", Value, "", REMOVED, Removed("removed in kube-scheduler v1.22: set profiles[].schedulerName in a --config file")),
    flag("lock-object-name", Value, "", REMOVED, Removed("removed in kube-scheduler v1.28: use --leader-elect-resource-name")),
    flag("lock-object-namespace", Value, "", REMOVED, Removed("removed in kube-scheduler v1.28: use --leader-elect-resource-namespace")),
    flag("experimental-logging-sanitization", Bool, "", REMOVED, Removed("removed from kube-scheduler with the log sanitization it switched on")),
    flag("add-dir-header", Bool, "", REMOVED, Removed(KLOG_REMOVED)),
    flag("alsologtostderr", Bool, "", REMOVED, Removed(KLOG_REMOVED)),
    flag("log-backtrace-at", Value, "", REMOVED, Removed(KLOG_REMOVED)),
    flag("log-dir", Value, "", REMOVED, Removed(KLOG_REMOVED)),
    flag("log-file", Value, "", REMOVED, Removed(KLOG_REMOVED)),
    flag("log-file-max-size", Value, "", REMOVED, Removed(KLOG_REMOVED)),
    flag("logtostderr", Bool, "", REMOVED, Removed(KLOG_REMOVED)),
    flag("one-output", Bool, "", REMOVED, Removed(KLOG_REMOVED)),
    flag("skip-headers", Bool, "", REMOVED, Removed(KLOG_REMOVED)),
    flag("skip-log-headers", Bool, "", REMOVED, Removed(KLOG_REMOVED)),
    flag("stderrthreshold", Value, "", REMOVED, Removed(KLOG_REMOVED)),
];

/// The flag of that name.
pub fn find(name: &str) -> Option<&'static KubeFlag> {
    FLAGS.iter().find(|f| f.name == name)
}

/// Flags of kubesched's own `run` that kube-scheduler has not got.
pub const PLAIN_HTTP: &str = "plain-http";
/// The leader election identity flag (kubesched's own).
pub const IDENTITY: &str = "identity";
/// The shutdown grace flag (kubesched's own).
pub const SHUTDOWN_TIMEOUT: &str = "shutdown-timeout";

/// The clap arguments of the table (without the [global](KubeFlag::global) ones), plus
/// kubesched's own `run` flags; refused and removed flags are hidden from the help but
/// parsed, so that [`plan`] can say why they are refused.
pub fn args() -> Vec<Arg> {
    let mut out: Vec<Arg> = FLAGS
        .iter()
        .filter(|f| !f.global())
        .map(|f| {
            let mut arg = Arg::new(f.name)
                .long(f.name)
                .action(ArgAction::Append)
                .help(f.text().to_string())
                .help_heading(f.section)
                .hide(!f.accepted());
            arg = match f.kind {
                Bool => arg
                    .num_args(0..=1)
                    .require_equals(true)
                    .default_missing_value("true")
                    .value_name("BOOL"),
                Value => arg.num_args(1).value_name("VALUE"),
            };
            if !f.default.is_empty() && f.accepted() {
                arg = arg.long_help(format!(
                    "{} [kube-scheduler's default: {}]",
                    f.text(),
                    f.default
                ));
            }
            arg
        })
        .collect();
    out.push(
        Arg::new(PLAIN_HTTP)
            .long(PLAIN_HTTP)
            .action(ArgAction::SetTrue)
            .help_heading("kubesched flags")
            .help("Serve the endpoints over plain HTTP without authentication or authorization (for local use only; a warning says so)"),
    );
    out.push(
        Arg::new(IDENTITY)
            .long(IDENTITY)
            .value_name("NAME")
            .help_heading("kubesched flags")
            .help("The leader election identity (default: the host name and a random suffix)"),
    );
    out.push(
        Arg::new(SHUTDOWN_TIMEOUT)
            .long(SHUTDOWN_TIMEOUT)
            .value_name("SECONDS")
            .default_value("30")
            .value_parser(clap::value_parser!(u64))
            .help_heading("kubesched flags")
            .help("Seconds bindings in flight may take to finish after SIGTERM"),
    );
    out
}

/// The global flags [`args`] leaves out, for a command of their own (the end-to-end tests
/// parse kube-scheduler argument lists with [`command`]).
fn global_args() -> Vec<Arg> {
    vec![
        Arg::new("v").long("v").value_name("N"),
        Arg::new("logging-format")
            .long("logging-format")
            .alias("log-format"),
        Arg::new("feature-gates")
            .long("feature-gates")
            .action(ArgAction::Append),
        Arg::new("emulated-version").long("emulated-version"),
        Arg::new("min-compatibility-version").long("min-compatibility-version"),
    ]
}

/// A command that takes exactly kube-scheduler's argument list (the binary's `run` plus
/// the global flags), for parsing one without the rest of the binary.
pub fn command() -> Command {
    Command::new("kube-scheduler")
        .no_binary_name(true)
        .args(args())
        .args(global_args())
}

/// Rewrites an argument list so clap reads it as pflag does: `--v 3`, `-v=3`, `-v3` and
/// `-v 3` become `--v=3` (a bare `-v`, `-vv` stays kubesched's counted verbosity), and a
/// boolean flag followed by a separate `true` or `false` (kubesched's older
/// `--leader-elect false`) takes it as its value. Nothing after `--` changes.
pub fn normalize<I, S>(args: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let args: Vec<String> = args.into_iter().map(Into::into).collect();
    let mut out = Vec::with_capacity(args.len());
    let mut i = 0;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    while i < args.len() {
        let a = &args[i];
        if a == "--" {
            out.extend(args[i..].iter().cloned());
            break;
        }
        let next = args.get(i + 1);
        if (a == "--v" || a == "-v") && next.is_some_and(|n| digits(n)) {
            out.push(format!("--v={}", args[i + 1]));
            i += 2;
            continue;
        }
        if let Some(n) = a
            .strip_prefix("-v=")
            .or_else(|| a.strip_prefix("-v").filter(|n| digits(n)))
        {
            out.push(format!("--v={n}"));
            i += 1;
            continue;
        }
        if let Some(name) = a.strip_prefix("--")
            && !name.contains('=')
            && find(name).is_some_and(|f| f.kind == Bool)
            && let Some(n) = next
            && (n == "true" || n == "false")
        {
            out.push(format!("{a}={n}"));
            i += 2;
            continue;
        }
        out.push(a.clone());
        i += 1;
    }
    out
}

/// pflag's booleans: 1, t, T, TRUE, true, True and their false forms.
pub fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// What the flags amount to: the run options, and where to write the configuration
/// instead of running when `--write-config-to` is given.
#[derive(Debug)]
pub struct Plan {
    /// The options of `kubesched run`.
    pub options: kubesched_live::RunOptions,
    /// `--write-config-to`.
    pub write_config_to: Option<PathBuf>,
}

/// The flags given on the command line (not clap's defaults), in table order: name and
/// every value given.
fn given(m: &ArgMatches) -> Vec<(&'static KubeFlag, Vec<String>)> {
    FLAGS
        .iter()
        .filter(|f| !f.global())
        .filter(|f| matches!(m.value_source(f.name), Some(ValueSource::CommandLine)))
        .map(|f| {
            let values = m
                .get_many::<String>(f.name)
                .map(|v| v.cloned().collect())
                .unwrap_or_default();
            (f, values)
        })
        .collect()
}

/// Whether any flag of the table was given (the binary refuses them before a subcommand
/// other than `run`).
pub fn any_given(m: &ArgMatches) -> bool {
    !given(m).is_empty()
        || matches!(m.value_source(PLAIN_HTTP), Some(ValueSource::CommandLine))
        || matches!(m.value_source(IDENTITY), Some(ValueSource::CommandLine))
}

/// kube-scheduler's flag set as `/flagz` lists it: every v1.37 flag of the table with the
/// value given on the command line (several given values joined by commas, as pflag shows
/// a list), else upstream's default (`false` for a boolean without one).
pub fn flagz_values(m: &ArgMatches) -> std::collections::BTreeMap<String, String> {
    FLAGS
        .iter()
        .filter(|f| !matches!(f.verdict, Removed(_)) && !matches!(f.name, "help" | "version"))
        .map(|f| {
            // The global flags are not ids of every command's matches (the binary defines
            // them apart): ask with try_get_raw, which does not panic on an unknown id.
            let raw = m.try_get_raw(f.name).ok().flatten();
            let given = raw
                .filter(|_| matches!(m.value_source(f.name), Some(ValueSource::CommandLine)))
                .map(|values| {
                    values
                        .map(|v| v.to_string_lossy().into_owned())
                        .collect::<Vec<_>>()
                        .join(",")
                });
            let value = given.unwrap_or_else(|| match (f.kind, f.default) {
                (Bool, "") => "false".to_string(),
                (_, default) => default.to_string(),
            });
            (f.name.to_string(), value)
        })
        .collect()
}

fn last(values: &[String]) -> &str {
    values.last().map(String::as_str).unwrap_or("")
}

fn duration(name: &str, text: &str) -> Result<Duration, String> {
    kubesched_config::duration::parse(text).map_err(|e| format!("--{name}={text}: {e}"))
}

fn boolean(name: &str, text: &str) -> Result<bool, String> {
    parse_bool(text).ok_or_else(|| format!("--{name}={text}: not a boolean (true or false)"))
}

/// Maps the parsed flags (of [`args`]) onto the configuration and the run options, as
/// upstream's options do; refused flags are errors, all of them named at once. Deprecation
/// and "ignored" warnings go to `warnings`, in flag order, also when an error follows.
pub fn plan(
    m: &ArgMatches,
    gates: FeatureGates,
    warnings: &mut Vec<String>,
) -> Result<Plan, String> {
    let given = given(m);
    let refused: Vec<String> = given
        .iter()
        .filter(|(f, _)| !f.accepted())
        .map(|(f, _)| match f.verdict {
            Removed(why) => format!("--{} is not a kube-scheduler v1.37 flag: {why}", f.name),
            _ => format!("--{} is not supported: {}", f.name, f.text()),
        })
        .collect();
    if !refused.is_empty() {
        return Err(refused.join("\n"));
    }
    let get = |name: &str| {
        given
            .iter()
            .find(|(f, _)| f.name == name)
            .map(|(_, v)| last(v))
    };
    let config_path = get("config").map(PathBuf::from);
    let mut loaded: LoadedConfig = match &config_path {
        Some(p) => kubesched_config::load_file_with_gates(p, &gates).map_err(|e| e.to_string())?,
        None => kubesched_config::default_config_with_gates(&gates),
    };
    loaded.feature_gates = gates;
    let mut changed = false;
    let mut kubeconfig = None;
    for (f, values) in &given {
        let value = last(values);
        if !matches!(f.verdict, Deprecated(_)) {
            continue;
        }
        let field = match f.name {
            "kubeconfig" => {
                kubeconfig = Some(PathBuf::from(value));
                if config_path.is_some() {
                    warnings.push("--kubeconfig is deprecated; kube-scheduler ignores it when --config is given, kubesched uses it (it wins over clientConnection.kubeconfig)".to_string());
                } else {
                    warnings.push("--kubeconfig is deprecated: set clientConnection.kubeconfig in a --config file".to_string());
                }
                continue;
            }
            "pod-max-in-unschedulable-pods-duration" => {
                let d = duration(f.name, value)?;
                if d != Duration::from_secs(300) {
                    return Err(format!(
                        "--pod-max-in-unschedulable-pods-duration={value} is not supported: kubesched keeps pods in unschedulablePods for upstream's 5m0s"
                    ));
                }
                warnings.push("--pod-max-in-unschedulable-pods-duration is deprecated and will be removed in a future kube-scheduler release".to_string());
                continue;
            }
            "profiling" => "enableProfiling",
            "contention-profiling" => "enableContentionProfiling",
            "kube-api-qps" => "clientConnection.qps",
            "kube-api-burst" => "clientConnection.burst",
            "kube-api-content-type" => "clientConnection.contentType",
            other => return Err(format!("--{other}: no mapping (a bug in kubesched)")),
        };
        if config_path.is_some() {
            warnings.push(format!(
                "--{} is deprecated and ignored because --config is given (as kube-scheduler ignores it): set {field} in the file",
                f.name
            ));
            continue;
        }
        warnings.push(format!(
            "--{} is deprecated: set {field} in a --config file",
            f.name
        ));
        let cfg = &mut loaded.config;
        match f.name {
            "profiling" => cfg.enable_profiling = boolean(f.name, value)?,
            "contention-profiling" => {
                cfg.enable_contention_profiling = Some(boolean(f.name, value)?);
            }
            "kube-api-qps" => {
                cfg.client_connection.qps = value
                    .parse()
                    .map_err(|_| format!("--kube-api-qps={value}: not a number"))?;
            }
            "kube-api-burst" => {
                cfg.client_connection.burst = value
                    .parse()
                    .map_err(|_| format!("--kube-api-burst={value}: not an integer"))?;
            }
            _ => {
                if value != "application/json" {
                    warnings.push(format!(
                        "--kube-api-content-type={value}: kubesched sends application/json to the API server whatever this says"
                    ));
                }
                cfg.client_connection.content_type = value.to_string();
            }
        }
        changed = true;
    }
    // Leader election: these override the file's fields when given.
    let mut leader_elect = None;
    {
        let le = &mut loaded.config.leader_election;
        for (f, values) in &given {
            let value = last(values);
            match f.name {
                "leader-elect" => {
                    let on = boolean(f.name, value)?;
                    le.leader_elect = on;
                    leader_elect = Some(on);
                }
                "leader-elect-lease-duration" => le.lease_duration = duration(f.name, value)?,
                "leader-elect-renew-deadline" => le.renew_deadline = duration(f.name, value)?,
                "leader-elect-retry-period" => le.retry_period = duration(f.name, value)?,
                "leader-elect-resource-lock" => le.resource_lock = value.to_string(),
                "leader-elect-resource-name" => le.resource_name = value.to_string(),
                "leader-elect-resource-namespace" => le.resource_namespace = value.to_string(),
                _ => continue,
            }
            changed = true;
        }
    }
    if changed {
        // Upstream validates the configuration after the flags are applied; so does this,
        // by loading what the flags made of it.
        let text = kubesched_config::to_yaml(&loaded.config);
        kubesched_config::load_str_with_gates(
            &text,
            "the configuration with the command-line flags applied",
            &loaded.feature_gates,
        )
        .map_err(|e| e.to_string())?;
    }
    if let Some(v) = get("tls-min-version")
        && !v.is_empty()
        && v != "VersionTLS12"
    {
        return Err(format!(
            "--tls-min-version={v} is not supported: kubesched's TLS library speaks TLS 1.2 and 1.3, so VersionTLS12 is the one minimum it keeps"
        ));
    }
    if let Some(v) = get("log-flush-frequency") {
        duration("log-flush-frequency", v)?;
    }
    let mut options = kubesched_live::RunOptions::new(loaded);
    options.kubeconfig = kubeconfig;
    options.leader_elect = leader_elect;
    options.master = get("master").filter(|m| !m.is_empty()).map(str::to_string);
    options.identity = m.get_one::<String>(IDENTITY).cloned();
    options.shutdown_timeout =
        Duration::from_secs(m.get_one::<u64>(SHUTDOWN_TIMEOUT).copied().unwrap_or(30));
    let plain_http = m.get_flag(PLAIN_HTTP);
    let cert = get("tls-cert-file")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from);
    let key = get("tls-private-key-file")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from);
    let client_ca = get("client-ca-file")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from);
    if plain_http && (cert.is_some() || key.is_some() || client_ca.is_some()) {
        return Err("--plain-http serves without TLS: it cannot go with --tls-cert-file, --tls-private-key-file or --client-ca-file".to_string());
    }
    let cert_dir = get("cert-dir").filter(|s| !s.is_empty()).map(PathBuf::from);
    let tls = match (plain_http, cert, key) {
        (true, _, _) => kubesched_live::Tls::Plain,
        (false, Some(cert), Some(key)) => kubesched_live::Tls::Files { cert, key },
        (false, None, None) => match cert_dir {
            Some(dir) => kubesched_live::Tls::SelfSignedIn { dir },
            None => kubesched_live::Tls::SelfSigned,
        },
        (false, Some(_), None) => {
            return Err("--tls-cert-file needs --tls-private-key-file".to_string());
        }
        (false, None, Some(_)) => {
            return Err("--tls-private-key-file needs --tls-cert-file".to_string());
        }
    };
    let port: u16 = match get("secure-port") {
        Some(p) => p
            .parse()
            .map_err(|_| format!("--secure-port={p}: not a port number (0 to 65535)"))?,
        None => kubesched_live::DEFAULT_SECURE_PORT,
    };
    let address: IpAddr = match get("bind-address") {
        Some("") | None => IpAddr::from([0, 0, 0, 0]),
        Some(a) => a
            .parse()
            .map_err(|_| format!("--bind-address={a}: not an IP address"))?,
    };
    let ttl = |name: &str| -> Result<Duration, String> {
        get(name).map_or(Ok(Duration::from_secs(10)), |v| duration(name, v))
    };
    let always_allow_paths = match given
        .iter()
        .find(|(f, _)| f.name == "authorization-always-allow-paths")
    {
        Some((_, values)) => values
            .iter()
            .flat_map(|v| v.split(','))
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect(),
        None => kubesched_live::auth::DEFAULT_ALWAYS_ALLOW_PATHS
            .iter()
            .map(|p| p.to_string())
            .collect(),
    };
    // pflag's string slices: comma-separated, and a repeated flag adds to the list.
    let list = |name: &str, default: &[&str]| -> Vec<String> {
        match given.iter().find(|(f, _)| f.name == name) {
            Some((_, values)) => values
                .iter()
                .flat_map(|v| v.split(','))
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect(),
            None => default.iter().map(|d| d.to_string()).collect(),
        }
    };
    let request_header = kubesched_live::auth_sources::RequestHeaderOptions {
        client_ca_file: get("requestheader-client-ca-file")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from),
        allowed_names: list("requestheader-allowed-names", &[]),
        username_headers: list("requestheader-username-headers", &["x-remote-user"]),
        uid_headers: list("requestheader-uid-headers", &[]),
        group_headers: list("requestheader-group-headers", &["x-remote-group"]),
        extra_headers_prefixes: list("requestheader-extra-headers-prefix", &["x-remote-extra-"]),
    };
    let skip_lookup = get("authentication-skip-lookup")
        .map_or(Ok(false), |v| boolean("authentication-skip-lookup", v))?;
    let tolerate_lookup_failure = get("authentication-tolerate-lookup-failure")
        .map_or(Ok(true), |v| {
            boolean("authentication-tolerate-lookup-failure", v)
        })?;
    let auth = (!plain_http)
        .then(|| -> Result<kubesched_live::DelegatedAuth, String> {
            Ok(kubesched_live::DelegatedAuth {
                authentication_kubeconfig: get("authentication-kubeconfig")
                    .filter(|s| !s.is_empty())
                    .map(PathBuf::from),
                authorization_kubeconfig: get("authorization-kubeconfig")
                    .filter(|s| !s.is_empty())
                    .map(PathBuf::from),
                client_ca_file: client_ca,
                always_allow_paths,
                authn_cache_ttl: ttl("authentication-token-webhook-cache-ttl")?,
                authz_allowed_ttl: ttl("authorization-webhook-cache-authorized-ttl")?,
                authz_denied_ttl: ttl("authorization-webhook-cache-unauthorized-ttl")?,
                request_header,
                skip_lookup,
                tolerate_lookup_failure,
                ..kubesched_live::DelegatedAuth::default()
            })
        })
        .transpose()?;
    options.serving = (port != 0).then(|| kubesched_live::Serving {
        auth,
        addr: std::net::SocketAddr::new(address, port),
        tls,
    });
    options.flags = flagz_values(m);
    Ok(Plan {
        options,
        write_config_to: get("write-config-to")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from),
    })
}

/// `--feature-gates` values with upstream's optional `kube:` component prefix removed
/// from each pair (v1.37 takes `kube:Name=true` as well as `Name=true`).
pub fn strip_component_prefix(value: &str) -> String {
    value
        .split(',')
        .map(|pair| pair.trim().strip_prefix("kube:").unwrap_or(pair.trim()))
        .collect::<Vec<_>>()
        .join(",")
}
