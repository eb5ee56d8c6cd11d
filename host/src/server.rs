//! Assembles the receiver from a validated config and runs it until cancelled. One
//! cancellation token stops the listeners and every background task.

use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::adapter::{Sandbox, SandboxLimits};
use crate::config::{self, Config, LiveRoutes};
use crate::console::{Console, ConsoleParts};
use crate::http::{
    AdminApi, BodyBudget, CertStore, ConnLimits, HttpState, Listener, TrustedProxies, admin_router,
    processing_admin_router, public_router, serve_on,
};
use crate::ingest::Store;
use crate::ingest::{
    Admission, ClientLimits, CommitSettings, Handoff, Ingest, IngestStats, RateLimits,
};
use crate::ingest::{KeySource, SecretStore};
use crate::processing::{self, Processing};
use crate::reload::{ConfigReloader, Reloader};
use crate::retention::Retention;
use crate::support::clock::{SharedClock, SystemClock};
use crate::support::failpoint;
use crate::support::metrics::Metrics;
use crate::support::traces::Traces;

/// What tests and embedders may change without a config file.
#[derive(Clone)]
pub struct ServerOptions {
    pub clock: SharedClock,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
        }
    }
}

/// The receiver: the public (and admin) listeners, ingest, and processing unless it runs
/// elsewhere.
pub type Server = Running<Receiver>;

/// What a running receiver exposes.
pub struct Receiver {
    pub addr: SocketAddr,
    pub admin_addr: Option<SocketAddr>,
    pub ingest: Arc<Ingest>,
    pub secrets: Arc<SecretStore>,
    /// What the workers, relays and reconciler share (also when none run here).
    pub processing: Arc<Processing>,
    /// The public route's answer counts not yet written to `ingest_stats`.
    pub stats: Arc<IngestStats>,
}

