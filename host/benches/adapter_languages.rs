//! The same webhook scheme (the `adapter new` skeleton: `X-Webhook-Signature: sha256=<hex>`
//! over `timestamp.body`) written in Rust, JavaScript and Python: each component's file size,
//! load (compile) time, and per-request cost as `Ingest` runs it (one hop to the sandbox's
//! threads, a fresh instance, `prepare`, HMAC verification, `parse`).
//!
//! Run (the components come from `wharf adapter new` in each language, built unchanged):
//! ```sh
//! for lang in rust js python; do
//!   wharf adapter new demo-$lang --dir /tmp/demo-$lang --lang $lang
//!   wharf adapter build --install-toolchain /tmp/demo-$lang
//!   mkdir -p target/lang-bench && cp /tmp/demo-$lang/dist/demo-$lang.wasm target/lang-bench/
//! done
//! cargo bench -p wharf --bench adapter_languages
//! ```
//! `WHARF_LANG_BENCH_DIR` overrides `target/lang-bench`; a missing component is skipped.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use hmac::{Hmac, Mac};
use wharf::adapter::{RequestView, Sandbox, SandboxLimits};
use wharf::ingest::{KeySet, TrustedKey};

mod common;
use common::{on_sandbox, view_of};

const SECRET: &str = "change-me-demo-secret";
const BODY: &str = r#"{"id":"evt_001","type":"order.created","data":{"id":"ord_42"}}"#;

fn request() -> RequestView {
    let t = 1_767_225_600;
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{t}.{BODY}").as_bytes());
    let signature = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    let mut headers = http::HeaderMap::new();
    headers.insert("x-webhook-timestamp", t.to_string().parse().unwrap());
    headers.insert("x-webhook-signature", signature.parse().unwrap());
    RequestView {
        endpoint_id: "bench".into(),
        method: http::Method::POST,
        url: None,
        query: None,
        headers: Arc::new(headers),
        body: Bytes::from_static(BODY.as_bytes()),
        settings: Arc::default(),
    }
}
fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = std::env::var_os("WHARF_LANG_BENCH_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/lang-bench"),
        PathBuf::from,
    );
    let keys = Arc::new(KeySet {
        secrets: vec![TrustedKey {
            version: "1".into(),
            key: SECRET.as_bytes().to_vec(),
        }],
        public_keys: vec![],
    });
    let request = request();
    for lang in ["rust", "js", "python"] {
        let wasm = dir.join(format!("demo-{lang}.wasm"));
        let Ok(size) = std::fs::metadata(&wasm).map(|m| m.len()) else {
            println!("{}: missing, skipped", wasm.display());
            continue;
        };
        // A sandbox of its own and no compiled-component cache: the load is a full compile.
        let sandbox = Sandbox::new(SandboxLimits::default(), None).unwrap();
        let started = Instant::now();
        let adapter = Arc::new(runtime.block_on(sandbox.load(&wasm)).unwrap());
        let load = started.elapsed();
        println!("lang/{lang}: {size} bytes, loaded (compiled) in {load:?}");

        c.bench_function(&format!("lang/{lang}/prepare_verify_parse"), |b| {
            b.to_async(&runtime)
                .iter(|| on_sandbox(Arc::clone(&adapter), Arc::clone(&keys), view_of(&request)))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
