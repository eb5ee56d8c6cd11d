//! A Wharf server under test, started in process on port 0 against a fresh database:
//! `TestApp::builder()` configures it, `.write_config()` writes its config without starting
//! anything, and `.start()` starts it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sqlx::PgPool;
use wharf::config::Config;
use wharf::support::clock::{FixedClock, SharedClock, SystemClock};
use wharf::support::sealing::PayloadKeys;
use wharf::{Server, ServerOptions};

use super::database::{fresh_database, scalar_i64};
use super::files::{adapter_file, repo_root};
use super::http::{Answer, get_text, get_url, post, refs};
use super::signing::{default_secrets, signed_stripe_event};

pub const DEFAULT_ENDPOINTS: &str = r#"
[[endpoint]]
id = "std"
adapter = "standard-webhooks"
secret = "std"

[[endpoint]]
id = "stripe"
adapter = "stripe"
secret = "stripe"

[[endpoint]]
id = "github"
adapter = "github"
secret = "github"
"#;

/// Worker settings with fast retries for tests; processing settings otherwise default.
pub fn worker_toml(count: usize) -> String {
    format!(
        "[worker]\ncount = {count}\nlease_secs = 3\nbackoff_base_ms = 20\nbackoff_max_ms = 200\nidle_poll_ms = 100\nreconcile_interval_secs = 3600\n"
    )
}

/// A route sending every event of the stripe endpoint to `url` (`extra`: more keys for it).
pub fn http_route_toml(url: &str, extra: &str) -> String {
    format!(
        "[[route]]\nendpoint = \"stripe\"\nevents = [\"*\"]\nsink = \"http\"\nurl = \"{url}\"\n{extra}\n"
    )
}

/// The payload key every test app seals with: `test-1`, current (base64 of
/// "test-payload-key-32-bytes-long!!").
pub const TEST_PAYLOAD_KEY: &str = "dGVzdC1wYXlsb2FkLWtleS0zMi1ieXRlcy1sb25nISE=";

/// The keys that open what a test app stored.
pub fn test_payload_keys() -> Arc<PayloadKeys> {
    Arc::new(PayloadKeys::single(
        "test-1",
        *b"test-payload-key-32-bytes-long!!",
    ))
}

/// The plaintext of a stored payload row, opened with the test key.
pub async fn opened_payload(db: &PgPool, payload_ref: uuid::Uuid) -> Vec<u8> {
    let (key_id, body): (Option<String>, Vec<u8>) =
        sqlx::query_as("SELECT key_id, body FROM webhook_payloads WHERE payload_ref = $1")
            .bind(payload_ref)
            .fetch_one(db)
            .await
            .expect("payload row");
    test_payload_keys()
        .open(payload_ref, key_id.as_deref(), &body)
        .expect("payload opens")
}

/// The admin API's bearer token in tests that turn the API on (`.admin_token(...)`).
pub const TEST_ADMIN_TOKEN: &str = "test-admin-token-0123456789abcdef0123456789";
/// The secret set that holds it.
pub const TEST_ADMIN_SET: &str = "wharf-admin";

/// The console's viewer token in tests that turn the viewer role on (`.with_viewer()`).
pub const TEST_VIEWER_TOKEN: &str = "test-viewer-token-0123456789abcdef0123456789";
/// The secret set that holds it.
pub const TEST_VIEWER_SET: &str = "console_viewer";

/// A client that sends `Authorization: Bearer TEST_ADMIN_TOKEN` on every request.
pub fn admin_client() -> reqwest::Client {
    let mut value = reqwest::header::HeaderValue::try_from(format!("Bearer {TEST_ADMIN_TOKEN}"))
        .expect("header value");
    value.set_sensitive(true);
    reqwest::Client::builder()
        .default_headers(
            [(reqwest::header::AUTHORIZATION, value)]
                .into_iter()
                .collect(),
        )
        .build()
        .expect("client")
}

static TRACING: AtomicBool = AtomicBool::new(false);

fn init_tracing() {
    if !TRACING.swap(true, Ordering::SeqCst) {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "info".into()),
            )
            .with_test_writer()
            .try_init();
    }
}

