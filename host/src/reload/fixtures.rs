//! Adapter fixtures: recorded requests with their expected outcome, run through the same
//! verification path as live traffic (`ingest::verify_and_parse`) with no database.
//!
//! A fixtures folder holds one folder per case:
//!
//! ```text
//! <case>/request.toml   now (Unix seconds), optional method ("POST" or "GET"), headers as
//!                       [name, value] pairs in order, optional query, optional [endpoint]
//!                       (public_url, tolerances, settings), the [[secret]] set, any
//!                       further sets the checks name as [[secrets.<slot>]], and optional
//!                       [sign]: the runner signs the request (see below)
//! <case>/body           the exact raw body bytes
//! <case>/expected.toml  outcome = "accepted" (with [[event]]s), "handshake", "ignored",
//!                       or "rejected" with the error code the receiver would answer
//! ```
//!
//! A self-signing fixture (`[sign]`, in `fixture_sign`) leaves the signature to the runner:
//! header values and `query` are then templates (`{now}`, `{timestamp}`, `{signature}`),
//! `{signature}` being the HMAC-SHA256 of `[sign] over` (`"{timestamp}.{body}"`, say), hex or
//! base64, under the first `[[secret]]` value decoded as the adapter declares its keys:
//!
//! ```toml
//! now = 1767225605
//! headers = [["x-webhook-timestamp", "{timestamp}"], ["x-webhook-signature", "sha256={signature}"]]
//! [sign]
//! over = "{timestamp}.{body}"
//! encoding = "hex"
//! [[secret]]
//! version = "v1"
//! value = "change-me-demo-secret"
//! ```
//!
//! `wharf adapter test` and hot reload both use `run_dir`; a failing case prints the expected
//! and actual outcome as a line diff. The folder is read under `fixture_folder`'s rules: plain
//! folders and files only, sizes capped.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::fixture_folder::{
    Case, MAX_BODY_BYTES, MAX_TOML_BYTES, cases, fixtures_root, read_fixture_file,
};
use super::fixture_sign::{Place, SignFile, Signed};
use crate::adapter::LoadedAdapter;
use crate::config::{EndpointConfig, UnsupportedTypes};
use crate::ingest::StoredVersion;
use crate::ingest::{Admitted, Outcome, RequestFacts, Verified, verify_and_parse};
use crate::ingest::{IngestError, Secrets};

/// The secret set's name inside a fixture; endpoints in fixtures always use it.
const FIXTURE_SET: &str = "fixture";
/// Lines of each outcome fed to the line diff (quadratic in memory); longer outcomes that
/// differ are shown as short excerpts instead.
pub const MAX_DIFF_LINES: usize = 200;
/// Bytes of each outcome fed to the line diff, for the same reason.
pub const MAX_DIFF_BYTES: usize = 16 << 10;
/// Excerpt lines shown per side when an outcome is too long to diff, and their longest.
const EXCERPT_LINES: usize = 10;
const EXCERPT_LINE_CHARS: usize = 200;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestFile {
    /// The fixed clock: freshness and secret expiry are judged at this instant.
    now: i64,
    /// `POST` (the default) or `GET`.
    method: Option<String>,
    /// `[name, value]` pairs, in order; a repeated name is sent twice.
    headers: Vec<(String, String)>,
    query: Option<String>,
    #[serde(default)]
    endpoint: EndpointFile,
    /// The endpoint's secret set, newest first, exactly as in the secrets file.
    secret: Vec<toml::Table>,
    /// Further sets by slot (`check.key`), each newest first.
    #[serde(default)]
    secrets: std::collections::BTreeMap<String, Vec<toml::Table>>,
    /// The runner signs the request: header values and `query` are templates.
    sign: Option<SignFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EndpointFile {
    id: Option<String>,
    public_url: Option<String>,
    tolerance_secs: Option<u64>,
    future_tolerance_secs: Option<u64>,
    #[serde(default)]
    unsupported_types: UnsupportedTypes,
    #[serde(default)]
    settings: std::collections::BTreeMap<String, String>,
}

/// An outcome, as written in `expected.toml` and as computed; compared whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    /// `accepted`, `handshake`, `ignored` or `rejected`.
    pub outcome: String,
    /// For `rejected`: the code the receiver answers (`invalid_signature`, `stale_timestamp`,
    /// `malformed`, `unsupported_event_type`, `adapter_unavailable`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// For `accepted`: the secret version that verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_version: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub event: Vec<ExpectedEvent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshake: Option<ExpectedHandshake>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedEvent {
    pub event_id: String,
    pub event_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_id: Option<String>,
    /// A provider sequence number (`ordering = sequence`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<i64>,
    /// The ordering timestamp (`ordering = created-at`), Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_created_at: Option<i64>,
    /// When the provider created the event, Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
    /// The event's slice of a batch body, `[start, end)` byte offsets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<[i64; 2]>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedHandshake {
    pub status: u16,
    pub content_type: String,
    /// The answer body as UTF-8 text (lossy for binary answers).
    pub body: String,
}

