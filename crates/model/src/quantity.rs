//! Exact parsing of Kubernetes resource quantities (`500m`, `1.5Gi`, `2e3`, `128974848`).
//!
//! A quantity is kept as a count of nano-units in an `i128`, which holds every value the
//! API server accepts (up to `8Ei` and down to `1n`) exactly. Conversions to whole units and
//! milli-units round up, as upstream's `Value()` and `MilliValue()` do.

use std::fmt;

/// A parsed quantity, exact to the nano-unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Quantity {
    nanos: i128,
}

/// Why a quantity string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string is empty.
    #[error("quantity is empty")]
    Empty,
    /// The string does not follow the quantity grammar.
    #[error("quantity {0:?} is not a number with an optional suffix")]
    Syntax(String),
    /// The suffix is not one Kubernetes knows.
    #[error("quantity {0:?} has an unknown suffix")]
    Suffix(String),
    /// The value is outside what a quantity can hold.
    #[error("quantity {0:?} is out of range")]
    Range(String),
}

const NANOS_PER_UNIT: i128 = 1_000_000_000;
/// Largest magnitude we accept, in nano-units: well above `8Ei` (about 9.2e27 nanos).
const MAX_NANOS: i128 = 1_000_000_000_000_000_000_000_000_000_000_000; // 1e33

impl Quantity {
    /// A quantity of `value` whole units.
    pub fn from_units(value: i64) -> Self {
        Self {
            nanos: i128::from(value) * NANOS_PER_UNIT,
        }
    }

    /// A quantity of `value` milli-units.
    pub fn from_milli(value: i64) -> Self {
        Self {
            nanos: i128::from(value) * 1_000_000,
        }
    }

    /// Parses the canonical or any accepted form of a quantity.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        parse(text)
    }

    /// The value in whole units, rounded up (away from zero for positives), saturating.
    pub fn value(&self) -> i64 {
        saturate(div_ceil(self.nanos, NANOS_PER_UNIT))
    }

    /// The value in milli-units, rounded up, saturating.
    pub fn milli_value(&self) -> i64 {
        saturate(div_ceil(self.nanos, 1_000_000))
    }

    /// The exact value in nano-units.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos % NANOS_PER_UNIT == 0 {
            write!(f, "{}", self.nanos / NANOS_PER_UNIT)
        } else if self.nanos % 1_000_000 == 0 {
            write!(f, "{}m", self.nanos / 1_000_000)
        } else {
            write!(f, "{}n", self.nanos)
        }
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}

