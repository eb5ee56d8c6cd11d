//! What verification answers: the request's passing key, or why it is not authentic.

use super::contract::{ContractViolation, Coverage, MAX_PUBLIC_KEY_VERIFICATIONS};

/// Why a request is not authentic. All but `Contract` are answered 401; `Contract` is the
/// adapter's fault (503 `adapter_unavailable`).
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
