//! What the adapter benches share: one request as `Ingest` runs it, on one instance.

use std::sync::Arc;

use wharf::adapter::{LoadedAdapter, Parsed, RequestView};
use wharf::ingest::{self, KeySet};

/// Another view of the same request (headers and body shared, not copied).
pub fn view_of(request: &RequestView) -> RequestView {
    RequestView {
        endpoint_id: request.endpoint_id.clone(),
        method: http::Method::POST,
        url: None,
        query: None,
        headers: Arc::clone(&request.headers),
        body: request.body.clone(),
        settings: Arc::clone(&request.settings),
    }
}

/// A request as `Ingest` runs it: one hop to the sandbox's threads, then prepare, verify and
/// parse there.
pub async fn on_sandbox(
    adapter: Arc<LoadedAdapter>,
    keys: Arc<KeySet>,
    req: RequestView,
) -> Parsed {
    let job = Arc::clone(&adapter);
    adapter
        .on_sandbox(async move { prepare_verify_parse(&job, &keys, req).await })
        .await
        .unwrap()
}

/// Steps 4, 5 and 7 of a request (`verify_and_parse` without its bookkeeping), on one instance;
/// the freshness rule is checked as when serving.
pub async fn prepare_verify_parse(
    adapter: &LoadedAdapter,
    keys: &KeySet,
    req: RequestView,
) -> Parsed {
    let body = req.body.clone();
    let mut instance = adapter.instance_for(req);
    let prepared = instance.prepare().await.unwrap().unwrap();
    let inputs = ingest::Inputs {
        body: &body,
        url: None,
        query: None,
    };
    ingest::verify(&adapter.info.verifiers, &|_| keys, &prepared, &inputs, true).unwrap();
    instance.parse().await.unwrap().unwrap()
}
