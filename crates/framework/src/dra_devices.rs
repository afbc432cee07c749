//! What DynamicResources tells NodeResourcesFit, within one scheduling cycle, about the
//! pod's extended resources backed by DRA (`DRAExtendedResource`): per node, how many
//! devices of the providing DeviceClass the node can use and how many of those other
//! claims hold. v1.37's NodeResourcesFit scores such a resource (when
//! `scoringStrategy.resources` names it) from these numbers instead of the node's
//! allocatable, which does not advertise it. DynamicResources writes the record at
//! PreFilter and fills it in Filter; NodeResourcesFit reads it at Score.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use parking_lot::Mutex;

/// One extended resource on one node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceTally {
    /// Devices on the node the class selects (the resource's allocatable).
    pub allocatable: i64,
    /// Of those, the ones allocated to claims (the resource's requested, before the pod).
    pub allocated: i64,
}

/// Per node, per extended resource: the devices DRA has for it. Cloning shares the record
/// (a preemption dry run's copy of the cycle state sees the same numbers).
#[derive(Debug, Clone, Default)]
pub struct DraExtendedDevices(Arc<Mutex<HashMap<String, BTreeMap<String, DeviceTally>>>>);

impl DraExtendedDevices {
    /// Records the tally of `resource` on `node` (replacing an earlier one).
    pub fn record(&self, node: &str, resource: &str, tally: DeviceTally) {
        self.0
            .lock()
            .entry(node.to_string())
            .or_default()
            .insert(resource.to_string(), tally);
    }

    /// The tally of `resource` on `node`, when Filter recorded one.
    pub fn get(&self, node: &str, resource: &str) -> Option<DeviceTally> {
        self.0
            .lock()
            .get(node)
            .and_then(|r| r.get(resource))
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_shared_by_clones() {
        let record = DraExtendedDevices::default();
        let copy = record.clone();
        let tally = DeviceTally {
            allocatable: 4,
            allocated: 1,
        };
        record.record("n1", "example.com/gpu", tally);
        assert_eq!(copy.get("n1", "example.com/gpu"), Some(tally));
        assert_eq!(copy.get("n2", "example.com/gpu"), None);
        assert_eq!(copy.get("n1", "example.com/fpga"), None);
    }
}