impl Server {
    pub async fn start(config: Config, options: ServerOptions) -> anyhow::Result<Self> {
        failpoint::validate()?;
        let metrics = Arc::new(Metrics::default());
        let payload_keys = Arc::new(serving_payload_keys(&config)?);
        // First, so that a bad certificate stops the start before anything else is set up.
        let certs = match &config.server.tls {
            Some(files) => Some(CertStore::open(files, Arc::clone(&metrics)).await?),
            None => None,
        };
        let proxies = Arc::new(TrustedProxies::new(config.server.trusted_proxies()?));
        // This host's workers take the events it accepts straight from acceptance while they
        // keep up; room for two batches each.
        let handoff = (config.worker.count > 0).then(|| {
            Arc::new(Handoff::new(
                2 * config.worker.count * config.worker.batch_size as usize,
                Duration::from_secs(config.worker.lease_secs),
            ))
        });
        let store = Store::connect_lazy(
            config.database_url(),
            config.database.max_connections,
            config.database.commit_timeout(),
            Arc::clone(&payload_keys),
        )?
        .with_group_commit(
            CommitSettings {
                writers: config.database.accept_writers,
                max_batch_events: config.database.accept_batch_max,
                max_wait: Duration::from_micros(config.database.accept_batch_wait_us),
                gather: Duration::from_micros(config.database.accept_gather_us),
                timeout: config.database.commit_timeout(),
                notices_published: config.nats.is_none(),
            },
            handoff.clone(),
            Arc::clone(&metrics),
        );
        if config.database.migrate_on_start {
            store.migrate().await?;
        }
        // Partitions for today and the days ahead before the first request.
        let retention = Retention::new(
            store.pool().clone(),
            config.retention.clone(),
            Arc::clone(&metrics),
        );
        let retention_clock = Arc::clone(&options.clock);
        let console_clock = Arc::clone(&options.clock);
        retention.logged_pass(retention_clock.now()).await;
        let secrets = SecretStore::open(&config.secrets.file)?;
        if let Ok(current) = &*secrets.current() {
            let names: Vec<&str> = current.set_names().collect();
            if let Some(missing) = config
                .missing_secret_sets(&names, &config.secrets.file)
                .first()
            {
                anyhow::bail!("{}", missing.message);
            }
        }
        processing::check_signing_sets(&config, &*secrets, options.clock.now())?;
        let admin_api = AdminApi::from_config(
            &config,
            Some(Arc::clone(&secrets) as Arc<dyn KeySource>),
            Arc::clone(&options.clock),
        )?;
        let sandbox = Sandbox::new(
            SandboxLimits::from_config(&config.adapters),
            config.adapters.cache_dir.clone(),
        )?;
        let reloader = Reloader::new(Arc::clone(&sandbox), config.adapters.dir.clone())
            .trusting(config.adapters.trusted_keys.clone());
        let adapters = reloader.initial(&metrics).await?;
        for e in &config.endpoints {
            match adapters.get(&e.adapter) {
                None => tracing::warn!(endpoint = %e.id, adapter = %e.adapter,
                    "adapter not loaded: the endpoint answers 503 adapter_unavailable until it is"),
                // An adapter that arrives later is not checked: such an endpoint then fails
                // closed (401 invalid_signature, cause "signed timestamp missing").
                Some(a) => {
                    let signs_timestamp = a.info.tolerance_past_secs.is_some();
                    if let Some(problem) = config::tolerance_without_timestamp(e, signs_timestamp) {
                        anyhow::bail!(problem);
                    }
                }
            }
        }
        let traces = start_traces(&config)?;
        let ingest = Arc::new(
            Ingest::new(
                config.endpoints.clone(),
                adapters,
                Arc::clone(&secrets),
                store,
                Arc::clone(&options.clock),
                config.server.max_body_bytes,
                Arc::clone(&metrics),
            )
            .with_admission(Admission::new(
                config.server.answer_budget(),
                config.server.min_in_flight,
                config.max_in_flight(),
            ))
            .with_rate_limits(RateLimits::new(&config.endpoints, &config.providers))
            .with_traces(traces.clone()),
        );
        let routes = Arc::new(LiveRoutes::new(&config.routes));
        let config_reloader = ConfigReloader::new(
            &config,
            Arc::clone(&ingest),
            Arc::clone(&secrets),
            Arc::clone(&routes),
            Arc::clone(&metrics),
        );
        let config = Arc::new(config);
        let processing = Arc::new(
            Processing::new(
                Arc::clone(&config),
                metrics,
                ingest.signals(),
                Arc::clone(&payload_keys),
            )?
            .with_endpoints(ingest.endpoints())
            .with_routes(routes)
            .with_signing(Arc::clone(&secrets) as Arc<dyn KeySource>, options.clock)
            .with_traces(traces.clone())
            .with_handoff(handoff),
        );
        let state = HttpState {
            ingest: Arc::clone(&ingest),
            max_headers: config.server.max_headers,
            max_header_bytes: config.server.max_header_bytes,
            body_budget: Arc::new(BodyBudget::new(&config.server)),
            client_limits: Arc::new(ClientLimits::new(config.server.client_rate_limit())),
            stats: Arc::default(),
        };
        let limits = ConnLimits::new(&config.server);

        let cancel = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let watcher = secrets.watch(cancel.clone())?;
        tasks.spawn(async move { watcher.await.map_err(Into::into) });
        tasks.spawn(retention.run(retention_clock, cancel.clone()));
        let stats = Arc::clone(&state.stats);
        tasks.spawn(Arc::clone(&stats).run(config.database_url().to_owned(), cancel.clone()));
        let adapter_watcher = reloader.watch(Arc::clone(&ingest), cancel.clone())?;
        tasks.spawn(async move { adapter_watcher.await.map_err(Into::into) });
        // Endpoints reload with the config file; a config built in memory has no file.
        if let Some(config_reloader) = config_reloader {
            let config_watcher = config_reloader.watch(cancel.clone())?;
            tasks.spawn(async move { config_watcher.await.map_err(Into::into) });
        }
        let public = Listener {
            limits,
            tls: match &certs {
                Some(certs) => {
                    let cert_watcher = certs.watch(cancel.clone())?;
                    tasks.spawn(async move { cert_watcher.await.map_err(Into::into) });
                    Some(certs.acceptor()?)
                }
                None => None,
            },
            proxies: Arc::clone(&proxies),
            metrics: Arc::clone(&processing.metrics),
        };
        // Workers here unless processing runs elsewhere (`count = 0` and `wharf worker`).
        if config.worker.count > 0 {
            processing.spawn(config.worker.count, &cancel, &mut tasks);
        }

        let addr = serve_on(
            config.server.listen,
            public_router(state.clone()),
            public,
            &cancel,
            &mut tasks,
        )
        .await?;
        // Plain HTTP unless `[server.admin_tls]`: bind it to localhost or a private network.
        let admin_addr = match config.server.admin_listen {
            Some(admin) => {
                let admin_certs = match &config.server.admin_tls {
                    Some(files) => {
                        let certs = CertStore::open(files, Arc::clone(&processing.metrics)).await?;
                        let cert_watcher = certs.watch(cancel.clone())?;
                        tasks.spawn(async move { cert_watcher.await.map_err(Into::into) });
                        Some(certs.acceptor()?)
                    }
                    None => None,
                };
                let console = match &admin_api {
                    Some(api) => Some(
                        Console::new(ConsoleParts {
                            config: Arc::clone(&config),
                            api: api.clone(),
                            secrets: Arc::clone(&secrets),
                            clock: Arc::clone(&console_clock),
                            http: state.clone(),
                            payload_keys: Arc::clone(&payload_keys),
                            tls: admin_certs.is_some(),
                            public_base: format!(
                                "{}://{addr}",
                                if certs.is_some() { "https" } else { "http" }
                            ),
                        })?
                        .router(),
                    ),
                    None => None,
                };
                let router = admin_router(state, admin_api, console);
                let mut listener =
                    Listener::plain(limits, proxies, Arc::clone(&processing.metrics));
                listener.tls = admin_certs;
                Some(serve_on(admin, router, listener, &cancel, &mut tasks).await?)
            }
            None => None,
        };
        let parts = Receiver {
            addr,
            admin_addr,
            ingest,
            secrets,
            processing,
            stats,
        };
        Ok(Running {
            parts,
            cancel,
            tasks,
            traces,
        })
    }
}