/// What a [`TestApp`] will be: by default the three standard adapters and their endpoints,
/// the default secrets, the system clock and a fresh database.
pub struct TestAppBuilder {
    secrets: String,
    /// Everything after the `[secrets]` table: the endpoints, then whatever was appended.
    tail: String,
    /// Lines appended to the `[database]` table.
    database_extra: String,
    /// Lines appended to the `[server]` table.
    server_extra: String,
    adapters: Vec<&'static str>,
    clock: Option<SharedClock>,
    database_url: Option<String>,
    max_body_bytes: u64,
    /// The payload key file's text.
    payload_keys: String,
    /// Lines appended to the `[payloads]` table.
    payloads_extra: String,
    /// `[server.tls]` files (cert, key); none: `plain_http = true`.
    tls: Option<(PathBuf, PathBuf)>,
    /// The admin API's token (set `TEST_ADMIN_SET`, appended to the secrets file); none: the
    /// admin listener serves health, readiness and metrics only.
    admin_token: Option<String>,
    /// The console's viewer token (set `TEST_VIEWER_SET`); needs the admin token.
    viewer_token: Option<String>,
}

impl TestAppBuilder {
    /// Replaces the payload key file's text (by default: [`TEST_PAYLOAD_KEY`] as `test-1`).
    pub fn payload_key_file(mut self, text: impl Into<String>) -> Self {
        self.payload_keys = text.into();
        self
    }
    /// Turns the admin API on with this bearer token: `[server] admin_token_secret` names a
    /// set appended to the secrets file (after any `secrets_file` text).
    pub fn admin_token(mut self, token: &str) -> Self {
        self.admin_token = Some(token.to_owned());
        self
    }
    /// Turns the admin API on with [`TEST_ADMIN_TOKEN`].
    pub fn with_admin(self) -> Self {
        self.admin_token(TEST_ADMIN_TOKEN)
    }
    /// The admin API and the console's viewer role, with [`TEST_VIEWER_TOKEN`].
    pub fn with_viewer(mut self) -> Self {
        self.viewer_token = Some(TEST_VIEWER_TOKEN.to_owned());
        self.with_admin()
    }
    /// Replaces the secrets file's text.
    pub fn secrets_file(mut self, text: impl Into<String>) -> Self {
        self.secrets = text.into();
        self
    }
    /// Appends to the secrets file's text (sets after the default ones).
    pub fn add_secrets(mut self, text: impl AsRef<str>) -> Self {
        self.secrets.push('\n');
        self.secrets.push_str(text.as_ref());
        self
    }
    /// One more `[[endpoint]]` (`extra`: more keys for it, one a line).
    pub fn endpoint(self, id: &str, adapter: &str, secret: &str, extra: &str) -> Self {
        self.add_endpoints(format!(
            "\n[[endpoint]]\nid = \"{id}\"\nadapter = \"{adapter}\"\nsecret = \"{secret}\"\n{extra}\n"
        ))
    }
    /// One endpoint per id, each of `adapter` and verified by the secret set of its own name.
    pub fn endpoints_of(mut self, adapter: &str, ids: &[&str]) -> Self {
        for id in ids {
            self = self.endpoint(id, adapter, id, "");
        }
        self
    }
    /// `[worker]` settings for `count` workers ([`worker_toml`]); 0: the test drives each step.
    pub fn workers(self, count: usize) -> Self {
        self.append_toml(&worker_toml(count))
    }
    /// Lines added to the `[server]` table.
    pub fn server_toml(mut self, lines: &str) -> Self {
        self.server_extra.push_str(lines);
        self.server_extra.push('\n');
        self
    }
    /// `[[endpoint]]` tables after the default ones.
    pub fn add_endpoints(mut self, toml: impl Into<String>) -> Self {
        self.tail.push_str(&toml.into());
        self
    }
    /// One more adapter component from `adapters/dist`, and the endpoints (TOML) that use it.
    pub fn add_adapter_for(self, rel: &'static str, endpoints: impl Into<String>) -> Self {
        self.add_adapter(rel).add_endpoints(endpoints)
    }
    /// One more adapter component from `adapters/dist`.
    pub fn add_adapter(mut self, rel: &'static str) -> Self {
        self.adapters.push(rel);
        self
    }
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = Some(clock);
        self
    }
    pub fn fixed_clock(self, unix: i64) -> Self {
        self.clock(FixedClock::new(unix))
    }
    /// An existing database instead of a fresh one.
    pub fn database_url(mut self, url: String) -> Self {
        self.database_url = Some(url);
        self
    }
    pub fn max_body_bytes(mut self, n: u64) -> Self {
        self.max_body_bytes = n;
        self
    }
    /// HTTPS from these PEM files (`[server.tls]`) instead of `plain_http = true`.
    pub fn tls(mut self, cert_file: &Path, key_file: &Path) -> Self {
        self.tls = Some((cert_file.to_owned(), key_file.to_owned()));
        self
    }
    /// Extra TOML appended at the end of the config (tables such as `[worker]`, `[[route]]`).
    pub fn append_toml(mut self, extra: &str) -> Self {
        self.tail.push('\n');
        self.tail.push_str(extra);
        self
    }
    /// Lines added to the `[payloads]` table (such as `upgrade_legacy_rows = true`).
    pub fn payloads_toml(mut self, lines: &str) -> Self {
        self.payloads_extra.push_str(lines);
        self.payloads_extra.push('\n');
        self
    }
    /// Extra TOML appended to the `[database]` table.
    pub fn append_database_toml(mut self, extra: &str) -> Self {
        self.database_extra.push_str(extra);
        self
    }

    /// Writes the config into a temporary folder without starting anything.
    pub async fn write_config(self) -> WrittenConfig {
        init_tracing();
        let dir = tempfile::tempdir().expect("tempdir");
        let adapters = dir.path().join("adapters");
        std::fs::create_dir(&adapters).unwrap();
        for rel in &self.adapters {
            let src = adapter_file(rel);
            std::fs::copy(&src, adapters.join(src.file_name().unwrap())).unwrap();
        }
        let secrets = dir.path().join("secrets.toml");
        let mut secrets_text = self.secrets.clone();
        let mut admin = String::new();
        if let Some(token) = &self.admin_token {
            secrets_text.push_str(&format!(
                "\n[[{TEST_ADMIN_SET}]]\nversion = \"1\"\nvalue = \"{token}\"\n"
            ));
            admin = format!("admin_token_secret = \"{TEST_ADMIN_SET}\"\n");
        }
        if let Some(token) = &self.viewer_token {
            secrets_text.push_str(&format!(
                "\n[[{TEST_VIEWER_SET}]]\nversion = \"1\"\nvalue = \"{token}\"\n"
            ));
            admin.push_str(&format!("viewer_token_secret = \"{TEST_VIEWER_SET}\"\n"));
        }
        std::fs::write(&secrets, secrets_text).unwrap();
        std::fs::write(dir.path().join("payload-keys.toml"), &self.payload_keys).unwrap();
        let database_url = match self.database_url {
            Some(url) => url,
            None => fresh_database().await,
        };
        let cache = repo_root().join("target/wharf-test-cache");
        let transport = match &self.tls {
            None => "plain_http = true\n".to_owned(),
            Some((cert, key)) => format!(
                "\n[server.tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\n",
                cert.display(),
                key.display()
            ),
        };
        let config = format!(
            r#"[server]
listen = "127.0.0.1:0"
admin_listen = "127.0.0.1:0"
max_body_bytes = {max_body}
{server_extra}{admin}{transport}
[database]
url = "{database_url}"
{database_extra}

[adapters]
dir = "adapters"
cache_dir = "{cache}"

[secrets]
file = "secrets.toml"

[payloads]
key_file = "payload-keys.toml"
{payloads_extra}{tail}"#,
            max_body = self.max_body_bytes,
            database_extra = self.database_extra,
            server_extra = self.server_extra,
            cache = cache.display(),
            payloads_extra = self.payloads_extra,
            tail = self.tail,
        );
        let config_path = dir.path().join("wharf.toml");
        std::fs::write(&config_path, config).unwrap();
        WrittenConfig {
            dir,
            config_path,
            secrets_path: secrets,
            database_url,
            admin_token: self.admin_token,
            clock: self.clock,
        }
    }

    /// Writes the config and starts the server on it.
    pub async fn start(self) -> TestApp {
        self.write_config().await.start().await
    }
}

