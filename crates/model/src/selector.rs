//! Label selectors and node selector terms, compiled once from their API form.
//!
//! Matching never allocates: requirements hold owned strings and are checked against the
//! object's label map directly.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use crate::ModelError;

/// Labels of an object, as the API holds them.
pub type Labels = BTreeMap<String, String>;

/// Where a selector looks label values up: an object's label map, or a node's
/// [`FlatLabels`].
pub trait LabelLookup {
    /// The value of the label `key`, if the object has it.
    fn label(&self, key: &str) -> Option<&str>;
}

impl LabelLookup for Labels {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// A node's labels packed for the per-node matching of NodeAffinity: every key and value
/// in one buffer, with a small table of lengths beside it. A lookup compares lengths first
/// and reads the bytes of a key of the right length only, in two allocations next to each
/// other, where a `BTreeMap<String, String>` costs a pointer chase per key compared (its
/// node, then each key's own heap buffer).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlatLabels {
    /// Per label, in key order: where its key starts in `text`, the key's length and the
    /// value's length (the value follows its key).
    entries: Box<[(usize, usize, usize)]>,
    text: Box<str>,
}

impl FlatLabels {
    /// Packs a label map.
    pub fn new(labels: &Labels) -> Self {
        let mut text = String::with_capacity(labels.iter().map(|(k, v)| k.len() + v.len()).sum());
        let mut entries = Vec::with_capacity(labels.len());
        for (k, v) in labels {
            entries.push((text.len(), k.len(), v.len()));
            text.push_str(k);
            text.push_str(v);
        }
        Self {
            entries: entries.into_boxed_slice(),
            text: text.into_boxed_str(),
        }
    }
}

impl LabelLookup for FlatLabels {
    #[inline]
    fn label(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .filter(|&&(_, key_len, _)| key_len == key.len())
            .find(|&&(start, key_len, _)| self.text.get(start..start + key_len) == Some(key))
            .and_then(|&(start, key_len, value_len)| {
                self.text.get(start + key_len..start + key_len + value_len)
            })
    }
}

/// The operator of a label requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Operator {
    /// The label exists and its value is one of the values.
    In,
    /// The label is absent, or its value is none of the values.
    NotIn,
    /// The label exists.
    Exists,
    /// The label does not exist.
    DoesNotExist,
    /// The label's value, read as an integer, is greater than the single value.
    Gt,
    /// The label's value, read as an integer, is less than the single value.
    Lt,
}

/// One compiled requirement on a label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// The operator.
    pub operator: Operator,
    /// The values (sorted and deduplicated for In/NotIn), empty for Exists/DoesNotExist.
    pub values: Vec<String>,
    /// The single integer of Gt/Lt.
    pub bound: i64,
}

impl Requirement {
    /// Builds a requirement, checking the operator's rules on its values.
    pub fn new(
        key: &str,
        operator: &str,
        values: &[String],
        allow_numeric: bool,
        field: &str,
    ) -> Result<Self, ModelError> {
        let invalid = |why: &str| ModelError::invalid(field, why);
        let operator = match operator {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" if allow_numeric => Operator::Gt,
            "Lt" if allow_numeric => Operator::Lt,
            other => return Err(invalid(&format!("{other:?} is not a valid operator"))),
        };
        if key.is_empty() {
            return Err(invalid("key must not be empty"));
        }
        let mut bound = 0;
        let mut values = values.to_vec();
        match operator {
            Operator::In | Operator::NotIn => {
                if values.is_empty() {
                    return Err(invalid("values must be non-empty for In and NotIn"));
                }
                values.sort();
                values.dedup();
            }
            Operator::Exists | Operator::DoesNotExist => {
                if !values.is_empty() {
                    return Err(invalid("values must be empty for Exists and DoesNotExist"));
                }
            }
            Operator::Gt | Operator::Lt => {
                if values.len() != 1 {
                    return Err(invalid(
                        "values must hold exactly one integer for Gt and Lt",
                    ));
                }
                bound = values[0]
                    .parse()
                    .map_err(|_| invalid(&format!("{:?} is not an integer", values[0])))?;
            }
        }
        Ok(Self {
            key: key.to_string(),
            operator,
            values,
            bound,
        })
    }

