//! `[server]`: the ingest listener (HTTPS from `[server.tls]`, or plain HTTP when asked), the
//! admin listener, request bounds, admission and the proxies whose forwarding headers count.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::database::MAX_COMMIT_TIMEOUT_MS;
use super::problems::{KeyPath, Problems, in_range};
use super::providers::{MAX_RATE_LIMIT, MIN_RATE_PER_SECOND, RateLimit};

pub const DEFAULT_MAX_BODY_BYTES: u64 = 1 << 20;
/// The largest body limit anywhere (server, endpoint): bodies are buffered whole.
pub const MAX_BODY_BYTES: u64 = 64 << 20;
/// The most `trusted_proxies` entries: each request from a proxy walks the list per hop.
pub const MAX_TRUSTED_PROXIES: usize = 256;

section! {
    #[derive(Debug, Clone)]
    pub struct ServerConfig as s: Default {
        pub listen: SocketAddr = "127.0.0.1:8080".parse().expect("literal"),
        pub admin_listen: Option<SocketAddr>,
        /// The secret set (in the secrets file) whose unexpired `value`s are the admin API's
        /// bearer tokens. Unset: the admin listeners serve only `/healthz`, `/readyz` and
        /// `/metrics`, and every `/admin/*` path is 404.
        pub admin_token_secret: Option<String>,
        /// Longest any admin API statement runs (lists, counts, replays): past it the request
        /// is 503 `database_unavailable` and the connection goes back to the API's pool.
        pub admin_statement_timeout_ms: u64 = 10_000; 100..=600_000,
        /// The secret set whose unexpired `value`s sign in to the console (`/console/`) as
        /// viewers: everything but payload bodies, and no replay. Needs `admin_token_secret`.
        pub viewer_token_secret: Option<String>,
        /// How long a console session lasts after sign-in (it ends sooner when its token
        /// version expires or is removed from the secrets file).
        pub console_session_minutes: u64 = 480; 5..=10_080,
        /// HTTPS on `admin_listen` from these PEM files (the ingest pair may be named again),
        /// reloaded when they change: the console shows decrypted data. Without it the admin
        /// listener is plain HTTP: bind it to localhost or a private network.
        pub admin_tls: Option<TlsConfig>,
        pub max_body_bytes: u64 = DEFAULT_MAX_BODY_BYTES; 1..=MAX_BODY_BYTES,
        /// At most this many header lines (431 past it).
        pub max_headers: usize = 64; 1..=1024,
        /// At most this many bytes of header names and values together (431 past it).
        pub max_header_bytes: usize = 16 << 10; 1024..=1 << 20,
        /// Serve plain HTTP on `listen`: only when set explicitly (local use, or behind a proxy
        /// that terminates TLS). Without it the listener needs `[server.tls]`.
        pub plain_http: bool = false,
        /// HTTPS on `listen` from these PEM files, reloaded when they change.
        pub tls: Option<TlsConfig>,
        /// Peers (addresses or CIDR networks) whose `X-Forwarded-For`/`X-Forwarded-Proto` and
        /// `Forwarded` headers are believed; from any other peer they are ignored.
        pub trusted_proxies: Vec<String> = Vec::new(),
        /// Longest wait for a complete request head, from accept or from the end of the previous
        /// answer on a kept-alive connection: also the idle keep-alive timeout.
        pub header_timeout_ms: u64 = 10_000; 100..=300_000,
        /// Longest time to receive a whole body once its head is in; then 408 and close.
        pub body_timeout_ms: u64 = 30_000; 100..=600_000,
        /// How long a body may take before it is held to `body_min_bytes_per_second`, and
        /// before it may be made to give way when the body budget is full (at most
        /// `body_timeout_ms` applies).
        pub body_grace_ms: u64 = 1_000; 100..=600_000,
        /// After the grace period a body must keep coming at this rate on average: by
        /// `grace + t` it has sent this times `t` bytes, or it is cut, 408 `body_timeout`.
        pub body_min_bytes_per_second: u64 = 1024; 1..=1 << 30,
        /// Connections open at once per listener; past it, new ones wait in the kernel's backlog.
        pub max_connections: usize = 1024; 1..=100_000,
        /// Body bytes that requests in flight may hold together, reserved as they arrive and
        /// held until the answer. When they do not fit, the slowest uploads past their grace
        /// period give way (503 `overloaded`); with none to, the newcomer is 503 `overloaded`
        /// (from its head alone when its first bytes could not fit). At least one largest body
        /// must fit, or no request could ever be read.
        pub max_buffered_bytes: u64 = 64 << 20;
            s.max_body_bytes..=16 << 30; "at least max_body_bytes",
        /// Longest a request admitted past the body read should wait for its answer under
        /// overload. Admission keeps in flight what the receiver answered per second times half
        /// this, so whatever cannot be answered in time is refused at once (503 `overloaded`)
        /// before the adapter runs. Above the commit timeout it would admit requests that can
        /// only end in a 503.
        pub answer_budget_ms: u64 = 500; 10..=MAX_COMMIT_TIMEOUT_MS,
        /// Requests admitted at once whatever the measured rate, so a burst after a quiet spell
        /// is taken (the rate measured then was low).
        pub min_in_flight: usize = 512; 1..=8192,
        /// Requests per second each client address may send that fail verification: a token
        /// bucket per address (`trusted_proxies` decides which address; IPv6 by its /64). Every
        /// request takes a token before its body is read, so one address's flood is 429 before
        /// it costs a read or an adapter call; one whose signature verifies gives it back, so
        /// a provider's own traffic is limited only by the endpoint and provider limits. A
        /// proxy in front must be in `trusted_proxies`, or every client shares its one bucket.
        pub client_rate_per_second: f64 = 20.0; MIN_RATE_PER_SECOND..=f64::from(MAX_RATE_LIMIT),
        /// Requests one client address may have taken at once before `client_rate_per_second`
        /// applies.
        pub client_rate_burst: u32 = 40; 1..=MAX_RATE_LIMIT,
    }
}