/// A config written into its own temporary folder, with the adapters and secrets file it names.
pub struct WrittenConfig {
    pub dir: tempfile::TempDir,
    pub config_path: PathBuf,
    pub secrets_path: PathBuf,
    pub database_url: String,
    /// The admin API's token, when the builder turned the API on.
    pub admin_token: Option<String>,
    clock: Option<SharedClock>,
}

impl WrittenConfig {
    /// Starts the server, in this process, on this config.
    pub async fn start(self) -> TestApp {
        let config = Config::load(&self.config_path).expect("valid config");
        let scheme = if config.server.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let clock = self.clock.clone().unwrap_or_else(|| Arc::new(SystemClock));
        let server = Server::start(config, ServerOptions { clock })
            .await
            .expect("server starts");
        let db = PgPool::connect(&self.database_url)
            .await
            .expect("test pool");
        TestApp {
            admin: format!("http://{}", server.admin_addr.expect("admin listener")),
            base: format!("{scheme}://{}", server.addr),
            addr: server.addr,
            client: reqwest::Client::new(),
            db,
            server: Some(server),
            config: self,
        }
    }

    /// Asserts that `wharf serve` refuses this config with each of `messages` on stderr.
    pub async fn assert_refused(&self, messages: &[&str]) {
        let stderr = super::process::refused_to_serve(&self.config_path).await;
        for message in messages {
            assert!(stderr.contains(message), "{message}: {stderr}");
        }
    }

