//! StorageCapacityScoring: a node's score from how full the storage the pod's volumes would
//! use there is, per storage class, through the configured utilization shape (upstream's
//! `buildScorerFunction` over `helper.BuildBrokenLinearFunction`).

use std::collections::BTreeMap;

use kubesched_framework::MAX_NODE_SCORE;

use crate::args::{MAX_SHAPE_SCORE, UtilizationShapePoint};

/// Upstream's `maxUtilization`.
const MAX_UTILIZATION: i64 = 100;

/// Requested and available storage of one class on one node (nano units).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ClassStorage {
    /// What the pod's claims of the class ask for.
    pub requested: i128,
    /// What the volumes or pools they would use hold.
    pub capacity: i128,
}

/// The scoring function built from a validated shape.
#[derive(Debug, Clone)]
pub struct Scorer {
    /// `(utilization, score)` with scores scaled to `0..=MAX_NODE_SCORE`.
    points: Vec<(i64, i64)>,
}

impl Scorer {
    /// Scales the shape's scores (0..=10) to node scores (0..=100), as upstream does.
    pub fn new(shape: &[UtilizationShapePoint]) -> Self {
        let scale = MAX_NODE_SCORE / i64::from(MAX_SHAPE_SCORE);
        Self {
            points: shape
                .iter()
                .map(|p| (i64::from(p.utilization), i64::from(p.score) * scale))
                .collect(),
        }
    }

    /// The shape at utilization `p`: flat before the first point and after the last,
    /// linear in between (integer division, as upstream).
    fn at(&self, p: i64) -> i64 {
        let Some(last) = self.points.last() else {
            return 0;
        };
        for (i, &(u, s)) in self.points.iter().enumerate() {
            if p <= u {
                if i == 0 {
                    return s;
                }
                let (u0, s0) = self.points[i - 1];
                return s0 + (s - s0) * (p - u0) / (u - u0);
            }
        }
        last.1
    }

    /// One class: utilization `requested * 100 / capacity`, full when nothing is known
    /// or the request does not fit.
    fn class_score(&self, c: ClassStorage) -> i64 {
        if c.capacity == 0 || c.requested > c.capacity {
            return self.at(MAX_UTILIZATION);
        }
        let utilization = c.requested * i128::from(MAX_UTILIZATION) / c.capacity;
        self.at(i64::try_from(utilization).unwrap_or(MAX_UTILIZATION))
    }

    /// The node's score: the classes' scores averaged (all classes weigh the same),
    /// rounded half away from zero; 0 without classes.
    pub fn score(&self, classes: &BTreeMap<&str, ClassStorage>) -> i64 {
        if classes.is_empty() {
            return 0;
        }
        let sum: i64 = classes.values().map(|&c| self.class_score(c)).sum();
        let n = classes.len() as i64;
        // Round half away from zero on non-negative values.
        (2 * sum + n) / (2 * n)
    }
}
