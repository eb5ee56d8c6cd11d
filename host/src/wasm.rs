//! The adapter sandbox: the only module that runs `bindgen!` and touches wasmtime.
//!
//! Every limit lives here: the pooling allocator's sizes, the memory cap, the epoch deadline,
//! result-size bounds and the concurrency permit that keeps the pool from being exhausted.
//! Each call gets a fresh store (a trapped instance is dead) instantiated from an `InstancePre`,
//! and a WASI context with nothing in it: no files, environment, network, and clocks that read
//! zero. Secrets never cross into a store.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use wasmtime::component::{Component, HasSelf, Linker, Resource, ResourceTable};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
use wasmtime::{StoreLimits, StoreLimitsBuilder, Trap, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxView, WasiView};

mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "adapter",
        imports: { default: trappable },
        exports: { default: async },
        with: { "wharf:adapter/types.request": super::RequestView },
    });
}

pub use bindings::wharf::adapter::types::{
    Algorithm, Check, Envelope, Handshake, ObjectVersion, Ordering, Parsed, Part, Prepared,
    Rejection, RejectionKind, SecretEncoding, Tolerance,
};

/// Epoch ticks are this long; call deadlines are counted in them.
const EPOCH_TICK: Duration = Duration::from_millis(5);
/// How much of a guest's stderr (its panic message) is kept for the log.
const STDERR_CAPTURE_BYTES: usize = 2048;

/// The sandbox's limits, set from `[adapters]` in the config.
#[derive(Debug, Clone)]
pub struct SandboxLimits {
    /// Linear memory cap per instance.
    pub memory_bytes: usize,
    /// CPU deadline for one call (instantiation included).
    pub call_timeout: Duration,
    /// Instances that may run at once; the pooling allocator is sized from it.
    pub max_concurrency: u32,
    /// Upper bound on what a `prepare` or `parse` result may hold (literals, signatures, ids).
    pub max_result_bytes: usize,
    /// Threads that run guest code, apart from the threads serving HTTP and the database.
    pub threads: usize,
}

impl SandboxLimits {
    /// The host-side bound on one call's wall time, in addition to the epoch deadline (which
    /// interrupts only running wasm, not a guest waiting in a host call).
    pub fn wall_timeout(&self) -> Duration {
        self.call_timeout * 2 + Duration::from_millis(100)
    }
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 << 20,
            call_timeout: Duration::from_millis(100),
            max_concurrency: 64,
            max_result_bytes: 256 << 10,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        }
    }
}

/// The request as an adapter sees it: a host-owned resource the guest queries.
pub struct RequestView {
    pub endpoint_id: String,
    /// The endpoint's configured public URL plus the query string; never the Host header.
    pub url: Option<String>,
    pub headers: Arc<http::HeaderMap>,
    pub body: Bytes,
}

/// Why an adapter call produced no usable answer. Every case is the adapter's fault (503).
#[derive(Debug, thiserror::Error)]
pub enum AdapterFailure {
    #[error("adapter exceeded its CPU deadline")]
    Timeout,
    #[error("adapter call exceeded its wall-clock bound of {0:?}")]
    WallTimeout(Duration),
    #[error("adapter trapped: {trap}{}", stderr_suffix(.stderr))]
    Trap { trap: String, stderr: String },
    #[error("adapter result too large: {0}")]
    OversizedResult(String),
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(" (guest stderr: {stderr})")
    }
}

pub struct GuestState {
    table: ResourceTable,
    wasi: WasiCtx,
    limits: StoreLimits,
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl bindings::wharf::adapter::types::Host for GuestState {}

impl bindings::wharf::adapter::types::HostRequest for GuestState {
    fn endpoint_id(&mut self, req: Resource<RequestView>) -> wasmtime::Result<String> {
        Ok(self.table.get(&req)?.endpoint_id.clone())
    }

    fn url(&mut self, req: Resource<RequestView>) -> wasmtime::Result<Option<String>> {
        Ok(self.table.get(&req)?.url.clone())
    }