/// Processing alone, for `wharf worker`: workers, relays and the reconciler, no listener, so
/// ingest and processing scale separately and several hosts can share one database.
pub type ProcessingHost = Running<ProcessingOnly>;

/// What a running `wharf worker` exposes.
pub struct ProcessingOnly {
    pub processing: Arc<Processing>,
    /// The admin listener (`/healthz`, `/readyz`, `/metrics`), when asked for one.
    pub admin_addr: Option<SocketAddr>,
}

impl ProcessingHost {
    pub async fn start(
        config: Config,
        workers: usize,
        admin: Option<SocketAddr>,
    ) -> anyhow::Result<Self> {
        failpoint::validate()?;
        let config = Arc::new(config);
        let payload_keys = Arc::new(serving_payload_keys(&config)?);
        if config.database.migrate_on_start {
            let keys = Arc::clone(&payload_keys);
            Store::connect_lazy(config.database_url(), 1, Duration::from_secs(30), keys)?
                .migrate()
                .await?;
        }
        let mut processing = Processing::new(
            Arc::clone(&config),
            Arc::new(Metrics::default()),
            Arc::default(),
            payload_keys,
        )?
        .with_traces(start_traces(&config)?);
        let cancel = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let retention = Retention::new(
            processing.pool.clone(),
            config.retention.clone(),
            Arc::clone(&processing.metrics),
        );
        let retention_clock: SharedClock = Arc::new(SystemClock);
        retention.logged_pass(retention_clock.now()).await;
        tasks.spawn(retention.run(retention_clock, cancel.clone()));
        // The secrets file only when a route signs or the admin API is served: a worker
        // reads no other secret.
        let signs = config.routes.iter().any(|r| r.signing_secret.is_some());
        let serves_api = admin.is_some() && config.server.admin_token_secret.is_some();
        let clock: SharedClock = Arc::new(SystemClock);
        let mut secrets = None;
        let mut signing_store = None;
        if signs || serves_api {
            let store = SecretStore::open(&config.secrets.file)?;
            let watcher = store.watch(cancel.clone())?;
            tasks.spawn(async move { watcher.await.map_err(Into::into) });
            signing_store = Some(Arc::clone(&store)).filter(|_| signs);
            secrets = Some(store as Arc<dyn KeySource>);
        }
        if let Some(secrets) = secrets.as_ref().filter(|_| signs) {
            processing::check_signing_sets(&config, &**secrets, clock.now())?;
            processing = processing.with_signing(Arc::clone(secrets), Arc::clone(&clock));
        }
        let admin_api = match admin {
            Some(_) => AdminApi::from_config(&config, secrets, clock)?,
            None => None,
        };
        let processing = Arc::new(processing);
        // Its workers know an endpoint or route added to the config file as the receivers do.
        let reloader = ConfigReloader::for_processing(
            &config,
            Arc::clone(&processing.endpoints),
            Arc::clone(&processing.routes),
            signing_store,
            Arc::clone(&processing.metrics),
        );
        if let Some(reloader) = reloader {
            let watcher = reloader.watch(cancel.clone())?;
            tasks.spawn(async move { watcher.await.map_err(Into::into) });
        }
        processing.spawn(workers, &cancel, &mut tasks);
        let admin_addr = match admin {
            Some(addr) => {
                let router = processing_admin_router(Arc::clone(&processing), admin_api);
                let proxies = TrustedProxies::new(config.server.trusted_proxies()?);
                let listener = Listener::plain(
                    ConnLimits::new(&config.server),
                    Arc::new(proxies),
                    Arc::clone(&processing.metrics),
                );
                Some(serve_on(addr, router, listener, &cancel, &mut tasks).await?)
            }
            None => None,
        };
        let traces = processing.traces.clone();
        Ok(Running {
            parts: ProcessingOnly {
                processing,
                admin_addr,
            },
            cancel,
            tasks,
            traces,
        })
    }
}

