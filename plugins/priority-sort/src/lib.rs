//! PrioritySort: the default QueueSort plugin. Pods with a higher `spec.priority` leave the
//! active queue first; among equal priorities, the pod that entered the queue earlier goes first.
//!
//! It only orders queued pods: it keeps no state and must not look at nodes or the cluster.

use kubesched_framework::{Handle, PluginError, QueueSortPlugin, QueuedPodInfo};

/// The plugin's registered name.
pub const NAME: &str = "PrioritySort";

/// The PrioritySort plugin.
#[derive(Debug, Default, Clone, Copy)]
pub struct PrioritySort;

impl PrioritySort {
    /// Builds the plugin (it needs nothing from the handle).
    pub fn new(_handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self)
    }
}

kubesched_framework::register_plugin! {
    name: NAME,
    plugin: PrioritySort,
    factory: PrioritySort::new,
}

impl QueueSortPlugin for PrioritySort {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        let (pa, pb) = (a.pod_info.priority, b.pod_info.priority);
        pa > pb || (pa == pb && a.timestamp < b.timestamp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_framework::registry;
    use kubesched_testing::PodBuilder;
    use std::time::{Duration, Instant};

    fn queued(name: &str, priority: Option<i32>, base: Instant, secs: u64) -> QueuedPodInfo {
        let mut pod = PodBuilder::new(name);
        if let Some(p) = priority {
            pod = pod.priority(p);
        }
        QueuedPodInfo::new(pod.info(), base + Duration::from_secs(secs))
    }

    #[test]
    fn less_table() {
        let base = Instant::now();
        // (name, a priority, a queued at, b priority, b queued at, a goes first)
        let cases = [
            ("higher priority first", Some(100), 5, Some(10), 1, true),
            ("lower priority after", Some(10), 1, Some(100), 5, false),
            (
                "equal priority, earlier first",
                Some(7),
                1,
                Some(7),
                2,
                true,
            ),
            ("equal priority, later after", Some(7), 3, Some(7), 2, false),
            (
                "same priority and time: not less",
                Some(7),
                2,
                Some(7),
                2,
                false,
            ),
            ("unset priority counts as zero", None, 1, Some(0), 2, true),
            ("negative priority after unset", Some(-1), 0, None, 9, false),
        ];
        for (name, pa, ta, pb, tb, want) in cases {
            let a = queued("a", pa, base, ta);
            let b = queued("b", pb, base, tb);
            assert_eq!(PrioritySort.less(&a, &b), want, "{name}");
        }
    }

    #[test]
    fn registered_with_its_points() {
        let desc = registry::find(NAME).expect("registered");
        assert_eq!(
            desc.extension_points().to_vec(),
            kubesched_framework::implemented_points(&PrioritySort).as_slice()
        );
    }

    #[derive(serde::Serialize)]
    struct Entry {
        pod: String,
        priority: i32,
        queued_at_secs: u64,
    }

    #[test]
    fn snapshot_queue_order() {
        let base = Instant::now();
        let mut queue = [
            ("batch-late", Some(0), 9),
            ("critical", Some(2_000_000_000), 8),
            ("batch-early", Some(0), 1),
            ("no-priority", None, 0),
            ("web", Some(1000), 5),
            ("web-earlier", Some(1000), 3),
        ]
        .into_iter()
        .map(|(n, p, t)| (queued(n, p, base, t), t))
        .collect::<Vec<_>>();
        queue.sort_by(|(a, _), (b, _)| {
            if PrioritySort.less(a, b) {
                std::cmp::Ordering::Less
            } else if PrioritySort.less(b, a) {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        });
        let order: Vec<Entry> = queue
            .iter()
            .map(|(q, t)| Entry {
                pod: q.pod_info.name.clone(),
                priority: q.pod_info.priority,
                queued_at_secs: *t,
            })
            .collect();
        insta::assert_yaml_snapshot!(order);
    }
}