    fn header(
        &mut self,
        req: Resource<RequestView>,
        name: String,
    ) -> wasmtime::Result<Option<Vec<u8>>> {
        let mut values = self.table.get(&req)?.headers.get_all(name.as_str()).iter();
        Ok(match (values.next(), values.next()) {
            (Some(one), None) => Some(one.as_bytes().to_vec()),
            _ => None,
        })
    }

    fn header_values(
        &mut self,
        req: Resource<RequestView>,
        name: String,
    ) -> wasmtime::Result<Vec<Vec<u8>>> {
        let view = self.table.get(&req)?;
        Ok(view
            .headers
            .get_all(name.as_str())
            .iter()
            .map(|v| v.as_bytes().to_vec())
            .collect())
    }

    fn headers(&mut self, req: Resource<RequestView>) -> wasmtime::Result<Vec<(String, Vec<u8>)>> {
        let view = self.table.get(&req)?;
        Ok(view
            .headers
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.as_bytes().to_vec()))
            .collect())
    }

    fn body_len(&mut self, req: Resource<RequestView>) -> wasmtime::Result<u64> {
        Ok(self.table.get(&req)?.body.len() as u64)
    }

    fn body(&mut self, req: Resource<RequestView>) -> wasmtime::Result<Vec<u8>> {
        Ok(self.table.get(&req)?.body.to_vec())
    }

    fn drop(&mut self, req: Resource<RequestView>) -> wasmtime::Result<()> {
        self.table.delete(req)?;
        Ok(())
    }
}

/// Clocks that always read zero: adapters get no time source.
struct NoClock;
impl HostWallClock for NoClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}
impl HostMonotonicClock for NoClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// What a guest's sleeps and poll timeouts wait on: nothing. With no clock there is nothing
/// worth waiting for, and a WASI call that blocked would hold a sandbox slot past the epoch
/// deadline, which interrupts only running wasm.
struct Ready;

#[async_trait::async_trait]
impl wasmtime_wasi::p2::Pollable for Ready {
    async fn ready(&mut self) {}
}

/// The WASI clock interface whose subscriptions `Ready` replaces (the version
/// `add_to_linker_async` defines; guests importing an older 0.2.x are matched to it).
const MONOTONIC_CLOCK: &str = "wasi:clocks/monotonic-clock@0.2.12";

fn ready_pollable(
    mut store: wasmtime::StoreContextMut<'_, GuestState>,
) -> wasmtime::Result<(Resource<wasmtime_wasi::p2::DynPollable>,)> {
    let table = &mut store.data_mut().table;
    let ready = table.push(Ready)?;
    Ok((wasmtime_wasi::p2::subscribe(table, ready)?,))
}

