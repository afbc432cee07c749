//! Well-known topology labels and the node's failure domain read from them.

use crate::selector::Labels;

/// `topology.kubernetes.io/region`.
pub const LABEL_REGION: &str = "topology.kubernetes.io/region";
/// `topology.kubernetes.io/zone`.
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
/// The deprecated region label, still read when the GA one is absent.
pub const LABEL_REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";
/// The deprecated zone label, still read when the GA one is absent.
pub const LABEL_ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";

/// The node's failure domain as (region, zone), each from its GA label or else its
/// deprecated beta label ("" when neither is set); None when the node has neither a
/// region nor a zone.
pub fn region_and_zone(labels: &Labels) -> Option<(&str, &str)> {
    let get = |ga: &str, beta: &str| {
        labels
            .get(ga)
            .or_else(|| labels.get(beta))
            .map_or("", String::as_str)
    };
    let region = get(LABEL_REGION, LABEL_REGION_BETA);
    let zone = get(LABEL_ZONE, LABEL_ZONE_BETA);
    (!region.is_empty() || !zone.is_empty()).then_some((region, zone))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn ga_labels_win_and_beta_labels_fill_in() {
        let l = labels(&[
            (LABEL_ZONE, "z1"),
            (LABEL_ZONE_BETA, "old"),
            (LABEL_REGION_BETA, "r1"),
        ]);
        assert_eq!(region_and_zone(&l), Some(("r1", "z1")));
        assert_eq!(
            region_and_zone(&labels(&[(LABEL_REGION, "r")])),
            Some(("r", ""))
        );
        assert_eq!(region_and_zone(&labels(&[("other", "x")])), None);
        assert_eq!(region_and_zone(&labels(&[(LABEL_ZONE, "")])), None);
    }
}
