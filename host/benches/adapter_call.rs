//! The per-request cost of the sandbox and verification: the hop to the sandbox's threads, a
//! fresh store, instantiation from `InstancePre`, `prepare`, HMAC verification and `parse`,
//! for a 10 KiB Stripe event.
//! Run: `cargo xtask adapters && cargo bench -p wharf --bench adapter_call`

use std::sync::Arc;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use hmac::{Hmac, Mac};
use wharf::adapter::{RequestView, Sandbox, SandboxLimits};
use wharf::ingest::{self, TrustedKey};

const SECRET: &str = "whsec_bench";

fn stripe_request() -> RequestView {
    let padding = "x".repeat(10 * 1024 - 200);
    let body = format!(
        r#"{{"id":"evt_bench","object":"event","type":"payment_intent.succeeded","created":1764480000,"data":{{"object":{{"id":"pi_1","note":"{padding}"}}}}}}"#
    );
    let t = 1_764_480_000;
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{t}.{body}").as_bytes());
    let signature = format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()));
    let mut headers = http::HeaderMap::new();
    headers.insert("stripe-signature", signature.parse().unwrap());
    RequestView {
        endpoint_id: "bench".into(),
        url: None,
        headers: Arc::new(headers),
        body: Bytes::from(body),
    }
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let wasm =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters/dist/stripe.wasm");
    assert!(wasm.is_file(), "run `cargo xtask adapters` first");
    let sandbox = Sandbox::new(SandboxLimits::default(), None).unwrap();
    let adapter = runtime.block_on(sandbox.load(&wasm)).unwrap();
    let request = stripe_request();
    let view = || RequestView {
        endpoint_id: request.endpoint_id.clone(),
        url: None,
        headers: Arc::clone(&request.headers),
        body: request.body.clone(),
    };
    let keys = [TrustedKey {
        version: "1".into(),
        key: SECRET.as_bytes().to_vec(),
    }];
    let mac = adapter.info.mac.unwrap();

    let adapter = Arc::new(adapter);
    c.bench_function("sandbox_hop_only", |b| {
        b.to_async(&runtime)
            .iter(|| async { adapter.on_sandbox(async {}).await.unwrap() })
    });
    c.bench_function("stripe_10KiB/prepare", |b| {
        b.to_async(&runtime)
            .iter(|| async { adapter.prepare(view()).await.unwrap().unwrap() })
    });
    // What a request costs before the database, as `Ingest` runs it: one hop to the sandbox's
    // threads, then prepare, verify and parse there.
    let keys = Arc::new(keys);
    c.bench_function("stripe_10KiB/prepare_verify_parse", |b| {
        b.to_async(&runtime).iter(|| {
            let (adapter, keys, req1, req2, body) = (
                Arc::clone(&adapter),
                Arc::clone(&keys),
                view(),
                view(),
                request.body.clone(),
            );
            async move {
                let job = Arc::clone(&adapter);
                adapter
                    .on_sandbox(async move {
                        let prepared = job.prepare(req1).await.unwrap().unwrap();
                        // Stripe signs a timestamp: the freshness rule is checked as when serving.
                        ingest::verify(mac, &keys[..], &prepared, &body, true).unwrap();
                        job.parse(req2).await.unwrap().unwrap()
                    })
                    .await
                    .unwrap()
            }
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
