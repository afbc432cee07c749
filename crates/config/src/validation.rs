//! Upstream's validation rules (validation.go and component-base's), run on the defaulted
//! configuration. Every rule adds to a list; nothing stops at the first problem.

use std::collections::{BTreeSet, HashMap};

use kubesched_framework::ExtensionPoint;
use kubesched_framework::model::resource::is_extended_resource_name;

use crate::duration;
use crate::error::FieldError;
use crate::types::{
    ClientConnectionConfiguration, DEFAULT_RESOURCE_LOCK, Extender, KubeSchedulerConfiguration,
    LeaderElectionConfiguration,
};
use kubesched_framework::ProfileSpec;

/// Global scalars: parallelism, percentageOfNodesToScore, backoffs, leader election, client.
pub(crate) fn validate_globals(cfg: &KubeSchedulerConfiguration, problems: &mut Vec<FieldError>) {
    if cfg.parallelism <= 0 {
        problems.push(FieldError::new(
            "parallelism",
            format!(
                "should be an integer value greater than zero, got {}",
                cfg.parallelism
            ),
        ));
    }
    check_percentage(
        "percentageOfNodesToScore",
        Some(cfg.percentage_of_nodes_to_score),
        problems,
    );
    if cfg.pod_initial_backoff_seconds <= 0 {
        problems.push(FieldError::new(
            "podInitialBackoffSeconds",
            format!(
                "must be greater than 0, got {}",
                cfg.pod_initial_backoff_seconds
            ),
        ));
    }
    if cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds {
        problems.push(FieldError::new(
            "podMaxBackoffSeconds",
            format!(
                "must be greater than or equal to podInitialBackoffSeconds ({}), got {}",
                cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds
            ),
        ));
    }
    validate_leader_election(&cfg.leader_election, problems);
    validate_client_connection(&cfg.client_connection, problems);
}

pub(crate) fn check_percentage(path: &str, value: Option<i32>, problems: &mut Vec<FieldError>) {
    if let Some(v) = value
        && !(0..=100).contains(&v)
    {
        problems.push(FieldError::new(
            path,
            format!("not in valid range [0-100], got {v}"),
        ));
    }
}

/// client-go's leader election jitter factor.
const LEADER_ELECTION_JITTER: f64 = 1.2;

fn validate_leader_election(le: &LeaderElectionConfiguration, problems: &mut Vec<FieldError>) {
    if !le.leader_elect {
        return;
    }
    let p = |f: &str| format!("leaderElection.{f}");
    for (field, d) in [
        ("leaseDuration", le.lease_duration),
        ("renewDeadline", le.renew_deadline),
        ("retryPeriod", le.retry_period),
    ] {
        if d.is_zero() {
            problems.push(FieldError::new(p(field), "must be greater than zero"));
        }
    }
    if le.lease_duration <= le.renew_deadline {
        problems.push(FieldError::new(
            p("leaseDuration"),
            format!(
                "must be greater than renewDeadline ({}), got {}",
                duration::format(le.renew_deadline),
                duration::format(le.lease_duration)
            ),
        ));
    }
    // client-go's leader elector refuses a renew deadline not above the jittered retry
    // period (retryPeriod × 1.2), so catch it here rather than at start-up.
    let jittered = le.retry_period.mul_f64(LEADER_ELECTION_JITTER);
    if le.renew_deadline <= jittered {
        problems.push(FieldError::new(
            p("renewDeadline"),
            format!(
                "must be greater than retryPeriod × {LEADER_ELECTION_JITTER} ({}), got {}",
                duration::format(jittered),
                duration::format(le.renew_deadline)
            ),
        ));
    }
    if le.resource_lock.is_empty() {
        problems.push(FieldError::new(p("resourceLock"), "required value"));
    } else if le.resource_lock != DEFAULT_RESOURCE_LOCK {
        problems.push(FieldError::new(
            p("resourceLock"),
            format!(
                "resourceLock value must be {DEFAULT_RESOURCE_LOCK:?}, got {:?}",
                le.resource_lock
            ),
        ));
    }
    if le.resource_namespace.is_empty() {
        problems.push(FieldError::new(p("resourceNamespace"), "required value"));
    }
    if le.resource_name.is_empty() {
        problems.push(FieldError::new(p("resourceName"), "required value"));
    }
}

fn validate_client_connection(cc: &ClientConnectionConfiguration, problems: &mut Vec<FieldError>) {
    if cc.burst < 0 {
        problems.push(FieldError::new(
            "clientConnection.burst",
            format!("must be non-negative, got {}", cc.burst),
        ));
    }
    if !cc.qps.is_finite() || cc.qps < 0.0 {
        problems.push(FieldError::new(
            "clientConnection.qps",
            format!("must be a non-negative number, got {}", cc.qps),
        ));
    }
}

