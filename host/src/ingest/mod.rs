//! Ingest: steps 4 to 8 of the pipeline, after the HTTP layer has read the exact raw bytes.
//!
//! - `pipeline`: `Ingest` (admit, process) and `verify_and_parse`, the database-free steps 4 to 7
//!   that the fixture runner shares
//! - `verify`: what "verified" means; MACs, public-key signatures, tokens; freshness
//! - `handshake`: a handshake's answer as sent, any MAC it asks for computed under the rules
//! - `secrets`: the secrets file, hot-reloaded, failing closed
//! - `rate_limit`: a token bucket per client address, taken before the body is read and given
//!   back when the signature verifies; endpoint and provider buckets, taken by verified requests
//! - `admission`: past capacity, refuse at once what could not be answered in the budget
//! - `store`: Postgres: migrations and `accept`, the one way events are stored
//! - `commit`: group commit behind `accept`: requests that arrive together share a transaction
//! - `pending`: a request made ready for its transaction: payload sealed, each event's row linked
//! - `stats`: per-minute counts of the public route's answers, flushed for the console
//! - `handoff`: events leased at acceptance to this host's workers, handed over in memory
//! - `rows`: what acceptance writes and answers, and `StoreError`
//! - `redacted`: `.redacted()?`, a database error that shows only its redacted text
//! - `error`: `IngestError`, its status, code and internal cause

mod admission;
mod commit;
mod error;
mod handoff;
mod handshake;
mod pending;
mod pipeline;
mod rate_limit;
mod redacted;
mod rows;
mod secrets;
mod stats;
mod store;
mod verify;

pub use admission::{Admission, MAX_IN_FLIGHT};
pub use commit::CommitSettings;
pub use error::IngestError;
pub use handoff::{Claim, Handoff};
pub use pipeline::{
    Admitted, Ingest, Outcome, RequestFacts, Verified, inbox_ids, verify_and_parse,
};
pub use rate_limit::{ClientLimits, LimitScope, Limited, RateLimits};
pub use redacted::{DbError, Redacted};
pub use rows::{Acceptance, NewEvent, StoreError, StoredVersion, Submission, redact_db};
pub use secrets::{
    HostSecretError, HostSecretUse, InvalidSecrets, KeyEncodings, KeySet, KeySource, PublicKey,
    SECRETS_QUIET, SecretStore, Secrets, SecretsError, SecretsFileError, TrustedKey,
    TrustedPublicKey, VersionInfo, decode_key, decode_public_key, host_secret_values,
};
pub use stats::{
    BUCKET_BOUNDS_MS, BUCKETS, FLUSH_EVERY, IngestStats, UNKNOWN_ENDPOINT, bucket_of, quantile_ms,
};
pub use store::{MIGRATOR, Store};
pub use verify::{
    ContractViolation, Coverage, Inputs, MAX_BODY_PASSES, MAX_CHECKS, MAX_LITERAL_BYTES, MAX_PARTS,
    MAX_SIGNATURE_BYTES, MAX_SIGNATURES, Passed, VerifyError, check_freshness, hash_budget,
    validate, verify,
};
