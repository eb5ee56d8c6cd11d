//! What verification answers: the request's passing key, or why it is not authentic.

use super::contract::{
    ContractViolation, Coverage, MAX_FORM_PAIRS, MAX_PUBLIC_KEY_VERIFICATIONS, MAX_SIGNATURE_BYTES,
    MAX_SIGNATURES,
};

/// Why a request is not authentic. `Contract` is the adapter's fault (503
/// `adapter_unavailable`); every other is the request's: 401, except `UndecodableString` (400
/// `malformed`) and the work budgets (401 `verification_too_costly`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("no signature matched any trusted key version")]
    NoMatch,
    #[error("the adapter found no signature to check")]
    NoSignatures,
    #[error("no check applies to the endpoint's keys (none is of a kind its checks verify)")]
    NoApplicableKey,
    /// Candidates come from the request, so a request that asks for more public-key work
    /// than allowed is refused as unverifiable (401), not blamed on the adapter.
    #[error("{0} public-key verifications asked for (at most {MAX_PUBLIC_KEY_VERIFICATIONS})")]
    PublicKeyBudget(usize),
    /// Public-key signatures hash their whole message each (Ed25519 cannot be prehashed).
    #[error("public-key verification would hash {bytes} bytes (at most {max})")]
    PublicKeyBytes { bytes: usize, max: usize },
    #[error("check {check} has {count} candidate signatures (at most {MAX_SIGNATURES})")]
    TooManyCandidates { check: usize, count: usize },
    #[error("check {check} has a {bytes}-byte candidate signature (at most {MAX_SIGNATURE_BYTES})")]
    CandidateTooLong { check: usize, bytes: usize },
    /// A signed JSON string of the body (`body-json-string`) with an escape that decodes to no
    /// character (a lone surrogate such as `\ud800`).
    #[error("check {0} signs a JSON string of the body that does not decode")]
    UndecodableString(usize),
    /// A signed form body (`sorted-form-params`) that is not a form: undecodable, not UTF-8,
    /// or over the pair cap.
    #[error(
        "check {0} signs the body as form parameters, but it is not a form of at most {MAX_FORM_PAIRS} pairs"
    )]
    NotAForm(usize),
    #[error("signed timestamp missing")]
    MissingTimestamp,
    #[error("signed timestamp is {0} s old, beyond the tolerance")]
    TooOld(i64),
    #[error("signed timestamp is {0} s in the future, beyond the tolerance")]
    TooNew(i64),
    #[error("adapter broke the verification contract: {0}")]
    Contract(#[from] ContractViolation),
}

/// A verified request: which key version passed, and what each check was.
#[derive(Debug)]
pub struct Passed {
    /// The version of the key that passed the first check that applied.
    pub version: String,
    /// That key's bytes when it was a secret (a handshake may MAC with it).
    pub secret: Option<Vec<u8>>,
    pub coverage: Vec<Coverage>,
    /// Which checks applied to the endpoint's keys (and so passed).
    pub applied: Vec<bool>,
}