    /// The folder the server loads adapters from.
    pub fn adapters_dir(&self) -> PathBuf {
        self.dir.path().join("adapters")
    }

    /// Adds lines to the written config's `[server]` table (before `[server.tls]`).
    pub fn append_server_toml(self, lines: &str) -> Self {
        let text = std::fs::read_to_string(&self.config_path).unwrap();
        let text = text.replacen("[server]\n", &format!("[server]\n{lines}\n"), 1);
        std::fs::write(&self.config_path, text).unwrap();
        self
    }
}

/// A running server and a pool on its database.
pub struct TestApp {
    pub base: String,
    /// The admin listener: `/healthz`, `/readyz`.
    pub admin: String,
    pub addr: std::net::SocketAddr,
    pub client: reqwest::Client,
    pub db: PgPool,
    pub server: Option<Server>,
    pub config: WrittenConfig,
}

impl TestApp {
    pub fn builder() -> TestAppBuilder {
        TestAppBuilder {
            secrets: default_secrets(),
            tail: DEFAULT_ENDPOINTS.into(),
            database_extra: String::new(),
            server_extra: String::new(),
            adapters: vec!["standard-webhooks.wasm", "stripe.wasm", "github.wasm"],
            clock: None,
            database_url: None,
            max_body_bytes: 1 << 20,
            payload_keys: format!(
                "current = \"test-1\"\n[keys]\ntest-1 = \"{TEST_PAYLOAD_KEY}\"\n"
            ),
            payloads_extra: String::new(),
            tls: None,
            admin_token: None,
            viewer_token: None,
        }
    }

    /// GET on the admin listener, with the admin token when the app has one.
    pub async fn admin_get(&self, path: &str) -> Answer {
        let mut request = self.client.get(format!("{}{path}", self.admin));
        if let Some(token) = &self.config.admin_token {
            request = request.bearer_auth(token);
        }
        Answer::read(request.send().await.expect("admin answers")).await
    }

    /// GET `path` on the webhook listener, without credentials.
    pub async fn get(&self, path: &str) -> Answer {
        get_url(&self.client, &format!("{}{path}", self.base)).await
    }

    /// GET `path` on the webhook listener with these headers.
    pub async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Answer {
        let mut request = self.client.get(format!("{}{path}", self.base));
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        Answer::read(request.send().await.expect("request sent")).await
    }

    /// GET `path` on the admin listener, without credentials.
    pub async fn get_admin(&self, path: &str) -> Answer {
        get_url(&self.client, &format!("{}{path}", self.admin)).await
    }

    /// POSTs a Stripe event freshly signed with the current secret to `endpoint`.
    pub async fn post_stripe_to(&self, endpoint: &str, id: &str) -> Answer {
        let (headers, body) = signed_stripe_event(id);
        self.post(endpoint, &refs(&headers), body).await
    }

    /// POSTs a Stripe event freshly signed with the current secret to `stripe`.
    pub async fn post_stripe(&self, id: &str) -> Answer {
        self.post_stripe_to("stripe", id).await
    }

