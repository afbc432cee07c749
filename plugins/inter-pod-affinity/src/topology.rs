//! Counts per topology pair and the incoming pod's terms with their namespaces resolved.

use std::sync::Arc;

use kubesched_framework::ObjectStore;
use kubesched_framework::model::{AffinityTerm, LabelSelector, Labels, PodInfo};
use rustc_hash::FxHashMap;

/// Counts keyed by topology pair: node label key, then label value.
///
/// Two levels so a lookup with borrowed `&str` key and value never allocates; keys are
/// shared so that copying the counts into a cycle's state copies no strings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PairCounts {
    map: FxHashMap<Arc<str>, FxHashMap<Arc<str>, i64>>,
}

impl PairCounts {
    /// Adds `delta` to a pair; a pair that reaches zero is dropped, so `is_empty` means
    /// "no pair counts anything".
    pub(crate) fn add(&mut self, key: &str, value: &str, delta: i64) {
        if delta == 0 {
            return;
        }
        if !self.map.contains_key(key) {
            self.map.insert(Arc::from(key), FxHashMap::default());
        }
        let Some(values) = self.map.get_mut(key) else {
            return;
        };
        let now = match values.get_mut(value) {
            Some(n) => {
                *n += delta;
                *n
            }
            None => {
                values.insert(Arc::from(value), delta);
                delta
            }
        };
        if now == 0 {
            values.remove(value);
            if values.is_empty() {
                self.map.remove(key);
            }
        }
    }

    /// Adds `delta` to the pair the node's labels give for `key`; nothing when the node
    /// lacks the label.
    pub(crate) fn add_on_node(&mut self, labels: &Labels, key: &str, delta: i64) {
        if let Some(value) = labels.get(key) {
            self.add(key, value, delta);
        }
    }

    /// The count of a pair (0 when absent).
    pub(crate) fn get(&self, key: &str, value: &str) -> i64 {
        self.map
            .get(key)
            .and_then(|v| v.get(value))
            .copied()
            .unwrap_or(0)
    }

    /// Whether any pair the node's labels form has a positive count.
    pub(crate) fn any_positive_on_node(&self, labels: &Labels) -> bool {
        // Iterating the (few) counted keys beats iterating the node's labels.
        self.map.iter().any(|(key, values)| {
            labels
                .get(key.as_ref())
                .and_then(|v| values.get(v.as_str()))
                .is_some_and(|n| *n > 0)
        })
    }

    /// The pairs the node's labels form that have a positive count, sorted by key.
    pub(crate) fn positive_on_node(&self, labels: &Labels) -> Vec<(String, String, i64)> {
        let mut out: Vec<_> = self
            .map
            .iter()
            .filter_map(|(key, values)| {
                let value = labels.get(key.as_ref())?;
                let n = *values.get(value.as_str())?;
                (n > 0).then(|| (key.to_string(), value.clone(), n))
            })
            .collect();
        out.sort();
        out
    }

    /// Whether no pair is counted.
    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Number of counted pairs.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.values().map(|v| v.len()).sum()
    }

    /// Every pair with its count, sorted (for assertions).
    #[cfg(test)]
    pub(crate) fn sorted(&self) -> Vec<(String, String, i64)> {
        let mut out: Vec<_> = self
            .map
            .iter()
            .flat_map(|(k, vs)| vs.iter().map(|(v, n)| (k.to_string(), v.to_string(), *n)))
            .collect();
        out.sort();
        out
    }
}

/// A term of the incoming pod with its namespace selector turned into namespace names,
/// so matching an existing pod needs no lookup of that pod's namespace labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResolvedTerm {
    /// Sorted namespace names the term covers.
    namespaces: Vec<String>,
    /// The namespace selector is empty: every namespace.
    all_namespaces: bool,
    selector: LabelSelector,
    /// The node label that defines the domain.
    pub(crate) topology_key: String,
}

impl ResolvedTerm {
    /// Resolves a term's namespace selector against the namespaces in the store.
    pub(crate) fn resolve(term: &AffinityTerm, objects: &ObjectStore) -> Self {
        let ns_selector = &term.namespace_selector;
        let mut namespaces = term.namespaces.clone();
        let mut all_namespaces = false;
        if !ns_selector.matches_nothing {
            if ns_selector.is_empty() {
                all_namespaces = true;
            } else {
                for ns in objects.namespaces.list() {
                    let labels = ns.metadata.labels.clone().unwrap_or_default();
                    if let Some(name) = &ns.metadata.name
                        && ns_selector.matches(&labels)
                    {
                        namespaces.push(name.clone());
                    }
                }
            }
        }
        namespaces.sort();
        namespaces.dedup();
        Self {
            namespaces,
            all_namespaces,
            selector: term.selector.clone(),
            topology_key: term.topology_key.clone(),
        }
    }

    /// Whether the pod is one this term is about.
    pub(crate) fn matches(&self, pod: &PodInfo) -> bool {
        (self.all_namespaces
            || self
                .namespaces
                .binary_search_by(|n| n.as_str().cmp(&pod.namespace))
                .is_ok())
            && self.selector.matches(&pod.labels)
    }
}

/// Whether the pod matches every term (false for no terms: nothing to match).
pub(crate) fn matches_all(terms: &[ResolvedTerm], pod: &PodInfo) -> bool {
    !terms.is_empty() && terms.iter().all(|t| t.matches(pod))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_drop_at_zero_and_lookups_borrow() {
        let mut c = PairCounts::default();
        c.add("zone", "a", 2);
        c.add("zone", "b", 1);
        assert_eq!(c.get("zone", "a"), 2);
        assert_eq!(c.len(), 2);
        c.add("zone", "a", -2);
        assert_eq!(c.get("zone", "a"), 0);
        assert_eq!(c.len(), 1);
        c.add("zone", "b", -1);
        assert!(c.is_empty());
        let labels = Labels::from([("zone".to_string(), "a".to_string())]);
        c.add_on_node(&labels, "zone", 1);
        c.add_on_node(&labels, "rack", 1);
        assert_eq!(c.sorted(), vec![("zone".into(), "a".into(), 1)]);
        assert!(c.any_positive_on_node(&labels));
    }
}