/// The engine, linker and limits shared by every adapter.
pub struct Sandbox {
    engine: Engine,
    linker: Linker<GuestState>,
    limits: SandboxLimits,
    permits: Arc<Semaphore>,
    cache_dir: Option<PathBuf>,
    /// Guest code runs here, never on the runtime serving HTTP and Postgres: a bulkhead, so a
    /// burst of spinning adapters slows other adapters' calls, not acknowledgements or commits.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which is not allowed inside another runtime.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Sandbox {
    pub fn new(limits: SandboxLimits, cache_dir: Option<PathBuf>) -> anyhow::Result<Arc<Self>> {
        let n = limits.max_concurrency.max(1);
        let mut pool = PoolingAllocationConfig::default();
        // Components built by Rust for wasm32-wasip2 hold a few core instances (the program,
        // the WASI adapter, shims); size the pool for that, plus one-off `describe` calls.
        pool.total_component_instances(n + 8)
            .total_core_instances((n + 8) * 8)
            .total_memories((n + 8) * 2)
            .total_tables((n + 8) * 4)
            .total_stacks(n + 8)
            .max_core_instances_per_component(16)
            .max_memories_per_component(2)
            .max_tables_per_component(8)
            .max_memory_size(limits.memory_bytes);
        let mut config = Config::new();
        config
            .epoch_interruption(true)
            // Traps are an adapter's failure, reported by name; a backtrace costs time per trap.
            .wasm_backtrace_max_frames(None)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
            .max_wasm_stack(512 << 10);
        let engine = Engine::new(&config).map_err(|e| anyhow::anyhow!("wasm engine: {e}"))?;

        let weak = engine.weak();
        std::thread::Builder::new()
            .name("wharf-epoch".into())
            .spawn(move || {
                while let Some(engine) = weak.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    std::thread::sleep(EPOCH_TICK);
                }
            })?;

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| anyhow::anyhow!("{e}"))?;
        linker.allow_shadowing(true);
        let mut clock = linker
            .instance(MONOTONIC_CLOCK)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        clock
            .func_wrap("subscribe-duration", |store, (_,): (u64,)| {
                ready_pollable(store)
            })
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        clock
            .func_wrap("subscribe-instant", |store, (_,): (u64,)| {
                ready_pollable(store)
            })
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        linker.allow_shadowing(false);
        bindings::Adapter::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let permits = Arc::new(Semaphore::new(n as usize));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(limits.threads.max(1))
            .thread_name("wharf-wasm")
            // The wall-clock bound on each call is a tokio timer.
            .enable_time()
            .build()?;
        Ok(Arc::new(Self {
            engine,
            linker,
            limits,
            permits,
            cache_dir,
            runtime: Some(runtime),
        }))
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime
            .as_ref()
            .expect("runtime lives as long as the sandbox")
    }

    /// Whether the caller already runs on the sandbox's threads.
    fn is_current(&self) -> bool {
        tokio::runtime::Handle::try_current().is_ok_and(|h| h.id() == self.runtime().handle().id())
    }

    pub fn limits(&self) -> &SandboxLimits {
        &self.limits
    }

    /// Compiles (or loads from the cache), links, and describes one component.
    pub async fn load(self: &Arc<Self>, path: &Path) -> anyhow::Result<LoadedAdapter> {
        let bytes = tokio::fs::read(path).await?;
        self.load_bytes(bytes, path).await
    }

    /// Like `load`, for bytes already read (hot reload hashes exactly what it compiles).
    /// Checks, in order: a valid component, imports on the allowlist, exports typed as the
    /// world says (`AdapterPre::new`), and a `describe` the host accepts.
    pub async fn load_bytes(
        self: &Arc<Self>,
        bytes: Vec<u8>,
        path: &Path,
    ) -> anyhow::Result<LoadedAdapter> {
        let sha256 = hex::encode(Sha256::digest(&bytes));
        let this = Arc::clone(self);
        let hash = sha256.clone();
        // Compilation is CPU-heavy: a blocking thread, never a thread serving requests.
        let component = tokio::task::spawn_blocking(move || this.compile(&bytes, &hash)).await??;
        let world = check_imports(&self.engine, &component)?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let pre = bindings::AdapterPre::new(pre).map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut adapter = LoadedAdapter {
            sandbox: Arc::clone(self),
            pre,
            info: AdapterInfo::placeholder(),
            sha256,
            path: path.to_owned(),
        };
        let description = adapter.describe().await?;
        adapter.info = AdapterInfo::try_from(description)?;
        adapter.info.world = world;
        Ok(adapter)
    }

    fn compile(&self, bytes: &[u8], sha256: &str) -> anyhow::Result<Component> {
        let Some(dir) = &self.cache_dir else {
            return Component::from_binary(&self.engine, bytes).map_err(|e| anyhow::anyhow!("{e}"));
        };
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut h);
        let cached = dir.join(format!("{sha256}-{:016x}.cwasm", h.finish()));
        if cached.exists() {
            // SAFETY: the cache holds only what `serialize` below wrote for this engine
            // configuration; the directory is the operator's and must not be writable by others.
            if let Ok(c) = unsafe { Component::deserialize_file(&self.engine, &cached) } {
                return Ok(c);
            }
        }
        let component =
            Component::from_binary(&self.engine, bytes).map_err(|e| anyhow::anyhow!("{e}"))?;
        if let Ok(serialized) = component.serialize() {
            let tmp = dir.join(format!(".{sha256}.{}.tmp", std::process::id()));
            let _ = std::fs::create_dir_all(dir)
                .and_then(|_| std::fs::write(&tmp, serialized))
                .and_then(|_| std::fs::rename(&tmp, &cached));
        }
        Ok(component)
    }
}