    /// POSTs `body` to `github` as GitHub signs it (delivery id `delivery`).
    pub async fn post_github(&self, body: impl Into<Vec<u8>>, delivery: &str) -> Answer {
        let body = body.into();
        let headers = super::signing::signed_github_headers(&body, delivery);
        self.post("github", &refs(&headers), body).await
    }

    /// POSTs a signed Stripe event, asserts it was answered 200, and gives its inbox id.
    pub async fn accept_stripe(&self, id: &str) -> uuid::Uuid {
        let answer = self.post_stripe(id).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        answer.json["inbox_id"]
            .as_str()
            .expect("an inbox id")
            .parse()
            .expect("a uuid")
    }

    pub async fn post(
        &self,
        endpoint: &str,
        headers: &[(&str, &str)],
        body: impl Into<Vec<u8>>,
    ) -> Answer {
        post(&self.client, &self.base, endpoint, headers, body.into()).await
    }

    /// POSTs the same request until it is accepted: before a hot-reloaded adapter is vetted
    /// its endpoint answers 503 `adapter_unavailable`, and nothing else is allowed meanwhile.
    pub async fn post_until_served(
        &self,
        endpoint: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        within: std::time::Duration,
    ) {
        let deadline = std::time::Instant::now() + within;
        loop {
            let answer = self.post(endpoint, headers, body.to_vec()).await;
            if answer.status == 200 {
                assert_eq!(answer.code(), "accepted", "{answer:?}");
                return;
            }
            assert_eq!(answer.code(), "adapter_unavailable", "{answer:?}");
            assert!(
                std::time::Instant::now() < deadline,
                "{endpoint} never served"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// The status of `/readyz`.
    pub async fn readiness(&self) -> u16 {
        let response = self
            .client
            .get(format!("{}/readyz", self.admin))
            .send()
            .await
            .expect("admin answers");
        response.status().as_u16()
    }

    /// The admin listener's `/metrics` text.
    pub async fn metrics(&self) -> String {
        get_text(&self.client, &format!("{}/metrics", self.admin)).await
    }

    /// Waits until `table` holds `n` rows where `condition` holds.
    pub async fn wait_count(&self, table: &str, condition: &str, n: i64) {
        let sql = format!("SELECT count(*) FROM {table} WHERE {condition}");
        super::wait::wait_until_count(&self.db, &sql, n).await;
    }

    /// Asserts `/metrics` values, each `series value` (absent counts as 0).
    pub async fn assert_metrics(&self, expected: &[&str]) {
        super::http::assert_metrics(&self.metrics().await, &expected.join("\n"));
    }

    /// The rows in `table`.
    pub async fn count(&self, table: &str) -> i64 {
        scalar_i64(&self.db, &format!("SELECT count(*) FROM {table}")).await
    }

    /// The server's processing context, for tests that drive workers and relays one step at
    /// a time (`Worker::new`, `DeliveryRelay::new`).
    pub fn processing(&self) -> Arc<wharf::processing::Processing> {
        Arc::clone(&self.server.as_ref().expect("a running server").processing)
    }

    /// A worker on the server's processing context, to drive one step at a time.
    pub fn worker(&self) -> wharf::processing::Worker {
        wharf::processing::Worker::new(self.processing())
    }

    /// A relay over every lane on the server's processing context.
    pub fn relay(&self) -> wharf::processing::DeliveryRelay {
        wharf::processing::DeliveryRelay::new(self.processing(), wharf::processing::Lane::All)
    }

    /// One worker step: the events it processed.
    pub async fn work_once(&self) -> usize {
        self.worker().try_execute().await.unwrap()
    }

    /// One worker step on a task of its own (for a step a test holds up).
    pub fn spawn_worker(&self) -> tokio::task::JoinHandle<usize> {
        let worker = self.worker();
        tokio::spawn(async move { worker.try_execute().await.unwrap() })
    }

    /// One relay step on a task of its own (for a send a test holds up).
    pub fn spawn_relay(&self) -> tokio::task::JoinHandle<usize> {
        let relay = self.relay();
        tokio::spawn(async move { relay.try_execute().await.unwrap() })
    }

    pub async fn shutdown(mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().await.expect("clean shutdown");
        }
    }
}