/// `[server.tls]`: the public listener's certificate chain and private key, PEM.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The server certificate first, then any intermediates.
    pub cert_file: PathBuf,
    /// Its private key: PKCS#8, PKCS#1 (RSA) or SEC1 (EC).
    pub key_file: PathBuf,
}

impl ServerConfig {
    /// `trusted_proxies` parsed: a bare address is a network of one.
    pub fn trusted_proxies(&self) -> anyhow::Result<Vec<ipnet::IpNet>> {
        in_range(
            "[server] trusted_proxies (entries)",
            self.trusted_proxies.len(),
            0..=MAX_TRUSTED_PROXIES,
        )?;
        self.trusted_proxies
            .iter()
            .map(|entry| {
                let text = entry.trim();
                text.parse::<ipnet::IpNet>()
                    .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "[server] trusted_proxies: {entry:?} is not an IP address or a CIDR \
                             network (such as \"10.0.0.0/8\" or \"::1\")"
                        )
                    })
            })
            .collect()
    }
    /// The bucket each client address draws on.
    pub fn client_rate_limit(&self) -> RateLimit {
        RateLimit {
            per_second: self.client_rate_per_second,
            burst: self.client_rate_burst,
        }
    }
    pub fn answer_budget(&self) -> Duration {
        Duration::from_millis(self.answer_budget_ms)
    }
    pub fn header_timeout(&self) -> Duration {
        Duration::from_millis(self.header_timeout_ms)
    }
    pub fn body_timeout(&self) -> Duration {
        Duration::from_millis(self.body_timeout_ms)
    }
    pub fn body_grace(&self) -> Duration {
        Duration::from_millis(self.body_grace_ms.min(self.body_timeout_ms))
    }

    /// HTTPS or plain HTTP, a named admin token set, proxies that parse.
    pub(super) fn problems(&self, p: &mut Problems) {
        match (&self.tls, self.plain_http) {
            (None, false) => p.ensure(false, KeyPath::section("server", "plain_http"), || {
                "[server]: the ingest listener serves HTTPS or, only when asked, plain HTTP: add \
                 [server.tls] with cert_file and key_file (PEM) for HTTPS, or set \
                 plain_http = true to serve plain HTTP (local use, or behind a proxy that \
                 terminates TLS)"
                    .into()
            }),
            (Some(_), true) => p.ensure(false, KeyPath::section("server", "tls"), || {
                "[server]: both [server.tls] and plain_http = true are set; the ingest listener \
                 serves one or the other: remove plain_http for HTTPS, or [server.tls] for plain \
                 HTTP"
                    .into()
            }),
            _ => {}
        }
        if let Some(set) = &self.admin_token_secret {
            p.ensure(
                !set.is_empty(),
                KeyPath::section("server", "admin_token_secret"),
                || "[server] admin_token_secret must name a secret set".into(),
            );
        }
        if let Some(set) = &self.viewer_token_secret {
            p.ensure(
                !set.is_empty() && self.admin_token_secret.is_some(),
                KeyPath::section("server", "viewer_token_secret"),
                || {
                    "[server] viewer_token_secret must name a secret set, beside \
                     admin_token_secret (the console exists only with an admin token)"
                        .into()
                },
            );
            p.ensure(
                self.admin_token_secret.as_ref() != Some(set),
                KeyPath::section("server", "viewer_token_secret"),
                || {
                    "[server] viewer_token_secret names the admin token set: a viewer would be \
                     an admin"
                        .into()
                },
            );
        }
        let proxies = self.trusted_proxies().err();
        p.ensure(
            proxies.is_none(),
            KeyPath::section("server", "trusted_proxies"),
            || proxies.map(|e| e.to_string()).unwrap_or_default(),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::Config;
    use super::super::testing::{config_with, payloads_table};
    use super::*;

    #[test]
    fn defaults_are_valid() {
        let config = config_with("server", "").unwrap();
        assert_eq!(config.server.header_timeout_ms, 10_000);
        assert_eq!(config.server.body_timeout_ms, 30_000);
        assert_eq!(config.server.body_grace_ms, 1_000);
        assert_eq!(config.server.body_min_bytes_per_second, 1024);
        assert_eq!(config.server.max_connections, 1024);
        assert_eq!(config.server.max_buffered_bytes, 64 << 20);
        assert_eq!(
            config.server.client_rate_limit(),
            RateLimit {
                per_second: 20.0,
                burst: 40
            }
        );
        for (knob, message) in [
            (
                "client_rate_per_second = 0\n",
                "client_rate_per_second = 0 is out of range",
            ),
            (
                "client_rate_burst = 0\n",
                "client_rate_burst = 0 is out of range",
            ),
            ("body_grace_ms = 99\n", "body_grace_ms = 99 is out of range"),
            (
                "body_min_bytes_per_second = 0\n",
                "body_min_bytes_per_second = 0 is out of range",
            ),
        ] {
            let error = config_with("server", knob).unwrap_err().to_string();
            assert!(error.contains(message), "{knob}: {error}");
        }
    }

    #[test]
    fn the_listener_serves_https_or_plain_http_only_when_asked() {
        let tls = "[server.tls]\ncert_file = \"tls/cert.pem\"\nkey_file = \"/etc/key.pem\"\n";
        let base = "[adapters]\ndir = \"a\"\n[secrets]\nfile = \"s.toml\"\n\
                    [database]\nurl = \"postgres://x/y\"\n";
        let load = |server: &str| {
            let text = format!("{server}{base}{}", payloads_table());
            let config = Config::parse(&text, Path::new("/conf"))?;
            config.validate().map(|()| config)
        };
        let config = load(&format!("[server]\n{tls}")).unwrap();
        let files = config.server.tls.unwrap();
        assert_eq!(files.cert_file, Path::new("/conf/tls/cert.pem"));
        assert_eq!(files.key_file, Path::new("/etc/key.pem"));

        let neither = load("[server]\n").unwrap_err().to_string();
        assert!(
            neither.contains("[server.tls]") && neither.contains("plain_http = true"),
            "{neither}"
        );
        let explicit_no = load("[server]\nplain_http = false\n").unwrap_err();
        assert_eq!(explicit_no.to_string(), neither);
        let both = load(&format!("[server]\nplain_http = true\n{tls}"))
            .unwrap_err()
            .to_string();
        assert!(both.contains("both"), "{both}");
        let unknown = load(&format!("[server]\n{tls}ca_file = \"x\"\n")).unwrap_err();
        assert!(unknown.to_string().contains("ca_file"), "{unknown}");
    }

    #[test]
    fn the_viewer_set_stands_beside_the_admin_set() {
        let with = |lines: &str| {
            config_with("server", lines)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        assert!(with("admin_token_secret = \"a\"\nviewer_token_secret = \"v\"\n").is_ok());
        let alone = with("viewer_token_secret = \"v\"\n").unwrap_err();
        assert!(alone.contains("beside admin_token_secret"), "{alone}");
        let same = with("admin_token_secret = \"a\"\nviewer_token_secret = \"a\"\n").unwrap_err();
        assert!(same.contains("a viewer would be an admin"), "{same}");
        let short = with("console_session_minutes = 1\n").unwrap_err();
        assert!(short.contains("console_session_minutes"), "{short}");
    }

    #[test]
    fn trusted_proxies_are_addresses_or_networks() {
        let config = config_with(
            "server",
            "trusted_proxies = [\"127.0.0.1\", \"10.0.0.0/8\", \"::1\", \"fd00::/8\"]\n",
        )
        .unwrap();
        let nets = config.server.trusted_proxies().unwrap();
        let shown: Vec<String> = nets.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["127.0.0.1/32", "10.0.0.0/8", "::1/128", "fd00::/8"]);
        for bad in ["\"proxy.internal\"", "\"10.0.0.0/33\"", "\"\""] {
            let error = config_with("server", &format!("trusted_proxies = [{bad}]\n"))
                .unwrap_err()
                .to_string();
            assert!(
                error.contains("[server] trusted_proxies") && error.contains("not an IP address"),
                "{bad}: {error}"
            );
        }
        let many: Vec<String> = (0..=MAX_TRUSTED_PROXIES)
            .map(|i| format!("\"10.0.{}.{}\"", i / 256, i % 256))
            .collect();
        let error = config_with(
            "server",
            &format!("trusted_proxies = [{}]\n", many.join(",")),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("allowed 0..=256"), "{error}");
    }
}
