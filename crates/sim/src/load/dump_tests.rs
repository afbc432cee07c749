//! Whole dumps: sizes past the YAML parser's default budgets, broken pieces among good
//! ones, duplicates, configurations among the manifests.

use proptest::prelude::*;

use super::*;

fn load(text: &str, file: &str) -> (Manifests, Vec<InputProblem>) {
    let mut m = Manifests::default();
    let mut problems = Vec::new();
    load_text(text, file, &mut m, &mut problems);
    (m, problems)
}

/// A pod as `kubectl get -o yaml` writes one (about 80 YAML nodes), indented by `indent`
/// with its first line starting `first`.
fn pod_yaml(name: &str, first: &str, indent: &str) -> String {
    let body = format!(
        "apiVersion: v1
kind: Pod
metadata:
  annotations:
    note: |
      a block scalar
      ---
      with a marker-like line
  creationTimestamp: \"2024-01-01T00:00:00Z\"
  labels:
    app: web
    pod-template-hash: 5d8f
    tier: front
  name: {name}
  namespace: default
  resourceVersion: \"1\"
  uid: {name}-uid
spec:
  containers:
  - image: nginx:1.25
    imagePullPolicy: IfNotPresent
    name: web
    ports:
    - containerPort: 80
      name: http
      protocol: TCP
    resources:
      limits:
        cpu: 200m
        memory: 256Mi
      requests:
        cpu: 100m
        memory: 128Mi
  - image: sidecar:1
    name: log
    resources:
      requests:
        cpu: 10m
  nodeSelector:
    kubernetes.io/os: linux
  schedulerName: default-scheduler
  tolerations:
  - effect: NoExecute
    key: node.kubernetes.io/not-ready
    operator: Exists
    tolerationSeconds: 300
  - effect: NoExecute
    key: node.kubernetes.io/unreachable
    operator: Exists
    tolerationSeconds: 300
  topologySpreadConstraints:
  - labelSelector:
      matchLabels:
        app: web
    maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
status:
  phase: Pending
  qosClass: Burstable
"
    );
    let mut out = String::new();
    for (i, line) in body.lines().enumerate() {
        out.push_str(if i == 0 { first } else { indent });
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn list_yaml(names: impl IntoIterator<Item = String>) -> String {
    let mut text = String::from("apiVersion: v1\nitems:\n");
    for n in names {
        text.push_str(&pod_yaml(&n, "- ", "  "));
    }
    text.push_str("kind: List\nmetadata:\n  resourceVersion: \"\"\n");
    text
}

#[test]
fn two_thousand_documents_with_three_thousand_pods_load_whole() {
    // Past serde-saphyr's default 1,024 documents per stream.
    let mut text = String::new();
    let mut n = 0;
    for d in 0..2000 {
        text.push_str("---\n");
        if d % 2 == 0 {
            text.push_str(&pod_yaml(&format!("p{n}"), "", ""));
            n += 1;
        } else {
            text.push_str(&list_yaml([format!("p{n}"), format!("p{}", n + 1)]));
            n += 2;
        }
    }
    assert_eq!(n, 3000);
    let (m, problems) = load(&text, "dump.yaml");
    assert!(
        problems.is_empty(),
        "{:?}",
        &problems[..problems.len().min(3)]
    );
    assert_eq!(m.pods.len(), 3000);
    assert_eq!(m.pods[2999].metadata.name.as_deref(), Some("p2999"));
}

#[test]
fn a_list_of_three_thousand_items_loads_whole() {
    // About 240,000 YAML nodes: near serde-saphyr's default budget of 250,000 for the
    // whole document, which a 2,150-pod dump passed.
    let text = list_yaml((0..3000).map(|i| format!("p{i}")));
    let (m, problems) = load(&text, "pods.yaml");
    assert!(
        problems.is_empty(),
        "{:?}",
        &problems[..problems.len().min(3)]
    );
    assert_eq!(m.pods.len(), 3000);
    let annotation = m.pods[0]
        .metadata
        .annotations
        .as_ref()
        .map(|a| a["note"].clone());
    assert_eq!(
        annotation.as_deref(),
        Some("a block scalar\n---\nwith a marker-like line\n")
    );
    // The same List as JSON, streamed item by item.
    let docs: serde_json::Value =
        serde_saphyr::from_str_with_options(&text, yaml_options(text.len())).expect("valid");
    let json = serde_json::to_string(&docs).expect("json");
    let (m, problems) = load(&json, "pods.json");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(m.pods.len(), 3000);
}

#[test]
fn a_list_of_six_thousand_items_is_past_the_old_node_budget() {
    // 2 × the items: far over 250,000 nodes in one document.
    let text = list_yaml((0..6000).map(|i| format!("p{i}")));
    let (m, problems) = load(&text, "pods.yaml");
    assert!(
        problems.is_empty(),
        "{:?}",
        &problems[..problems.len().min(3)]
    );
    assert_eq!(m.pods.len(), 6000);
}

#[test]
fn an_indented_list_and_a_flow_list_load_too() {
    let indented = "apiVersion: v1\nkind: List\nitems:\n  - kind: Pod\n    metadata: {name: a}\n  - kind: Pod\n    metadata: {name: b}\n";
    let (m, problems) = load(indented, "f.yaml");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(m.pods.len(), 2);
    let flow = "{apiVersion: v1, kind: List, items: [{kind: Pod, metadata: {name: a}}]}\n";
    let (m, problems) = load(&format!("---\n{flow}"), "f.yaml");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(m.pods.len(), 1);
    // A file that starts with a flow mapping is YAML unless its keys are quoted.
    let (m, problems) = load(flow, "f.yaml");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(m.pods.len(), 1);
    assert!(
        looks_like_json(" {\"kind\": \"Pod\"}") && looks_like_json("[{}]") && looks_like_json("{}")
    );
    assert!(!looks_like_json("[{kind: Pod}]") && !looks_like_json("kind: Pod"));
    // Anchors shared between items: the List is parsed whole.
    let shared = "kind: List\nitems:\n- &p\n  kind: Pod\n  metadata: {name: a}\n- kind: Node\n  metadata: {name: n0}\n  spec: {podCIDR: *p}\n";
    let (m, problems) = load(shared, "f.yaml");
    assert_eq!((m.pods.len(), problems.len()), (1, 1), "{problems:?}");
}

/// Ways to break one piece of YAML.
#[derive(Debug, Clone, Copy)]
enum Breakage {
    UnclosedFlow,
    DuplicateKey,
    TabIndent,
    AliasBomb,
    WrongType,
}

fn broken(name: &str, how: Breakage) -> String {
    match how {
        Breakage::UnclosedFlow => format!("kind: Pod\nmetadata: {{name: {name}\n"),
        Breakage::DuplicateKey => {
            format!("kind: Pod\nmetadata:\n  name: {name}\n  name: {name}-again\n")
        }
        Breakage::TabIndent => format!("kind: Pod\nmetadata:\n\tname: {name}\n"),
        Breakage::AliasBomb => {
            let mut text = format!(
                "kind: Pod\nmetadata: {{name: {name}}}\nx0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
            );
            for i in 1..12 {
                let p = i - 1;
                text.push_str(&format!(
                    "x{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
                ));
            }
            text
        }
        Breakage::WrongType => {
            format!("kind: Pod\nmetadata: {{name: {name}}}\nspec: {{priority: high}}\n")
        }
    }
}

fn breakage() -> impl Strategy<Value = Breakage> {
    prop_oneof![
        Just(Breakage::UnclosedFlow),
        Just(Breakage::DuplicateKey),
        Just(Breakage::TabIndent),
        Just(Breakage::AliasBomb),
        Just(Breakage::WrongType),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn one_bad_document_drops_only_itself(count in 2usize..12, bad in 0usize..12, how in breakage()) {
        let bad = bad % count;
        let mut text = String::new();
        for i in 0..count {
            text.push_str("---\n");
            if i == bad {
                text.push_str(&broken(&format!("p{i}"), how));
            } else {
                text.push_str(&pod_yaml(&format!("p{i}"), "", ""));
            }
        }
        let (m, problems) = load(&text, "dump.yaml");
        prop_assert_eq!(m.pods.len(), count - 1, "{:?}", problems);
        prop_assert_eq!(problems.len(), 1, "{:?}", problems);
        let document = problems[0].document.clone().unwrap_or_default();
        prop_assert!(document.starts_with(&format!("document {} (line ", bad + 1)), "{}", problems[0]);
    }

    #[test]
    fn one_bad_list_item_drops_only_itself(count in 2usize..12, bad in 0usize..12, how in breakage()) {
        let bad = bad % count;
        let mut text = String::from("apiVersion: v1\nitems:\n");
        for i in 0..count {
            if i == bad {
                text.push_str(&pod_yaml_of(&broken(&format!("p{i}"), how)));
            } else {
                text.push_str(&pod_yaml(&format!("p{i}"), "- ", "  "));
            }
        }
        text.push_str("kind: List\n");
        let (m, problems) = load(&text, "dump.yaml");
        prop_assert_eq!(m.pods.len(), count - 1, "{:?}", problems);
        prop_assert_eq!(problems.len(), 1, "{:?}", problems);
        let document = problems[0].document.clone().unwrap_or_default();
        prop_assert!(document.starts_with(&format!("document 1, item {} (line ", bad + 1)), "{}", problems[0]);
    }
}

/// A document's text as an item of a block List.
fn pod_yaml_of(doc: &str) -> String {
    let mut out = String::new();
    for (i, line) in doc.lines().enumerate() {
        out.push_str(if i == 0 { "- " } else { "  " });
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[test]
fn problems_name_the_line_of_the_file() {
    let text = "kind: Pod\nmetadata: {name: a}\n---\n# two\nkind: Pod\nmetadata: {name: b\n";
    let (m, problems) = load(text, "f.yaml");
    assert_eq!(m.pods.len(), 1);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].document.as_deref(), Some("document 2 (line 3)"));
    assert_eq!(problems[0].object.as_deref(), Some("Pod"));
    let (_, problems) = load(
        "kind: Node\nmetadata:\n  labels: {a: b}\n  name: n-1\n  name: n-2\n",
        "f.yaml",
    );
    assert_eq!(
        problems[0].object.as_deref(),
        Some("Node n-1"),
        "{problems:?}"
    );
    assert!(
        problems[0].message.starts_with("invalid YAML at line "),
        "{}",
        problems[0]
    );
}

#[test]
fn duplicates_say_which_copy_was_kept() {
    let text = "kind: Pod\nmetadata: {name: a, namespace: ns, resourceVersion: \"7\"}\nspec: {nodeName: n1}\n---\nkind: Pod\nmetadata: {name: a, namespace: ns, resourceVersion: \"5\"}\nspec: {nodeName: n2}\n---\nkind: Node\nmetadata: {name: n1}\n---\nkind: Node\nmetadata: {name: n1, labels: {second: \"yes\"}}\n---\nkind: Node\nmetadata: {name: n2}\n";
    let (m, problems) = load(text, "f.yaml");
    assert_eq!((m.pods.len(), m.nodes.len()), (1, 2));
    // The higher resourceVersion wins, wherever it is.
    assert_eq!(
        m.pods[0].spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some("n1")
    );
    // Without resourceVersions, the later copy.
    assert!(m.nodes[0].metadata.labels.is_some());
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert_eq!(problems[0].object.as_deref(), Some("Pod ns/a"));
    assert_eq!(problems[0].field.as_deref(), Some("metadata.name"));
    assert_eq!(
        problems[0].message,
        "defined twice (also in f.yaml, document 1 (line 1)): the copy in f.yaml, document 1 (line 1) is kept (it has the higher resourceVersion), the one in f.yaml, document 2 (line 4) left out"
    );
    assert!(
        problems[1]
            .message
            .contains("the copy in f.yaml, document 4 (line 11) is kept (it is the later one)"),
        "{}",
        problems[1]
    );
    // Across calls too (files loaded one after the other).
    let mut m = m;
    let mut problems = Vec::new();
    load_text(
        "kind: Node\nmetadata: {name: n2}\n",
        "g.yaml",
        &mut m,
        &mut problems,
    );
    assert_eq!(m.nodes.len(), 2);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].message.contains("also in an earlier input"),
        "{}",
        problems[0]
    );
}

#[test]
fn a_pod_bound_to_a_missing_node_is_reported() {
    let text = "kind: Pod\nmetadata: {name: a}\nspec: {nodeName: gone}\n---\nkind: Node\nmetadata: {name: here}\n---\nkind: Pod\nmetadata: {name: b}\nspec: {nodeName: here}\n";
    let (m, problems) = load(text, "f.yaml");
    assert_eq!(m.pods.len(), 2);
    assert_eq!(problems.len(), 1, "{problems:?}");
    let p = &problems[0];
    assert_eq!(
        p.to_string(),
        "f.yaml: document 1 (line 1): Pod default/a: spec.nodeName: bound to node \"gone\", which is not in the input"
    );
}

#[test]
fn a_configuration_among_the_manifests_is_used() {
    const CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nparallelism: 3\n";
    let multi = format!(
        "kind: Node\nmetadata: {{name: n0}}\n---\n{CONFIG}---\nkind: Pod\nmetadata: {{name: p}}\n"
    );
    let list = format!(
        "apiVersion: v1\nitems:\n{}- kind: Node\n  metadata: {{name: n0}}\nkind: List\n",
        pod_yaml_of(CONFIG)
    );
    let json = serde_json::json!({"kind": "List", "items": [
        {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "parallelism": 3},
        {"kind": "Node", "metadata": {"name": "n0"}},
    ]})
    .to_string();
    for (text, file, at) in [
        (multi.as_str(), "f.yaml", "f.yaml, document 2 (line 3)"),
        (
            list.as_str(),
            "f.yaml",
            "f.yaml, document 1, item 1 (line 3)",
        ),
        (json.as_str(), "f.json", "f.json, document 1, item 1"),
    ] {
        let (m, problems) = load(text, file);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(m.nodes.len(), 1);
        let (source, config) = m.config.expect("a configuration");
        assert_eq!(source, at);
        let loaded = kubesched_config::load_str(&config, &source).expect("it loads");
        assert_eq!(loaded.config.parallelism, 3);
    }
}

#[test]
fn two_configurations_are_reported_and_the_first_is_used() {
    let text = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nparallelism: 3\n---\napiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nparallelism: 4\n";
    let (m, problems) = load(text, "f.yaml");
    let (source, config) = m.config.expect("a configuration");
    assert!(config.contains("parallelism: 3"));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(
        problems[0].to_string(),
        format!(
            "f.yaml: document 2 (line 4): KubeSchedulerConfiguration: kind: a second KubeSchedulerConfiguration: the first one ({source}) is used, this one is ignored"
        )
    );
}

#[test]
fn standard_input_and_folders_go_through_the_same_checks() {
    let dir = std::env::temp_dir().join(format!("kubesched-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("a.yaml"), "kind: Node\nmetadata: {name: n0}\n").expect("write");
    std::fs::write(
        dir.join("b.json"),
        "{\"kind\": \"Node\", \"metadata\": {\"name\": \"n0\"}}",
    )
    .expect("write");
    let (m, problems) = load_paths(&[dir.clone(), PathBuf::from("/dev/zero")]);
    assert_eq!(m.nodes.len(), 1);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].message.contains("defined twice"),
        "{}",
        problems[0]
    );
    assert_eq!(problems[1].file, "/dev/zero");
    assert!(
        problems[1].message.contains("a character device"),
        "{}",
        problems[1]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_broken_list_header_costs_only_itself() {
    let text = format!(
        "apiVersion: v1\nmetadata: {{resourceVersion: \"\"\nitems:\n{}{}kind: List\n",
        pod_yaml("a", "- ", "  "),
        pod_yaml("b", "- ", "  ")
    );
    let (m, problems) = load(&text, "f.yaml");
    assert_eq!(m.pods.len(), 2);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].document.as_deref(), Some("document 1 (line 1)"));
}

#[test]
fn windows_line_endings_and_a_byte_order_mark_load_the_same() {
    let unix = list_yaml((0..3).map(|i| format!("p{i}"))) + "---\n" + &pod_yaml("q", "", "");
    let windows = format!("\u{feff}{}", unix.replace('\n', "\r\n"));
    let (m, problems) = load(&windows, "f.yaml");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(m.pods.len(), 4);
    let (u, _) = load(&unix, "f.yaml");
    assert_eq!(
        m.pods[0].metadata.labels, u.pods[0].metadata.labels,
        "the same objects either way"
    );
}

fn load_windowed(text: &str, window: usize) -> (Vec<String>, Vec<InputProblem>) {
    let mut m = Manifests::default();
    let mut problems = Vec::new();
    load_text_windowed(text, "dump.yaml", window, &mut m, &mut problems);
    let pods = m.pods.iter().map(|p| &p.metadata);
    let nodes = m.nodes.iter().map(|n| &n.metadata);
    let names = pods
        .chain(nodes)
        .map(|meta| meta.name.clone().unwrap_or_default())
        .collect();
    (names, problems)
}

/// One piece of a generated file: a pod document, a List of pods, a broken document, a
/// node, or a List with a broken item.
#[derive(Debug, Clone)]
enum Part {
    Pod,
    List(usize),
    Broken(Breakage),
    Node,
    ListWithBroken(usize, Breakage),
}

fn part() -> impl Strategy<Value = Part> {
    prop_oneof![
        Just(Part::Pod),
        (1usize..6).prop_map(Part::List),
        breakage().prop_map(Part::Broken),
        Just(Part::Node),
        (2usize..6, breakage()).prop_map(|(n, b)| Part::ListWithBroken(n, b)),
    ]
}

fn file_of(parts: &[Part]) -> String {
    let mut text = String::new();
    let mut n = 0;
    let mut name = || {
        n += 1;
        format!("p{n}")
    };
    for part in parts {
        text.push_str("---\n");
        match part {
            Part::Pod => text.push_str(&pod_yaml(&name(), "", "")),
            Part::List(k) => text.push_str(&list_yaml((0..*k).map(|_| name()))),
            Part::Broken(how) => text.push_str(&broken(&name(), *how)),
            Part::Node => text.push_str(&format!("kind: Node\nmetadata:\n  name: {}\n", name())),
            Part::ListWithBroken(k, how) => {
                text.push_str("apiVersion: v1\nitems:\n");
                for i in 0..*k {
                    if i == 1 {
                        text.push_str(&pod_yaml_of(&broken(&name(), *how)));
                    } else {
                        text.push_str(&pod_yaml(&name(), "- ", "  "));
                    }
                }
                text.push_str("kind: List\nmetadata:\n  resourceVersion: \"\"\n");
            }
        }
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// Read in windows of any size, a file loads exactly as read whole: the same
    /// objects in the same order, the same problems at the same documents and lines.
    #[test]
    fn windows_of_any_size_load_what_the_whole_file_does(
        parts in proptest::collection::vec(part(), 1..8),
        window in prop_oneof![Just(1usize), 16usize..4096],
    ) {
        let text = file_of(&parts);
        let whole = load_windowed(&text, usize::MAX);
        let windowed = load_windowed(&text, window);
        prop_assert_eq!(&whole.0, &windowed.0);
        prop_assert_eq!(&whole.1, &windowed.1);
    }
}

#[test]
fn a_streamed_list_reads_its_header_at_its_end() {
    // A List past the window, its kind after the items (as kubectl writes it), then a
    // broken header of a second one: the items load, the header is reported.
    let text = format!(
        "{}---\napiVersion: v1\nitems:\n{}{}kind: List\nmetadata: {{resourceVersion: \"\"\n",
        list_yaml((0..40).map(|i| format!("a{i}"))),
        pod_yaml("b0", "- ", "  "),
        pod_yaml("b1", "- ", "  "),
    );
    let (names, problems) = load_windowed(&text, 256);
    assert_eq!(names.len(), 42, "{problems:?}");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].message.starts_with("invalid YAML"),
        "{}",
        problems[0]
    );
    let second = text.find("\n---\n").expect("two documents") + 1;
    let line = text[..second].lines().count() + 1;
    assert_eq!(
        problems[0].document.as_deref(),
        Some(format!("document 2 (line {line})").as_str())
    );
}

#[test]
fn json_items_are_parsed_alone_and_a_cut_short_file_keeps_what_came_before() {
    let pod = |name: &str| {
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}})
            .to_string()
    };
    let good = format!(
        "{{\"apiVersion\": \"v1\",\n\"items\": [\n{},\n{{\"kind\": \"Pod\", \"metadata\": {{\"name\": \"bad\",}}}},\n{}\n],\n\"kind\": \"List\"}}\n",
        pod("a"),
        pod("c")
    );
    let (m, problems) = load(&good, "pods.json");
    let names: Vec<_> = m
        .pods
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert_eq!(names, ["a", "c"]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(
        problems[0].to_string(),
        "pods.json: document 1, item 2: invalid JSON: trailing comma at line 4 column 44"
    );
    let cut = format!("{{\"items\": [\n{},\n{}", pod("a"), &pod("b")[..20]);
    let (m, problems) = load(&cut, "pods.json");
    assert_eq!(m.pods.len(), 1);
    assert_eq!(
        problems[0].message,
        "invalid JSON: the file ends inside the value that starts on line 1"
    );
}
