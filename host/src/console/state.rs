//! What every console page reads: the admin API's pool, the live secrets (tokens, and the
//! versions the endpoints page lists), the receiver's adapters and endpoints, the sessions.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;

use super::session::Sessions;
use crate::config::{Config, RateLimit};
use crate::http::{AdminApi, HttpState, token_versions};
use crate::ingest::{ClientLimits, KeySource, SecretStore};
use crate::support::clock::SharedClock;
use crate::support::sealing::PayloadKeys;

/// Failed sign-ins one client address may make: a burst of ten, then one a minute.
const SIGNIN_FAILURES: RateLimit = RateLimit {
    per_second: 1.0 / 60.0,
    burst: 10,
};

/// What the console is built from (`Server` has each at hand).
pub struct ConsoleParts {
    pub config: Arc<Config>,
    pub api: AdminApi,
    pub secrets: Arc<SecretStore>,
    pub clock: SharedClock,
    pub http: HttpState,
    pub payload_keys: Arc<PayloadKeys>,
    /// The admin listener serves HTTPS: cookies are `Secure`.
    pub tls: bool,
    /// Where providers send webhooks (`https://host:port`), for the endpoints page.
    pub public_base: String,
}

#[derive(Clone)]
pub struct Console(pub(super) Arc<Inner>);

pub(super) struct Inner {
    pub config: Arc<Config>,
    pub pool: PgPool,
    pub secrets: Arc<SecretStore>,
    pub admin_set: String,
    pub viewer_set: Option<String>,
    pub clock: SharedClock,
    pub sessions: Sessions,
    pub signin_limits: ClientLimits,
    pub http: HttpState,
    pub payload_keys: Arc<PayloadKeys>,
    pub tls: bool,
    pub public_base: String,
    pub body_deadline: Duration,
}

impl Console {
    /// The console, beside the admin API it shares its tokens and pool with; a viewer set
    /// that cannot authenticate anyone stops the start, like the admin set.
    pub fn new(parts: ConsoleParts) -> anyhow::Result<Self> {
        let server = &parts.config.server;
        let admin_set = server
            .admin_token_secret
            .clone()
            .ok_or_else(|| anyhow::anyhow!("the console needs [server] admin_token_secret"))?;
        if let Some(set) = &server.viewer_token_secret {
            token_versions(&*parts.secrets, set, parts.clock.now()).map_err(|cause| {
                anyhow::anyhow!(
                    "[server] viewer_token_secret: {cause} ({})",
                    parts.config.secrets.file.display()
                )
            })?;
        }
        Ok(Self(Arc::new(Inner {
            pool: parts.api.pool().clone(),
            secrets: parts.secrets,
            admin_set,
            viewer_set: server.viewer_token_secret.clone(),
            clock: parts.clock,
            sessions: Sessions::new(Duration::from_secs(server.console_session_minutes * 60)),
            signin_limits: ClientLimits::new(SIGNIN_FAILURES),
            http: parts.http,
            payload_keys: parts.payload_keys,
            tls: parts.tls,
            public_base: parts.public_base,
            body_deadline: server.body_timeout(),
            config: parts.config,
        })))
    }
}

impl Inner {
    pub fn keys(&self) -> &dyn KeySource {
        &*self.secrets
    }
}
