//! Consumable capacity (KEP-5075, DRAConsumableCapacity): what a request takes from a
//! device's capacity once the capacity's `requestPolicy` has rounded it, as v1.37's
//! allocator computes it with DRAFractionalCapacityRange off (whole-unit arithmetic,
//! each value rounded up to a unit first, as a quantity's `Value()` does).

use std::collections::BTreeMap;

use crate::slices::{Amount, DeviceCapacity, RequestPolicy};

const NANOS: i128 = 1_000_000_000;

/// A value in whole units, rounded up.
fn units(nanos: i128) -> i128 {
    nanos.div_euclid(NANOS) + i128::from(nanos.rem_euclid(NANOS) != 0)
}

/// What `requested` (None: the request does not name the capacity) consumes of `cap`:
/// the policy's default or everything when unnamed, else the request rounded up to the
/// valid range's next step or the next valid value.
pub fn consumed(requested: Option<&Amount>, cap: &DeviceCapacity) -> Amount {
    let Some(requested) = requested else {
        return cap
            .policy
            .as_ref()
            .and_then(|p| p.default.clone())
            .unwrap_or_else(|| cap.value.clone());
    };
    let Some(policy) = &cap.policy else {
        return requested.clone();
    };
    if let Some((min, _, step)) = &policy.range {
        if requested.nanos < min.nanos {
            return min.clone();
        }
        let Some(step) = step else {
            return requested.clone();
        };
        let (req, step_u, min_u) = (units(requested.nanos), units(step.nanos), units(min.nanos));
        if step_u <= 0 {
            return requested.clone();
        }
        let added = req - min_u;
        let n = added / step_u + i128::from(added % step_u != 0);
        let value = (min_u + step_u * n) * NANOS;
        return Amount {
            text: canonical(value, is_binary(&step.text)),
            nanos: value,
        };
    }
    if let Some(values) = &policy.valid_values {
        return values
            .iter()
            .find(|v| requested.nanos <= v.nanos)
            .cloned()
            .unwrap_or_else(|| requested.clone());
    }
    requested.clone()
}

/// Whether a consumed amount breaks the policy: above the range's max, off its steps, or
/// not one of the valid values (the default always passes).
pub fn violates(consumed: &Amount, policy: Option<&RequestPolicy>) -> bool {
    let Some(policy) = policy else {
        return false;
    };
    if policy
        .default
        .as_ref()
        .is_some_and(|d| d.nanos == consumed.nanos)
    {
        return false;
    }
    if let Some((min, max, step)) = &policy.range {
        if max.as_ref().is_some_and(|m| consumed.nanos > m.nanos) {
            return true;
        }
        if let Some(step) = step {
            let step_u = units(step.nanos);
            if step_u > 0 && (units(consumed.nanos) - units(min.nanos)) % step_u != 0 {
                return true;
            }
        }
        return false;
    }
    if let Some(values) = policy.valid_values.as_ref().filter(|v| !v.is_empty()) {
        return !values.iter().any(|v| v.nanos == consumed.nanos);
    }
    false
}

/// What a request consumes of each of a device's capacities, or None when it names a
/// capacity the device does not have, breaks a policy, or the device's total (with what
/// `used` already takes) would be exceeded.
pub fn fits(
    requests: Option<&BTreeMap<String, Amount>>,
    capacity: &[DeviceCapacity],
    used: &dyn Fn(&str) -> i128,
) -> Option<BTreeMap<String, Amount>> {
    if let Some(r) = requests
        && r.keys()
            .any(|name| !capacity.iter().any(|c| &c.name == name))
    {
        return None;
    }
    let mut out = BTreeMap::new();
    for cap in capacity {
        let requested = requests.and_then(|r| r.get(&cap.name));
        let take = consumed(requested, cap);
        if violates(&take, cap.policy.as_ref()) {
            return None;
        }
        if used(&cap.name) + take.nanos > cap.value.nanos {
            return None;
        }
        out.insert(cap.name.clone(), take);
    }
    Some(out)
}

/// Whether a quantity is written with a binary suffix (its format is BinarySI).
fn is_binary(text: &str) -> bool {
    ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
        .iter()
        .any(|s| text.trim().ends_with(s))
}

