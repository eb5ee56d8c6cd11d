//! Rejections, by the answer each gets, and `Option`'s shorthand for them: a missing value is
//! `.or_invalid("…")?` before verification and `.or_malformed("…")?` after.

use crate::{Rejection, RejectionKind};

fn rejection(kind: RejectionKind, detail: impl Into<String>) -> Rejection {
    Rejection {
        kind,
        detail: detail.into(),
    }
}

/// 401 `invalid_signature`: for anything wrong before verification.
pub fn invalid(detail: impl Into<String>) -> Rejection {
    rejection(RejectionKind::InvalidSignature, detail)
}

/// 400 `malformed`: a verified body whose envelope cannot be read.
pub fn malformed(detail: impl Into<String>) -> Rejection {
    rejection(RejectionKind::Malformed, detail)
}

/// 422 `unsupported_event_type` (or ignored, per endpoint).
pub fn unsupported(detail: impl Into<String>) -> Rejection {
    rejection(RejectionKind::UnsupportedEventType, detail)
}

/// Candidate signatures in one check, as the host bounds them: more is refused (401).
pub const MAX_SIGNATURES: usize = 16;
/// One candidate, decoded (a token as sent): longer is refused (401).
pub const MAX_SIGNATURE_BYTES: usize = 512;

/// The candidates a request carries, refused (401) when there are more than
/// [`MAX_SIGNATURES`] or one is longer than [`MAX_SIGNATURE_BYTES`]: no provider sends such a
/// header, and the host would refuse it too, after the adapter had done its work.
pub fn candidates(signatures: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, Rejection> {
    if signatures.len() > MAX_SIGNATURES {
        return Err(invalid(format!(
            "{} candidate signatures (at most {MAX_SIGNATURES})",
            signatures.len()
        )));
    }
    if signatures.iter().any(|s| s.len() > MAX_SIGNATURE_BYTES) {
        return Err(invalid(format!(
            "a candidate signature over {MAX_SIGNATURE_BYTES} bytes"
        )));
    }
    Ok(signatures)
}

/// `None` as a rejection. The detail is a short diagnostic for logs: never a secret, a
/// signature or body content.
pub trait OrReject<T> {
    /// The value, else [`invalid`] (401).
    fn or_invalid(self, detail: &str) -> Result<T, Rejection>;
    /// The value, else [`malformed`] (400).
    fn or_malformed(self, detail: &str) -> Result<T, Rejection>;
}

impl<T> OrReject<T> for Option<T> {
    fn or_invalid(self, detail: &str) -> Result<T, Rejection> {
        self.ok_or_else(|| invalid(detail))
    }

    fn or_malformed(self, detail: &str) -> Result<T, Rejection> {
        self.ok_or_else(|| malformed(detail))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_details() {
        let r = invalid("missing t");
        assert!(matches!(r.kind, RejectionKind::InvalidSignature));
        assert_eq!(r.detail, "missing t");
        assert!(matches!(malformed("x").kind, RejectionKind::Malformed));
        assert!(matches!(
            unsupported("x").kind,
            RejectionKind::UnsupportedEventType
        ));
        assert_eq!(Some(1).or_invalid("never").unwrap(), 1);
        let r = None::<u8>.or_invalid("missing t").unwrap_err();
        assert!(matches!(r.kind, RejectionKind::InvalidSignature) && r.detail == "missing t");
        let r = None::<u8>.or_malformed("missing id").unwrap_err();
        assert!(matches!(r.kind, RejectionKind::Malformed) && r.detail == "missing id");
    }

    #[test]
    fn candidates_are_bounded_as_the_host_bounds_them() {
        let at_bounds = vec![vec![0; MAX_SIGNATURE_BYTES]; MAX_SIGNATURES];
        assert_eq!(candidates(at_bounds.clone()).unwrap(), at_bounds);
        let too_many = vec![vec![0; 32]; MAX_SIGNATURES + 1];
        let too_long = vec![vec![0; MAX_SIGNATURE_BYTES + 1]];
        for over in [too_many, too_long] {
            let r = candidates(over).unwrap_err();
            assert!(matches!(r.kind, RejectionKind::InvalidSignature));
        }
    }
}
