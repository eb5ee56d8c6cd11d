//! `spawn_app()` and signing helpers shared by the black-box tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sqlx::{Connection, PgConnection, PgPool};
use tokio::sync::OnceCell;
use wharf::config::Config;
use wharf::support::clock::{FixedClock, SharedClock, SystemClock};
use wharf::{Server, ServerOptions};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_owned()
}

/// A built adapter component (or its fixtures folder); the suite needs
/// `cargo xtask adapters` first.
pub fn adapter_file(rel: &str) -> PathBuf {
    let path = repo_root().join("adapters/dist").join(rel);
    assert!(
        path.exists(),
        "{} missing: run `cargo xtask adapters` (or `cargo xtask test`)",
        path.display()
    );
    path
}

pub fn vectors(name: &str) -> serde_json::Value {
    let text =
        std::fs::read_to_string(repo_root().join("tests/vectors").join(name)).expect("vector file");
    serde_json::from_str(&text).expect("vector json")
}

/// The server that hosts every test's database.
pub fn admin_database_url() -> String {
    std::env::var("WHARF_TEST_DATABASE_URL")
        .or_else(|_| std::env::var("DATABASE_URL"))
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

fn database_url_for(name: &str) -> String {
    let admin = admin_database_url();
    let (base, _) = admin
        .rsplit_once('/')
        .expect("database url with a database name");
    format!("{base}/{name}")
}

static SWEPT: OnceCell<()> = OnceCell::const_new();

/// Creates an empty database for one test. The first call drops what earlier runs left.
pub async fn fresh_database() -> String {
    let mut admin = PgConnection::connect(&admin_database_url())
        .await
        .expect("Postgres must be running: see README (cargo xtask test starts it)");
    SWEPT
        .get_or_init(|| async {
            let stale: Vec<String> = sqlx::query_scalar(
                "SELECT datname FROM pg_database WHERE datname LIKE 'wharf\\_test\\_%'",
            )
            .fetch_all(&mut admin)
            .await
            .unwrap_or_default();
            // Only databases older than an hour: another test binary (or another checkout)
            // may be running now. The name carries a UUIDv7, so it carries its creation time.
            let cutoff = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
            for name in stale.into_iter().filter(|n| created_before(n, cutoff)) {
                let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                    .execute(&mut admin)
                    .await;
            }
        })
        .await;
    let name = format!("wharf_test_{}", uuid::Uuid::now_v7().simple());
    sqlx::query(&format!("CREATE DATABASE \"{name}\""))
        .execute(&mut admin)
        .await
        .expect("create database");
    database_url_for(&name)
}

fn created_before(name: &str, cutoff: std::time::SystemTime) -> bool {
    let Some(Ok(id)) = name.strip_prefix("wharf_test_").map(uuid::Uuid::parse_str) else {
        return false;
    };
    let Some(ts) = id.get_timestamp() else {
        return false;
    };
    let (secs, nanos) = ts.to_unix();
    std::time::UNIX_EPOCH + std::time::Duration::new(secs, nanos) < cutoff
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

pub const STRIPE_SECRET: &str = "whsec_test_stripe_2026_11";
pub const STRIPE_OLD_SECRET: &str = "whsec_test_stripe_2026_10";
pub const GITHUB_SECRET: &str = "It's a Secret to Everybody";

/// The default secrets file: the published vectors' secrets plus test ones.
pub fn default_secrets() -> String {
    format!(
        r#"[[std]]
version = "vec-1"
value = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
[[std]]
version = "vec-2"
value = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"

[[stripe]]
version = "2026-11"
value = "{STRIPE_SECRET}"
[[stripe]]
version = "2026-10"
value = "{STRIPE_OLD_SECRET}"
expires_at = "2999-01-01T00:00:00Z"

[[github]]
version = "gh-1"
value = "{GITHUB_SECRET}"
"#
    )
}

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

pub struct AppBuilder {
    secrets: String,
    endpoints: String,
    extra: String,
    adapters: Vec<&'static str>,
    clock: Option<SharedClock>,
    database_url: Option<String>,
    max_body_bytes: u64,
}

pub fn app() -> AppBuilder {
    AppBuilder {
        secrets: default_secrets(),
        endpoints: DEFAULT_ENDPOINTS.into(),
        extra: String::new(),
        adapters: vec!["standard-webhooks.wasm", "stripe.wasm", "github.wasm"],
        clock: None,
        database_url: None,
        max_body_bytes: 1 << 20,
    }
}

impl AppBuilder {
    pub fn secrets(mut self, text: impl Into<String>) -> Self {
        self.secrets = text.into();
        self
    }
    pub fn endpoints(mut self, toml: impl Into<String>) -> Self {
        self.endpoints.push_str(&toml.into());
        self
    }
    pub fn adapter(mut self, rel: &'static str) -> Self {
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
    pub fn database_url(mut self, url: String) -> Self {
        self.database_url = Some(url);
        self
    }
    pub fn max_body_bytes(mut self, n: u64) -> Self {
        self.max_body_bytes = n;
        self
    }
    /// Extra TOML appended at the end of the config (tables such as `[worker]`, `[[route]]`).
    pub fn toml(mut self, extra: &str) -> Self {
        self.endpoints.push('\n');
        self.endpoints.push_str(extra);
        self
    }
    /// Extra TOML appended to the `[database]` table.
    pub fn database_toml(mut self, extra: &str) -> Self {
        self.extra.push_str(extra);
        self
    }

    /// Writes the config into a temporary folder without starting anything.
    pub async fn write(self) -> WrittenConfig {
        init_tracing();
        let dir = tempfile::tempdir().expect("tempdir");
        let adapters = dir.path().join("adapters");
        std::fs::create_dir(&adapters).unwrap();
        for rel in &self.adapters {
            let src = adapter_file(rel);
            std::fs::copy(&src, adapters.join(src.file_name().unwrap())).unwrap();
        }
        let secrets = dir.path().join("secrets.toml");
        std::fs::write(&secrets, &self.secrets).unwrap();
        let database_url = match self.database_url {
            Some(url) => url,
            None => fresh_database().await,
        };
        let cache = repo_root().join("target/wharf-test-cache");
        let config = format!(
            r#"[server]
listen = "127.0.0.1:0"
admin_listen = "127.0.0.1:0"
max_body_bytes = {max_body}

[database]
url = "{database_url}"
{extra}

[adapters]
dir = "adapters"
cache_dir = "{cache}"

[secrets]
file = "secrets.toml"
{endpoints}"#,
            max_body = self.max_body_bytes,
            extra = self.extra,
            cache = cache.display(),
            endpoints = self.endpoints,
        );
        let config_path = dir.path().join("wharf.toml");
        std::fs::write(&config_path, config).unwrap();
        WrittenConfig {
            dir,
            config_path,
            secrets_path: secrets,
            database_url,
            clock: self.clock,
        }
    }

    pub async fn spawn(self) -> TestApp {
        self.write().await.spawn().await
    }
}

pub struct WrittenConfig {
    pub dir: tempfile::TempDir,
    pub config_path: PathBuf,
    pub secrets_path: PathBuf,
    pub database_url: String,
    clock: Option<SharedClock>,
}

impl WrittenConfig {
    pub async fn spawn(self) -> TestApp {
        let config = Config::load(&self.config_path).expect("valid config");
        let clock = self.clock.clone().unwrap_or_else(|| Arc::new(SystemClock));
        let server = Server::start(config, ServerOptions { clock })
            .await
            .expect("server starts");
        let db = PgPool::connect(&self.database_url)
            .await
            .expect("test pool");
        TestApp {
            admin: format!("http://{}", server.admin_addr.expect("admin listener")),
            base: format!("http://{}", server.addr),
            addr: server.addr,
            client: reqwest::Client::new(),
            db,
            server: Some(server),
            config: self,
        }
    }
}

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

/// An answer, read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub json: serde_json::Value,
}

impl Answer {
    pub fn code(&self) -> &str {
        self.json["error"]
            .as_str()
            .or(self.json["status"].as_str())
            .unwrap_or("")
    }
}

impl TestApp {
    pub async fn post(
        &self,
        endpoint: &str,
        headers: &[(&str, &str)],
        body: impl Into<Vec<u8>>,
    ) -> Answer {
        post(&self.client, &self.base, endpoint, headers, body.into()).await
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

    pub async fn count(&self, table: &str) -> i64 {
        sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(&self.db)
            .await
            .unwrap()
    }

    pub async fn shutdown(mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().await.expect("clean shutdown");
        }
    }
}

pub async fn get_text(client: &reqwest::Client, url: &str) -> String {
    let response = client.get(url).send().await.expect("request sent");
    response.text().await.expect("body")
}

pub async fn post(
    client: &reqwest::Client,
    base: &str,
    endpoint: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Answer {
    let mut request = client
        .post(format!("{base}/webhooks/{endpoint}"))
        .body(body);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().await.expect("request sent");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.expect("body");
    let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    Answer {
        status,
        headers,
        json,
    }
}

pub fn hmac_sha256(key: &[u8], message: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
    mac.update(message);
    mac.finalize().into_bytes().to_vec()
}

pub fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// A Stripe-style `Stripe-Signature` header for `body` at `t` under `secret`.
pub fn stripe_header(secret: &str, t: i64, body: &[u8]) -> String {
    let mut message = format!("{t}.").into_bytes();
    message.extend_from_slice(body);
    format!(
        "t={t},v1={}",
        hex::encode(hmac_sha256(secret.as_bytes(), &message))
    )
}

pub fn stripe_event(id: &str) -> String {
    format!(
        r#"{{"id":"{id}","object":"event","type":"payment_intent.succeeded","created":1764480000,"data":{{"object":{{"id":"pi_123","object":"payment_intent","amount":2000}}}}}}"#
    )
}

/// A freshly signed Stripe request: (headers, body).
pub fn signed_stripe(id: &str) -> (Vec<(String, String)>, String) {
    let body = stripe_event(id);
    let header = stripe_header(STRIPE_SECRET, now(), body.as_bytes());
    (
        vec![
            ("stripe-signature".into(), header),
            ("content-type".into(), "application/json".into()),
        ],
        body,
    )
}

pub fn github_headers(body: &[u8], delivery: &str) -> Vec<(String, String)> {
    vec![
        (
            "x-hub-signature-256".into(),
            format!(
                "sha256={}",
                hex::encode(hmac_sha256(GITHUB_SECRET.as_bytes(), body))
            ),
        ),
        ("x-github-delivery".into(), delivery.into()),
        ("x-github-event".into(), "push".into()),
    ]
}

pub fn standard_signature(secret: &str, id: &str, ts: i64, body: &[u8]) -> String {
    let key = base64::engine::general_purpose::STANDARD
        .decode(secret.trim_start_matches("whsec_"))
        .unwrap();
    let mut message = format!("{id}.{ts}.").into_bytes();
    message.extend_from_slice(body);
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(hmac_sha256(&key, &message))
    )
}

/// Copies a folder of folders of files (a fixtures folder).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_tree(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}

/// Writes `bytes` to `dest` the way deploy tools should: a temporary file, then a rename.
pub fn install_atomically(dest: &Path, bytes: &[u8]) {
    let temp = dest.with_extension("tmp-upload");
    std::fs::write(&temp, bytes).unwrap();
    std::fs::rename(&temp, dest).unwrap();
}

pub fn refs(headers: &[(String, String)]) -> Vec<(&str, &str)> {
    headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// A `wharf serve` child process on port 0; killed on drop.
pub struct ServeProcess {
    pub child: tokio::process::Child,
    pub base: String,
    /// The admin listener's base URL, when the config has one.
    pub admin: Option<String>,
}

impl ServeProcess {
    /// Starts `wharf serve`; its log (stderr) goes to `log` at `RUST_LOG=info`, else nowhere.
    pub async fn start(config: &Path, log: Option<&Path>) -> Self {
        Self::start_with(&["serve"], config, log, &[]).await
    }

    /// Starts `wharf <command...> --config CONFIG` with extra environment variables and waits
    /// for its first stdout line (`serve` prints its addresses, `worker` its worker count).
    pub async fn start_with(
        command: &[&str],
        config: &Path,
        log: Option<&Path>,
        env: &[(&str, &str)],
    ) -> Self {
        use std::process::Stdio;
        use tokio::io::AsyncBufReadExt;
        let stderr = match log {
            Some(path) => Stdio::from(std::fs::File::create(path).expect("log file")),
            None => Stdio::null(),
        };
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wharf"))
            .args(command)
            .arg("--config")
            .arg(config)
            .env_remove("WHARF_DATABASE_URL")
            .env_remove("DATABASE_URL")
            .env_remove("WHARF_FAILPOINTS")
            .env("RUST_LOG", if log.is_some() { "info" } else { "warn" })
            .env("WHARF_LOG_FORMAT", "json")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .expect("wharf binary");
        let stdout = child.stdout.take().unwrap();
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let line = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
            .await
            .expect("wharf starts within a minute")
            .unwrap()
            .expect("a first line on stdout");
        let started: serde_json::Value = serde_json::from_str(&line).expect("json line");
        let base = started["listening"]
            .as_str()
            .map(|a| format!("http://{a}"))
            .unwrap_or_default();
        let admin = started["admin"].as_str().map(|a| format!("http://{a}"));
        Self { child, base, admin }
    }

    /// Waits for the process to end on its own (a failpoint) and returns how it ended.
    pub async fn wait_exit(mut self, within: std::time::Duration) -> std::process::ExitStatus {
        tokio::time::timeout(within, self.child.wait())
            .await
            .expect("the process ends in time")
            .unwrap()
    }

    /// SIGTERM, then waits for the graceful exit.
    pub async fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("running") as i32;
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), self.child.wait())
            .await
            .expect("exits within 10 s of SIGTERM")
            .unwrap()
    }
}

impl WrittenConfig {
    /// Adds lines to the written config's `[server]` table.
    pub fn server_toml(self, lines: &str) -> Self {
        let text = std::fs::read_to_string(&self.config_path).unwrap();
        let text = text.replacen("[server]\n", &format!("[server]\n{lines}\n"), 1);
        std::fs::write(&self.config_path, text).unwrap();
        self
    }
}

/// Reads what the server sends until it closes the connection (or `within` passes):
/// `(bytes, closed)`.
pub async fn read_until_closed(
    stream: &mut tokio::net::TcpStream,
    within: std::time::Duration,
) -> (String, bool) {
    use tokio::io::AsyncReadExt;
    let mut answer = Vec::new();
    let closed = tokio::time::timeout(within, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .is_ok();
    (String::from_utf8_lossy(&answer).into_owned(), closed)
}

/// The JSON request lines (message `webhook`) of a `wharf serve` log written with
/// `WHARF_LOG_FORMAT=json`.
pub fn request_lines(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .filter(|l| l.contains("\"webhook\""))
        .map(|l| serde_json::from_str(l).expect("json log line"))
        .collect()
}
