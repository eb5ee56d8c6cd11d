//! A compiled, linked, described adapter, and the instance that serves one request:
//! `describe`, `prepare` and `parse` on the sandbox's threads, with their results bounded.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::bindings::{
    Algorithm, AnswerPart, Description, GuestPre, Parsed, Part, Prepared, Rejection, RequestView,
    WitVersion,
};
use super::info::AdapterInfo;
use super::sandbox::{AdapterFailure, GuestFn, Instance, Sandbox};

/// A compiled, linked, described adapter, ready to instantiate per request.
pub struct LoadedAdapter {
    sandbox: Arc<Sandbox>,
    pre: GuestPre,
    pub wit: WitVersion,
    pub info: AdapterInfo,
    pub sha256: String,
    pub path: PathBuf,
}

impl LoadedAdapter {
    async fn describe(&self) -> Result<Description, AdapterFailure> {
        let mut instance = self.instance(None);
        instance
            .call(Box::new(|adapter, store, _| {
                Box::pin(async move { adapter.describe(store).await })
            }))
            .await
    }

    /// The instance that serves one request: its `prepare` and, once the host has verified
    /// what that described, its `parse`. Fresh for this request and dropped with it.
    pub fn instance_for(&self, req: RequestView) -> RequestInstance {
        self.instance(Some(req))
    }

    fn instance(&self, req: Option<RequestView>) -> RequestInstance {
        RequestInstance {
            sandbox: Arc::clone(&self.sandbox),
            pre: self.pre.clone(),
            algorithm: self.info.verifiers.first().copied(),
            state: State::Unstarted(req),
        }
    }

    /// Runs `job` on the sandbox's threads: one hop for several guest calls and the CPU work
    /// between them (see docs/performance.md).
    pub async fn on_sandbox<T: Send + 'static>(
        &self,
        job: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, AdapterFailure> {
        self.sandbox.run(job).await
    }
}

/// One request's guest instance (see `LoadedAdapter::instance_for`). Isolation between
/// requests holds because no instance outlives its request; `prepare` and `parse` of the same
/// request share one, which spares a second instantiation and lets nothing cross requests.
pub struct RequestInstance {
    sandbox: Arc<Sandbox>,
    pre: GuestPre,
    /// What a 0.1 component's checks are verified with (None only while describing).
    algorithm: Option<Algorithm>,
    state: State,
}

enum State {
    /// No call yet: the store is made by the first call, on the sandbox's threads.
    Unstarted(Option<RequestView>),
    Ready(Box<Instance>),
    /// A call failed (its instance is dropped) or was abandoned.
    Spent,
}

impl RequestInstance {
    /// Where the signatures are and which bytes they sign. Secrets are not involved.
    pub async fn prepare(&mut self) -> Result<Result<Prepared, Rejection>, AdapterFailure> {
        let algorithm = self.algorithm.unwrap_or(Algorithm::HmacSha256);
        let out = self
            .call(Box::new(move |adapter, store, req| {
                Box::pin(async move {
                    adapter
                        .prepare(store, req.expect("request"), algorithm)
                        .await
                })
            }))
            .await?;
        if let Ok(prepared) = &out {
            let parts: usize = prepared
                .checks
                .iter()
                .flat_map(|c| c.message.iter())
                .map(|p| match p {
                    Part::Literal(bytes) => bytes.len() + 16,
                    _ => 24,
                })
                .sum();
            let sigs: usize = prepared
                .checks
                .iter()
                .flat_map(|c| c.signatures.iter())
                .map(|s| s.len() + 16)
                .sum();
            let names: usize = prepared
                .checks
                .iter()
                .map(|c| {
                    c.key.as_ref().map_or(0, String::len)
                        + c.body_sha256_param.as_ref().map_or(0, String::len)
                        + 48
                })
                .sum();
            self.bounded(parts + sigs + names, "prepare")?;
        }
        Ok(out)
    }

    /// What the verified body means.
    pub async fn parse(&mut self) -> Result<Result<Parsed, Rejection>, AdapterFailure> {
        let out = self
            .call(Box::new(|adapter, store, req| {
                Box::pin(async move { adapter.parse(store, req.expect("request")).await })
            }))
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
                            + 96
                    })
                    .sum(),
                Parsed::Handshake(h) => {
                    h.body
                        .iter()
                        .map(|p| match p {
                            AnswerPart::Literal(b) | AnswerPart::HmacSha256Hex(b) => b.len() + 16,
                        })
                        .sum::<usize>()
                        + h.content_type.len()
                }
            };
            self.bounded(size, "parse")?;
        }
        Ok(out)
    }

    fn bounded(&mut self, size: usize, what: &str) -> Result<(), AdapterFailure> {
        let max = self.sandbox.limits().max_result_bytes;
        if size > max {
            self.state = State::Spent;
            return Err(AdapterFailure::OversizedResult(format!(
                "{what} returned about {size} bytes (max {max})"
            )));
        }
        Ok(())
    }

    /// One call on the sandbox's own threads: here when already there (`Ingest` hops once
    /// per request), else with a hop of its own.
    async fn call<R: Send + 'static>(&mut self, f: GuestFn<R>) -> Result<R, AdapterFailure> {
        let state = std::mem::replace(&mut self.state, State::Spent);
        let run = {
            let (sandbox, pre) = (Arc::clone(&self.sandbox), self.pre.clone());
            async move {
                let instance = match state {
                    State::Ready(instance) => instance,
                    State::Unstarted(req) => Instance::new(&sandbox, req).await?,
                    State::Spent => {
                        return Err(AdapterFailure::Trap {
                            trap: "the request's adapter instance failed earlier".into(),
                            stderr: String::new(),
                        });
                    }
                };
                instance.call(&sandbox, &pre, f).await
            }
        };
        let (instance, out) = if self.sandbox.is_current() {
            run.await?
        } else {
            self.sandbox.run(run).await??
        };
        self.state = State::Ready(instance);
        Ok(out)
    }
}

impl Drop for RequestInstance {
    fn drop(&mut self) {
        // Tearing the store down (resetting its pool slot) takes microseconds: on the sandbox's
        // threads, after the job that answers the request has finished.
        if let State::Ready(instance) = std::mem::replace(&mut self.state, State::Spent) {
            drop(self.sandbox.runtime().spawn(async move { drop(instance) }));
        }
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
        let (pre, wit, world) = self.prepare_component(&component)?;
        let mut adapter = LoadedAdapter {
            sandbox: Arc::clone(self),
            pre,
            wit,
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
