//! Score normalisation helpers shared by Score plugins.

/// Rescales raw scores from `0..=max(scores)` to `0..=max_priority`, as upstream's
/// `DefaultNormalizeScore` does; with `reverse`, a score `s` becomes `max_priority - s`
/// afterwards (so the smallest raw score wins).
///
/// Raw scores are expected to be non-negative. When every score is 0, the scores stay 0,
/// or all become `max_priority` when reversed.
pub fn default_normalize_score(max_priority: i64, reverse: bool, scores: &mut [i64]) {
    let max = scores.iter().copied().fold(0, i64::max);
    if max == 0 {
        if reverse {
            scores.fill(max_priority);
        }
        return;
    }
    for score in scores.iter_mut() {
        // Integer division truncates, exactly as upstream's arithmetic does.
        let scaled = max_priority * *score / max;
        *score = if reverse {
            max_priority - scaled
        } else {
            scaled
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_NODE_SCORE;

    fn check(reverse: bool, raw: &[i64], want: &[i64]) {
        let mut scores = raw.to_vec();
        default_normalize_score(MAX_NODE_SCORE, reverse, &mut scores);
        assert_eq!(scores, want, "reverse={reverse} raw={raw:?}");
    }

    #[test]
    fn table() {
        check(false, &[], &[]);
        check(false, &[0, 0, 0], &[0, 0, 0]);
        check(true, &[0, 0, 0], &[100, 100, 100]);
        check(false, &[1, 2, 3, 4, 5], &[20, 40, 60, 80, 100]);
        check(true, &[1, 2, 3, 4, 5], &[80, 60, 40, 20, 0]);
        check(false, &[1000, 10, 20, 30, 40, 50], &[100, 1, 2, 3, 4, 5]);
        check(true, &[1000, 10, 20, 30, 40, 50], &[0, 99, 98, 97, 96, 95]);
        // Truncation: 100 * 1 / 3 = 33.
        check(false, &[1, 3], &[33, 100]);
        check(true, &[1, 3], &[67, 0]);
    }
}
