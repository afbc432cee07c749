//! The RBAC rows kubesched needs for a set of plugins: the fixed table of
//! [`crate::rbac::RULES`] and the rows derived from the plugins' kind declarations (list
//! and watch for every kind read, the declared verbs for every write).

use kubesched_framework::registry::{DeclaredKinds, PluginDescriptor, declared_kinds};

use crate::rbac::{READ, RULES};

/// One RBAC rule, owned (derived rows are built at run time).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct AccessRule {
    /// The API group (`""` for core).
    pub api_group: String,
    /// The resource, `plural` or `plural/status`.
    pub resource: String,
    /// The verbs, sorted.
    pub verbs: Vec<String>,
}

fn add(rules: &mut Vec<AccessRule>, group: &str, resource: String, verbs: &[&str]) {
    if verbs.is_empty() {
        return;
    }
    let rule = match rules
        .iter_mut()
        .find(|r| r.api_group == group && r.resource == resource)
    {
        Some(r) => r,
        None => {
            rules.push(AccessRule {
                api_group: group.to_string(),
                resource,
                verbs: Vec::new(),
            });
            rules.last_mut().expect("just pushed")
        }
    };
    for v in verbs {
        if !rule.verbs.iter().any(|x| x == v) {
            rule.verbs.push((*v).to_string());
        }
    }
    rule.verbs.sort();
}

/// The fixed rows, then one row per declared kind (and per status subresource written).
pub fn rules_for_declared(declared: &DeclaredKinds) -> Vec<AccessRule> {
    let mut rules: Vec<AccessRule> = RULES
        .iter()
        .map(|r| AccessRule {
            api_group: r.api_group.to_string(),
            resource: r.resource.to_string(),
            verbs: r.verbs.iter().map(|v| (*v).to_string()).collect(),
        })
        .collect();
    for k in &declared.reads {
        add(&mut rules, k.group, k.plural.to_string(), READ);
    }
    for w in &declared.writes {
        add(&mut rules, w.kind.group, w.kind.plural.to_string(), w.verbs);
        add(
            &mut rules,
            w.kind.group,
            format!("{}/status", w.kind.plural),
            w.status_verbs,
        );
    }
    rules
}

/// The rows `plugins` need.
pub fn rules_for<'a>(plugins: impl IntoIterator<Item = &'a PluginDescriptor>) -> Vec<AccessRule> {
    rules_for_declared(&declared_kinds(plugins))
}

/// Whether `rules` grant `verb` on `group`/`resource`.
pub fn grants(rules: &[AccessRule], group: &str, resource: &str, verb: &str) -> bool {
    rules.iter().any(|r| {
        r.api_group == group && r.resource == resource && r.verbs.iter().any(|v| v == verb)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Namespace, PersistentVolume};
    use kubesched_framework::{KindWrite, ObjectKind};

    #[test]
    fn declared_reads_and_writes_become_rows() {
        let declared = DeclaredKinds {
            reads: vec![
                ObjectKind::of::<Namespace>(),
                ObjectKind::of::<PersistentVolume>(),
            ],
            writes: vec![
                KindWrite::update::<PersistentVolume>(),
                KindWrite::status::<Namespace>(),
            ],
        };
        let rules = rules_for_declared(&declared);
        assert!(grants(&rules, "", "namespaces", "watch"));
        assert!(!grants(&rules, "", "namespaces", "update"));
        assert!(grants(&rules, "", "namespaces/status", "patch"));
        assert!(grants(&rules, "", "persistentvolumes", "list"));
        assert!(grants(&rules, "", "persistentvolumes", "update"));
        assert!(!grants(&rules, "", "persistentvolumes/status", "update"));
        // The fixed rows stay.
        assert!(grants(&rules, "", "pods/binding", "create"));
        // Without declarations, no kind beyond the fixed table.
        let bare = rules_for_declared(&DeclaredKinds::default());
        assert!(!grants(&bare, "", "namespaces", "list"));
        assert_eq!(bare.len(), RULES.len());
    }
}
