//! Test-only adapter for the host's sandbox limits:
//! `prepare` and `parse` allocate without bound (the memory cap must stop them).
//! Never deploy it; `cargo xtask adapters` puts it under `dist/testing/`.

wit_bindgen::generate!({ path: "../../../wit", world: "adapter" });

use wharf::adapter::types::{Algorithm, Ordering, SecretEncoding};

struct Adapter;
export!(Adapter);

/// Keeps 1 MiB blocks alive and writes to every page until allocation fails (a trap).
fn misbehave() -> ! {
    const MIB: usize = 1 << 20;
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut block = vec![0u8; MIB];
        for page in block.chunks_mut(4096) {
            page[0] = 1;
        }
        hoard.push(core::hint::black_box(block));
        core::hint::black_box(&mut hoard);
    }
}

impl Guest for Adapter {
    fn describe() -> Description {
        Description {
            name: "test-hog".into(),
            version: "0.1.0".into(),
            event_types: Vec::new(),
            max_body_bytes: None,
            algorithm: Algorithm::HmacSha256,
            secret_encoding: SecretEncoding::Raw,
            tolerance: None,
            ordering: Ordering::None,
        }
    }

    fn prepare(_req: &Request) -> Result<Prepared, Rejection> {
        misbehave()
    }

    fn parse(_req: &Request) -> Result<Parsed, Rejection> {
        misbehave()
    }
}