/// The exporter when `[tracing]` is configured; otherwise tracing is off.
fn start_traces(config: &Config) -> anyhow::Result<Traces> {
    match &config.tracing {
        Some(t) => Traces::start(&t.settings()),
        None => Ok(Traces::off()),
    }
}

/// A started process: what it exposes (`P`, read through `Deref`), and every task it runs
/// under one cancellation token, stopped the same way whatever the process; the trace
/// exporter is flushed once the tasks have all ended.
pub struct Running<P> {
    parts: P,
    cancel: CancellationToken,
    tasks: JoinSet<anyhow::Result<()>>,
    traces: Traces,
}

impl<P> Deref for Running<P> {
    type Target = P;

    fn deref(&self) -> &P {
        &self.parts
    }
}

impl<P> Running<P> {
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Stops accepting, lets requests in flight finish, and waits for every task.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        self.cancel.cancel();
        self.wait().await
    }

    /// Runs until the token is cancelled (for example by a signal).
    pub async fn run_until_cancelled(mut self) -> anyhow::Result<()> {
        self.cancel.cancelled().await;
        self.wait().await
    }

    async fn wait(&mut self) -> anyhow::Result<()> {
        let result = self.join().await;
        // The spans of the last requests and deliveries, which the tasks just finished.
        self.traces.shutdown().await;
        result
    }

    async fn join(&mut self) -> anyhow::Result<()> {
        while let Some(result) = self.tasks.join_next().await {
            result??;
        }
        Ok(())
    }
}

/// The payload keys a serving process reads with; the upgrade setting is said aloud, since it
/// lets rows no one received be read (`docs/operations.md`, "Links from events to payloads").
fn serving_payload_keys(config: &Config) -> anyhow::Result<crate::support::sealing::PayloadKeys> {
    let keys = config.payload_keys()?;
    if keys.accepts_legacy_rows() {
        tracing::warn!(
            "[payloads] upgrade_legacy_rows is on: unsealed payloads and events without a link \
             tag are read as they are; turn it off once `wharf payloads reencrypt` has run"
        );
    }
    Ok(keys)
}