/// A quantity's canonical text (as Go's `Quantity.String()` writes one it computed):
/// the largest power-of-1024 suffix that divides it exactly for binary ones of at least
/// 1024, else the largest power-of-1000 suffix (down to milli and nano units).
pub fn canonical(nanos: i128, binary: bool) -> String {
    if binary && nanos % NANOS == 0 && (nanos / NANOS).abs() >= 1024 {
        let mut v = nanos / NANOS;
        let mut i = 0;
        let suffixes = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
        while i + 1 < suffixes.len() && v % 1024 == 0 {
            v /= 1024;
            i += 1;
        }
        return format!("{v}{}", suffixes[i]);
    }
    if nanos == 0 {
        return "0".into();
    }
    let suffixes: [(&str, i128); 9] = [
        ("E", NANOS * 1_000_000_000_000_000_000),
        ("P", NANOS * 1_000_000_000_000_000),
        ("T", NANOS * 1_000_000_000_000),
        ("G", NANOS * 1_000_000_000),
        ("M", NANOS * 1_000_000),
        ("k", NANOS * 1_000),
        ("", NANOS),
        ("m", 1_000_000),
        ("u", 1_000),
    ];
    for (suffix, scale) in suffixes {
        if nanos % scale == 0 {
            return format!("{}{suffix}", nanos / scale);
        }
    }
    format!("{nanos}n")
}

/// A share's ID: a version-4-shaped UUID derived from what it is for, so simulations stay
/// deterministic (upstream draws a random one).
pub fn share_id(seed: &str) -> String {
    use std::hash::{Hash, Hasher};
    let half = |salt: u64| {
        let mut h = rustc_hash::FxHasher::default();
        salt.hash(&mut h);
        seed.hash(&mut h);
        h.finish()
    };
    let (a, b) = (half(0x5eed_0001), half(0x5eed_0002));
    let v = (u128::from(a) << 64) | u128::from(b);
    // Version 4, variant 10xx.
    let v = (v & !(0xf << 76)) | (0x4 << 76);
    let v = (v & !(0x3 << 62)) | (0x2 << 62);
    let hex = format!("{v:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amount(text: &str) -> Amount {
        Amount {
            text: text.into(),
            nanos: kubesched_framework::model::Quantity::parse(text)
                .expect("quantity")
                .nanos(),
        }
    }

    fn cap(value: &str, policy: Option<RequestPolicy>) -> DeviceCapacity {
        DeviceCapacity {
            name: "memory".into(),
            value: amount(value),
            policy,
        }
    }

    fn range(min: &str, max: Option<&str>, step: Option<&str>) -> Option<RequestPolicy> {
        Some(RequestPolicy {
            default: Some(amount(min)),
            range: Some((amount(min), max.map(amount), step.map(amount))),
            valid_values: None,
        })
    }

    #[test]
    fn requests_round_up_to_the_policy() {
        let stepped = cap("40Gi", range("1Gi", Some("10Gi"), Some("2Gi")));
        let rows = [
            (None, "1Gi", "unnamed: the default"),
            (Some("500Mi"), "1Gi", "below min: min"),
            (Some("1Gi"), "1Gi", "on a step"),
            (Some("2Gi"), "3Gi", "up to the next step from min"),
            (Some("3500Mi"), "5Gi", "up to the next step"),
        ];
        for (req, want, name) in rows {
            let got = consumed(req.map(amount).as_ref(), &stepped);
            assert_eq!(got.nanos, amount(want).nanos, "{name}");
            assert_eq!(got.text, want, "{name}: written as upstream writes it");
        }
        let plain = cap("40Gi", None);
        assert_eq!(consumed(None, &plain).text, "40Gi", "no policy: all of it");
        let listed = cap(
            "100",
            Some(RequestPolicy {
                default: None,
                range: None,
                valid_values: Some(vec![amount("10"), amount("50")]),
            }),
        );
        assert_eq!(consumed(Some(&amount("20")), &listed).text, "50");
        assert_eq!(consumed(Some(&amount("60")), &listed).text, "60");
        assert!(violates(&amount("60"), listed.policy.as_ref()));
        assert!(
            violates(&amount("12Gi"), stepped.policy.as_ref()),
            "above max"
        );
        assert!(!violates(&amount("9Gi"), stepped.policy.as_ref()));
    }

    #[test]
    fn canonical_text() {
        let gi = 1024_i128.pow(3) * NANOS;
        assert_eq!(canonical(3 * gi, true), "3Gi");
        assert_eq!(canonical(1536 * NANOS, true), "1536");
        assert_eq!(canonical(2000 * NANOS, false), "2k");
        assert_eq!(canonical(1500 * NANOS, false), "1500");
        assert_eq!(canonical(NANOS / 2, false), "500m");
    }

    #[test]
    fn share_ids_are_stable_uuids() {
        let a = share_id("uid-c/gpu/gpu.example.com/n1/nic-0/0");
        assert_eq!(a, share_id("uid-c/gpu/gpu.example.com/n1/nic-0/0"));
        assert_ne!(a, share_id("uid-d/gpu/gpu.example.com/n1/nic-0/0"));
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }
}
