//! The per-request cost of the sandbox and verification: the hop to the sandbox's threads, a
//! fresh store, instantiation from `InstancePre`, `prepare`, HMAC verification and `parse`,
//! for a 10 KiB Stripe event, in two shapes: one long string (`stripe_10KiB`) and 200 small
//! objects (`stripe_10KiB_200_objects`, closer to a real event, where the JSON costs more).
//! Run: `cargo xtask adapters && cargo bench -p wharf --bench adapter_call`

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use hmac::{Hmac, Mac};
use wharf::adapter::{RequestView, Sandbox, SandboxLimits};
use wharf::ingest::{KeySet, TrustedKey};

mod common;
use common::{on_sandbox, prepare_verify_parse, view_of};

const SECRET: &str = "whsec_bench";

/// Counts heap allocations, so the bench can report how many one request makes.
struct Counting;
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: defers to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A signed Stripe event of about 10 KiB whose `data.object` holds `object`'s fields.
fn stripe_request(object: &str) -> RequestView {
    let body = format!(
        r#"{{"id":"evt_bench","object":"event","type":"payment_intent.succeeded","created":1764480000,"data":{{"object":{{"id":"pi_1",{object}}}}}}}"#
    );
    let t = 1_764_480_000;
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{t}.{body}").as_bytes());
    let signature = format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()));
    let mut headers = http::HeaderMap::new();
    headers.insert("stripe-signature", signature.parse().unwrap());
    RequestView {
        endpoint_id: "bench".into(),
        method: http::Method::POST,
        url: None,
        query: None,
        headers: Arc::new(headers),
        body: Bytes::from(body),
        settings: Arc::default(),
    }
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let wasm =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters/dist/stripe.wasm");
    assert!(wasm.is_file(), "run `cargo xtask adapters` first");
    let sandbox = Sandbox::new(SandboxLimits::default(), None).unwrap();
    let adapter = Arc::new(runtime.block_on(sandbox.load(&wasm)).unwrap());
    let keys = Arc::new(KeySet {
        secrets: vec![TrustedKey {
            version: "1".into(),
            key: SECRET.as_bytes().to_vec(),
        }],
        public_keys: vec![],
    });

    // The floor under any hop on this machine: two plain threads passing a message and back.
    let (to_echo, echo_in) = std::sync::mpsc::sync_channel::<u64>(1);
    let (echo_out, from_echo) = std::sync::mpsc::sync_channel::<u64>(1);
    std::thread::spawn(move || {
        while let Ok(n) = echo_in.recv() {
            let _ = echo_out.send(n);
        }
    });
    c.bench_function("thread_ping_pong", |b| {
        b.iter(|| {
            to_echo.send(1).unwrap();
            from_echo.recv().unwrap()
        })
    });
    c.bench_function("sandbox_hop_only", |b| {
        b.to_async(&runtime)
            .iter(|| async { adapter.on_sandbox(async {}).await.unwrap() })
    });

    let long_string = stripe_request(&format!(r#""note":"{}""#, "x".repeat(10 * 1024 - 210)));
    let objects: Vec<String> = (0..200)
        .map(|i| format!(r#""field_{i}":{{"amount":{i},"currency":"usd","ok":true}}"#))
        .collect();
    let many_objects = stripe_request(&objects.join(","));
    for (name, request) in [
        ("stripe_10KiB", long_string),
        ("stripe_10KiB_200_objects", many_objects),
    ] {
        if name == "stripe_10KiB" {
            c.bench_function(&format!("{name}/prepare"), |b| {
                b.to_async(&runtime).iter(|| async {
                    let mut instance = adapter.instance_for(view_of(&request));
                    instance.prepare().await.unwrap().unwrap()
                })
            });
        }
        // What a request costs before the database, as `Ingest` runs it: one hop to the
        // sandbox's threads, then prepare, verify and parse there.
        c.bench_function(&format!("{name}/prepare_verify_parse"), |b| {
            b.to_async(&runtime)
                .iter(|| on_sandbox(Arc::clone(&adapter), Arc::clone(&keys), view_of(&request)))
        });
        // The same work without the hop's wake-ups: requests back to back in one hop, so this
        // is the CPU a request costs on the sandbox's threads, the store's teardown included.
        c.bench_function(&format!("{name}/prepare_verify_parse_on_sandbox"), |b| {
            b.to_async(&runtime).iter_custom(|iters| {
                let (adapter, keys, request) =
                    (Arc::clone(&adapter), Arc::clone(&keys), view_of(&request));
                async move {
                    let job = Arc::clone(&adapter);
                    adapter
                        .on_sandbox(async move {
                            let started = Instant::now();
                            for i in 0..iters {
                                prepare_verify_parse(&job, &keys, view_of(&request)).await;
                                // Let finished requests' stores be torn down (one yield per
                                // eight requests, so the yield itself is not what is measured).
                                if i % 8 == 7 {
                                    tokio::task::yield_now().await;
                                }
                            }
                            started.elapsed()
                        })
                        .await
                        .unwrap()
                }
            })
        });
        // Heap allocations (host side: wasmtime, WASI, verification) of one request on the
        // sandbox's thread; printed, as criterion has no place for it.
        let (job, keys) = (Arc::clone(&adapter), Arc::clone(&keys));
        let allocations = runtime
            .block_on(adapter.on_sandbox(async move {
                prepare_verify_parse(&job, &keys, view_of(&request)).await;
                let before = ALLOCATIONS.load(Relaxed);
                prepare_verify_parse(&job, &keys, request).await;
                ALLOCATIONS.load(Relaxed) - before
            }))
            .unwrap();
        println!("{name}/prepare_verify_parse: {allocations} heap allocations per request");
    }
}
criterion_group!(benches, bench);
criterion_main!(benches);