    /// Whether the labels satisfy this requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.matches_in(labels)
    }

    /// As [`Requirement::matches`], on any [`LabelLookup`].
    pub fn matches_in<L: LabelLookup + ?Sized>(&self, labels: &L) -> bool {
        self.matches_value(labels.label(&self.key))
    }

    /// Whether a label value (None when absent) satisfies this requirement.
    pub fn matches_value(&self, value: Option<&str>) -> bool {
        match self.operator {
            Operator::In => value.is_some_and(|v| self.has_value(v)),
            Operator::NotIn => !value.is_some_and(|v| self.has_value(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::Gt => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > self.bound),
            Operator::Lt => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < self.bound),
        }
    }

    fn has_value(&self, v: &str) -> bool {
        self.values.binary_search_by(|x| x.as_str().cmp(v)).is_ok()
    }
}

/// A compiled `metav1.LabelSelector`.
///
/// An absent selector matches nothing and an empty one matches everything, as upstream's
/// `LabelSelectorAsSelector` has it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    /// All must hold.
    pub requirements: Vec<Requirement>,
    /// True for a selector built from nothing (`nil`): it matches no object.
    pub matches_nothing: bool,
}

impl LabelSelector {
    /// A selector that matches every object.
    pub fn everything() -> Self {
        Self::default()
    }

    /// A selector that matches no object.
    pub fn nothing() -> Self {
        Self {
            requirements: Vec::new(),
            matches_nothing: true,
        }
    }

    /// A selector of equality requirements, as a `matchLabels` map or a Service selector.
    pub fn from_map(labels: &Labels) -> Self {
        Self {
            requirements: labels
                .iter()
                .map(|(k, v)| Requirement {
                    key: k.clone(),
                    operator: Operator::In,
                    values: vec![v.clone()],
                    bound: 0,
                })
                .collect(),
            matches_nothing: false,
        }
    }

    /// Compiles an optional API selector; `field` names where it sits, for errors.
    pub fn compile(
        selector: Option<&meta::LabelSelector>,
        field: &str,
    ) -> Result<Self, ModelError> {
        let Some(selector) = selector else {
            return Ok(Self::nothing());
        };
        let mut out = Self::from_map(&selector.match_labels.clone().unwrap_or_default());
        for (i, expr) in selector.match_expressions.iter().flatten().enumerate() {
            out.requirements.push(Requirement::new(
                &expr.key,
                &expr.operator,
                expr.values.as_deref().unwrap_or_default(),
                false,
                &format!("{field}.matchExpressions[{i}]"),
            )?);
        }
        Ok(out)
    }

    /// Like [`LabelSelector::compile`], but a selector that cannot be compiled selects
    /// nothing (as upstream's callers treat a selector that fails to parse); the error is
    /// returned beside it for whoever must report it.
    pub fn compile_lenient(
        selector: Option<&meta::LabelSelector>,
        field: &str,
    ) -> (Self, Option<ModelError>) {
        match Self::compile(selector, field) {
            Ok(s) => (s, None),
            Err(e) => (Self::nothing(), Some(e)),
        }
    }

    /// Whether the labels match.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.matches_in(labels)
    }

    /// As [`LabelSelector::matches`], on any [`LabelLookup`].
    pub fn matches_in<L: LabelLookup + ?Sized>(&self, labels: &L) -> bool {
        !self.matches_nothing && self.requirements.iter().all(|r| r.matches_in(labels))
    }

    /// Whether this selector has no requirement (and so matches everything unless nothing).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Adds a requirement (used for matchLabelKeys and mismatchLabelKeys).
    pub fn push(&mut self, requirement: Requirement) {
        self.requirements.push(requirement);
    }
}