/// One case's result.
#[derive(Debug)]
pub struct CaseResult {
    pub name: String,
    /// `None` when the case passed; else what to show (a diff, or why it could not run).
    pub failure: Option<String>,
}

/// Every case of a fixtures folder, in name order.
#[derive(Debug, Default)]
pub struct Report {
    pub cases: Vec<CaseResult>,
}

impl Report {
    pub fn failed(&self) -> usize {
        self.cases.iter().filter(|c| c.failure.is_some()).count()
    }

    pub fn passed(&self) -> usize {
        self.cases.len() - self.failed()
    }

    /// A short reason for logs and the status table: the first failing case.
    pub fn summary(&self) -> String {
        match self.cases.iter().find(|c| c.failure.is_some()) {
            Some(case) => format!(
                "{} of {} fixtures failed, first {:?}: {}",
                self.failed(),
                self.cases.len(),
                case.name,
                case.failure.as_deref().unwrap_or_default()
            ),
            None => format!("{} fixtures passed", self.cases.len()),
        }
    }

    /// What `wharf adapter test` prints.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for case in &self.cases {
            match &case.failure {
                None => out.push_str(&format!("ok    {}\n", case.name)),
                Some(why) => {
                    out.push_str(&format!("FAIL  {}\n", case.name));
                    for line in why.lines() {
                        out.push_str(&format!("      {line}\n"));
                    }
                }
            }
        }
        out.push_str(&format!(
            "{} passed, {} failed\n",
            self.passed(),
            self.failed()
        ));
        out
    }
}

/// Runs every case in `dir` against `adapter`. An empty folder is an error: it is far more
/// likely a wrong path than an adapter with nothing to test.
pub async fn run_dir(adapter: &Arc<LoadedAdapter>, dir: &Path) -> anyhow::Result<Report> {
    let root = fixtures_root(dir)?;
    let cases = cases(&root)?;
    anyhow::ensure!(
        !cases.is_empty(),
        "no fixtures in {} (expected folders with request.toml, body, expected.toml)",
        dir.display()
    );
    let mut report = Report::default();
    for case in cases {
        let name = case
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let failure = match case {
            Case::Symlink(_) => Some(
                "cannot run: the case folder is a symlink; fixtures must be plain folders and files"
                    .into(),
            ),
            Case::Folder(case) => match run_case_in(adapter, &root, &case).await {
                Ok(ran) if ran.expected == ran.actual => None,
                Ok(ran) => Some(match ran.cause {
                    // Why the host rejected it: what an author needs to fix the adapter.
                    Some(cause) => format!("{}cause: {cause}", diff(&ran.expected, &ran.actual)),
                    None => diff(&ran.expected, &ran.actual),
                }),
                Err(e) => Some(format!("cannot run: {e:#}")),
            },
        };
        report.cases.push(CaseResult { name, failure });
    }
    Ok(report)
}

/// One case, run.
pub struct Ran {
    pub expected: Expected,
    pub actual: Expected,
    /// For a rejection, the internal cause the request log would carry.
    pub cause: Option<String>,
}

/// Runs one case folder (its parent is taken as the fixtures folder).
pub async fn run_case(adapter: &Arc<LoadedAdapter>, case: &Path) -> anyhow::Result<Ran> {
    let root = fixtures_root(case.parent().unwrap_or(Path::new(".")))?;
    let name = case
        .file_name()
        .ok_or_else(|| anyhow::anyhow!("{} is not a case folder", case.display()))?;
    run_case_in(adapter, &root, &root.join(name)).await
}

