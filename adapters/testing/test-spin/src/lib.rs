//! Test-only adapter for the host's sandbox limits:
//! `prepare` and `parse` spin forever (the CPU deadline must stop them).
//! Never deploy it; `cargo xtask adapters` puts it under `dist/testing/`.

wit_bindgen::generate!({ path: "../../../wit", world: "adapter" });

use wharf::adapter::types::{Algorithm, Ordering, SecretEncoding};

struct Adapter;
export!(Adapter);

/// Burns CPU forever; `black_box` keeps the optimiser from proving the loop useless.
fn misbehave() -> ! {
    let mut n = 0u64;
    loop {
        n = core::hint::black_box(n.wrapping_add(1));
    }
}

impl Guest for Adapter {
    fn describe() -> Description {
        Description {
            name: "test-spin".into(),
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