/// One compiled node selector term: every expression and every field must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSelectorTerm {
    /// Requirements on node labels.
    pub match_expressions: Vec<Requirement>,
    /// Requirements on node fields (only `metadata.name` exists).
    pub match_fields: Vec<Requirement>,
}

impl NodeSelectorTerm {
    /// Compiles a term. A term with no requirement matches no node, as upstream has it.
    pub fn compile(term: &api::NodeSelectorTerm, field: &str) -> Result<Self, ModelError> {
        let mut match_expressions = Vec::new();
        for (i, r) in term.match_expressions.iter().flatten().enumerate() {
            match_expressions.push(Requirement::new(
                &r.key,
                &r.operator,
                r.values.as_deref().unwrap_or_default(),
                true,
                &format!("{field}.matchExpressions[{i}]"),
            )?);
        }
        let mut match_fields = Vec::new();
        for (i, r) in term.match_fields.iter().flatten().enumerate() {
            let f = format!("{field}.matchFields[{i}]");
            if r.key != "metadata.name" {
                return Err(ModelError::invalid(
                    &f,
                    &format!(
                        "{:?} is not a supported field; only metadata.name is",
                        r.key
                    ),
                ));
            }
            let values = r.values.as_deref().unwrap_or_default();
            let req = Requirement::new(&r.key, &r.operator, values, false, &f)?;
            if !matches!(req.operator, Operator::In | Operator::NotIn) || req.values.len() != 1 {
                return Err(ModelError::invalid(
                    &f,
                    "metadata.name takes In or NotIn with exactly one value",
                ));
            }
            match_fields.push(req);
        }
        Ok(Self {
            match_expressions,
            match_fields,
        })
    }

    /// Like [`NodeSelectorTerm::compile`], but a term that cannot be compiled (a `Gt` with
    /// a value that is not an integer, say) matches no node, as upstream's node selectors
    /// treat a term with parse errors; the error is returned beside it.
    pub fn compile_lenient(
        term: &api::NodeSelectorTerm,
        field: &str,
    ) -> (Self, Option<ModelError>) {
        match Self::compile(term, field) {
            Ok(t) => (t, None),
            Err(e) => (
                Self {
                    match_expressions: Vec::new(),
                    match_fields: Vec::new(),
                },
                Some(e),
            ),
        }
    }

    /// Whether the node with these labels and this name matches the term.
    pub fn matches(&self, labels: &Labels, node_name: &str) -> bool {
        self.matches_in(labels, node_name)
    }

    /// As [`NodeSelectorTerm::matches`], on any [`LabelLookup`].
    pub fn matches_in<L: LabelLookup + ?Sized>(&self, labels: &L, node_name: &str) -> bool {
        if self.match_expressions.is_empty() && self.match_fields.is_empty() {
            return false;
        }
        self.match_expressions.iter().all(|r| r.matches_in(labels))
            && self
                .match_fields
                .iter()
                .all(|r| r.matches_value(Some(node_name)))
    }

    /// The node names this term pins with `metadata.name In`, if it pins any.
    pub fn pinned_node_names(&self) -> Option<Vec<String>> {
        self.match_fields
            .iter()
            .find(|r| r.operator == Operator::In)
            .map(|r| r.values.clone())
    }
}

/// A compiled `NodeSelector`: the terms are ORed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeSelector {
    /// The terms; a node matches when any term matches.
    pub terms: Vec<NodeSelectorTerm>,
}

impl NodeSelector {
    /// Compiles a selector.
    pub fn compile(selector: &api::NodeSelector, field: &str) -> Result<Self, ModelError> {
        let mut terms = Vec::new();
        for (i, t) in selector.node_selector_terms.iter().enumerate() {
            terms.push(NodeSelectorTerm::compile(
                t,
                &format!("{field}.nodeSelectorTerms[{i}]"),
            )?);
        }
        Ok(Self { terms })
    }

