//! ISO-8601 durations for engram time-to-live (`PT6H`, `P7D`, `P1DT12H30M`, `PT0.5S`).
//!
//! Calendar units have no fixed length, so for expiry arithmetic a year counts 365 days and a month 30 days.
//! A ttl is at most 1000 years ([`MAX_TTL_YEARS`]): any later expiry is past the last date a timestamp can name, and
//! a longer one is refused rather than overflowing the clock arithmetic that adds it to now.
//! The original text is kept, so a value serializes exactly as it was written.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{ErrorCode, Violation};

/// A time-to-live: an ISO-8601 duration and its length.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ttl {
    // Invariant: `text` parses as an ISO-8601 duration of length `duration`.
    text: String,
    duration: Duration,
}

const SECS_PER_MINUTE: u64 = 60;
const SECS_PER_HOUR: u64 = 60 * SECS_PER_MINUTE;
const SECS_PER_DAY: u64 = 24 * SECS_PER_HOUR;

/// The longest ttl, in years of 365 days (`P1000Y`).
pub const MAX_TTL_YEARS: u64 = 1000;
const MAX_TTL: Duration = Duration::from_secs(MAX_TTL_YEARS * 365 * SECS_PER_DAY);

impl Ttl {
    /// Parses `P[nY][nM][nW][nD][T[nH][nM][n[.f]S]]`; at least one component; a fraction only on seconds.
    pub fn parse(text: &str) -> Result<Ttl, Violation> {
        let duration = parse_duration(text).map_err(|why| {
            Violation::new(ErrorCode::TtlInvalid, "", format!("ttl {text:?} is not an ISO-8601 duration: {why}"))
        })?;
        Ok(Ttl { text: text.to_owned(), duration })
    }

    /// A TTL of whole hours, written `PT<n>H`.
    pub fn hours(hours: u64) -> Ttl {
        Ttl { text: format!("PT{hours}H"), duration: Duration::from_secs(hours * SECS_PER_HOUR) }
    }

    /// A TTL of whole days, written `P<n>D`.
    pub fn days(days: u64) -> Ttl {
        Ttl { text: format!("P{days}D"), duration: Duration::from_secs(days * SECS_PER_DAY) }
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The length (years as 365 days, months as 30 days).
    pub fn duration(&self) -> Duration {
        self.duration
    }
}

impl fmt::Display for Ttl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Ttl {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Ttl {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Ttl, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ttl::parse(&text).map_err(|v| serde::de::Error::custom(v.message))
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let rest = text.strip_prefix('P').ok_or("it must start with `P`")?;
    if rest.is_empty() {
        return Err("it has no components".to_owned());
    }
    let (date_part, time_part) = match rest.split_once('T') {
        Some((date, time)) => {
            if time.is_empty() {
                return Err("`T` must be followed by hours, minutes or seconds".to_owned());
            }
            (date, Some(time))
        }
        None => (rest, None),
    };
    let mut total = Duration::ZERO;
    let mut n_components = 0usize;
    let date_units =
        [('Y', 365 * SECS_PER_DAY), ('M', 30 * SECS_PER_DAY), ('W', 7 * SECS_PER_DAY), ('D', SECS_PER_DAY)];
    let time_units = [('H', SECS_PER_HOUR), ('M', SECS_PER_MINUTE), ('S', 1)];
    for (part, units, allow_fraction) in
        [(date_part, &date_units[..], false), (time_part.unwrap_or(""), &time_units[..], true)]
    {
        let mut unit_idx = 0usize;
        let mut number = String::new();
        for c in part.chars() {
            if c.is_ascii_digit() || c == '.' || c == ',' {
                number.push(if c == ',' { '.' } else { c });
                continue;
            }
            let pos = units[unit_idx..]
                .iter()
                .position(|(u, _)| *u == c)
                .ok_or_else(|| format!("unexpected `{c}` (components go in the order Y M W D T H M S)"))?;
            let (_, secs) = units[unit_idx + pos];
            unit_idx += pos + 1;
            if number.is_empty() {
                return Err(format!("`{c}` has no number before it"));
            }
            let is_seconds = allow_fraction && c == 'S';
            total = total
                .checked_add(component(&number, secs, is_seconds)?)
                .filter(|total| *total <= MAX_TTL)
                .ok_or_else(|| format!("it is longer than {MAX_TTL_YEARS} years (P{MAX_TTL_YEARS}Y)"))?;
            n_components += 1;
            number.clear();
        }
        if !number.is_empty() {
            return Err(format!("number {number:?} has no unit after it"));
        }
    }
    if n_components == 0 {
        return Err("it has no components".to_owned());
    }
    Ok(total)
}

fn component(number: &str, unit_secs: u64, allow_fraction: bool) -> Result<Duration, String> {
    match number.split_once('.') {
        Some((whole, frac)) => {
            if !allow_fraction {
                return Err("only seconds may have a fraction".to_owned());
            }
            if whole.is_empty() || frac.is_empty() || frac.contains('.') {
                return Err(format!("{number:?} is not a decimal number"));
            }
            let secs: f64 = number.parse().map_err(|_| format!("{number:?} is not a decimal number"))?;
            Duration::try_from_secs_f64(secs).map_err(|_| format!("{number:?} is too large"))
        }
        None => {
            let n: u64 = number.parse().map_err(|_| format!("{number:?} is too large"))?;
            n.checked_mul(unit_secs).map(Duration::from_secs).ok_or_else(|| format!("{number:?} is too large"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_common_durations() {
        let cases = [
            ("PT6H", 6 * 3600),
            ("P7D", 7 * 86400),
            ("P1DT12H", 86400 + 12 * 3600),
            ("PT30M", 1800),
            ("PT0S", 0),
            ("P2W", 14 * 86400),
            ("P1Y", 365 * 86400),
            ("P1M", 30 * 86400),
            ("P1Y2M3DT4H5M6S", 365 * 86400 + 60 * 86400 + 3 * 86400 + 4 * 3600 + 5 * 60 + 6),
        ];
        for (text, secs) in cases {
            let ttl = Ttl::parse(text).unwrap_or_else(|v| panic!("{text}: {v}"));
            assert_eq!(ttl.duration(), Duration::from_secs(secs), "{text}");
            assert_eq!(ttl.as_str(), text);
        }
        assert_eq!(Ttl::parse("PT1.5S").expect("fraction").duration(), Duration::from_millis(1500));
        assert_eq!(Ttl::parse("PT0,5S").expect("comma fraction").duration(), Duration::from_millis(500));
        assert_eq!(Ttl::parse("P1000Y").expect("the longest ttl").duration(), MAX_TTL);
    }

    #[test]
    fn rejects_what_is_not_a_duration() {
        for bad in [
            "",
            "P",
            "PT",
            "6H",
            "pt6h",
            "PT6",
            "P1H",
            "PT1D",
            "P1DT",
            "P1.5D",
            "PT6H30",
            "P-1D",
            "P1D1Y",
            "PT1M1H",
            "1 day",
            "P1DD",
            // Found by fuzzing: a fraction too large for a duration, components that overflow when added, and
            // ttls whose expiry no clock can name.
            "PT20000000000000000000.0S",
            "P1DT18446744073709551615S",
            "P1001Y",
            "P99999999Y",
            "PT31536000001S",
        ] {
            let err = Ttl::parse(bad).expect_err(bad);
            assert_eq!(err.code, ErrorCode::TtlInvalid, "{bad}");
        }
    }
}
