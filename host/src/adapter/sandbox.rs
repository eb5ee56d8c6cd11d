//! The engine, the pooling allocator, the linker (WASI granted nothing, clocks that read zero
//! and never wait), the compiled-component cache, the hop to the sandbox's threads, and one
//! request's instance: a fresh store with a memory cap and a captured stderr, whose every call
//! has an epoch deadline, hostcall fuel and a wall-clock bound. Every limit is set here.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::component::{Component, Linker, Resource, ResourceTable};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
use wasmtime::{StoreLimitsBuilder, Trap, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx};

use crate::config::AdaptersConfig;

use super::bindings::{Guest, GuestPre, GuestState, RequestView, WitVersion};
use super::imports::check_imports;
use super::wasm_error::IntoAnyhow;

/// Epoch ticks are this long; call deadlines are counted in them.
const EPOCH_TICK: Duration = Duration::from_millis(5);
/// Per pool slot, how much written memory is reset in place and kept resident for the next
/// instance (see `Sandbox::new`).
const KEEP_RESIDENT_BYTES: usize = 512 << 10;
/// Core instances one component may hold: componentize-py's Python adapters hold 38.
const MAX_CORE_INSTANCES: u32 = 48;
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
    /// The limits `[adapters]` sets; the rest keep their defaults.
    pub fn from_config(adapters: &AdaptersConfig) -> Self {
        let defaults = Self::default();
        Self {
            // Validated to at most 4096 MiB; saturating for configs that skipped validation.
            memory_bytes: adapters.memory_mib.saturating_mul(1 << 20),
            call_timeout: Duration::from_millis(adapters.call_timeout_ms),
            max_concurrency: adapters.max_concurrency,
            threads: adapters.threads.unwrap_or(defaults.threads),
            ..defaults
        }
    }

    /// The host-side bound on one call's wall time, in addition to the epoch deadline (which
    /// interrupts only running wasm, not a guest waiting in a host call). Generous: a call
    /// also waits its turn on the sandbox's threads, which the epoch deadline does not count,
    /// and a burst of concurrent calls on a loaded host must not fail for that.
    pub fn wall_timeout(&self) -> Duration {
        (self.call_timeout * 10).max(Duration::from_secs(1))
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
        // the WASI adapter, shims); componentize-py's hold 38 (CPython and its shims), so every
        // slot is sized for a Python adapter: a slot that could not hold one would fail its
        // request instead of waiting. Core instances are only counted (no memory set aside);
        // the memories, the bulk of the reservation, stay at two per component.
        pool.total_component_instances(n + 8)
            .total_core_instances((n + 8) * MAX_CORE_INSTANCES)
            .total_memories((n + 8) * 2)
            .total_tables((n + 8) * 8)
            .total_stacks(n + 8)
            .max_core_instances_per_component(MAX_CORE_INSTANCES)
            .max_memories_per_component(2)
            .max_tables_per_component(8)
            .max_memory_size(limits.memory_bytes)
            // A freed slot is reset by copying back only the pages the guest wrote (found with
            // the kernel's pagemap scan), not by `madvise`: the next instance in the slot then
            // takes no page faults. What stays resident is bounded per slot.
            .pagemap_scan(wasmtime::Enabled::Auto)
            .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
            .table_keep_resident(KEEP_RESIDENT_BYTES);
        let mut config = Config::new();
        config
            .epoch_interruption(true)
            // Traps are an adapter's failure, reported by name; a backtrace costs time per trap.
            .wasm_backtrace_max_frames(None)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
            .max_wasm_stack(512 << 10);
        // For profiling only: name guest functions for `perf` (see docs/performance.md).
        if std::env::var_os("WHARF_PERF_MAP").is_some() {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
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
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).into_anyhow()?;
        linker.allow_shadowing(true);
        let mut clock = linker.instance(MONOTONIC_CLOCK).into_anyhow()?;
        clock
            .func_wrap("subscribe-duration", |store, (_,): (u64,)| {
                ready_pollable(store)
            })
            .into_anyhow()?;
        clock
            .func_wrap("subscribe-instant", |store, (_,): (u64,)| {
                ready_pollable(store)
            })
            .into_anyhow()?;
        linker.allow_shadowing(false);
        super::bindings::add_to_linker(&mut linker)?;
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

    pub(super) fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime
            .as_ref()
            .expect("runtime lives as long as the sandbox")
    }

    /// Runs `job` on the sandbox's threads and waits for it.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        job: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, AdapterFailure> {
        // Two thread wake-ups when both sides are idle (see docs/performance.md); spinning
        // before parking was measured and not kept.
        self.runtime()
            .spawn(job)
            .await
            .map_err(|e| AdapterFailure::Trap {
                trap: format!("sandbox task ended: {e}"),
                stderr: String::new(),
            })
    }

    /// Whether the caller already runs on the sandbox's threads.
    pub(super) fn is_current(&self) -> bool {
        tokio::runtime::Handle::try_current().is_ok_and(|h| h.id() == self.runtime().handle().id())
    }

    pub fn limits(&self) -> &SandboxLimits {
        &self.limits
    }

    /// Compiles a component (or loads it from the cache) and checks its imports; returns
    /// it linked, ready to instantiate, and the WIT package it targets.
    pub(super) fn prepare_component(
        self: &Arc<Self>,
        component: &Component,
    ) -> anyhow::Result<(GuestPre, WitVersion, String)> {
        let (version, world) = check_imports(&self.engine, component)?;
        let pre = self.linker.instantiate_pre(component).into_anyhow()?;
        Ok((GuestPre::new(pre, version)?, version, world))
    }

    pub(super) fn compile(&self, bytes: &[u8], sha256: &str) -> anyhow::Result<Component> {
        let Some(dir) = &self.cache_dir else {
            return Component::from_binary(&self.engine, bytes).into_anyhow();
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
        let component = Component::from_binary(&self.engine, bytes).into_anyhow()?;
        if let Ok(serialized) = component.serialize() {
            let tmp = dir.join(format!(".{sha256}.{}.tmp", std::process::id()));
            let _ = std::fs::create_dir_all(dir)
                .and_then(|_| std::fs::write(&tmp, serialized))
                .and_then(|_| std::fs::rename(&tmp, &cached));
        }
        Ok(component)
    }
}

