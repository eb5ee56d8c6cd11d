//! Published test vectors (`tests/vectors/*.json`), typed, and the one runner that sends each
//! of a file's vectors to an endpoint of its own and checks the answer.

use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};

use super::app::{TestApp, TestAppBuilder};
use super::files::repo_root;
use super::http::{Answer, refs};
use super::mutate::{Headers, header};
use super::offline::{Verdict, Verifier};
use super::secrets::{SecretsFile, Version, endpoint};

/// One file of `tests/vectors/`.
#[derive(Debug, Clone, Deserialize)]
pub struct VectorFile {
    pub scheme: String,
    #[serde(default)]
    pub vectors: Vec<Vector>,
    /// A third party's cross-check where the provider published no vector (Zoom).
    pub crosscheck: Option<Crosscheck>,
}

/// One published request and whether it verifies.
#[derive(Debug, Clone, Deserialize)]
pub struct Vector {
    /// What a receiver configures: the secret, or the public key (`secret` in older files).
    #[serde(alias = "secret")]
    pub key: String,
    /// The signed URL, query included (empty where no URL is signed).
    #[serde(default)]
    pub url: String,
    /// The request's headers, in the file's order.
    #[serde(deserialize_with = "ordered_pairs")]
    pub headers: Headers,
    /// The exact raw body.
    pub body: String,
    /// `None` in the files whose vectors all verify.
    pub expect: Option<Expect>,
    #[serde(default)]
    pub why: String,
    /// The scheme, where one file holds several (Adyen).
    pub scheme: Option<String>,
    /// A GET's query (Meta's verification request).
    pub query: Option<String>,
    pub expect_response: Option<ExpectResponse>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    Valid,
    Invalid,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ExpectResponse {
    pub status: u16,
    pub body: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Crosscheck {
    pub secret: String,
    pub plain_token: String,
    pub encrypted_token: String,
}

/// A file of `tests/vectors/`, read and typed.
pub fn vector_file(name: &str) -> VectorFile {
    let path = repo_root().join("tests/vectors").join(name);
    let text = std::fs::read_to_string(&path).expect("vector file");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

impl Vector {
    /// Whether the vector verifies (files without `expect` hold only vectors that do).
    pub fn valid(&self) -> bool {
        self.expect != Some(Expect::Invalid)
    }

    pub fn header(&self, name: &str) -> &str {
        header(&self.headers, name)
    }

    /// A header holding Unix seconds.
    pub fn timestamp(&self, name: &str) -> i64 {
        self.header(name).parse().expect("a Unix timestamp")
    }

    /// The signed URL without its query, and the query.
    pub fn split_url(&self) -> (&str, Option<&str>) {
        match self.url.split_once('?') {
            Some((base, query)) => (base, Some(query)),
            None => (&self.url, None),
        }
    }
}

/// A JSON object read as its (name, value) pairs in the file's order.
fn ordered_pairs<'de, D: Deserializer<'de>>(d: D) -> Result<Headers, D::Error> {
    struct Pairs;
    impl<'de> Visitor<'de> for Pairs {
        type Value = Headers;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object of strings")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Headers, A::Error> {
            let mut out = Vec::new();
            while let Some(pair) = map.next_entry::<String, String>()? {
                out.push(pair);
            }
            Ok(out)
        }
    }
    d.deserialize_map(Pairs)
}

/// Every vector of a file at an endpoint of its own (so that two vectors with one event id
/// are not duplicates of each other), with the vector's key as version `v1` and its URL, when
/// it signs one, as the endpoint's `public_url`.
pub struct Published {
    pub vectors: Vec<Vector>,
    /// `{prefix}-{i}` for vector `i`.
    prefix: String,
    /// The endpoints' tables; a test may add its own.
    pub endpoints: String,
    /// Their secret sets; a test may add its own.
    pub secrets: SecretsFile,
}

impl Published {
    /// `version`: how the key is configured ([`super::secrets::value`] or
    /// [`super::secrets::public_key`]).
    pub fn new(
        vectors: &[Vector],
        adapter: &str,
        prefix: &str,
        version: fn(&str, &str) -> Version,
    ) -> Self {
        let (mut endpoints, mut secrets) = (String::new(), SecretsFile::new());
        for (i, v) in vectors.iter().enumerate() {
            let name = format!("{prefix}-{i}");
            let mut e = endpoint(&name, adapter);
            let (base, _) = v.split_url();
            if !base.is_empty() {
                e = e.public_url(base);
            }
            endpoints.push_str(&e.toml());
            secrets = secrets.set(&name, [version("v1", &v.key)]);
        }
        Self {
            vectors: vectors.to_vec(),
            prefix: prefix.to_owned(),
            endpoints,
            secrets,
        }
    }

    /// `builder` with every vector's endpoint and secret set.
    pub fn app(&self, builder: TestAppBuilder) -> TestAppBuilder {
        builder
            .add_endpoints(self.endpoints.clone())
            .secrets_file(self.secrets.text())
    }

    /// A test app with `adapter` (`square.wasm`) loaded and every vector's endpoint.
    pub async fn start(&self, adapter: &'static str) -> TestApp {
        self.app(TestApp::builder().add_adapter(adapter))
            .start()
            .await
    }

    /// Where vector `i` is sent: its endpoint, with the query of the URL it signs.
    pub fn path(&self, i: usize) -> String {
        match self.vectors[i].split_url().1 {
            Some(q) => format!("{}-{i}?{q}", self.prefix),
            None => format!("{}-{i}", self.prefix),
        }
    }

    /// Sends every vector (with `extra(i)` headers after its own) and checks its status and
    /// code against `want(i, vector)`; the answers, in order.
    pub async fn run(
        &self,
        app: &TestApp,
        extra: impl Fn(usize) -> Headers,
        want: impl Fn(usize, &Vector) -> (u16, &'static str),
    ) -> Vec<Answer> {
        let mut answers = Vec::new();
        for (i, v) in self.vectors.iter().enumerate() {
            let mut headers = v.headers.clone();
            headers.extend(extra(i));
            let answer = app
                .post(&self.path(i), &refs(&headers), v.body.as_str())
                .await;
            assert_eq!(
                (answer.status, answer.code()),
                want(i, v),
                "vector {i}: {}: {answer:?}",
                v.why
            );
            answers.push(answer);
        }
        answers
    }
}

impl Published {
    /// The vectors' endpoints and secrets with no database, `adapter` (`gitlab.wasm`) loaded.
    pub async fn verifier(&self, adapter: &str, now: i64) -> Verifier {
        Verifier::of(adapter, &self.endpoints, self.secrets.clone(), now).await
    }

    /// Verifies every vector at the instant `at(vector)` and checks the verdict against
    /// `want(i, vector)`.
    pub async fn verify(
        &self,
        mut verifier: Verifier,
        at: impl Fn(&Vector) -> i64,
        want: impl Fn(usize, &Vector) -> Verdict,
    ) {
        for (i, v) in self.vectors.iter().enumerate() {
            verifier = verifier.at(at(v));
            let got = verifier
                .post(&self.path(i), &v.headers, v.body.as_str())
                .await;
            assert_eq!(got, want(i, v), "vector {i}: {}", v.why);
        }
    }
}