/// Profile names (non-empty, unique) and the rule that every profile sorts its queue the same
/// way: same QueueSort plugin, same args.
pub(crate) fn validate_profiles(
    cfg: &KubeSchedulerConfiguration,
    specs: &[ProfileSpec],
    problems: &mut Vec<FieldError>,
) {
    if cfg.profiles.is_empty() {
        problems.push(FieldError::new("profiles", "required value"));
        return;
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, p) in cfg.profiles.iter().enumerate() {
        let path = format!("profiles[{i}].schedulerName");
        if p.scheduler_name.is_empty() {
            problems.push(FieldError::new(path, "required value"));
        } else if let Some(first) = seen.get(p.scheduler_name.as_str()) {
            problems.push(FieldError::new(
                path,
                format!(
                    "duplicate value {:?} (also profiles[{first}].schedulerName)",
                    p.scheduler_name
                ),
            ));
        } else {
            seen.insert(&p.scheduler_name, i);
        }
        check_percentage(
            &format!("profiles[{i}].percentageOfNodesToScore"),
            p.percentage_of_nodes_to_score,
            problems,
        );
    }
    // What upstream's framework refuses when it is built (v1.37's words), said here so
    // `config validate` catches it: without a QueueSort or a Bind plugin no pod is ever
    // scheduled. A slim build that compiles no plugin for the point at all cannot be
    // asked for one, so only the count above one is refused there.
    let compiled = |point: ExtensionPoint| {
        kubesched_framework::registry::plugins()
            .iter()
            .any(|d| d.extension_points().contains(point))
    };
    let (can_sort, can_bind) = (
        compiled(ExtensionPoint::QueueSort),
        compiled(ExtensionPoint::Bind),
    );
    for (i, spec) in specs.iter().enumerate() {
        let count = spec.at(ExtensionPoint::QueueSort).len();
        if count > 1 || (count == 0 && can_sort) {
            problems.push(FieldError::new(
                format!("profiles[{i}].plugins.queueSort"),
                format!(
                    "only one queue sort plugin required for profile with scheduler name {:?}, but got {count}",
                    spec.scheduler_name
                ),
            ));
        }
        if can_bind && spec.at(ExtensionPoint::Bind).is_empty() {
            problems.push(FieldError::new(
                format!("profiles[{i}].plugins.bind"),
                format!(
                    "at least one bind plugin is needed for profile with scheduler name {:?}",
                    spec.scheduler_name
                ),
            ));
        }
    }
    let queue_sort = |spec: &ProfileSpec| -> Vec<String> {
        spec.at(ExtensionPoint::QueueSort)
            .iter()
            .map(|r| r.name.clone())
            .collect()
    };
    let args_of = |profile: usize, names: &[String]| -> Vec<Option<serde_json::Value>> {
        names
            .iter()
            .map(|n| {
                cfg.profiles[profile]
                    .plugin_config
                    .iter()
                    .find(|pc| &pc.name == n)
                    .and_then(|pc| pc.args.clone())
            })
            .collect()
    };
    let Some(first) = specs.first() else {
        return;
    };
    let canon = queue_sort(first);
    let canon_args = args_of(0, &canon);
    for (i, spec) in specs.iter().enumerate().skip(1) {
        let names = queue_sort(spec);
        if names != canon {
            problems.push(FieldError::new(
                format!("profiles[{i}].plugins.queueSort"),
                format!(
                    "must be the same for all profiles: got {names:?}, profiles[0] uses {canon:?}"
                ),
            ));
        } else if args_of(i, &names) != canon_args {
            problems.push(FieldError::new(
                format!("profiles[{i}].pluginConfig"),
                "queueSort args must be the same for all profiles",
            ));
        }
    }
}

/// Whether `text` is an absolute http(s) URL with a host (and an optional port, path).
fn is_http_url(text: &str) -> bool {
    let Some(rest) = text
        .strip_prefix("http://")
        .or_else(|| text.strip_prefix("https://"))
    else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let (host, port) = match host_port.strip_prefix('[') {
        // An IPv6 literal: `[::1]:8888`.
        Some(v6) => match v6.split_once(']') {
            Some((h, rest)) => (h, rest.strip_prefix(':')),
            None => return false,
        },
        None => match host_port.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        },
    };
    !host.is_empty()
        && !host.contains(char::is_whitespace)
        && port.is_none_or(|p| !p.is_empty() && p.parse::<u16>().is_ok())
}