fn saturate(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

fn div_ceil(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 && a > 0 { q + 1 } else { q }
}

/// Multiplier of a suffix as `(numerator, power of ten)`: value × numerator × 10^power.
fn suffix_multiplier(suffix: &str) -> Option<(i128, i32)> {
    Some(match suffix {
        "" => (1, 0),
        "n" => (1, -9),
        "u" => (1, -6),
        "m" => (1, -3),
        "k" => (1, 3),
        "M" => (1, 6),
        "G" => (1, 9),
        "T" => (1, 12),
        "P" => (1, 15),
        "E" => (1, 18),
        "Ki" => (1 << 10, 0),
        "Mi" => (1 << 20, 0),
        "Gi" => (1 << 30, 0),
        "Ti" => (1 << 40, 0),
        "Pi" => (1 << 50, 0),
        "Ei" => (1 << 60, 0),
        _ => return None,
    })
}

fn parse(text: &str) -> Result<Quantity, QuantityError> {
    let s = text.trim();
    if s.is_empty() {
        return Err(QuantityError::Empty);
    }
    let syntax = || QuantityError::Syntax(text.to_string());
    let range = || QuantityError::Range(text.to_string());
    let bytes = s.as_bytes();
    let mut i = 0;
    let negative = match bytes[0] {
        b'-' => {
            i += 1;
            true
        }
        b'+' => {
            i += 1;
            false
        }
        _ => false,
    };
    // Digits before and after the decimal point, kept as a big integer plus a scale.
    let mut digits: i128 = 0;
    let mut scale: i32 = 0; // number of digits after the point that were folded into `digits`
    let mut seen_digit = false;
    let mut seen_point = false;
    // Digits beyond what i128 can hold only matter if non-zero after the point; we track
    // whether anything non-zero was dropped so that rounding up stays exact.
    let mut dropped_nonzero = false;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_digit() {
            seen_digit = true;
            let d = i128::from(c - b'0');
            if digits < MAX_NANOS {
                digits = digits * 10 + d;
                if seen_point {
                    scale += 1;
                }
            } else if seen_point {
                dropped_nonzero |= d != 0;
            } else {
                return Err(range());
            }
        } else if c == b'.' && !seen_point {
            seen_point = true;
        } else {
            break;
        }
        i += 1;
    }
    if !seen_digit {
        return Err(syntax());
    }
    let rest = &s[i..];
    // Either a decimal exponent (e/E followed by an integer) or a unit suffix.
    let (numerator, mut power) = if let Some(exp) = rest.strip_prefix(['e', 'E']).filter(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
    }) {
        let p: i32 = exp.parse().map_err(|_| range())?;
        (1, p)
    } else {
        suffix_multiplier(rest).ok_or_else(|| {
            if rest.bytes().all(|b| b.is_ascii_alphabetic()) {
                QuantityError::Suffix(text.to_string())
            } else {
                syntax()
            }
        })?
    };
    // value = digits × numerator × 10^(power − scale); express in nanos: × 10^9.
    power = power - scale + 9;
    let mut nanos = digits.checked_mul(numerator).ok_or_else(range)?;
    if power >= 0 {
        if power > 40 {
            if nanos == 0 {
                return Ok(Quantity { nanos: 0 });
            }
            return Err(range());
        }
        nanos = nanos
            .checked_mul(10i128.pow(power as u32))
            .ok_or_else(range)?;
    } else {
        let div = (-power) as u32;
        if div > 38 {
            nanos = i128::from(nanos != 0 || dropped_nonzero);
        } else {
            let d = 10i128.pow(div);
            let rounded_up = nanos % d != 0 || dropped_nonzero;
            nanos = nanos / d + i128::from(rounded_up);
        }
    }
    if nanos > MAX_NANOS {
        return Err(range());
    }
    Ok(Quantity {
        nanos: if negative { -nanos } else { nanos },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, milli: i64, value: i64) {
        let q = Quantity::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(q.milli_value(), milli, "milli of {input}");
        assert_eq!(q.value(), value, "value of {input}");
    }

    #[test]
    fn decimal_and_binary_suffixes() {
        check("0", 0, 0);
        check("1", 1000, 1);
        check("100m", 100, 1);
        check("1.5", 1500, 2);
        check("0.1", 100, 1);
        check("250u", 1, 1);
        check("10n", 1, 1);
        check("1k", 1_000_000, 1000);
        check("1M", 1_000_000_000, 1_000_000);
        check("2G", 2_000_000_000_000, 2_000_000_000);
        check("1Ki", 1_024_000, 1024);
        check("1Mi", 1_048_576_000, 1_048_576);
        check("1.5Gi", 1_610_612_736_000, 1_610_612_736);
        check("1Ti", 1_099_511_627_776_000, 1_099_511_627_776);
        check("1Pi", 1_125_899_906_842_624_000, 1_125_899_906_842_624);
        check("1Ei", i64::MAX, 1_152_921_504_606_846_976);
        check("1e3", 1_000_000, 1000);
        check("1E3", 1_000_000, 1000);
        check("5e-3", 5, 1);
        check("+3", 3000, 3);
        check("-2", -2000, -2);
        check(".5", 500, 1);
        check("128974848", 128_974_848_000, 128_974_848);
    }

    #[test]
    fn refuses_bad_text() {
        for bad in ["", "abc", "1Qi", "1.2.3", "1 Gi", "--1", "Mi", "1e", "1ee3"] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?} should be refused");
        }
        assert!(matches!(
            Quantity::parse("1Xi"),
            Err(QuantityError::Suffix(_))
        ));
        assert!(matches!(
            Quantity::parse("1e400"),
            Err(QuantityError::Range(_))
        ));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,24}") {
            let _ = Quantity::parse(&s);
        }

        #[test]
        fn milli_round_trip(m in 0i64..1_000_000_000_000) {
            let q = Quantity::parse(&format!("{m}m")).unwrap();
            proptest::prop_assert_eq!(q.milli_value(), m);
        }
    }
}