async fn run_case_in(
    adapter: &Arc<LoadedAdapter>,
    root: &Path,
    case: &Path,
) -> anyhow::Result<Ran> {
    let toml_text = |file: &str| {
        String::from_utf8(read_fixture_file(root, case, file, MAX_TOML_BYTES)?)
            .map_err(|_| anyhow::anyhow!("{file}: not UTF-8"))
    };
    let request: RequestFile = toml::from_str(&toml_text("request.toml")?)
        .map_err(|e| anyhow::anyhow!("request.toml: {}", e.message()))?;
    let expected: Expected = toml::from_str(&toml_text("expected.toml")?)
        .map_err(|e| anyhow::anyhow!("expected.toml: {}", e.message()))?;
    let body = Bytes::from(read_fixture_file(root, case, "body", MAX_BODY_BYTES)?);
    let mut request = request;
    if let Some(sign) = &request.sign {
        let secret = request
            .secret
            .first()
            .and_then(|v| v.get("value")?.as_str());
        let signed = Signed::new(sign, request.now, secret, adapter.info.encoding, &body)
            .map_err(|e| anyhow::anyhow!("request.toml: {e}"))?;
        for (_, value) in &mut request.headers {
            *value = signed
                .text(value, Place::Header)
                .map_err(|e| anyhow::anyhow!("request.toml: {e}"))?;
        }
        if let Some(query) = &mut request.query {
            *query = signed
                .text(query, Place::Query)
                .map_err(|e| anyhow::anyhow!("request.toml: {e}"))?;
        }
    }

    let mut headers = http::HeaderMap::new();
    for (name, value) in &request.headers {
        headers.append(
            http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| anyhow::anyhow!("header name {name:?}: {e}"))?,
            http::HeaderValue::from_bytes(value.as_bytes())
                .map_err(|e| anyhow::anyhow!("header {name:?}: {e}"))?,
        );
    }
    let mut sets = toml::Table::new();
    sets.insert(
        FIXTURE_SET.into(),
        toml::Value::Array(request.secret.into_iter().map(Into::into).collect()),
    );
    let mut slots = std::collections::BTreeMap::new();
    for (slot, versions) in request.secrets {
        let set = format!("{FIXTURE_SET}.{slot}");
        sets.insert(
            set.clone(),
            toml::Value::Array(versions.into_iter().map(Into::into).collect()),
        );
        slots.insert(slot, set);
    }
    let method = match request.method.as_deref() {
        None | Some("POST") => http::Method::POST,
        Some("GET") => http::Method::GET,
        Some(other) => anyhow::bail!("request.toml: method {other:?} is not POST or GET"),
    };
    // As the HTTP route does: a GET reaches only an adapter that serves one.
    anyhow::ensure!(
        method == http::Method::POST || adapter.info.serves_get,
        "request.toml: method GET, but the adapter does not serve GET (the receiver answers 405)"
    );
    let secrets = Secrets::parse(&toml::to_string(&sets)?)
        .map_err(|e| anyhow::anyhow!("request.toml [[secret]]: {e}"))?;
    let now = OffsetDateTime::from_unix_timestamp(request.now)?;
    let e = request.endpoint;
    let admitted = Admitted {
        endpoint: Arc::new(EndpointConfig {
            id: e.id.unwrap_or_else(|| "fixture".into()),
            adapter: adapter.info.name.clone(),
            secret: FIXTURE_SET.into(),
            public_url: e.public_url,
            tolerance_secs: e.tolerance_secs,
            future_tolerance_secs: e.future_tolerance_secs,
            max_body_bytes: None,
            unsupported_types: e.unsupported_types,
            rate_limit: None,
            max_attempts: None,
            projection_document: None,
            secrets: slots,
            settings: Arc::new(e.settings),
            redelivery_window_days: None,
        }),
        adapter: Arc::clone(adapter),
        max_body_bytes: u64::MAX,
    };
    let mut facts = RequestFacts::default();
    let result = verify_and_parse(
        &admitted,
        &secrets,
        now,
        method,
        Arc::new(headers),
        request.query.as_deref(),
        body,
        &mut facts,
    )
    .await;
    // A breach of the verification contract fails the case whatever it expects: such a file
    // must never be swapped in, even with a fixture that anticipates the 503.
    if let Err(e @ crate::ingest::IngestError::AdapterContract(_)) = &result {
        anyhow::bail!("{}", e.internal_cause().unwrap_or_default());
    }
    let cause = result.as_ref().err().and_then(IngestError::internal_cause);
    Ok(Ran {
        expected,
        actual: outcome_of(result),
        cause,
    })
}

