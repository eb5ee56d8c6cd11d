//! Verification without a server or a database: the host's own `verify_and_parse` (what the
//! HTTP path and `wharf adapter test` run before anything is stored), for cases that test a
//! signature, a key or a clock and nothing of storage.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;
use time::OffsetDateTime;
use wharf::adapter::{Sandbox, SandboxLimits};
use wharf::config::EndpointConfig;
use wharf::ingest::{
    Admitted, IngestError, Outcome, RequestFacts, Secrets, Verified, verify_and_parse,
};

use super::files::{adapter_file, repo_root};
use super::secrets::SecretsFile;

/// What the receiver would decide before storing anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Verified and parsed: the receiver would store the events (answered `accepted` on first
    /// sight). The secret version that verified.
    Accepted(String),
    /// Refused: the status and code the receiver answers.
    Rejected(u16, &'static str),
    /// A verified handshake, answered with this status.
    Handshake(u16),
    Ignored,
}

pub const INVALID_SIGNATURE: Verdict = Verdict::Rejected(401, "invalid_signature");
pub const STALE_TIMESTAMP: Verdict = Verdict::Rejected(401, "stale_timestamp");

impl Verdict {
    pub fn accepted(&self) -> bool {
        matches!(self, Verdict::Accepted(_))
    }
}

/// Endpoints, their adapters and a secrets file, verified at a pinned instant.
pub struct Verifier {
    endpoints: HashMap<String, Admitted>,
    secrets: Secrets,
    now: OffsetDateTime,
}

#[derive(Deserialize)]
struct Tables {
    endpoint: Vec<EndpointConfig>,
}

impl Verifier {
    /// `adapters` from `adapters/dist` (`"zoom.wasm"`), the `[[endpoint]]` tables that use
    /// them, the secrets file, and the instant (Unix seconds) requests are verified at.
    pub async fn new(
        adapters: &[&str],
        endpoints: &str,
        secrets: impl Into<String>,
        now: i64,
    ) -> Self {
        let cache = repo_root().join("target/wharf-test-cache");
        let sandbox = Sandbox::new(SandboxLimits::default(), Some(cache)).expect("sandbox");
        let mut loaded = HashMap::new();
        for file in adapters {
            let adapter = Arc::new(sandbox.load(&adapter_file(file)).await.expect("adapter"));
            loaded.insert(adapter.info.name.clone(), adapter);
        }
        let tables: Tables = toml::from_str(endpoints).expect("endpoint tables");
        let endpoints = tables
            .endpoint
            .into_iter()
            .map(|e| {
                let adapter = Arc::clone(&loaded[&e.adapter]);
                let admitted = Admitted {
                    endpoint: Arc::new(e),
                    adapter,
                    max_body_bytes: 1 << 20,
                };
                (admitted.endpoint.id.clone(), admitted)
            })
            .collect();
        Self {
            endpoints,
            secrets: Secrets::parse(&secrets.into()).expect("secrets file"),
            now: OffsetDateTime::from_unix_timestamp(now).unwrap(),
        }
    }

    /// One adapter, its endpoints, and the default secrets with `secrets`' sets.
    pub async fn of(adapter: &str, endpoints: &str, secrets: SecretsFile, now: i64) -> Self {
        Self::new(&[adapter], endpoints, secrets, now).await
    }

    /// Verifies at another instant from now on.
    pub fn at(mut self, now: i64) -> Self {
        self.now = OffsetDateTime::from_unix_timestamp(now).unwrap();
        self
    }

    /// A POST to `target` (`endpoint` or `endpoint?query`), as the receiver would judge it.
    pub async fn post(
        &self,
        target: &str,
        headers: &[(String, String)],
        body: impl Into<Vec<u8>>,
    ) -> Verdict {
        match self.verify(target, headers, body.into()).await {
            Ok(Verified::Accept(submission)) => {
                Verdict::Accepted(submission.matched_secret_version)
            }
            Ok(Verified::Done(Outcome::Handshake(answer))) => Verdict::Handshake(answer.status),
            Ok(Verified::Done(Outcome::Ignored(_))) => Verdict::Ignored,
            Ok(Verified::Done(Outcome::Stored(_))) => unreachable!("stored without a database"),
            Err(e) => rejected(&e),
        }
    }

    /// The ids of the events an accepted POST would store, one row each.
    pub async fn event_ids(
        &self,
        target: &str,
        headers: &[(String, String)],
        body: impl Into<Vec<u8>>,
    ) -> Vec<String> {
        match self.verify(target, headers, body.into()).await {
            Ok(Verified::Accept(submission)) => {
                submission.events.into_iter().map(|e| e.event_id).collect()
            }
            other => panic!("not accepted: {other:?}"),
        }
    }

    async fn verify(
        &self,
        target: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
    ) -> Result<Verified, IngestError> {
        let (id, query) = match target.split_once('?') {
            Some((id, q)) => (id, Some(q)),
            None => (target, None),
        };
        let admitted = self.endpoints.get(id).expect("a configured endpoint");
        let mut map = http::HeaderMap::new();
        for (k, v) in headers {
            map.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                http::HeaderValue::from_str(v).unwrap(),
            );
        }
        verify_and_parse(
            admitted,
            &self.secrets,
            self.now,
            http::Method::POST,
            Arc::new(map),
            query,
            Bytes::from(body),
            &mut RequestFacts::default(),
        )
        .await
    }
}

fn rejected(e: &IngestError) -> Verdict {
    let (status, code) = e.status_and_code();
    Verdict::Rejected(status.as_u16(), code)
}

impl Verifier {
    /// Asserts the verdict on one request; `what` names the case.
    pub async fn expect(
        &self,
        target: &str,
        headers: &[(String, String)],
        body: impl Into<Vec<u8>>,
        want: Verdict,
        what: &str,
    ) {
        assert_eq!(self.post(target, headers, body).await, want, "{what}");
    }

    /// Asserts `invalid_signature` without the `name` header, and with it twice (ambiguous
    /// even when one copy is right).
    pub async fn expect_missing_and_repeated_refused(
        &self,
        target: &str,
        headers: &[(String, String)],
        body: &str,
        name: &str,
    ) {
        let missing = super::mutate::without(headers, name);
        self.expect(target, &missing, body, INVALID_SIGNATURE, "missing")
            .await;
        let repeated = super::mutate::twice(headers, name);
        self.expect(target, &repeated, body, INVALID_SIGNATURE, "repeated")
            .await;
    }
}
