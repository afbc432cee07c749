//! Taints and tolerations, with upstream's matching rules.

use k8s_openapi::api::core::v1 as api;

use crate::ModelError;

/// What a taint does to pods that do not tolerate it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum TaintEffect {
    /// New pods are not scheduled.
    NoSchedule,
    /// The scheduler avoids the node.
    PreferNoSchedule,
    /// New pods are not scheduled and running ones are evicted.
    NoExecute,
}

impl TaintEffect {
    /// Parses the API string.
    pub fn parse(s: &str, field: &str) -> Result<Self, ModelError> {
        match s {
            "NoSchedule" => Ok(Self::NoSchedule),
            "PreferNoSchedule" => Ok(Self::PreferNoSchedule),
            "NoExecute" => Ok(Self::NoExecute),
            other => Err(ModelError::invalid(
                field,
                &format!("{other:?} is not a taint effect"),
            )),
        }
    }

    /// The API string.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::NoSchedule => "NoSchedule",
            Self::PreferNoSchedule => "PreferNoSchedule",
            Self::NoExecute => "NoExecute",
        }
    }
}

/// A node taint.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Taint {
    /// Key.
    pub key: String,
    /// Value (may be empty).
    pub value: String,
    /// Effect.
    pub effect: TaintEffect,
}

impl Taint {
    /// Compiles an API taint.
    pub fn compile(t: &api::Taint, field: &str) -> Result<Self, ModelError> {
        Ok(Self {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
            effect: TaintEffect::parse(&t.effect, &format!("{field}.effect"))?,
        })
    }
}

/// How a toleration compares its value with a taint's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TolerationOperator {
    /// The values are equal (the default when no operator is given).
    Equal,
    /// Any value.
    Exists,
    /// Both values are integers and the taint's is less than the toleration's
    /// (upstream v1.35+, behind TaintTolerationComparisonOperators).
    Lt,
    /// Both values are integers and the taint's is greater than the toleration's
    /// (upstream v1.35+, behind TaintTolerationComparisonOperators).
    Gt,
}

/// A pod toleration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toleration {
    /// Key; empty with `Exists` tolerates every key.
    pub key: String,
    /// How the value is compared.
    pub operator: TolerationOperator,
    /// Value compared under `Equal`, `Lt` and `Gt`.
    pub value: String,
    /// Effect tolerated; None tolerates all effects.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// Compiles an API toleration.
    pub fn compile(t: &api::Toleration, field: &str) -> Result<Self, ModelError> {
        let operator = match t.operator.as_deref() {
            None | Some("") | Some("Equal") => TolerationOperator::Equal,
            Some("Exists") => TolerationOperator::Exists,
            Some("Lt") => TolerationOperator::Lt,
            Some("Gt") => TolerationOperator::Gt,
            Some(other) => {
                return Err(ModelError::invalid(
                    &format!("{field}.operator"),
                    &format!("{other:?} is not Equal, Exists, Lt or Gt"),
                ));
            }
        };
        let effect = match t.effect.as_deref() {
            None | Some("") => None,
            Some(e) => Some(TaintEffect::parse(e, &format!("{field}.effect"))?),
        };
        Ok(Self {
            key: t.key.clone().unwrap_or_default(),
            operator,
            value: t.value.clone().unwrap_or_default(),
            effect,
        })
    }

    /// Whether this toleration tolerates the taint, with `Lt` / `Gt` never tolerating
    /// (TaintTolerationComparisonOperators off, its default through v1.37).
    pub fn tolerates(&self, taint: &Taint) -> bool {
        self.tolerates_with(taint, false)
    }

    /// Whether this toleration tolerates the taint; `comparisons` says whether `Lt` and
    /// `Gt` compare (the gate on) or tolerate nothing (off).
    pub fn tolerates_with(&self, taint: &Taint, comparisons: bool) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match self.operator {
            TolerationOperator::Exists => true,
            // Equal with an empty key only matches a taint whose key is empty too.
            TolerationOperator::Equal => self.key == taint.key && self.value == taint.value,
            TolerationOperator::Lt | TolerationOperator::Gt if comparisons => {
                // Both sides must be base-10 64-bit integers; anything else tolerates
                // nothing (upstream logs the parse error and answers no).
                let (Ok(mine), Ok(theirs)) =
                    (self.value.parse::<i64>(), taint.value.parse::<i64>())
                else {
                    return false;
                };
                if self.operator == TolerationOperator::Lt {
                    theirs < mine
                } else {
                    theirs > mine
                }
            }
            TolerationOperator::Lt | TolerationOperator::Gt => false,
        }
    }
}

