//! Assembles the receiver from a validated config and runs it until cancelled. One
//! cancellation token stops the listeners and every background task.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::either::Either;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use crate::adapter::{Sandbox, SandboxLimits};
use crate::config::{self, Config, ServerConfig};
use crate::http::{
    AdminApi, CertStore, HttpState, IDLE_FOR, OpenConnections, TrustedProxies, admin_router,
    processing_admin_router, public_router,
};
use crate::ingest::Store;
use crate::ingest::{Admission, CommitSettings, Ingest, RateLimits};
use crate::ingest::{KeySource, SecretStore};
use crate::processing::{self, Processing};
use crate::reload::Reloader;
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

pub struct Server {
    pub addr: SocketAddr,
    pub admin_addr: Option<SocketAddr>,
    pub ingest: Arc<Ingest>,
    pub secrets: Arc<SecretStore>,
    /// What the workers, relays and reconciler share (also when none run here).
    pub processing: Arc<Processing>,
    background: Background,
}

impl Server {
    pub async fn start(config: Config, options: ServerOptions) -> anyhow::Result<Self> {
        failpoint::validate()?;
        let metrics = Arc::new(Metrics::default());
        let payload_keys = Arc::new(config.payload_keys()?);
        // First, so that a bad certificate stops the start before anything else is set up.
        let certs = match &config.server.tls {
            Some(files) => Some(CertStore::open(files, Arc::clone(&metrics)).await?),
            None => None,
        };
        let proxies = Arc::new(TrustedProxies::new(config.server.trusted_proxies()?));
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
                timeout: config.database.commit_timeout(),
            },
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
        let reloader = Reloader::new(Arc::clone(&sandbox), config.adapters.dir.clone());
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
            ))
            .with_rate_limits(RateLimits::new(&config.endpoints, &config.providers))
            .with_traces(traces.clone()),
        );
        let config = Arc::new(config);
        let processing = Arc::new(
            Processing::new(Arc::clone(&config), metrics, ingest.signals(), payload_keys)?
                .with_signing(Arc::clone(&secrets) as Arc<dyn KeySource>, options.clock)
                .with_traces(traces.clone()),
        );
        let state = HttpState {
            ingest: Arc::clone(&ingest),
            max_headers: config.server.max_headers,
            max_header_bytes: config.server.max_header_bytes,
            body_budget: Arc::new(Semaphore::new(config.server.max_buffered_bytes as usize)),
            body_timeout: config.server.body_timeout(),
        };
        let limits = ConnLimits::new(&config.server);

        let cancel = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let watcher = secrets.watch(cancel.clone())?;
        tasks.spawn(async move { watcher.await.map_err(Into::into) });
        tasks.spawn(retention.run(retention_clock, cancel.clone()));
        let adapter_watcher = reloader.watch(Arc::clone(&ingest), cancel.clone())?;
        tasks.spawn(async move { adapter_watcher.await.map_err(Into::into) });
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
        // Always plain HTTP: bind it to localhost or a private network.
        let admin_addr = match config.server.admin_listen {
            Some(admin) => {
                let router = admin_router(state, admin_api);
                let listener = Listener::plain(limits, proxies);
                Some(serve_on(admin, router, listener, &cancel, &mut tasks).await?)
            }
            None => None,
        };
        Ok(Self {
            addr,
            admin_addr,
            ingest,
            secrets,
            processing,
            background: Background {
                cancel,
                tasks,
                traces,
            },
        })
    }

    pub fn cancel_token(&self) -> CancellationToken {
        self.background.cancel.clone()
    }

    /// Stops accepting, lets requests in flight finish, and waits for every task.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.background.shutdown().await
    }

    /// Runs until the token is cancelled (for example by a signal).
    pub async fn run_until_cancelled(self) -> anyhow::Result<()> {
        self.background.run_until_cancelled().await
    }
}

/// Processing alone, for `wharf worker`: workers, relays and the reconciler, no listener, so
/// ingest and processing scale separately and several hosts can share one database.
pub struct ProcessingHost {
    pub processing: Arc<Processing>,
    /// The admin listener (`/healthz`, `/readyz`, `/metrics`), when asked for one.
    pub admin_addr: Option<SocketAddr>,
    background: Background,
}