    /// Like [`NodeSelector::compile`], but each term that cannot be compiled matches no
    /// node while the others still apply (upstream's lazy-error node selector); the errors
    /// are returned beside it.
    pub fn compile_lenient(selector: &api::NodeSelector, field: &str) -> (Self, Vec<ModelError>) {
        let mut problems = Vec::new();
        let terms = selector
            .node_selector_terms
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let (term, problem) = NodeSelectorTerm::compile_lenient(
                    t,
                    &format!("{field}.nodeSelectorTerms[{i}]"),
                );
                problems.extend(problem);
                term
            })
            .collect();
        (Self { terms }, problems)
    }

    /// Whether any term matches.
    pub fn matches(&self, labels: &Labels, node_name: &str) -> bool {
        self.matches_in(labels, node_name)
    }

    /// As [`NodeSelector::matches`], on any [`LabelLookup`].
    pub fn matches_in<L: LabelLookup + ?Sized>(&self, labels: &L, node_name: &str) -> bool {
        self.terms.iter().any(|t| t.matches_in(labels, node_name))
    }
}

/// A preferred scheduling term with its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedNodeSelectorTerm {
    /// 1..=100.
    pub weight: i32,
    /// The term.
    pub term: NodeSelectorTerm,
}

/// A pod's hard node constraints: its `nodeSelector` map and its required node affinity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequiredNodeAffinity {
    /// `spec.nodeSelector`, every pair must be on the node.
    pub node_selector: Option<LabelSelector>,
    /// `requiredDuringSchedulingIgnoredDuringExecution`.
    pub required: Option<NodeSelector>,
}

impl RequiredNodeAffinity {
    /// Whether a node with these labels and this name satisfies both parts.
    pub fn matches(&self, labels: &Labels, node_name: &str) -> bool {
        self.matches_in(labels, node_name)
    }

    /// As [`RequiredNodeAffinity::matches`], on any [`LabelLookup`].
    pub fn matches_in<L: LabelLookup + ?Sized>(&self, labels: &L, node_name: &str) -> bool {
        self.node_selector
            .as_ref()
            .is_none_or(|s| s.matches_in(labels))
            && self
                .required
                .as_ref()
                .is_none_or(|s| s.matches_in(labels, node_name))
    }

    /// Whether there is anything to check.
    pub fn is_empty(&self) -> bool {
        self.node_selector.is_none() && self.required.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_labels_answer_as_the_map_does() {
        let map = labels(&[
            ("kubernetes.io/hostname", "n1"),
            ("topology.kubernetes.io/zone", "zone1"),
            ("zone", ""),
            ("a", "é"),
            ("ab", "x"),
        ]);
        let flat = FlatLabels::new(&map);
        for key in [
            "kubernetes.io/hostname",
            "topology.kubernetes.io/zone",
            "topology.kubernetes.io/zonf",
            "zone",
            "a",
            "ab",
            "b",
            "",
        ] {
            assert_eq!(flat.label(key), map.label(key), "{key}");
        }
        assert_eq!(FlatLabels::new(&Labels::new()).label("a"), None);
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, op: &str, values: &[&str]) -> Requirement {
        let values: Vec<String> = values.iter().map(|s| s.to_string()).collect();
        Requirement::new(key, op, &values, true, "test").unwrap()
    }

    #[test]
    fn operators() {
        let l = labels(&[("zone", "a"), ("gen", "5")]);
        let cases = [
            (req("zone", "In", &["a", "b"]), true),
            (req("zone", "In", &["b"]), false),
            (req("zone", "NotIn", &["b"]), true),
            (req("missing", "NotIn", &["b"]), true),
            (req("zone", "Exists", &[]), true),
            (req("missing", "DoesNotExist", &[]), true),
            (req("gen", "Gt", &["4"]), true),
            (req("gen", "Gt", &["5"]), false),
            (req("gen", "Lt", &["6"]), true),
            (req("zone", "Lt", &["6"]), false),
            (req("missing", "Gt", &["0"]), false),
        ];
        for (r, want) in cases {
            assert_eq!(r.matches(&l), want, "{r:?}");
        }
    }

    #[test]
    fn operator_rules_are_checked() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(Requirement::new("k", "In", &[], false, "f").is_err());
        assert!(Requirement::new("k", "Exists", &v(&["x"]), false, "f").is_err());
        assert!(Requirement::new("k", "Gt", &v(&["x"]), true, "f").is_err());
        assert!(Requirement::new("k", "Gt", &v(&["1"]), false, "f").is_err());
        assert!(Requirement::new("k", "Bogus", &[], true, "f").is_err());
        let err = Requirement::new("", "Exists", &[], true, "spec.x").unwrap_err();
        assert!(err.to_string().contains("spec.x"), "{err}");
    }

