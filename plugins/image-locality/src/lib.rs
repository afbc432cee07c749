//! ImageLocality: prefers nodes that already hold the pod's container images, weighing each
//! image by its size and by how widely it is spread (to avoid piling pods on the few nodes
//! that pulled an image first).
//!
//! Score only. It reads the node's `image_states` (filled by the cache) and the number of
//! nodes in the cycle's snapshot through the handle; it must not look at pods on nodes.
//!
//! The images are those of the pod's init containers and containers and, after v1.34
//! (#130231), its image volumes. The count that sets the upper threshold is the number of
//! those images (#138951 added the image volumes to it in v1.37, so an image volume weighs
//! as much as a container image), which equals upstream's count for every pod the API
//! server accepts (a pod container must name an image).

use std::borrow::Cow;

use kubesched_framework::model::{ImageStateSummary, NodeInfo, PodInfo};
use kubesched_framework::{CycleState, Handle, MAX_NODE_SCORE, PluginError, ScorePlugin, Status};

/// The plugin's registered name.
pub const NAME: &str = "ImageLocality";

/// One mebibyte.
pub const MB: i64 = 1024 * 1024;
/// Image sums below this score 0.
pub const MIN_THRESHOLD: i64 = 23 * MB;
/// Per container: image sums at or above this times the number of containers score 100.
pub const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

/// The ImageLocality plugin.
#[derive(Clone)]
pub struct ImageLocality {
    handle: Handle,
}

impl std::fmt::Debug for ImageLocality {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageLocality").finish_non_exhaustive()
    }
}

impl ImageLocality {
    /// Builds the plugin; it keeps the handle to count the snapshot's nodes.
    pub fn new(handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self {
            handle: handle.clone(),
        })
    }
}

kubesched_framework::register_plugin! {
    name: NAME,
    plugin: ImageLocality,
    factory: ImageLocality::new,
}

/// The name an image is recorded under on nodes: `:latest` is added when the reference has
/// no tag (no `:` after the last `/`). Borrows when nothing needs adding.
pub fn normalized_image_name(name: &str) -> Cow<'_, str> {
    let has_tag = match (name.rfind(':'), name.rfind('/')) {
        (Some(colon), Some(slash)) => colon > slash,
        (Some(_), None) => true,
        (None, _) => false,
    };
    if has_tag {
        Cow::Borrowed(name)
    } else {
        Cow::Owned(format!("{name}:latest"))
    }
}

/// An image's size scaled by the share of nodes that have it. The share is computed first
/// and then multiplied, in floating point, so results round exactly as upstream's do.
pub fn scaled_image_score(state: &ImageStateSummary, total_nodes: usize) -> i64 {
    let spread = state.num_nodes as f64 / total_nodes.max(1) as f64;
    (state.size as f64 * spread) as i64
}

/// The node score: the sum clamped to `[MIN_THRESHOLD, MAX_CONTAINER_THRESHOLD ×
/// containers]`, then scaled linearly onto `0..=MAX_NODE_SCORE`.
pub fn calculate_priority(sum: i64, num_containers: usize) -> i64 {
    let max_threshold =
        MAX_CONTAINER_THRESHOLD.saturating_mul(i64::try_from(num_containers).unwrap_or(i64::MAX));
    let sum = if sum < MIN_THRESHOLD {
        MIN_THRESHOLD
    } else {
        sum.min(max_threshold)
    };
    // Never 0 (the floor is not a multiple of the ceiling); guarded all the same.
    let range = max_threshold - MIN_THRESHOLD;
    if range == 0 {
        return 0;
    }
    MAX_NODE_SCORE * (sum - MIN_THRESHOLD) / range
}

/// The sum of the scaled scores of the pod's images present on the node.
fn sum_image_scores(node: &NodeInfo, pod: &PodInfo, total_nodes: impl FnOnce() -> usize) -> i64 {
    // Most nodes report no images: nothing to normalise or look up, and the flag at the
    // head of the info saves reading `image_states` (a cache line of its own).
    if !node.node_has_images() || node.image_states.is_empty() {
        return 0;
    }
    let total_nodes = total_nodes();
    pod.images
        .iter()
        .filter_map(|image| node.image_states.get(normalized_image_name(image).as_ref()))
        .map(|state| scaled_image_score(state, total_nodes))
        .sum()
}

