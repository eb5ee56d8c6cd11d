//! Builders the unit tests share: key sets, inputs, checks, and the loop run on one key set.

use super::*;
use crate::adapter::{Check, Envelope, MacAlgorithm, Part, Prepared, Span};
use crate::ingest::secrets::{KeySet, TrustedKey};

pub(super) const HMAC: &[Algorithm] = &[Algorithm::HmacSha256];

pub(super) fn secrets(keys: &[(&str, &[u8])]) -> KeySet {
    KeySet {
        secrets: keys
            .iter()
            .map(|(v, k)| TrustedKey {
                version: (*v).into(),
                key: k.to_vec(),
            })
            .collect(),
        public_keys: vec![],
    }
}

pub(super) fn inputs(body: &[u8]) -> Inputs<'_> {
    Inputs {
        body,
        url: None,
        query: None,
    }
}

pub(super) fn hmac_check(message: Vec<Part>, signatures: Vec<Vec<u8>>) -> Check {
    Check {
        algorithm: Algorithm::HmacSha256,
        key: None,
        message,
        signatures,
        body_sha256_param: None,
    }
}

pub(super) fn one(check: Check, timestamp: Option<i64>) -> Prepared {
    Prepared {
        checks: vec![check],
        timestamp,
    }
}

pub(super) fn run(
    declared: &[Algorithm],
    set: &KeySet,
    prepared: &Prepared,
    inputs: &Inputs<'_>,
    fresh: bool,
) -> Result<Passed, VerifyError> {
    verify(declared, &|_| set, prepared, inputs, fresh)
}

pub(super) fn mac(key: &[u8], message: &[Part], body: &[u8]) -> Vec<u8> {
    let pieces = resolve(0, message, None, &inputs(body)).unwrap().unwrap();
    mac_of(MacAlgorithm::Sha256, key, &pieces, "").to_vec()
}

pub(super) fn sig_check(message: Vec<Part>, ts: Option<i64>) -> Prepared {
    one(hmac_check(message, vec![vec![0; 32]]), ts)
}

pub(super) fn validated(
    p: &Prepared,
    body_len: usize,
    fresh: bool,
) -> Result<Vec<Coverage>, ContractViolation> {
    let body = vec![b'x'; body_len];
    validate(p, HMAC, &inputs(&body), fresh)
}

/// An event of a batch: `signed_by` the check that signs its item, over `span`.
pub(super) fn event(signed_by: Option<u32>, span: Option<Span>) -> Envelope {
    Envelope {
        event_id: "e".into(),
        event_type: "t".into(),
        object_id: None,
        object_version: None,
        created_at: None,
        route: None,
        span,
        signed_by,
    }
}