/// Extenders: a positive weight where prioritizeVerb is set, at most one binder, valid and
/// distinct managed resource names, and a urlPrefix when any verb is set.
pub(crate) fn validate_extenders(extenders: &[Extender], problems: &mut Vec<FieldError>) {
    let mut binders = 0;
    let mut managed: BTreeSet<&str> = BTreeSet::new();
    for (i, e) in extenders.iter().enumerate() {
        let path = format!("extenders[{i}]");
        // Upstream accepts an empty urlPrefix and fails every call; an extender without
        // verbs (only managedResources, e.g. ignoredByScheduler) is never called and needs
        // none.
        let has_verb = [
            &e.filter_verb,
            &e.prioritize_verb,
            &e.preempt_verb,
            &e.bind_verb,
        ]
        .iter()
        .any(|v| !v.is_empty());
        if e.url_prefix.is_empty() && has_verb {
            problems.push(FieldError::new(
                format!("{path}.urlPrefix"),
                "required value when a verb is set",
            ));
        } else if !e.url_prefix.is_empty() && !is_http_url(&e.url_prefix) {
            // Upstream would fail every call to it; refused here, where it is written.
            problems.push(FieldError::new(
                format!("{path}.urlPrefix"),
                format!(
                    "must be an http:// or https:// URL with a host, got {:?}",
                    e.url_prefix
                ),
            ));
        }
        if !e.prioritize_verb.is_empty() && e.weight <= 0 {
            problems.push(FieldError::new(
                format!("{path}.weight"),
                format!(
                    "must have a positive weight applied to it, got {}",
                    e.weight
                ),
            ));
        }
        if !e.bind_verb.is_empty() {
            binders += 1;
        }
        for (j, r) in e.managed_resources.iter().enumerate() {
            let rpath = format!("{path}.managedResources[{j}].name");
            let name_problems = qualified_name_problems(&r.name);
            if !name_problems.is_empty() {
                for m in name_problems {
                    problems.push(FieldError::new(rpath.clone(), m));
                }
            } else if !is_extended_resource_name(&r.name)
                || !qualified_name_problems(&format!("requests.{}", r.name)).is_empty()
            {
                problems.push(FieldError::new(
                    rpath.clone(),
                    format!("{:?} is an invalid extended resource name", r.name),
                ));
            }
            if !managed.insert(&r.name) {
                problems.push(FieldError::new(
                    rpath,
                    format!("duplicate extender managed resource name {:?}", r.name),
                ));
            }
        }
    }
    if binders > 1 {
        problems.push(FieldError::new(
            "extenders",
            format!("only one extender can implement bind, found {binders}"),
        ));
    }
}

const QUALIFIED_NAME_MAX: usize = 63;
const DNS_SUBDOMAIN_MAX: usize = 253;

/// apimachinery's IsQualifiedName: `[prefix/]name`, the prefix a DNS subdomain, the name at
/// most 63 alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
fn qualified_name_problems(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                out.push("prefix part must be non-empty".to_string());
            } else if !is_dns_subdomain(prefix) {
                out.push(format!(
                    "prefix part must be a lowercase RFC 1123 subdomain of at most {DNS_SUBDOMAIN_MAX} characters"
                ));
            }
            name
        }
        _ => {
            out.push(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
                    .to_string(),
            );
            return out;
        }
    };
    if name.is_empty() {
        out.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX {
        out.push(format!(
            "name part must be no more than {QUALIFIED_NAME_MAX} characters"
        ));
    } else if !is_qualified_name_part(name) {
        out.push(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
                .to_string(),
        );
    }
    out
}

fn is_qualified_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    let ends_ok = |b: u8| b.is_ascii_alphanumeric();
    match (bytes.first(), bytes.last()) {
        (Some(&f), Some(&l)) if ends_ok(f) && ends_ok(l) => bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')),
        _ => false,
    }
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= DNS_SUBDOMAIN_MAX
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        assert!(qualified_name_problems("example.com/foo").is_empty());
        assert!(qualified_name_problems("foo").is_empty());
        assert!(qualified_name_problems("a.b-c/Foo_1.x").is_empty());
        assert!(!qualified_name_problems("/foo").is_empty());
        assert!(!qualified_name_problems("example.com/").is_empty());
        assert!(!qualified_name_problems("Example.com/foo").is_empty());
        assert!(!qualified_name_problems("a/b/c").is_empty());
        assert!(!qualified_name_problems("example.com/-foo").is_empty());
        assert!(!qualified_name_problems(&format!("example.com/{}", "a".repeat(64))).is_empty());
    }
}
