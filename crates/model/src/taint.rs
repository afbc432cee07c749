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

/// A pod toleration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toleration {
    /// Key; empty with `Exists` tolerates every key.
    pub key: String,
    /// True for `Exists`, false for `Equal` (the default).
    pub exists: bool,
    /// Value compared under `Equal`.
    pub value: String,
    /// Effect tolerated; None tolerates all effects.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// Compiles an API toleration.
    pub fn compile(t: &api::Toleration, field: &str) -> Result<Self, ModelError> {
        let exists = match t.operator.as_deref() {
            None | Some("") | Some("Equal") => false,
            Some("Exists") => true,
            Some(other) => {
                return Err(ModelError::invalid(
                    &format!("{field}.operator"),
                    &format!("{other:?} is not Equal or Exists"),
                ));
            }
        };
        let effect = match t.effect.as_deref() {
            None | Some("") => None,
            Some(e) => Some(TaintEffect::parse(e, &format!("{field}.effect"))?),
        };
        Ok(Self {
            key: t.key.clone().unwrap_or_default(),
            exists,
            value: t.value.clone().unwrap_or_default(),
            effect,
        })
    }

    /// Whether this toleration tolerates the taint.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        if self.exists {
            return true;
        }
        // Equal with an empty key only matches a taint whose key is empty too.
        self.key == taint.key && self.value == taint.value
    }
}

/// Whether any toleration tolerates the taint.
pub fn tolerated(taint: &Taint, tolerations: &[Toleration]) -> bool {
    tolerations.iter().any(|t| t.tolerates(taint))
}

/// The first taint with one of the effects that no toleration tolerates.
pub fn find_untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    effects: &[TaintEffect],
) -> Option<&'a Taint> {
    taints
        .iter()
        .find(|t| effects.contains(&t.effect) && !tolerated(t, tolerations))
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
            exists,
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
