//! RFC 3339 timestamps without a date crate: the pipeline only needs UTC
//! formatting of epoch milliseconds and parsing of the ISO stamps agents print.

/// Formats epoch milliseconds as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn format_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", y, m, d, sod / 3600, (sod % 3600) / 60, sod % 60, milli)
}

/// Parses an RFC 3339 / ISO 8601 date-time with a `Z` or `±HH:MM` offset into
/// epoch milliseconds. Fractions beyond milliseconds are truncated. Returns
/// `None` for anything else, so callers can fall back to the read time.
pub fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac_ms = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        let digits = &b[start..i.min(start + 3)];
        let mut v = 0i64;
        for &c in digits {
            v = v * 10 + i64::from(c - b'0');
        }
        for _ in digits.len()..3 {
            v *= 10;
        }
        frac_ms = v;
    }
    let offset_min = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            let v = oh * 60 + om;
            if sign == b'-' {
                -v
            } else {
                v
            }
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + h * 3600 + mi * 60 + se.min(59) - offset_min * 60;
    Some(secs * 1000 + frac_ms)
}

// Howard Hinnant's civil calendar algorithms (public domain).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The fallback clock: `SOURCE_DATE_EPOCH` (seconds) when set, so output is
/// reproducible, else the wall clock.
#[derive(Debug, Clone, Copy)]
pub enum Clock {
    Fixed(i64),
    Wall,
}

impl Clock {
    /// Reads `SOURCE_DATE_EPOCH` once; an unparsable value is ignored.
    pub fn from_env() -> Clock {
        match std::env::var("SOURCE_DATE_EPOCH").ok().and_then(|v| v.trim().parse::<i64>().ok()) {
            Some(s) => Clock::Fixed(s.saturating_mul(1000)),
            None => Clock::Wall,
        }
    }

    pub fn now_ms(&self) -> i64 {
        match self {
            Clock::Fixed(ms) => *ms,
            Clock::Wall => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_known_instants() {
        assert_eq!(format_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_ms(1_754_166_531_710), "2025-08-02T20:28:51.710Z");
        assert_eq!(parse_rfc3339_ms("2025-08-02T20:28:51.710Z"), Some(1_754_166_531_710));
        assert_eq!(parse_rfc3339_ms("2025-08-02T22:28:51.7101+02:00"), Some(1_754_166_531_710));
        assert_eq!(
            parse_rfc3339_ms("2024-02-29T00:00:00Z").map(format_ms).as_deref(),
            Some("2024-02-29T00:00:00.000Z")
        );
    }

    #[test]
    fn rejects_garbage() {
        for s in [
            "",
            "2025-08-02",
            "2025-13-02T00:00:00Z",
            "2025-08-02T20:28:51.Z",
            "2025-08-02T20:28:51Zjunk",
            "２０２５-08-02T20:28:51Z",
        ] {
            assert_eq!(parse_rfc3339_ms(s), None, "{s}");
        }
    }

    #[test]
    fn every_day_round_trips() {
        for day in -1000..40_000i64 {
            let ms = day * 86_400_000 + 12_345;
            assert_eq!(parse_rfc3339_ms(&format_ms(ms)), Some(ms));
        }
    }
}
