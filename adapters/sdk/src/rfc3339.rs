//! RFC 3339 timestamps (`2022-07-13T20:30:59.037339943Z`, `2026-11-02T09:15:04+01:00`) to Unix
//! seconds, for providers that write event times as text (Square). Small on purpose: the guest
//! has no clock and needs no calendar beyond this.

/// Parses an RFC 3339 date-time to whole Unix seconds. `None` for anything else: a missing
/// offset, out-of-range fields, or trailing bytes.
///
/// **Fractional seconds are dropped**, whatever their number of digits (they must be digits,
/// at least one): the result is the whole second at or before the instant, so
/// `2022-07-13T20:30:59.999Z` and `2022-07-13T20:30:59Z` both give `1657744259`. Two events
/// of one object created within the same second therefore get the same
/// [`ObjectVersion::CreatedAt`](crate::ObjectVersion), and the host orders them by event id.
/// A provider whose ordering needs sub-second precision should be given a
/// [`ObjectVersion::Sequence`](crate::ObjectVersion) instead.
///
/// Also accepted, as RFC 3339 allows: `t`/`z` in lower case, a space for `T`, any `+hh:mm` or
/// `-hh:mm` offset (converted to UTC), and a leap second `:60` (read as the next minute's
/// `:00`). Not accepted: a date alone, no offset, `+hhmm` without the colon.
pub fn parse_rfc3339(input: &str) -> Option<i64> {
    let b = input.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let digits = b.get(from..from + len)?;
        digits.iter().try_fold(0i64, |acc, &d| {
            d.is_ascii_digit().then(|| acc * 10 + i64::from(d - b'0'))
        })
    };
    let sep = |at: usize, chars: &[u8]| b.get(at).is_some_and(|c| chars.contains(c));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month[(month - 1) as usize]
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut at = 19;
    if b.get(at) == Some(&b'.') {
        let digits = b[at + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits == 0 {
            return None;
        }
        at += 1 + digits;
    }
    let offset = match b.get(at)? {
        b'Z' | b'z' if at + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if at + 6 == b.len() && sep(at + 3, b":") => {
            let (h, m) = (num(at + 1, 2)?, num(at + 4, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let secs = h * 3600 + m * 60;
            if *sign == b'+' { secs } else { -secs }
        }
        _ => return None,
    };
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_utc_offsets_and_fractions() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        // Square's published vector: nanoseconds, truncated.
        assert_eq!(
            parse_rfc3339("2022-07-13T20:30:59.037339943Z"),
            Some(1_657_744_259)
        );
        assert_eq!(
            parse_rfc3339("2026-11-02T09:15:04.308Z"),
            Some(1_793_610_904)
        );
        assert_eq!(
            parse_rfc3339("2026-11-02T10:15:04+01:00"),
            Some(1_793_610_904)
        );
        assert_eq!(
            parse_rfc3339("2026-11-02t04:15:04-05:00"),
            Some(1_793_610_904)
        );
        assert_eq!(parse_rfc3339("2000-02-29T00:00:00Z"), Some(951_782_400));
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59Z"), Some(-1));
    }

    #[test]
    fn fractions_are_dropped_and_leap_seconds_roll_over_as_documented() {
        let whole = parse_rfc3339("2022-07-13T20:30:59Z");
        assert_eq!(whole, Some(1_657_744_259));
        for fraction in ["0", "5", "999", "999999999999"] {
            let with = format!("2022-07-13T20:30:59.{fraction}Z");
            assert_eq!(parse_rfc3339(&with), whole, "{with}");
        }
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59.5Z"), Some(-1));
        assert_eq!(
            parse_rfc3339("2016-12-31T23:59:60Z"),
            parse_rfc3339("2017-01-01T00:00:00Z")
        );
        assert_eq!(parse_rfc3339("2022-07-13 20:30:59z"), Some(1_657_744_259));
    }

    #[test]
    fn refuses_what_is_not_rfc3339() {
        for bad in [
            "",
            "2022-07-13",
            "2022-07-13T20:30:59",
            "2022-07-13T20:30:59.Z",
            "2022-07-13T20:30:59Zx",
            "2022-13-13T20:30:59Z",
            "2023-02-29T00:00:00Z",
            "2022-07-13T24:00:00Z",
            "2022-07-13T20:30:59+0100",
            "2022-07-13T20:30:59+24:00",
            "+022-07-13T20:30:59Z",
            "1657744259",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
