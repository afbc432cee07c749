//! One copy of each object: the same kind, namespace and name twice is a problem that
//! says which copy was kept (the higher `metadata.resourceVersion` when both carry a
//! number, else the later one), never a silent overwrite. And what only the whole input
//! can tell: pods bound to nodes the input lacks.

use std::collections::{HashMap, HashSet};

use k8s_openapi::Metadata;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use kubesched_framework::model::PodObject;

use super::{InputProblem, Manifests};

/// Where a copy came from: the file and the position in it (`document 2 (line 40)`).
#[derive(Debug, Clone)]
pub(super) struct Origin {
    pub file: String,
    pub position: String,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.position.is_empty() {
            write!(f, "{}", self.file)
        } else {
            write!(f, "{}, {}", self.file, self.position)
        }
    }
}

type Key = (String, String);

/// For each kind, where each object is in the manifests and where it came from.
#[derive(Debug, Default)]
pub(super) struct Seen {
    pods: HashMap<Key, (usize, Origin)>,
    nodes: HashMap<Key, (usize, Origin)>,
    priority_classes: HashMap<Key, (usize, Origin)>,
    deployments: HashMap<Key, (usize, Origin)>,
    others: HashMap<(String, String, String), (usize, Origin)>,
}

fn earlier() -> Origin {
    Origin {
        file: "an earlier input".into(),
        position: String::new(),
    }
}

fn key_of(meta: &ObjectMeta, namespaced: bool) -> Key {
    let ns = if namespaced {
        meta.namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into())
    } else {
        String::new()
    };
    (ns, meta.name.clone().unwrap_or_default())
}