/// The interface every adapter imports (its `request` resource lives there); the version on
/// this import is how a component's WIT package version is told apart (see ARCHITECTURE.md).
const TYPES_INTERFACE: &str = "wharf:adapter/types@";
/// The package versions this host has bindings for.
const SERVED_WORLDS: &[&str] = &["0.1."];

/// Import namespaces a component may use. Everything WASI that Rust's standard library links
/// is allowed because the host grants it nothing (empty context, zero clocks); sockets, HTTP
/// and anything unknown are refused at load time, before the component can serve.
const ALLOWED_IMPORTS: &[&str] = &[
    TYPES_INTERFACE,
    "wasi:cli/",
    "wasi:io/",
    "wasi:clocks/",
    "wasi:filesystem/",
    "wasi:random/",
];

fn import_allowed(name: &str) -> bool {
    ALLOWED_IMPORTS.iter().any(|p| name.starts_with(p))
}

/// Refuses imports off the allowlist; returns the WIT package the component targets.
fn check_imports(engine: &Engine, component: &Component) -> anyhow::Result<String> {
    let ty = component.component_type();
    use wasmtime::component::types::ComponentItem;
    let refused: Vec<&str> = ty
        .imports(engine)
        // Type imports (the world's `use types.{request, ...}`) grant nothing; anything that
        // can be called or instantiated must come from an allowed interface.
        .filter(|(_, item)| !matches!(item.ty, ComponentItem::Type(_) | ComponentItem::Resource(_)))
        .map(|(name, _)| name)
        .filter(|name| !import_allowed(name))
        .collect();
    anyhow::ensure!(
        refused.is_empty(),
        "component imports what adapters may not use: {}",
        refused.join(", ")
    );
    let version = ty
        .imports(engine)
        .find_map(|(name, _)| name.strip_prefix(TYPES_INTERFACE))
        .ok_or_else(|| anyhow::anyhow!("component does not import {TYPES_INTERFACE}*"))?;
    anyhow::ensure!(
        SERVED_WORLDS.iter().any(|v| version.starts_with(v)),
        "component targets wharf:adapter@{version}; this host serves {}",
        SERVED_WORLDS
            .iter()
            .map(|v| format!("{v}x"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(format!("wharf:adapter@{version}"))
}

/// The loaded adapters by name. Cloned and swapped whole (`Ingest::update_adapters`), so a
/// request sees one consistent set and keeps its adapter after a swap.
/// The status of each file in the adapters folder travels with the set, so the two never
/// disagree.
#[derive(Default, Clone)]
pub struct AdapterSet {
    adapters: HashMap<String, Arc<LoadedAdapter>>,
    files: BTreeMap<String, crate::reload::FileStatus>,
}

impl AdapterSet {
    pub fn get(&self, name: &str) -> Option<&Arc<LoadedAdapter>> {
        self.adapters.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.adapters.keys().map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<LoadedAdapter>> {
        self.adapters.values()
    }

    /// Adds or replaces the adapter of that name; returns the one it replaced.
    pub fn insert(&mut self, adapter: Arc<LoadedAdapter>) -> Option<Arc<LoadedAdapter>> {
        self.adapters.insert(adapter.info.name.clone(), adapter)
    }

    pub fn remove(&mut self, name: &str) -> Option<Arc<LoadedAdapter>> {
        self.adapters.remove(name)
    }

    /// Every file seen in the adapters folder, by file name.
    pub fn files(&self) -> &BTreeMap<String, crate::reload::FileStatus> {
        &self.files
    }

    pub fn set_file(&mut self, status: crate::reload::FileStatus) {
        self.files.insert(status.file.clone(), status);
    }
}

/// Event-type globs one adapter may declare.
const MAX_EVENT_TYPE_GLOBS: usize = 1024;

/// What `describe` said, checked and in host types.
#[derive(Debug, Clone, Serialize)]
pub struct AdapterInfo {
    pub name: String,
    pub version: String,
    pub event_types: Vec<String>,
    pub max_body_bytes: Option<u64>,
    pub algorithm: &'static str,
    pub secret_encoding: &'static str,
    pub tolerance_past_secs: Option<u64>,
    pub tolerance_future_secs: Option<u64>,
    pub ordering: &'static str,
    /// The WIT package the component was built against, from its `types` import.
    pub world: String,
    #[serde(skip)]
    pub mac: Option<crate::verify::MacAlgorithm>,
    #[serde(skip)]
    pub encoding: crate::secrets::KeyEncoding,
}

impl AdapterInfo {
    fn placeholder() -> Self {
        Self {
            name: String::new(),
            version: String::new(),
            event_types: vec![],
            max_body_bytes: None,
            algorithm: "",
            secret_encoding: "",
            tolerance_past_secs: None,
            tolerance_future_secs: None,
            ordering: "",
            world: String::new(),
            mac: None,
            encoding: crate::secrets::KeyEncoding::Raw,
        }
    }
}

impl TryFrom<bindings::wharf::adapter::types::Description> for AdapterInfo {
    type Error = anyhow::Error;

    fn try_from(d: bindings::wharf::adapter::types::Description) -> anyhow::Result<Self> {
        use crate::secrets::KeyEncoding;
        use crate::verify::MacAlgorithm;
        let valid_name = !d.name.is_empty()
            && d.name.len() <= 64
            && d.name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        anyhow::ensure!(
            valid_name,
            "adapter name {:?} must be 1-64 of [a-z0-9_-]",
            d.name
        );
        // Every string from `describe` reaches log lines and `/admin/adapters`: bounded and
        // printable, or the file is refused.
        anyhow::ensure!(
            !d.version.is_empty()
                && d.version.len() <= 64
                && d.version.bytes().all(|b| b.is_ascii_graphic()),
            "adapter version must be 1-64 printable ASCII bytes without spaces"
        );
        anyhow::ensure!(
            d.event_types.len() <= MAX_EVENT_TYPE_GLOBS,
            "adapter declares {} event types (at most {MAX_EVENT_TYPE_GLOBS})",
            d.event_types.len()
        );
        anyhow::ensure!(
            d.event_types
                .iter()
                .all(|t| !t.is_empty() && t.len() <= 255 && !t.chars().any(char::is_control)),
            "adapter event types must be 1-255 bytes without control characters"
        );
        let (algorithm, mac) = match d.algorithm {
            Algorithm::HmacSha256 => ("hmac-sha256", MacAlgorithm::Sha256),
            Algorithm::HmacSha1 => ("hmac-sha1", MacAlgorithm::Sha1),
            Algorithm::HmacSha512 => ("hmac-sha512", MacAlgorithm::Sha512),
            Algorithm::Ed25519 | Algorithm::EcdsaP256Sha256 => {
                anyhow::bail!(
                    "adapter {} declares a public-key algorithm, which this host does not verify yet",
                    d.name
                )
            }
        };
        let (secret_encoding, encoding) = match d.secret_encoding {
            SecretEncoding::Raw => ("raw", KeyEncoding::Raw),
            SecretEncoding::WhsecBase64 => ("whsec-base64", KeyEncoding::WhsecBase64),
            SecretEncoding::Base64 => ("base64", KeyEncoding::Base64),
            SecretEncoding::Hex => ("hex", KeyEncoding::Hex),
        };
        let ordering = match d.ordering {
            Ordering::Sequence => "sequence",
            Ordering::CreatedAt => "created-at",
            Ordering::None => "none",
        };
        Ok(Self {
            name: d.name,
            version: d.version,
            event_types: d.event_types,
            max_body_bytes: d.max_body_bytes,
            algorithm,
            secret_encoding,
            tolerance_past_secs: d.tolerance.map(|t| t.past_secs),
            tolerance_future_secs: d.tolerance.map(|t| t.future_secs),
            ordering,
            world: String::new(),
            mac: Some(mac),
            encoding,
        })
    }
}

/// A compiled, linked, described adapter, ready to instantiate per call.
pub struct LoadedAdapter {
    sandbox: Arc<Sandbox>,
    pre: bindings::AdapterPre<GuestState>,
    pub info: AdapterInfo,
    pub sha256: String,
    pub path: PathBuf,
}

impl LoadedAdapter {
    async fn describe(
        &self,
    ) -> Result<bindings::wharf::adapter::types::Description, AdapterFailure> {
        self.call(None, |adapter, store, _| {
            Box::pin(async move { adapter.call_describe(store).await })
        })
        .await
    }

    /// Where the signatures are and which bytes they sign. Secrets are not involved.
    pub async fn prepare(
        &self,
        req: RequestView,
    ) -> Result<Result<Prepared, Rejection>, AdapterFailure> {
        let out = self
            .call(Some(req), |adapter, store, req| {
                Box::pin(async move { adapter.call_prepare(store, req.expect("request")).await })
            })
            .await?;
        if let Ok(prepared) = &out {
            let literal: usize = prepared
                .checks
                .iter()
                .flat_map(|c| c.message.iter())
                .map(|p| match p {
                    Part::Literal(bytes) => bytes.len() + 16,
                    Part::RawBody => 16,
                })
                .sum();
            let sigs: usize = prepared
                .checks
                .iter()
                .flat_map(|c| c.signatures.iter())
                .map(|s| s.len() + 16)
                .sum();
            self.bounded(literal + sigs + prepared.checks.len() * 16, "prepare")?;
        }
        Ok(out)
    }

    /// What the verified body means.
    pub async fn parse(
        &self,
        req: RequestView,
    ) -> Result<Result<Parsed, Rejection>, AdapterFailure> {
        let out = self
            .call(Some(req), |adapter, store, req| {
                Box::pin(async move { adapter.call_parse(store, req.expect("request")).await })
            })
            .await?;
        if let Ok(parsed) = &out {
            let size = match parsed {
                Parsed::Events(events) => events
                    .iter()
                    .map(|e| {
                        e.event_id.len()
                            + e.event_type.len()
                            + e.object_id.as_ref().map_or(0, String::len)
                            + e.route.as_ref().map_or(0, String::len)
                            + 64
                    })
                    .sum(),
                Parsed::Handshake(h) => h.body.len() + h.content_type.len(),
            };
            self.bounded(size, "parse")?;
        }
        Ok(out)
    }

    fn bounded(&self, size: usize, what: &str) -> Result<(), AdapterFailure> {
        let max = self.sandbox.limits.max_result_bytes;
        if size > max {
            return Err(AdapterFailure::OversizedResult(format!(
                "{what} returned about {size} bytes (max {max})"
            )));
        }
        Ok(())
    }

    /// Runs `job` on the sandbox's threads: one hop for several guest calls and the CPU work
    /// between them (a hop costs tens of microseconds of wake-ups; see docs/performance.md).
    pub async fn on_sandbox<T: Send + 'static>(
        &self,
        job: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, AdapterFailure> {
        self.sandbox
            .runtime()
            .spawn(job)
            .await
            .map_err(|e| AdapterFailure::Trap {
                trap: format!("sandbox task ended: {e}"),
                stderr: String::new(),
            })
    }

    /// One call in a fresh store on the sandbox's own threads.
    async fn call<R, F>(&self, req: Option<RequestView>, f: F) -> Result<R, AdapterFailure>
    where
        R: Send + 'static,
        F: for<'a> FnOnce(
                &'a bindings::Adapter,
                &'a mut Store<GuestState>,
                Option<Resource<RequestView>>,
            ) -> std::pin::Pin<
                Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>,
            > + Send
            + 'static,
    {
        if self.sandbox.is_current() {
            return run_call(&self.sandbox, &self.pre, req, f).await;
        }
        let sandbox = Arc::clone(&self.sandbox);
        let pre = self.pre.clone();
        self.on_sandbox(async move { run_call(&sandbox, &pre, req, f).await })
            .await?
    }
}

/// Bounded memory, epoch deadline, captured stderr; a trapped store is dropped with the call.
async fn run_call<R, F>(
    sandbox: &Sandbox,
    pre: &bindings::AdapterPre<GuestState>,
    req: Option<RequestView>,
    f: F,
) -> Result<R, AdapterFailure>
where
    F: for<'a> FnOnce(
        &'a bindings::Adapter,
        &'a mut Store<GuestState>,
        Option<Resource<RequestView>>,
    )
        -> std::pin::Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>,
{
    // Never more instances at once than the pool holds: waiting here beats failing there.
    let _permit = sandbox
        .permits
        .acquire()
        .await
        .expect("semaphore never closed");
    let stderr = MemoryOutputPipe::new(STDERR_CAPTURE_BYTES);
    let wasi = WasiCtx::builder()
        .stderr(stderr.clone())
        .wall_clock(NoClock)
        .monotonic_clock(NoClock)
        .build();
    let limits = StoreLimitsBuilder::new()
        .memory_size(sandbox.limits.memory_bytes)
        .build();
    let mut store = Store::new(
        &sandbox.engine,
        GuestState {
            table: ResourceTable::new(),
            wasi,
            limits,
        },
    );
    store.limiter(|s| &mut s.limits);
    // Lifting a result (and any guest-to-host argument) is bounded while it is lifted, not
    // after: a list of two million parts fails here instead of being allocated.
    store.set_hostcall_fuel(sandbox.limits.max_result_bytes);
    // Every tick the guest yields to the executor, so a spinning adapter cannot starve the
    // requests (and commits) sharing its worker thread; after the budget it is interrupted.
    let mut ticks_left = sandbox
        .limits
        .call_timeout
        .as_millis()
        .div_ceil(EPOCH_TICK.as_millis())
        .max(1);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        ticks_left -= 1;
        Ok(if ticks_left == 0 {
            UpdateDeadline::Interrupt
        } else {
            UpdateDeadline::Yield(1)
        })
    });

    // Kept to withhold echoes of the request from the guest's stderr in the log.
    let echo_source = req
        .as_ref()
        .map(|r| (r.body.clone(), Arc::clone(&r.headers)));
    let req = match req {
        Some(r) => Some(
            store
                .data_mut()
                .table
                .push(r)
                .map_err(|e| AdapterFailure::Trap {
                    trap: e.to_string(),
                    stderr: String::new(),
                })?,
        ),
        None => None,
    };
    let wall = sandbox.limits.wall_timeout();
    let call = async {
        match pre.instantiate_async(&mut store).await {
            Ok(adapter) => f(&adapter, &mut store, req).await,
            Err(e) => Err(e),
        }
    };
    // Dropping the call mid-way is safe: the store is never used again.
    let Ok(result) = tokio::time::timeout(wall, call).await else {
        return Err(AdapterFailure::WallTimeout(wall));
    };
    result.map_err(|e| {
        if matches!(e.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
            return AdapterFailure::Timeout;
        }
        let message = e.to_string();
        if message.contains("fuel allocated for hostcalls has been exhausted") {
            return AdapterFailure::OversizedResult(format!(
                "more than {} bytes crossed from the guest in one call",
                sandbox.limits.max_result_bytes
            ));
        }
        let captured = stderr.contents();
        let captured =
            String::from_utf8_lossy(&captured[..captured.len().min(STDERR_CAPTURE_BYTES)]);
        let captured = match &echo_source {
            Some((body, headers)) => crate::redact::adapter_text(captured.trim(), body, headers),
            None => {
                crate::redact::printable(captured.trim(), crate::redact::MAX_ADAPTER_TEXT_BYTES)
            }
        };
        let trap = match e.downcast_ref::<Trap>() {
            Some(trap) => trap.to_string(),
            None => message,
        };
        AdapterFailure::Trap {
            trap,
            stderr: captured,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::import_allowed;

    #[test]
    fn imports_allowlist() {
        for ok in [
            "wharf:adapter/types@0.1.0",
            "wasi:cli/environment@0.2.6",
            "wasi:io/streams@0.2.6",
            "wasi:filesystem/preopens@0.2.6",
        ] {
            assert!(import_allowed(ok), "{ok}");
        }
        for refused in [
            "wasi:sockets/tcp@0.2.6",
            "wasi:http/outgoing-handler@0.2.6",
            "acme:backdoor/api",
        ] {
            assert!(!import_allowed(refused), "{refused}");
        }
    }
}
