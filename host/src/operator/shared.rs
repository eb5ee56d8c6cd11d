//! What the operator queries share: the largest page, status lists matched whatever their
//! case, time ranges, and counts written for people.

use time::OffsetDateTime;

use super::error::OperatorError;

/// The largest page, and the most one replay by filter selects.
pub const MAX_LIMIT: i64 = 10_000;

/// The most a replay by filter selects when the request names no limit.
pub const DEFAULT_REPLAY_LIMIT: i64 = 1000;

/// Counts of matches stop here: a list's "of N matching" must not scan every partition of a
/// large table (each query is also under the admin pool's statement timeout). A count of
/// `MAX_COUNTED + 1` means "more than `MAX_COUNTED`".
pub const MAX_COUNTED: i64 = 100_000;

/// `n` matches, as people read it: `12,345`, or `more than 100,000` at the cap.
pub fn matches_text(n: i64) -> String {
    if n > MAX_COUNTED {
        format!("more than {}", thousands(MAX_COUNTED))
    } else {
        thousands(n)
    }
}

pub fn check_limit(limit: i64) -> Result<i64, OperatorError> {
    if (1..=MAX_LIMIT).contains(&limit) {
        Ok(limit)
    } else {
        Err(OperatorError::Limit { max: MAX_LIMIT })
    }
}

/// `value` in the spelling of `allowed` (the stored case), if it is one of them.
pub fn one_of(
    field: &'static str,
    value: &str,
    allowed: &'static [&'static str],
) -> Result<String, OperatorError> {
    allowed
        .iter()
        .find(|a| a.eq_ignore_ascii_case(value))
        .map(|a| (*a).to_owned())
        .ok_or(OperatorError::NotOneOf { field, allowed })
}

/// `since` (inclusive) must come before `until` (exclusive) when both are set.
pub fn check_range(
    since: Option<OffsetDateTime>,
    until: Option<OffsetDateTime>,
) -> Result<(), OperatorError> {
    match (since, until) {
        (Some(since), Some(until)) if since >= until => Err(OperatorError::EmptyRange),
        _ => Ok(()),
    }
}

/// `12345` as `12,345`.
pub fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(2345678), "2,345,678");
        assert_eq!(thousands(-12345), "-12,345");
        assert_eq!(matches_text(MAX_COUNTED), "100,000");
        assert_eq!(matches_text(MAX_COUNTED + 1), "more than 100,000");
    }

    #[test]
    fn values_take_the_spelling_of_their_list() {
        assert_eq!(one_of("sink", "HTTP", &["http", "nats"]).unwrap(), "http");
        assert_eq!(
            one_of("status", "x", &["A", "B"]).unwrap_err().to_string(),
            "status must be one of A, B"
        );
        assert_eq!(
            check_limit(0).unwrap_err().to_string(),
            "limit must be 1..=10000"
        );
    }
}