fn outcome_of(result: Result<Verified, crate::ingest::IngestError>) -> Expected {
    let mut out = Expected {
        outcome: String::new(),
        code: None,
        secret_version: None,
        event: Vec::new(),
        handshake: None,
    };
    match result {
        Err(e) => {
            out.outcome = "rejected".into();
            out.code = Some(e.status_and_code().1.into());
        }
        Ok(Verified::Done(Outcome::Handshake(h))) => {
            out.outcome = "handshake".into();
            out.handshake = Some(ExpectedHandshake {
                status: h.status,
                content_type: h.content_type,
                body: String::from_utf8_lossy(&h.body).into_owned(),
            });
        }
        Ok(Verified::Done(Outcome::Ignored(_))) => out.outcome = "ignored".into(),
        // Stored outcomes come only from the database, after `Verified::Accept`.
        Ok(Verified::Done(Outcome::Stored(_))) => out.outcome = "stored".into(),
        Ok(Verified::Accept(submission)) => {
            out.outcome = "accepted".into();
            out.secret_version = Some(submission.matched_secret_version);
            out.event = submission
                .events
                .into_iter()
                .map(|e| ExpectedEvent {
                    event_id: e.event_id,
                    event_type: e.event_type,
                    object_id: e.object_id,
                    sequence: match e.object_version {
                        Some(StoredVersion::Sequence(v)) => Some(v),
                        _ => None,
                    },
                    version_created_at: match e.object_version {
                        Some(StoredVersion::CreatedAt(v)) => Some(v),
                        _ => None,
                    },
                    created_at: e.created_at.map(OffsetDateTime::unix_timestamp),
                    span: e.payload_span.map(|(a, b)| [a, b]),
                })
                .collect();
        }
    }
    out
}

/// Both outcomes as `expected.toml` text, line by line: `-` expected only, `+` actual only.
/// Past [`MAX_DIFF_LINES`] or [`MAX_DIFF_BYTES`] on either side, the first lines of each instead (the line diff
/// needs memory in the product of the two lengths).
pub fn diff(expected: &Expected, actual: &Expected) -> String {
    let render = |e: &Expected| toml::to_string(e).unwrap_or_else(|e| format!("<{e}>"));
    let (a, b) = (render(expected), render(actual));
    let too_long = a.len().max(b.len()) > MAX_DIFF_BYTES;
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    if too_long || a.len() > MAX_DIFF_LINES || b.len() > MAX_DIFF_LINES {
        return excerpts(&a, &b);
    }
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut out = String::from("--- expected.toml\n+++ actual\n");
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!("  {}\n", a[i]));
            (i, j) = (i + 1, j + 1);
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push_str(&format!("- {}\n", a[i]));
            i += 1;
        } else {
            out.push_str(&format!("+ {}\n", b[j]));
            j += 1;
        }
    }
    out
}

/// The start of each outcome, each line shortened, for outcomes too long to diff.
fn excerpts(a: &[&str], b: &[&str]) -> String {
    let mut out = format!(
        "expected.toml and the actual outcome differ ({} and {} lines, too long to diff; \
         the first {EXCERPT_LINES} of each follow)\n",
        a.len(),
        b.len()
    );
    for (mark, lines) in [("-", a), ("+", b)] {
        for line in lines.iter().take(EXCERPT_LINES) {
            let short: String = line.chars().take(EXCERPT_LINE_CHARS).collect();
            let cut = if short.len() < line.len() { "…" } else { "" };
            out.push_str(&format!("{mark} {short}{cut}\n"));
        }
        if lines.len() > EXCERPT_LINES {
            out.push_str(&format!(
                "{mark} … {} more lines\n",
                lines.len() - EXCERPT_LINES
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_marks_changed_lines() {
        let expected = Expected {
            outcome: "rejected".into(),
            code: Some("invalid_signature".into()),
            secret_version: None,
            event: vec![],
            handshake: None,
        };
        let actual = Expected {
            code: Some("stale_timestamp".into()),
            ..expected.clone()
        };
        let d = diff(&expected, &actual);
        assert!(d.contains("- code = \"invalid_signature\""), "{d}");
        assert!(d.contains("+ code = \"stale_timestamp\""), "{d}");
        assert!(d.contains("  outcome = \"rejected\""), "{d}");
    }

    #[test]
    fn long_outcomes_are_excerpted_not_diffed() {
        let event = |n: usize| ExpectedEvent {
            event_id: format!("evt_{n}"),
            event_type: "t".into(),
            object_id: None,
            sequence: None,
            version_created_at: None,
            created_at: None,
            span: None,
        };
        let expected = Expected {
            outcome: "accepted".into(),
            code: None,
            secret_version: Some("v".into()),
            event: (0..300).map(event).collect(),
            handshake: None,
        };
        let actual = Expected {
            event: (1..301).map(event).collect(),
            ..expected.clone()
        };
        let d = diff(&expected, &actual);
        assert!(d.contains("too long to diff"), "{d}");
        assert!(d.lines().count() < 3 * EXCERPT_LINES, "{d}");
        assert!(d.contains("- outcome = \"accepted\""), "{d}");
    }
}