fn other_key(kind: &str, doc: &serde_json::Value) -> (String, String, String) {
    let meta = doc.get("metadata");
    let field = |f: &str| {
        meta.and_then(|m| m.get(f))
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    (kind.to_string(), field("namespace"), field("name"))
}

/// Which copy to keep: the new one unless the old one has the higher resourceVersion.
/// Returns whether the new one wins and why.
fn choose(old: Option<&str>, new: Option<&str>) -> (bool, &'static str) {
    let number = |rv: Option<&str>| rv.and_then(|v| v.parse::<u64>().ok());
    match (number(old), number(new)) {
        (Some(o), Some(n)) if o > n => (false, "it has the higher resourceVersion"),
        (Some(o), Some(n)) if n > o => (true, "it has the higher resourceVersion"),
        _ => (true, "it is the later one"),
    }
}

/// What the duplicate problem says.
fn duplicate_message(first: &Origin, second: &Origin, keep_new: bool, why: &str) -> String {
    let (kept, dropped) = if keep_new {
        (second, first)
    } else {
        (first, second)
    };
    format!(
        "defined twice (also in {first}): the copy in {kept} is kept ({why}), the one in {dropped} left out"
    )
}

/// Adds `object` to `list` unless a copy is there; returns the problem's message when
/// it is a duplicate.
fn add<T>(
    list: &mut Vec<T>,
    seen: &mut HashMap<Key, (usize, Origin)>,
    key: Key,
    object: T,
    origin: Origin,
    resource_version: impl Fn(&T) -> Option<&str>,
) -> Option<String> {
    match seen.get_mut(&key) {
        Some((index, first)) => {
            let (keep_new, why) =
                choose(resource_version(&list[*index]), resource_version(&object));
            let message = duplicate_message(first, &origin, keep_new, why);
            if keep_new {
                list[*index] = object;
                *first = origin;
            }
            Some(message)
        }
        None => {
            seen.insert(key, (list.len(), origin));
            list.push(object);
            None
        }
    }
}

fn rv<T: Metadata<Ty = ObjectMeta>>(object: &T) -> Option<&str> {
    object.metadata().resource_version.as_deref()
}

impl Seen {
    /// What `manifests` already holds (from an earlier call).
    pub(super) fn of(manifests: &Manifests) -> Self {
        let mut seen = Self::default();
        for (i, p) in manifests.pods.iter().enumerate() {
            let (ns, name) = p.name_key().split_once('/').unwrap_or_default();
            seen.pods
                .insert((ns.to_string(), name.to_string()), (i, earlier()));
        }
        for (i, n) in manifests.nodes.iter().enumerate() {
            seen.nodes
                .insert(key_of(&n.metadata, false), (i, earlier()));
        }
        for (i, c) in manifests.priority_classes.iter().enumerate() {
            seen.priority_classes
                .insert(key_of(&c.metadata, false), (i, earlier()));
        }
        for (i, d) in manifests.deployments.iter().enumerate() {
            seen.deployments
                .insert(key_of(&d.metadata, true), (i, earlier()));
        }
        for (i, (kind, doc)) in manifests.others.iter().enumerate() {
            seen.others.insert(other_key(kind, doc), (i, earlier()));
        }
        seen
    }

    pub(super) fn add_pod(
        &mut self,
        m: &mut Manifests,
        pod: PodObject,
        origin: Origin,
    ) -> Option<String> {
        let key = match pod.name_key().split_once('/') {
            Some((ns, name)) => (ns.to_string(), name.to_string()),
            None => (String::new(), pod.name_key().to_string()),
        };
        // Only a duplicate reads the versions: packed pods stay packed.
        match self.pods.get_mut(&key) {
            Some((index, first)) => {
                let old = m.pods[*index].read();
                let new = pod.read();
                let (keep_new, why) = choose(rv(&*old), rv(&*new));
                let message = duplicate_message(first, &origin, keep_new, why);
                if keep_new {
                    m.pods[*index] = pod;
                    *first = origin;
                }
                Some(message)
            }
            None => {
                self.pods.insert(key, (m.pods.len(), origin));
                m.pods.push(pod);
                None
            }
        }
    }

    pub(super) fn add_node(
        &mut self,
        m: &mut Manifests,
        node: k8s_openapi::api::core::v1::Node,
        origin: Origin,
    ) -> Option<String> {
        let key = key_of(&node.metadata, false);
        add(&mut m.nodes, &mut self.nodes, key, node, origin, rv)
    }

    pub(super) fn add_priority_class(
        &mut self,
        m: &mut Manifests,
        class: k8s_openapi::api::scheduling::v1::PriorityClass,
        origin: Origin,
    ) -> Option<String> {
        let key = key_of(&class.metadata, false);
        add(
            &mut m.priority_classes,
            &mut self.priority_classes,
            key,
            class,
            origin,
            rv,
        )
    }

    pub(super) fn add_deployment(
        &mut self,
        m: &mut Manifests,
        deployment: k8s_openapi::api::apps::v1::Deployment,
        origin: Origin,
    ) -> Option<String> {
        let key = key_of(&deployment.metadata, true);
        add(
            &mut m.deployments,
            &mut self.deployments,
            key,
            deployment,
            origin,
            rv,
        )
    }

    pub(super) fn add_other(
        &mut self,
        m: &mut Manifests,
        kind: String,
        doc: serde_json::Value,
        origin: Origin,
    ) -> Option<String> {
        let key = other_key(&kind, &doc);
        let version = |d: &serde_json::Value| {
            d.get("metadata")
                .and_then(|m| m.get("resourceVersion"))
                .and_then(|v| v.as_str())
                .map(str::to_string)
        };
        match self.others.get_mut(&key) {
            Some((index, first)) => {
                let old = version(&m.others[*index].1);
                let (keep_new, why) = choose(old.as_deref(), version(&doc).as_deref());
                let message = duplicate_message(first, &origin, keep_new, why);
                if keep_new {
                    m.others[*index] = (kind, doc);
                    *first = origin;
                }
                Some(message)
            }
            None => {
                self.others.insert(key, (m.others.len(), origin));
                m.others.push((kind, doc));
                None
            }
        }
    }

    /// What no cluster can hold: pods bound (`spec.nodeName`) to a node the input does
    /// not hold (they still count where the cache puts them, as in a cluster whose node
    /// was just deleted), and two pods with one `metadata.uid`. Reported.
    pub(super) fn check_bindings(&self, m: &Manifests, problems: &mut Vec<InputProblem>) {
        let mut uids: HashMap<&str, &Key> = HashMap::new();
        for (key, (index, origin)) in sorted(&self.pods) {
            let Some(uid) = m.pods[*index].uid() else {
                continue;
            };
            if let Some(first) = uids.insert(uid, key) {
                problems.push(InputProblem {
                    file: origin.file.clone(),
                    document: (!origin.position.is_empty()).then(|| origin.position.clone()),
                    object: Some(format!("Pod {}/{}", key.0, key.1)),
                    field: Some("metadata.uid".into()),
                    message: format!(
                        "{uid:?} is also the uid of pod {}/{}: an API server gives each object its own",
                        first.0, first.1
                    ),
                });
            }
        }
        let nodes: HashSet<&str> = m
            .nodes
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        for ((ns, name), (index, origin)) in sorted(&self.pods) {
            let Some(node) = m.pods[*index].node_name() else {
                continue;
            };
            if nodes.contains(node) || origin.position.is_empty() && origin.file == earlier().file {
                continue;
            }
            problems.push(InputProblem {
                file: origin.file.clone(),
                document: (!origin.position.is_empty()).then(|| origin.position.clone()),
                object: Some(format!("Pod {ns}/{name}")),
                field: Some("spec.nodeName".into()),
                message: format!("bound to node {node:?}, which is not in the input"),
            });
        }
    }
}

/// Entries in input order.
fn sorted(map: &HashMap<Key, (usize, Origin)>) -> Vec<(&Key, &(usize, Origin))> {
    let mut v: Vec<_> = map.iter().collect();
    v.sort_by_key(|(_, (i, _))| *i);
    v
}
