//! Scheduling errors that repeat, logged without flooding: an extender that is down fails
//! every attempt of every pod with the same message, and a warning a retry would bury what
//! else happened. The first occurrence of a message is a warning, then the 10th, 100th,
//! 1,000th… with the count; the others go to debug. Events and pod conditions still carry
//! every failure, as upstream writes them.

use std::collections::HashMap;

use parking_lot::Mutex;

/// Messages remembered at most; past it the counts start again (a bound, not a policy).
const MAX_MESSAGES: usize = 1024;

/// Counts of error messages seen.
#[derive(Debug, Default)]
pub(crate) struct RepeatedErrors {
    counts: Mutex<HashMap<String, u64>>,
}

impl RepeatedErrors {
    /// Counts `message` once more; `Some(count)` when this occurrence is to be a warning.
    pub(crate) fn note(&self, message: &str) -> Option<u64> {
        let mut counts = self.counts.lock();
        if counts.len() >= MAX_MESSAGES && !counts.contains_key(message) {
            counts.clear();
        }
        let count = counts.entry(message.to_string()).or_insert(0);
        *count += 1;
        is_power_of_ten(*count).then_some(*count)
    }
}

fn is_power_of_ten(mut n: u64) -> bool {
    while n >= 10 && n.is_multiple_of(10) {
        n /= 10;
    }
    n == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_and_every_power_of_ten_are_warnings() {
        let repeated = RepeatedErrors::default();
        let warned: Vec<u64> = (0..1000)
            .filter_map(|_| repeated.note("Post \"http://127.0.0.1:9/filter\": refused"))
            .collect();
        assert_eq!(warned, [1, 10, 100, 1000]);
        assert_eq!(repeated.note("another message"), Some(1));
    }

    #[test]
    fn memory_stays_bounded() {
        let repeated = RepeatedErrors::default();
        for i in 0..(MAX_MESSAGES * 3) {
            repeated.note(&format!("message {i}"));
        }
        assert!(repeated.counts.lock().len() <= MAX_MESSAGES);
    }
}
