//! A compiled, linked, described adapter: `describe`, `prepare` and `parse`, each in a fresh
//! store on the sandbox's threads, with their results bounded.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use wasmtime::Store;
use wasmtime::component::Resource;

use super::bindings::{
    Adapter, AdapterPre, Description, GuestState, Parsed, Part, Prepared, Rejection, RequestView,
};
use super::info::AdapterInfo;
use super::sandbox::{AdapterFailure, Sandbox, run_call};

/// A compiled, linked, described adapter, ready to instantiate per call.
pub struct LoadedAdapter {
    sandbox: Arc<Sandbox>,
    pre: AdapterPre<GuestState>,
    pub info: AdapterInfo,
    pub sha256: String,
    pub path: PathBuf,
}

impl LoadedAdapter {
    async fn describe(&self) -> Result<Description, AdapterFailure> {
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
        let max = self.sandbox.limits().max_result_bytes;
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
                &'a Adapter,
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

impl Sandbox {
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
        let (pre, world) = self.prepare_component(&component)?;
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
}