/// The guest side of one call: the export to run on an instance and the request it is handed.
pub(super) type GuestFn<R> = Box<
    dyn for<'a> FnOnce(
            &'a Guest,
            &'a mut Store<GuestState>,
            Option<Resource<RequestView>>,
        )
            -> std::pin::Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>
        + Send,
>;

/// One request's guest: a fresh store (memory cap, captured stderr, hostcall fuel) and one
/// instance in it, used for that request's calls only (`prepare`, then `parse`) and dropped
/// with it. Never shared between requests; a call that fails consumes it, so a trapped or
/// interrupted instance is never called again.
pub(super) struct Instance {
    store: Store<GuestState>,
    /// Instantiated by the first call, inside that call's deadline.
    adapter: Option<Guest>,
    /// The `request` resource's handle in the store's table.
    req: Option<u32>,
    /// Kept to withhold echoes of the request from the guest's stderr in the log.
    echo_source: Option<(bytes::Bytes, Arc<http::HeaderMap>, Option<String>)>,
    stderr: MemoryOutputPipe,
    /// Never more instances at once than the pool holds: waiting for this beats failing there.
    _permit: OwnedSemaphorePermit,
}

impl Instance {
    /// Waits for a pool slot and sets up the store; instantiation waits for the first call.
    pub(super) async fn new(
        sandbox: &Sandbox,
        req: Option<RequestView>,
    ) -> Result<Box<Self>, AdapterFailure> {
        let permit = Arc::clone(&sandbox.permits)
            .acquire_owned()
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
                ticks_left: 0,
            },
        );
        store.limiter(|s| &mut s.limits);
        // Every tick the guest yields to the executor, so a spinning adapter cannot starve the
        // calls sharing its worker thread; after the call's budget it is interrupted.
        store.epoch_deadline_callback(|mut store| {
            let ticks_left = &mut store.data_mut().ticks_left;
            *ticks_left = ticks_left.saturating_sub(1);
            Ok(if *ticks_left == 0 {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::Yield(1)
            })
        });
        let echo_source = req
            .as_ref()
            .map(|r| (r.body.clone(), Arc::clone(&r.headers), r.query.clone()));
        let req = match req {
            Some(r) => Some(
                store
                    .data_mut()
                    .table
                    .push(r)
                    .map_err(|e| AdapterFailure::Trap {
                        trap: e.to_string(),
                        stderr: String::new(),
                    })?
                    .rep(),
            ),
            None => None,
        };
        Ok(Box::new(Self {
            store,
            adapter: None,
            req,
            echo_source,
            stderr,
            _permit: permit,
        }))
    }

    /// One export call with its own CPU deadline (instantiation included on the first call),
    /// hostcall fuel and wall-clock bound. On success the instance is handed back for the
    /// request's next call; on failure it is dropped.
    pub(super) async fn call<R>(
        mut self: Box<Self>,
        sandbox: &Sandbox,
        pre: &GuestPre,
        f: GuestFn<R>,
    ) -> Result<(Box<Self>, R), AdapterFailure> {
        // Lifting a result (and any guest-to-host argument) is bounded while it is lifted, not
        // after: a list of two million parts fails here instead of being allocated.
        self.store
            .set_hostcall_fuel(sandbox.limits.max_result_bytes);
        self.store.data_mut().ticks_left = sandbox
            .limits
            .call_timeout
            .as_millis()
            .div_ceil(EPOCH_TICK.as_millis())
            .max(1) as u64;
        self.store.set_epoch_deadline(1);
        let wall = sandbox.limits.wall_timeout();
        let this = &mut *self;
        let call = async {
            let adapter = match this.adapter.take() {
                Some(adapter) => adapter,
                None => pre.instantiate_async(&mut this.store).await?,
            };
            let req = this.req.map(Resource::new_borrow);
            let out = f(&adapter, &mut this.store, req).await;
            this.adapter = Some(adapter);
            out
        };
        // Dropping the call mid-way is safe: the store is dropped with `self`, unused.
        let Ok(result) = tokio::time::timeout(wall, call).await else {
            return Err(AdapterFailure::WallTimeout(wall));
        };
        match result {
            Ok(out) => Ok((self, out)),
            Err(e) => Err(self.failure(sandbox, e)),
        }
    }

    fn failure(&self, sandbox: &Sandbox, e: wasmtime::Error) -> AdapterFailure {
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
        let captured = self.stderr.contents();
        let captured =
            String::from_utf8_lossy(&captured[..captured.len().min(STDERR_CAPTURE_BYTES)]);
        let captured = match &self.echo_source {
            Some((body, headers, query)) => crate::support::redact::adapter_text(
                captured.trim(),
                &crate::support::redact::Echoes {
                    body,
                    headers,
                    query: query.as_deref().unwrap_or(""),
                },
            ),
            None => crate::support::redact::printable(
                captured.trim(),
                crate::support::redact::MAX_ADAPTER_TEXT_BYTES,
            ),
        };
        let trap = match e.downcast_ref::<Trap>() {
            Some(trap) => trap.to_string(),
            None => message,
        };
        AdapterFailure::Trap {
            trap,
            stderr: captured,
        }
    }
}