impl ProcessingHost {
    pub async fn start(
        config: Config,
        workers: usize,
        admin: Option<SocketAddr>,
    ) -> anyhow::Result<Self> {
        failpoint::validate()?;
        let config = Arc::new(config);
        let payload_keys = Arc::new(config.payload_keys()?);
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
        if signs || serves_api {
            let store = SecretStore::open(&config.secrets.file)?;
            let watcher = store.watch(cancel.clone())?;
            tasks.spawn(async move { watcher.await.map_err(Into::into) });
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
        processing.spawn(workers, &cancel, &mut tasks);
        let admin_addr = match admin {
            Some(addr) => {
                let router = processing_admin_router(Arc::clone(&processing), admin_api);
                let proxies = TrustedProxies::new(config.server.trusted_proxies()?);
                let listener = Listener::plain(ConnLimits::new(&config.server), Arc::new(proxies));
                Some(serve_on(addr, router, listener, &cancel, &mut tasks).await?)
            }
            None => None,
        };
        let traces = processing.traces.clone();
        Ok(Self {
            processing,
            admin_addr,
            background: Background {
                cancel,
                tasks,
                traces,
            },
        })
    }

    pub fn cancel_token(&self) -> CancellationToken {
        self.background.cancel.clone()
    }

    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.background.shutdown().await
    }

    pub async fn run_until_cancelled(self) -> anyhow::Result<()> {
        self.background.run_until_cancelled().await
    }
}

/// How a listener bounds its connections, so that slow or idle clients cannot hold the
/// host's memory or connections (README: "What the host enforces").
#[derive(Clone, Copy)]
struct ConnLimits {
    /// hyper starts this timer whenever a connection waits for a request head: on accept and
    /// after each answer, so it is the slow-header and the idle keep-alive timeout at once.
    header_timeout: Duration,
    max_connections: usize,
    /// Above `[server] max_headers`, so that our own check answers the JSON 431 first.
    max_headers: usize,
    /// hyper's read buffer per connection (headers must fit in it).
    max_buf_size: usize,
}

impl ConnLimits {
    fn new(server: &ServerConfig) -> Self {
        Self {
            header_timeout: server.header_timeout(),
            max_connections: server.max_connections,
            max_headers: (server.max_headers * 2).max(100),
            max_buf_size: server.max_header_bytes * 2 + (8 << 10),
        }
    }
}

/// What one listener speaks and whom it believes.
struct Listener {
    limits: ConnLimits,
    /// HTTPS when set; plain HTTP otherwise.
    tls: Option<tokio_rustls::TlsAcceptor>,
    /// Peers whose forwarded-client headers are believed (`ClientInfo` on every request).
    proxies: Arc<TrustedProxies>,
}

impl Listener {
    fn plain(limits: ConnLimits, proxies: Arc<TrustedProxies>) -> Self {
        Self {
            limits,
            tls: None,
            proxies,
        }
    }
}

