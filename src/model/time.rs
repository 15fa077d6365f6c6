//! [`Timestamp`]: a moment in UTC to the millisecond, the type of every `at`,
//! `started_at` and `finished_at`. On disk and on the wire it is RFC 3339
//! (`2026-12-03T08:16:24.123Z`), as it always was; in memory it is a number, so
//! times compare as times, not as text.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Milliseconds since the Unix epoch, UTC. `Timestamp::default()` is the epoch:
/// older than anything a sweep records, so it serves as "never".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The current time.
    pub fn now() -> Timestamp {
        let ns = OffsetDateTime::now_utc().unix_timestamp_nanos();
        Timestamp(i64::try_from(ns / 1_000_000).unwrap_or(i64::MAX))
    }

    pub fn from_unix_ms(ms: i64) -> Timestamp {
        Timestamp(ms)
    }

    /// A file's time, say; a time before the epoch is the epoch.
    pub fn from_system_time(t: std::time::SystemTime) -> Timestamp {
        let ms = t
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        Timestamp(ms)
    }

    pub fn unix_ms(self) -> i64 {
        self.0
    }

    /// Any RFC 3339 time (any offset, any number of fraction digits), to the
    /// millisecond; `None` for anything else.
    pub fn parse(s: &str) -> Option<Timestamp> {
        let t = OffsetDateTime::parse(s.trim(), &Rfc3339).ok()?;
        i64::try_from(t.unix_timestamp_nanos().div_euclid(1_000_000))
            .ok()
            .map(Timestamp)
    }

    /// Seconds from `earlier` to `self` (negative when `earlier` is later).
    pub fn seconds_since(self, earlier: Timestamp) -> f64 {
        self.0.saturating_sub(earlier.0) as f64 / 1000.0
    }

    /// `HH:MM:SS`, for progress lines.
    pub fn clock(self) -> String {
        let t = self.datetime();
        format!("{:02}:{:02}:{:02}", t.hour(), t.minute(), t.second())
    }

    /// `YYYYMMDD-HHMMSS`, for directory names.
    pub fn compact(self) -> String {
        let t = self.datetime();
        format!(
            "{:04}{:02}{:02}-{:02}{:02}{:02}",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        )
    }

    /// `YYYY-MM-DD HH:MM` in UTC, for listings.
    pub fn minute_text(self) -> String {
        let t = self.datetime();
        format!(
            "{:04}-{:02}-{:02} {:02}:{:02}",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute()
        )
    }

    fn datetime(self) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(self.0) * 1_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH)
    }
}

impl fmt::Display for Timestamp {
    /// RFC 3339 in UTC with milliseconds: `2026-12-03T08:16:24.123Z`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.datetime();
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.millisecond()
        )
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let s = std::borrow::Cow::<str>::deserialize(d)?;
        Timestamp::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("`{s}` is not an RFC 3339 time")))
    }
}

/// A length of time as people read it in a listing: `42s`, `4m05s`,
/// `1h12m`, `3d04h`; negative or not a number reads as `0s`.
pub fn span_text(secs: f64) -> String {
    let s = if secs.is_finite() && secs > 0.0 {
        secs as u64
    } else {
        0
    };
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, s / 60 % 60),
        _ => format!("{}d{:02}h", s / 86_400, s / 3600 % 24),
    }
}

/// Seconds covered by any of `spans` (from, to): overlaps counted once,
/// a span that ends before it starts counted as nothing.
pub fn covered_s(spans: impl IntoIterator<Item = (Timestamp, Timestamp)>) -> f64 {
    let mut spans: Vec<(Timestamp, Timestamp)> = spans.into_iter().collect();
    spans.sort();
    let mut total = 0.0;
    let mut reached: Option<Timestamp> = None;
    for (from, to) in spans {
        let from = reached.map_or(from, |r| from.max(r));
        if to > from {
            total += to.seconds_since(from);
            reached = Some(to);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_rfc3339() {
        let p = |s| Timestamp::parse(s).map(Timestamp::unix_ms);
        assert_eq!(p("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(p("1970-01-02T00:00:01.5Z"), Some(86_401_500));
        assert_eq!(p("2000-03-01T00:00:00Z"), Some(951_868_800_000));
        assert_eq!(p("2000-03-01T01:00:00+01:00"), Some(951_868_800_000));
        assert_eq!(p("garbage"), None);
        assert_eq!(p("t0"), None);
        let t = Timestamp::parse("2026-12-03T08:16:24.123Z").unwrap();
        assert_eq!(t.to_string(), "2026-12-03T08:16:24.123Z");
        assert_eq!(t.clock(), "08:16:24");
        assert_eq!(t.compact(), "20261203-081624");
    }

    #[test]
    fn orders_as_time_and_round_trips_through_json() {
        let a = Timestamp::parse("2026-12-03T09:00:00Z").unwrap();
        // As text this one sorts first; as a time it is later.
        let b = Timestamp::parse("2026-12-03T09:00:00.5+00:00").unwrap();
        assert!(b > a);
        assert_eq!(b.seconds_since(a), 0.5);
        let json = serde_json::to_string(&b).unwrap();
        assert_eq!(json, "\"2026-12-03T09:00:00.500Z\"");
        assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), b);
        assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
        let now = Timestamp::now();
        assert!(now > a || a.unix_ms() > 0);
        assert!(Timestamp::default() < a);
    }

    #[test]
    fn spans_read_as_people_write_them() {
        assert_eq!(span_text(-1.0), "0s");
        assert_eq!(span_text(f64::NAN), "0s");
        assert_eq!(span_text(42.9), "42s");
        assert_eq!(span_text(245.0), "4m05s");
        assert_eq!(span_text(4320.0), "1h12m");
        assert_eq!(span_text(273_600.0), "3d04h");
        assert_eq!(Timestamp::from_unix_ms(0).minute_text(), "1970-01-01 00:00");
    }
}