impl ScorePlugin for ImageLocality {
    fn score(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        if node.node().is_none() {
            return Err(Status::error("node not found"));
        }
        let sum = sum_image_scores(node, pod, || self.handle.num_nodes());
        Ok(calculate_priority(sum, pod.images.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_framework::registry;
    use kubesched_testing::{NodeBuilder, PluginHarness, PodBuilder, node_infos};

    #[test]
    fn image_names_are_normalised_like_upstream() {
        let cases = [
            ("nginx", "nginx:latest"),
            ("nginx:1.27", "nginx:1.27"),
            ("gcr.io/team/app", "gcr.io/team/app:latest"),
            ("localhost:5000/app", "localhost:5000/app:latest"),
            ("localhost:5000/app:v2", "localhost:5000/app:v2"),
            ("gcr.io/app@sha256:0123abcd", "gcr.io/app@sha256:0123abcd"),
        ];
        for (name, want) in cases {
            assert_eq!(normalized_image_name(name), want, "{name}");
        }
        assert!(matches!(normalized_image_name("a:b"), Cow::Borrowed(_)));
    }

    #[test]
    fn priority_table() {
        let rows = [
            // (sum, containers, score)
            (0, 1, 0),
            (MIN_THRESHOLD, 1, 0),
            (MAX_CONTAINER_THRESHOLD, 1, 100),
            (5 * MAX_CONTAINER_THRESHOLD, 1, 100),
            (500 * MB, 1, 100 * (500 - 23) / (1000 - 23)),
            (500 * MB, 2, 100 * (500 - 23) / (2000 - 23)),
            // A pod without images has nothing on any node.
            (0, 0, 0),
        ];
        for (sum, containers, want) in rows {
            assert_eq!(
                calculate_priority(sum, containers),
                want,
                "sum={sum} containers={containers}"
            );
        }
    }

    #[test]
    fn spread_scales_the_size() {
        let state = |size, num_nodes| ImageStateSummary { size, num_nodes };
        assert_eq!(scaled_image_score(&state(400 * MB, 4), 4), 400 * MB);
        assert_eq!(scaled_image_score(&state(400 * MB, 1), 4), 100 * MB);
        assert_eq!(scaled_image_score(&state(10 * MB, 1), 4), 10 * MB / 4);
        // No nodes in the snapshot never divides by zero.
        assert_eq!(scaled_image_score(&state(10 * MB, 0), 0), 0);
    }

    /// Four nodes: n1 has the 40 MB and 300 MB images, n2 the 300 MB one, n3 and n4 the
    /// 2000 MB one (n3 also reports it by digest), and n4 a small tagged image too.
    fn nodes() -> Vec<NodeBuilder> {
        vec![
            NodeBuilder::new("n1")
                .image(&["gcr.io/40:latest", "gcr.io/40@sha256:40"], 40 * MB)
                .image(&["gcr.io/300:latest"], 300 * MB),
            NodeBuilder::new("n2").image(&["gcr.io/300:latest"], 300 * MB),
            NodeBuilder::new("n3")
                .image(&["gcr.io/2000:latest", "gcr.io/2000@sha256:20"], 2000 * MB),
            NodeBuilder::new("n4")
                .image(&["gcr.io/2000:latest"], 2000 * MB)
                .image(&["gcr.io/10:v1"], 10 * MB),
        ]
    }

    fn harness() -> PluginHarness {
        PluginHarness::from_registry(NAME, None, Handle::builder()).expect("registered")
    }

    /// Normalised scores of n1..n4 for a pod.
    fn scores(pod: PodBuilder) -> Vec<i64> {
        let run = harness().run(&pod.info(), &node_infos(nodes(), &[]));
        run.nodes
            .iter()
            .map(|n| n.normalized_score.expect("scored"))
            .collect()
    }

    #[test]
    fn score_table() {
        // 40 MB on 1 of 4 nodes counts 10 MB; 300 MB on 2 of 4 counts 150 MB; two
        // containers put the ceiling at 2000 MB.
        assert_eq!(
            scores(
                PodBuilder::new("two")
                    .image("gcr.io/40")
                    .image("gcr.io/300")
            ),
            vec![
                100 * (160 - 23) / (2000 - 23),
                100 * (150 - 23) / (2000 - 23),
                0,
                0
            ]
        );
        // 2000 MB on half the nodes counts 1000 MB: the ceiling of one container.
        assert_eq!(
            scores(PodBuilder::new("big").image("gcr.io/2000:latest")),
            vec![0, 0, 100, 100]
        );
        // Small images stay below the floor.
        assert_eq!(
            scores(PodBuilder::new("small").image("gcr.io/10:v1")),
            vec![0, 0, 0, 0]
        );
        // A digest reference matches the name the node reports; only n3 reports this
        // digest, so it counts a quarter of 2000 MB.
        assert_eq!(
            scores(PodBuilder::new("digest").image("gcr.io/2000@sha256:20")),
            vec![0, 0, 100 * (500 - 23) / (1000 - 23), 0]
        );
        // Init containers count, both for the sum and for the ceiling.
        let with_init = PodBuilder::new("init")
            .with(|p| {
                let spec = p.spec.get_or_insert_with(Default::default);
                spec.init_containers = Some(vec![
                    kubesched_framework::model::k8s_openapi::api::core::v1::Container {
                        name: "init".into(),
                        image: Some("gcr.io/2000:latest".into()),
                        ..Default::default()
                    },
                ]);
            })
            .image("gcr.io/10:v1");
        let n4 = (1000 * MB + 10 * MB / 4 - MIN_THRESHOLD) * 100 / (2000 * MB - MIN_THRESHOLD);
        assert_eq!(
            scores(with_init),
            vec![0, 0, 100 * (1000 - 23) / (2000 - 23), n4]
        );
        // Untagged names only match `:latest`.
        assert_eq!(
            scores(PodBuilder::new("untagged").image("gcr.io/10")),
            vec![0, 0, 0, 0]
        );
    }

    #[test]
    fn image_volumes_count_like_container_images() {
        use kubesched_framework::model::k8s_openapi::api::core::v1 as api;
        let image_volume = |reference: &str| {
            let reference = reference.to_string();
            move |p: &mut api::Pod| {
                let spec = p.spec.get_or_insert_with(Default::default);
                spec.volumes.get_or_insert_with(Vec::new).push(api::Volume {
                    name: "model".into(),
                    image: Some(api::ImageVolumeSource {
                        reference: Some(reference),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
            }
        };
        // A container image of 10 MB and a 2000 MB image mounted as a volume. n3 and n4
        // hold the volume's image (1000 MB after spreading over half the nodes); n4 has the
        // container's too. The volume counts in the sum (#130231) and in the ceiling
        // (#138951): 2000 MB for two images. v1.34 ignored the volume: n3 and n4 scored 0.
        let pod = PodBuilder::new("vol")
            .image("gcr.io/10:v1")
            .with(image_volume("gcr.io/2000"));
        let n4 = (1000 * MB + 10 * MB / 4 - MIN_THRESHOLD) * 100 / (2000 * MB - MIN_THRESHOLD);
        assert_eq!(scores(pod), vec![0, 0, 100 * (1000 - 23) / (2000 - 23), n4]);
        // The volume scores exactly as a second container with that image does (before
        // #138951 its missing share of the ceiling gave it more).
        let as_volume = PodBuilder::new("as-volume")
            .image("gcr.io/10:v1")
            .with(image_volume("gcr.io/2000:latest"));
        let as_container = PodBuilder::new("as-container")
            .image("gcr.io/10:v1")
            .image("gcr.io/2000:latest");
        assert_eq!(scores(as_volume), scores(as_container));
        // An image volume the node lacks still widens the ceiling.
        let pod = PodBuilder::new("missing")
            .image("gcr.io/2000:latest")
            .with(image_volume("gcr.io/absent:v1"));
        assert_eq!(
            scores(pod),
            vec![
                0,
                0,
                100 * (1000 - 23) / (2000 - 23),
                100 * (1000 - 23) / (2000 - 23)
            ]
        );
    }

    #[test]
    fn spread_uses_the_snapshot_size() {
        // The same node scores lower when the snapshot has more nodes that lack the image.
        let only = vec![NodeBuilder::new("n1").image(&["app:v1"], 500 * MB)];
        let mut more = only.clone();
        more.push(NodeBuilder::new("n2"));
        let pod = PodBuilder::new("p").image("app:v1").info();
        let alone = harness().run(&pod, &node_infos(only, &[]));
        let shared = harness().run(&pod, &node_infos(more, &[]));
        assert_eq!(alone.score_of("n1"), Some(100 * (500 - 23) / (1000 - 23)));
        assert_eq!(shared.score_of("n1"), Some(100 * (250 - 23) / (1000 - 23)));
    }

    #[test]
    fn registered_with_its_points() {
        let desc = registry::find(NAME).expect("registered");
        assert_eq!(
            kubesched_framework::implemented_points(harness().plugin().as_ref()),
            desc.extension_points().to_vec()
        );
    }

    #[test]
    fn snapshot() {
        let pod = PodBuilder::new("web")
            .image("gcr.io/40")
            .image("gcr.io/300:latest")
            .image("gcr.io/2000")
            .info();
        let run = harness().run(&pod, &node_infos(nodes(), &[]));
        insta::assert_yaml_snapshot!(run);
    }
}