/// Whether any toleration tolerates the taint (`Lt` / `Gt` off).
pub fn tolerated(taint: &Taint, tolerations: &[Toleration]) -> bool {
    tolerated_with(taint, tolerations, false)
}

/// Whether any toleration tolerates the taint, `Lt` / `Gt` comparing when `comparisons`.
pub fn tolerated_with(taint: &Taint, tolerations: &[Toleration], comparisons: bool) -> bool {
    tolerations
        .iter()
        .any(|t| t.tolerates_with(taint, comparisons))
}

/// The first taint with one of the effects that no toleration tolerates (`Lt` / `Gt` off).
pub fn find_untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    effects: &[TaintEffect],
) -> Option<&'a Taint> {
    find_untolerated_with(taints, tolerations, effects, false)
}

/// The first taint with one of the effects that no toleration tolerates, `Lt` / `Gt`
/// comparing when `comparisons`.
pub fn find_untolerated_with<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    effects: &[TaintEffect],
    comparisons: bool,
) -> Option<&'a Taint> {
    taints
        .iter()
        .find(|t| effects.contains(&t.effect) && !tolerated_with(t, tolerations, comparisons))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
        Taint {
            key: key.into(),
            value: value.into(),
            effect,
        }
    }

    fn tol(key: &str, exists: bool, value: &str, effect: Option<TaintEffect>) -> Toleration {
        Toleration {
            key: key.into(),
            operator: if exists {
                TolerationOperator::Exists
            } else {
                TolerationOperator::Equal
            },
            value: value.into(),
            effect,
        }
    }

    #[test]
    fn matching_rules() {
        use TaintEffect::*;
        let t = taint("gpu", "true", NoSchedule);
        let cases = [
            (tol("gpu", false, "true", Some(NoSchedule)), true),
            (tol("gpu", false, "false", Some(NoSchedule)), false),
            (tol("gpu", false, "true", Some(NoExecute)), false),
            (tol("gpu", false, "true", None), true),
            (tol("gpu", true, "", None), true),
            (tol("", true, "", None), true),
            (tol("", true, "", Some(PreferNoSchedule)), false),
            (tol("other", true, "", None), false),
            (tol("", false, "", None), false),
        ];
        for (toleration, want) in cases {
            assert_eq!(toleration.tolerates(&t), want, "{toleration:?}");
        }
    }

    #[test]
    fn numeric_operators_compare_integers_when_enabled() {
        use TaintEffect::*;
        let cmp = |op: TolerationOperator, value: &str| Toleration {
            key: "capacity".into(),
            operator: op,
            value: value.into(),
            effect: None,
        };
        use TolerationOperator::{Gt, Lt};
        // (toleration, taint value, tolerated with the gate on)
        let cases = [
            (cmp(Gt, "5"), "10", true),
            (cmp(Gt, "10"), "10", false),
            (cmp(Gt, "10"), "5", false),
            (cmp(Lt, "10"), "5", true),
            (cmp(Lt, "5"), "5", false),
            (cmp(Lt, "0"), "-3", true),
            (cmp(Gt, "-5"), "-3", true),
            (cmp(Gt, "5"), "ten", false),
            (cmp(Gt, "five"), "10", false),
            (cmp(Gt, "5"), "", false),
            (cmp(Lt, "5"), "1.5", false),
        ];
        for (toleration, value, want) in cases {
            let t = taint("capacity", value, NoSchedule);
            assert_eq!(
                toleration.tolerates_with(&t, true),
                want,
                "{toleration:?} vs {value:?}"
            );
            // Off (v1.34 had no such operators; alpha and off through v1.37): never.
            assert!(!toleration.tolerates(&t), "{toleration:?} vs {value:?}");
        }
        // The key still has to match.
        let other = taint("other", "10", NoSchedule);
        assert!(!cmp(Gt, "5").tolerates_with(&other, true));
        let api = api::Toleration {
            key: Some("capacity".into()),
            operator: Some("Gt".into()),
            value: Some("5".into()),
            ..Default::default()
        };
        assert_eq!(
            Toleration::compile(&api, "spec.tolerations[0]")
                .expect("valid")
                .operator,
            Gt
        );
    }

    #[test]
    fn finds_first_untolerated_with_effect() {
        use TaintEffect::*;
        let taints = [
            taint("a", "", PreferNoSchedule),
            taint("b", "x", NoSchedule),
        ];
        let found = find_untolerated(&taints, &[], &[NoSchedule, NoExecute]);
        assert_eq!(found.map(|t| t.key.as_str()), Some("b"));
        let tols = [tol("b", true, "", None)];
        assert!(find_untolerated(&taints, &tols, &[NoSchedule, NoExecute]).is_none());
    }
}