/// Binds `addr` and serves `router` on it until `cancel` fires, letting requests in flight
/// finish; returns the bound address (port 0 picks one). Served with hyper directly because
/// `axum::serve` sets no header timeout.
async fn serve_on(
    addr: SocketAddr,
    router: axum::Router,
    Listener {
        limits,
        tls,
        proxies,
    }: Listener,
    cancel: &CancellationToken,
    tasks: &mut JoinSet<anyhow::Result<()>>,
) -> anyhow::Result<SocketAddr> {
    let listener = listen(addr, limits.max_connections)?;
    let bound = listener.local_addr()?;
    let token = cancel.clone();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_headers(limits.max_headers)
        .max_buf_size(limits.max_buf_size);
    tasks.spawn(async move {
        let open = Arc::new(Semaphore::new(limits.max_connections));
        let connections = Arc::new(OpenConnections::default());
        'serve: loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors, for instance: wait instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                () = token.cancelled() => break,
            };
            // At the cap, the connection just accepted waits (and further ones wait in the
            // kernel's backlog) for a slot: one idle for a while is closed to make room.
            let permit = match Arc::clone(&open).try_acquire_owned() {
                Ok(permit) => permit,
                Err(_) => loop {
                    // One closing is enough: its permit comes back when it has closed.
                    let closing = connections.close_one_idle(IDLE_FOR);
                    tokio::select! {
                        permit = Arc::clone(&open).acquire_owned() => break permit?,
                        () = tokio::time::sleep(IDLE_FOR / 4), if !closing => continue,
                        () = token.cancelled() => break 'serve,
                    }
                },
            };
            let _ = stream.set_nodelay(true);
            let https = tls.is_some();
            let proxies = Arc::clone(&proxies);
            let registered = Arc::new(connections.open());
            let requests = Arc::clone(&registered);
            let service = router
                .clone()
                .map_request(move |mut request: hyper::Request<_>| {
                    let client = proxies.client(peer.ip(), https, request.headers());
                    request.extensions_mut().insert(client);
                    request
                })
                .map_future(move |response| requests.serving(response));
            let (http, tls, token) = (http.clone(), tls.clone(), token.clone());
            tokio::spawn(async move {
                let stream = match tls {
                    None => Either::Left(stream),
                    // The handshake holds this connection's permit and is bounded like a
                    // request head, so a slow one costs no more than a slow plain request.
                    Some(acceptor) => {
                        let handshake =
                            tokio::time::timeout(limits.header_timeout, acceptor.accept(stream));
                        tokio::select! {
                            done = handshake => match done {
                                Ok(Ok(stream)) => Either::Right(stream),
                                // The client's failure (plain HTTP, an untrusted certificate,
                                // too slow): nothing to answer.
                                Ok(Err(e)) => {
                                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                                    return;
                                }
                                Err(_) => return,
                            },
                            () = token.cancelled() => return,
                        }
                    }
                };
                let conn =
                    http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
                let mut conn = std::pin::pin!(conn);
                // Errors here are the client's (timeouts, resets, bad framing): nothing to log.
                tokio::select! {
                    _ = conn.as_mut() => {}
                    () = token.cancelled() => {
                        conn.as_mut().graceful_shutdown();
                        let _ = conn.await;
                    }
                    // The listener is at the cap and this connection is between requests.
                    () = registered.close_requested() => {
                        conn.as_mut().graceful_shutdown();
                        tokio::select! {
                            _ = conn.as_mut() => {}
                            () = token.cancelled() => {}
                        }
                    }
                }
                drop(registered);
                drop(permit);
            });
        }
        drop(listener);
        // Each connection gives its permit back when it ends: all back, all finished.
        let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
        let _ = open.acquire_many(all).await?;
        Ok(())
    });
    Ok(bound)
}

/// Binds with a listen backlog of at least the connection cap and 4,096 (the kernel clips it
/// to `net.core.somaxconn`): a connection waiting there is taken as soon as a slot frees,
/// where one whose SYN is dropped (tokio's backlog is 1,024, and a burst at the cap overflowed
/// it) is retried by its client 1, 3 or 7 s later.
fn listen(addr: SocketAddr, max_connections: usize) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // As `TcpListener::bind` does: a restart need not wait for TIME_WAIT to clear.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(u32::try_from(max_connections.max(4096)).unwrap_or(u32::MAX))
}

/// The exporter when `[tracing]` is configured; otherwise tracing is off.
fn start_traces(config: &Config) -> anyhow::Result<Traces> {
    match &config.tracing {
        Some(t) => Traces::start(&t.settings()),
        None => Ok(Traces::off()),
    }
}

/// Every task of a process under one cancellation token, and the trace exporter flushed
/// once they have all ended.
struct Background {
    cancel: CancellationToken,
    tasks: JoinSet<anyhow::Result<()>>,
    traces: Traces,
}

impl Background {
    async fn shutdown(mut self) -> anyhow::Result<()> {
        self.cancel.cancel();
        self.wait().await
    }

    async fn run_until_cancelled(mut self) -> anyhow::Result<()> {
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
