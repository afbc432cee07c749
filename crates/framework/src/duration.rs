//! Go `time.Duration` strings (`15s`, `1m30s`, `500ms`), as `metav1.Duration` reads and
//! writes them: for the configuration and for plugins' args alike.

use std::time::Duration;

/// Parses a Go duration string: a sequence of decimal numbers, each with an optional fraction
/// and a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), e.g. `1h2m3.5s`. `0` alone is allowed.
/// Negative durations are refused: no duration of the configuration may be negative.
pub fn parse(text: &str) -> Result<Duration, String> {
    match parse_signed(text)? {
        (true, d) if !d.is_zero() => {
            Err(format!("invalid duration {text:?}: must not be negative"))
        }
        (_, d) => Ok(d),
    }
}

/// Parses a Go duration string that may be negative, as `metav1.Duration` decodes one
/// before validation refuses it: whether it was negative, and its size.
pub fn parse_signed(text: &str) -> Result<(bool, Duration), String> {
    let invalid = || format!("invalid duration {text:?}");
    let (negative, mut s) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if s == "0" {
        return Ok((negative, Duration::ZERO));
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !s.is_empty() {
        let int_len = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (int_part, rest) = s.split_at(int_len);
        let (frac_part, rest) = match rest.strip_prefix('.') {
            Some(r) => {
                let n = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
                r.split_at(n)
            }
            None => ("", rest),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(invalid());
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (unit, rest) = rest.split_at(unit_len);
        let nanos_per_unit: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(format!("missing unit in duration {text:?}")),
            other => return Err(format!("unknown unit {other:?} in duration {text:?}")),
        };
        let whole: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| invalid())?
        };
        let mut value = whole.checked_mul(nanos_per_unit).ok_or_else(invalid)?;
        // The fraction keeps nanosecond precision; digits past that are dropped as Go does.
        let mut scale = nanos_per_unit;
        for d in frac_part.chars() {
            scale /= 10;
            if scale == 0 {
                break;
            }
            value += u128::from(d.to_digit(10).unwrap_or(0)) * scale;
        }
        total = total.checked_add(value).ok_or_else(invalid)?;
        s = rest;
    }
    // Go durations are int64 nanoseconds.
    if total > i64::MAX as u128 {
        return Err(format!("duration {text:?} is too large"));
    }
    Ok((negative, Duration::from_nanos(total as u64)))
}

/// Writes a duration as Go's `time.Duration.String` does: `0s`, `500ms`, `1.5µs`, `15s`,
/// `1m30s`, `1h0m0s`.
pub fn format(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    if nanos < 1_000_000_000 {
        let (scale, unit) = if nanos < 1_000 {
            (1, "ns")
        } else if nanos < 1_000_000 {
            (1_000, "µs")
        } else {
            (1_000_000, "ms")
        };
        return format!("{}{unit}", decimal(nanos, scale));
    }
    let hours = nanos / 3_600_000_000_000;
    let rem = nanos % 3_600_000_000_000;
    let minutes = rem / 60_000_000_000;
    let secs = decimal(rem % 60_000_000_000, 1_000_000_000);
    if hours > 0 {
        format!("{hours}h{minutes}m{secs}s")
    } else if minutes > 0 {
        format!("{minutes}m{secs}s")
    } else {
        format!("{secs}s")
    }
}

/// `value / scale` as a decimal with trailing zeros of the fraction removed.
fn decimal(value: u128, scale: u128) -> String {
    let whole = value / scale;
    let frac = value % scale;
    if frac == 0 {
        return whole.to_string();
    }
    let width = scale.to_string().len() - 1;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// Serde adapter for `Duration` fields written as Go duration strings.
pub mod serde_go {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the duration as a Go duration string.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format(*d))
    }

    /// Reads a Go duration string.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        super::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        let cases = [
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("15s", Duration::from_secs(15)),
            ("1m30s", Duration::from_secs(90)),
            ("1h", Duration::from_secs(3600)),
            ("1.5s", Duration::from_millis(1500)),
            (".5s", Duration::from_millis(500)),
            ("500ms", Duration::from_millis(500)),
            ("2us", Duration::from_micros(2)),
            ("2µs", Duration::from_micros(2)),
            ("7ns", Duration::from_nanos(7)),
            ("1h2m3s4ms", Duration::from_millis(3_723_004)),
            ("+3s", Duration::from_secs(3)),
            ("-0s", Duration::ZERO),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn refuses_bad_durations() {
        for text in ["", "15", "s", "1x", "-1s", "1.s.", "3 s", "9999999999h"] {
            assert!(parse(text).is_err(), "{text:?} should be refused");
        }
    }

    #[test]
    fn formats_like_go() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_secs(15), "15s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_nanos(1500), "1.5µs"),
            (Duration::from_nanos(7), "7ns"),
            (Duration::from_millis(3_723_004), "1h2m3.004s"),
        ];
        for (d, want) in cases {
            assert_eq!(format(d), want);
            assert_eq!(parse(want), Ok(d), "round trip of {want}");
        }
    }
}
