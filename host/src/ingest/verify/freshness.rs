//! Freshness: a signed timestamp against the endpoint's past and future tolerances.

use super::outcome::VerifyError;

/// Checks a signed Unix timestamp against separate past and future tolerances.
pub fn check_freshness(
    timestamp: Option<i64>,
    now: i64,
    past_secs: u64,
    future_secs: u64,
) -> Result<(), VerifyError> {
    let ts = timestamp.ok_or(VerifyError::MissingTimestamp)?;
    let age = now.saturating_sub(ts);
    if age > 0 && age as u64 > past_secs {
        return Err(VerifyError::TooOld(age));
    }
    if age < 0 && age.unsigned_abs() > future_secs {
        return Err(VerifyError::TooNew(-age));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freshness_bounds_are_separate_and_inclusive() {
        assert!(check_freshness(Some(1000), 1300, 300, 5).is_ok());
        assert_eq!(
            check_freshness(Some(1000), 1301, 300, 5),
            Err(VerifyError::TooOld(301))
        );
        assert!(check_freshness(Some(1005), 1000, 300, 5).is_ok());
        assert_eq!(
            check_freshness(Some(1006), 1000, 300, 5),
            Err(VerifyError::TooNew(6))
        );
        assert_eq!(
            check_freshness(None, 1000, 300, 5),
            Err(VerifyError::MissingTimestamp)
        );
    }
}