    #[test]
    fn nil_and_empty_selectors() {
        let l = labels(&[("a", "b")]);
        assert!(!LabelSelector::compile(None, "f").unwrap().matches(&l));
        let empty = meta::LabelSelector::default();
        assert!(
            LabelSelector::compile(Some(&empty), "f")
                .unwrap()
                .matches(&l)
        );
    }

    #[test]
    fn empty_node_selector_term_matches_nothing() {
        let term = NodeSelectorTerm::compile(&api::NodeSelectorTerm::default(), "t").unwrap();
        assert!(!term.matches(&labels(&[]), "n1"));
    }

    fn gt_requirement(value: &str) -> api::NodeSelectorRequirement {
        api::NodeSelectorRequirement {
            key: "gen".into(),
            operator: "Gt".into(),
            values: Some(vec![value.into()]),
        }
    }

    #[test]
    fn a_term_that_cannot_compile_matches_nothing_and_the_others_still_apply() {
        let selector = api::NodeSelector {
            node_selector_terms: vec![
                api::NodeSelectorTerm {
                    match_expressions: Some(vec![gt_requirement("four")]),
                    ..Default::default()
                },
                api::NodeSelectorTerm {
                    match_expressions: Some(vec![gt_requirement("4")]),
                    ..Default::default()
                },
            ],
        };
        let (compiled, problems) = NodeSelector::compile_lenient(&selector, "spec.x");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(
            problems[0].field,
            "spec.x.nodeSelectorTerms[0].matchExpressions[0]"
        );
        assert!(compiled.matches(&labels(&[("gen", "5")]), "n1"));
        assert!(!compiled.matches(&labels(&[("gen", "3")]), "n1"));
        // Alone, the bad term matches no node at all.
        let (only_bad, _) =
            NodeSelectorTerm::compile_lenient(&selector.node_selector_terms[0], "t");
        assert!(!only_bad.matches(&labels(&[("gen", "5")]), "n1"));
        assert!(!only_bad.matches(&labels(&[]), "n1"));
    }

    #[test]
    fn a_label_selector_that_cannot_compile_selects_nothing() {
        let bad = meta::LabelSelector {
            match_expressions: Some(vec![meta::LabelSelectorRequirement {
                key: "app".into(),
                operator: "In".into(),
                values: Some(vec![]),
            }]),
            ..Default::default()
        };
        let (compiled, problem) = LabelSelector::compile_lenient(Some(&bad), "spec.sel");
        assert!(!compiled.matches(&labels(&[("app", "x")])));
        assert!(!compiled.matches(&labels(&[])));
        let problem = problem.expect("a problem");
        assert_eq!(problem.field, "spec.sel.matchExpressions[0]");
        let (good, none) = LabelSelector::compile_lenient(None, "f");
        assert!(none.is_none());
        assert!(!good.matches(&labels(&[])));
    }

    #[test]
    fn match_fields_on_name() {
        let term = api::NodeSelectorTerm {
            match_fields: Some(vec![api::NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec!["n1".into()]),
            }]),
            ..Default::default()
        };
        let term = NodeSelectorTerm::compile(&term, "t").unwrap();
        assert!(term.matches(&labels(&[]), "n1"));
        assert!(!term.matches(&labels(&[]), "n2"));
        assert_eq!(term.pinned_node_names(), Some(vec!["n1".to_string()]));
    }
}
